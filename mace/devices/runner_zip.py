"""Pack the device runner into one file, mace_run.pyz (a zipapp), that needs only numpy.

Inside: runner.py as the entry point, the runtime half of `mace` (errors, ir, proto, ops,
runtime, and report/benchmark.py with what it imports, so a device computes the very
benchmark tables the host does), the numba loops of the fast kernels under mace_loops/
(unpacked by the runner where the device has numba, see LOOP_PATTERNS below), the OpenCL
sources of the GPU kernels (a board whose Python has pyopencl runs the GPU engine) and the
pure-Python part of `google.protobuf`, copied from the host's installation.

Why vendor protobuf rather than decode the .pb with a small wire-format reader of our own: the
device then runs exactly the loader and engine the host runs (mace.ir.model_io, the ops read
their arguments through the protobuf message API: HasField, repeated fields, proto2
defaults), there is no second decoder to keep in step with mace_ir.proto, and the generated
mace_ir_pb2 finds the protobuf version it was generated for. The cost is ~160 KiB of the ~580 KiB archive
and a pure-Python parse of the graph at load, which is small: the weights are in .data,
memory-mapped, never parsed. __main__ forces PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python,
because the C extension (upb) is a compiled file for the host's CPU and is left out.

The archive is reproducible: files in sorted order with a fixed timestamp, so the same
sources give the same bytes (and the same sha256 in build.json).
"""
from __future__ import annotations

import ast
import fnmatch
import hashlib
import sys
import zipfile
from pathlib import Path

import mace
from mace.devices.runner import LOOPS
from mace.util.atomic import atomic_write

# The runtime half of mace; modules these import at module level (mace/__init__.py's helpers)
# are added by _with_imports, so a new one needs no edit here.
MACE_PARTS = ("__init__.py", "errors.py", "ir", "proto", "ops", "runtime", "devices/__init__.py",
              "devices/runner.py", "devices/board_engine.py",   # board_engine: --runtime
              "report/__init__.py", "report/benchmark.py")  # benchmark: --benchmark
# Data files the runtime reads as package resources: the OpenCL sources the GPU engine compiles
# on a board with pyopencl (mace/runtime/gpu/programs.py).
MACE_DATA = (("ops/gpu/cl", "*.cl"),)
# Top-level imports the device can satisfy; anything else must be imported lazily (in a
# function or a try block) by the modules above, or the runner fails on the device.
DEVICE_MODULES = {"numpy", "mace", "google"}
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# Left out: the host's engine opener with its backend table (open.py, backends.py): they read
# deployment files (mace.config, yaml), which the runner never does: it loads the .pb it is given.
LEFT_OUT = {"mace/runtime/open.py", "mace/runtime/backends.py"}
# The numba-compiled loops are not importable from the archive: numba cannot cache code that
# lives in a zip (it would compile every loop in every run), and the device may lack numba. They
# travel under mace_loops/ (runner.LOOPS; their mace/... paths), where no import finds them; a
# runner whose Python has numba unpacks them to disk and adds that folder to their packages'
# __path__ (runner.unpack_loops), else the fast kernels run their numpy paths (the int8:fast
# kernels decline and the int8 reference kernels run). Every loop module is named
# mace/ops/fast/.../_*loops.py (mace/ops/fast/kernel_cache.py lists them for warmup): a new
# op's loops travel without being listed here. _tile_ir.py travels with them: the LLVM IR the
# float and int8 GEMM tiles are built from (it imports llvmlite, which only a numba board has).
LOOP_PATTERNS = ("mace/ops/fast/_*loops.py", "mace/ops/fast/*/_*loops.py", "mace/ops/fast/_tile_ir.py")


def left_out(name: str) -> bool:
    return name in LEFT_OUT or is_loop(name)


def is_loop(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in LOOP_PATTERNS)

MAIN = '''"""mace_run.pyz: run a converted model with the pymace runtime (python3 mace_run.pyz -h)."""
import os
import sys

# upb, protobuf's C extension, is not in this archive: use the pure-Python implementation
os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
if sys.version_info < (3, 10):
    sys.exit("error: mace_run.pyz needs Python >= 3.10, this is " + sys.version.split()[0])

from mace.devices.runner import main  # noqa: E402

sys.exit(main())
'''
# A regular package, not a namespace one: a `google` installed on the device (another
# protobuf, google-auth) must not mix with ours.
GOOGLE_INIT = '"""Vendored pure-Python protobuf for mace_run.pyz (see its LICENSE)."""\n'


def _python_files(root: Path, part: str):
    path = root / part
    if path.is_file():
        yield path
        return
    for p in sorted(path.rglob("*.py")):
        if "__pycache__" not in p.parts and "testdata" not in p.parts:
            yield p


def archive_members() -> dict:
    """name inside the archive -> bytes."""
    mace_root = Path(mace.__file__).parent
    members = {"__main__.py": MAIN.encode(), "google/__init__.py": GOOGLE_INIT.encode()}
    for part in MACE_PARTS:
        for p in _python_files(mace_root, part):
            name = f"mace/{p.relative_to(mace_root).as_posix()}"
            if is_loop(name):
                members[f"{LOOPS}/{name}"] = p.read_bytes()
            elif not left_out(name):
                members[name] = p.read_bytes()
    for folder, pattern in MACE_DATA:
        for p in sorted((mace_root / folder).glob(pattern)):
            members[f"mace/{p.relative_to(mace_root).as_posix()}"] = p.read_bytes()
    _with_imports(members, mace_root)
    pb_root = _protobuf_root()
    for p in _python_files(pb_root, "."):
        members[f"google/protobuf/{p.relative_to(pb_root).as_posix()}"] = p.read_bytes()
    license_text = _protobuf_license()
    if license_text:
        members["google/protobuf/LICENSE"] = license_text
    return members


def _module_level_imports(source: bytes):
    """Dotted names imported by a module's top-level statements (lazy imports are optional)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)  # `from mace import x`


def _with_imports(members: dict, mace_root: Path) -> None:
    """Add the mace modules that included modules import at module level, until none is missing."""
    pending = [n for n in members if n.startswith("mace/") and n.endswith(".py")]
    while pending:
        for dotted in _module_level_imports(members[pending.pop()]):
            parts = dotted.split(".")
            if parts[0] != "mace":
                continue
            for i in range(2, len(parts) + 1):  # mace.a.b needs mace/a/__init__.py and mace/a/b.py
                for rel in ("/".join(parts[1:i]) + ".py", "/".join(parts[1:i]) + "/__init__.py"):
                    name = f"mace/{rel}"
                    if name not in members and (mace_root / rel).is_file():
                        members[name] = (mace_root / rel).read_bytes()
                        pending.append(name)


def _protobuf_root() -> Path:
    import google.protobuf
    return Path(google.protobuf.__file__).parent


def _protobuf_license() -> bytes | None:
    from importlib import metadata
    try:
        dist = metadata.distribution("protobuf")
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name.upper().startswith("LICENSE"):
            return Path(dist.locate_file(f)).read_bytes()
    return None


def protobuf_version() -> str:
    import google.protobuf
    return google.protobuf.__version__


def foreign_imports(members: dict) -> list:
    """'mace/ops/x.py imports scipy' for module-level imports a numpy-only device lacks."""
    found = []
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for name, source in members.items():
        if not name.startswith("mace/") or not name.endswith(".py"):
            continue
        for node in ast.parse(source).body:  # module level only: lazy imports are optional
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            found += [f"{name} imports {t}" for t in tops if t not in stdlib | DEVICE_MODULES]
    return found


def write_runner(dest: Path, members: dict | None = None) -> str:
    """Write mace_run.pyz to `dest` atomically (executable, with a shebang); returns its sha256."""
    members = archive_members() if members is None else members

    def write(f) -> None:
        f.write(b"#!/usr/bin/env python3\n")
        with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as z:
            for name in sorted(members):
                info = zipfile.ZipInfo(name, ZIP_TIME)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, members[name])
    atomic_write(dest, write, executable=True)
    return hashlib.sha256(dest.read_bytes()).hexdigest()
