"""Kernels compiled ahead of time: the recorded loop signatures in one extension module per
machine, served without numba in the process (MACE_AOT=1).

numba itself is most of a small model's memory: importing it and loading one cached kernel
takes a process from ~30 to ~160 MB (LLVM's JIT and its modules), while a model such as
gender_v1 runs in ~46 MB of numpy and our runtime. `converter.py warmup --aot`
(mace/ops/fast/aot_build.py) compiles every recorded serial signature into one extension
module, each behind a plain exported function; with MACE_AOT=1 the loop modules the kernels ask
for (`_jit.loops()` and the others) are `AotModule`s: an attribute is the export picked by the
arguments' types (`AotKernel`), a module constant from the build's manifest, or else the numba
module's own attribute (numba is imported then, as without the library).

What the library does not hold runs through numba as before: the parallel drivers (a module built
ahead has no threading layer) and a signature no recorded model called (a run says which, and
notes them for the next build: kernel_cache.served_ahead). A small model's steps still chain
without numba: each export has a trampoline loading its arguments from an int64 and a float64
array (`pack` lays them out) and the library's one runner walks a model's table of trampolines
(`chain`; numba's chains are generated and compiled per model).

The library is named by a stamp of what its machine code depends on (our kernel sources, numba's
and Python's versions, the CPU and numba's CPU settings): an edited kernel or another machine
finds no library and says so once, with the command that builds one. This module imports no
numba; the manifest is our own file, read with `ast.literal_eval`.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import logging
import os
import platform
import re
import sys
import sysconfig
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

log = logging.getLogger("mace.jit")

AOT_HINT = "python tools/converter.py warmup --aot"
FAST = Path(__file__).resolve().parent   # mace/ops/fast: the kernels' sources


def enabled(environ=os.environ) -> bool:
    """MACE_AOT=1: serve the loops from the library built ahead where it has them."""
    return environ.get("MACE_AOT", "") not in ("", "0")


def folder(environ=os.environ) -> Path:
    """Where libraries are built and looked for: MACE_AOT_DIR, else the user's cache folder."""
    if environ.get("MACE_AOT_DIR"):
        return Path(environ["MACE_AOT_DIR"])
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "pymace" / "kernels"


def _cpu_identity() -> str:
    """The CPU as its machine code depends on it: model and flags (Linux), the machine type, and
    numba's CPU settings (a build for another CPU model / feature list)."""
    parts = [platform.machine(), os.environ.get("NUMBA_CPU_NAME", ""), os.environ.get("NUMBA_CPU_FEATURES", "")]
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags", "Features", "CPU part")):
                parts.append(line)
                if line.startswith(("flags", "Features")):
                    break   # the first processor's are enough
    except OSError:
        parts.append(platform.processor())
    return "\n".join(parts)


_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(mace\.ops\.fast[\w.]*)[ \t]+import[ \t]+([\w ,()]+)"
                     r"|import[ \t]+(?:mace\.ops\.fast[\w.]*))", re.M)


def _compiled_files() -> list:
    """The sources the library's machine code comes from: the loop modules, the modules they
    import from this package (read with `ast`, to the end), and the build itself."""
    todo = sorted(FAST.glob("_*loops.py")) + sorted((FAST / "int8").glob("_*loops.py"))
    todo += [FAST / "aot_build.py", FAST / "_aot.py"]
    seen = {}
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen[path] = source = path.read_text()
        # `from mace.ops.fast.X import a, b` / `from mace.ops.fast import X` / `import mace.ops.fast.X`
        # (a regular expression, not ast: every process served ahead computes this at start)
        for module, names in _IMPORT.findall(source):
            for name in [module] + [f"{module}.{n.strip()}" for n in names.replace("(", "").split(",") if n.strip()]:
                name = name.split(" as ")[0].strip()
                if name.startswith("mace.ops.fast."):   # a name that is no module: no such file, skipped
                    todo.append(FAST.joinpath(*name.split(".")[3:]).with_suffix(".py"))
    return sorted(seen)


def _sources() -> bytes:
    return b"".join(p.relative_to(FAST).as_posix().encode() + b"\0" + p.read_bytes() for p in _compiled_files())


@functools.lru_cache(maxsize=None)
def stamp() -> str:
    """What the library's machine code depends on, hashed: its file name."""
    try:
        numba_version = version("numba")
    except PackageNotFoundError:
        numba_version = "none"
    h = hashlib.sha256()
    for part in (numba_version, sys.version, str(sysconfig.get_config_var("SOABI")), _cpu_identity()):
        h.update(part.encode() + b"\0")
    h.update(_sources())
    return h.hexdigest()[:16]


def seen_file(where: Path | None = None) -> Path:
    """Signatures runs served ahead had numba supply on this machine (kernel_cache.served_ahead
    writes it; `warmup --aot` compiles them in)."""
    return (where if where is not None else folder()) / "seen_signatures.txt"


def loaded() -> "Library | None":
    """The library this process loaded, without loading one."""
    return _LOADED[0] if _LOADED else None


def module_name(key: str | None = None) -> str:
    return f"mace_kernels_{key or stamp()}"


def paths(where: Path | None = None, key: str | None = None) -> tuple:
    """(extension module, manifest) of this machine's library."""
    where = where if where is not None else folder()
    name = module_name(key)
    return where / (name + sysconfig.get_config_var("EXT_SUFFIX")), where / (name + ".manifest")


# ---- argument types, as numba would type them (the build side: aot_build.type_key) ----------------

def value_key(v):
    """The key of one argument's numba type, without numba: arrays by dtype, ndim, layout and
    read-only (numba types every array as aligned); Python and numpy scalars by numba's name of
    their type; tuples by their items. Something numba would type otherwise gets a key no export
    has."""
    if isinstance(v, np.ndarray):
        f = v.flags
        layout = "C" if f.c_contiguous else "F" if f.f_contiguous else "A"
        return ("a", v.dtype.name, v.ndim, layout, not f.writeable)
    t = type(v)
    if t is bool or t is np.bool_:
        return "bool"
    if t is int:
        return "int64" if -2 ** 63 <= v < 2 ** 63 else "uint64"
    if t is float:
        return "float64"
    if isinstance(v, (np.integer, np.floating)):
        return v.dtype.name
    if t is tuple:
        return ("t",) + tuple(value_key(e) for e in v)
    if v is None:
        return "none"
    return ("?", t.__name__)


def args_key(args: tuple) -> tuple:
    return tuple(value_key(a) for a in args)


# ---- where a step's arguments lie for its trampoline (aot_build writes the loads, `pack` the values)

INT_KEYS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
FLOAT_KEYS = ("float32", "float64")


def chainable(key) -> bool:
    """Whether an argument of this key can be passed through ints / floats (the library's
    trampolines take nothing else: no uint64, no object)."""
    if isinstance(key, tuple):
        if key[0] == "a":
            return key[3] in ("C", "F", "A") and str(key[1]).isidentifier()
        return key[0] == "t" and all(chainable(k) for k in key[1:])
    return key in INT_KEYS or key in FLOAT_KEYS or key in ("bool", "none")


def pack(args: tuple, keys: tuple, ints: list, floats: list, keep: list) -> None:
    """Append `args`' values (of `keys`) to ints / floats in the trampolines' order: an array as
    its address, shape and strides (kept alive in `keep`), an int or bool as an int, a float as a
    float, a tuple's items in turn, None as nothing."""
    for a, key in zip(args, keys):
        if isinstance(key, tuple) and key[0] == "a":
            keep.append(a)
            ints.extend([a.ctypes.data, *a.shape, *a.strides])
        elif isinstance(key, tuple):
            pack(a, key[1:], ints, floats, keep)
        elif key in FLOAT_KEYS:
            floats.append(float(a))
        elif key != "none":
            ints.append(int(a))


class AotStep(partial):
    """A bound step calling a library export directly (binding.direct); `tramp` is the address of
    its trampoline (0: none), `keys` its arguments' keys, for a chain (`chain`)."""
    tramp, keys = 0, ()


class AotChain(partial):
    """Steps served ahead run as one call of the library's `run_table` (table, ints, floats):
    `at` is the node of the step running or that failed (the last int slot holds its position)."""

    @property
    def at(self):
        return self.indices[int(self.args[1][-1])]


def as_step(call):
    """`call` as an AotStep (a partial of a library loop, bound to its export), or None."""
    if type(call) is AotStep:
        return call
    if type(call) is partial and not call.keywords and isinstance(call.func, AotKernel):
        return call.func.bound(call.args)
    return None


def chain(steps: list, indices: list):
    """One call running `steps` (AotSteps with trampolines) in order, or None where the library
    has no runner."""
    lib = loaded()
    runner = lib.runner() if lib is not None else None
    if runner is None:
        return None
    ints, floats, keep, rows = [], [], [], []
    for step in steps:
        rows.append((step.tramp, len(ints), len(floats)))
        pack(step.args, step.keys, ints, floats, keep)
    made = AotChain(runner, np.array(rows, np.int64), np.array(ints + [0], np.int64),
                    np.array(floats or [0.0], np.float64))
    made.indices, made.keep = list(indices), keep
    return made


# ---- the library ----------------------------------------------------------------------------------

class AotKernel:
    """One loop of the library: calls the export for its arguments' types, else numba's loop."""
    __slots__ = ("__name__", "module", "table")

    def __init__(self, name: str, module: "AotModule", table: dict):
        self.__name__, self.module, self.table = name, module, table

    def bound(self, args: tuple):
        """An AotStep calling the export for `args`' types with them, or None."""
        keys = args_key(args)
        found = self.table.get(keys)
        if found is None:
            return None
        export, tramp = found
        step = AotStep(export, *args)
        step.tramp, step.keys = (self.module.address(tramp) if tramp else 0), keys
        return step

    def __call__(self, *args):
        found = self.table.get(args_key(args))
        if found is None:
            return self.module.numba_attr(self.__name__, args)(*args)
        return found[0](*args)

    def __repr__(self) -> str:
        return f"<ahead-of-time loop {self.module.__name__}.{self.__name__}>"


class Address:
    """A compiled C function of the library, where numba's `cfunc` would be: its `.address`."""
    __slots__ = ("address",)

    def __init__(self, address: int):
        self.address = address


class AotModule:
    """A loop module served from the library; `fallback()` imports numba's module on demand
    (None without numba)."""

    def __init__(self, name: str, ext, entry: dict, fallback):
        self.__name__ = name
        self._ext, self._entry, self._fallback = ext, entry, fallback
        self.fallbacks = []   # (attribute, why) served by numba: what a run of this process missed

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        entry = self._entry
        if attr in entry["kernels"]:
            # an export the module lacks (its manifest replaced by a newer build's in between) is
            # as a signature it does not hold: numba's
            table = {key: (getattr(self._ext, symbol), tramp) for key, symbol, tramp in entry["kernels"][attr]
                     if hasattr(self._ext, symbol) and (not tramp or hasattr(self._ext, tramp))}
            value = AotKernel(attr, self, table)
        elif attr in entry["addresses"] and hasattr(self._ext, entry["addresses"][attr]):
            value = Address(self.address(entry["addresses"][attr]))
        elif attr in entry["constants"]:
            value = entry["constants"][attr]
        else:
            value = self.numba_attr(attr)
        self.__dict__[attr] = value   # resolved once
        return value

    def address(self, symbol: str) -> int:
        """The machine code address an export of the library returns (a trampoline's)."""
        return int(getattr(self._ext, symbol)())

    def numba_attr(self, attr: str, args: tuple | None = None):
        """numba's own `attr` of this module (compiling as numba does), for what the library lacks."""
        why = "not in the library" if args is None else f"no signature {args_key(args)}"
        # a parallel loop is numba's by design (the pool's threads, which numba runs): not a miss
        if (attr, why) not in self.fallbacks and attr not in self._entry.get("parallel", ()):
            self.fallbacks.append((attr, why))
            log.debug("ahead-of-time kernels: %s.%s from numba (%s)", self.__name__, attr, why)
        real = self._fallback()
        if real is None:
            raise RuntimeError(f"kernel {self.__name__}.{attr}: {why}, and numba is not available to compile "
                               f"it; `{AOT_HINT}` on this machine builds the kernels its models call")
        return getattr(real, attr)


class Library:
    """The loaded extension module and its manifest."""

    def __init__(self, ext, manifest: dict, path: Path):
        self.ext, self.manifest, self.path = ext, manifest, path
        self.modules = {}

    def module(self, name: str, fallback) -> AotModule:
        if name not in self.modules:
            entry = self.manifest["modules"].get(name, {"kernels": {}, "addresses": {}, "constants": {},
                                                        "parallel": []})
            self.modules[name] = AotModule(name, self.ext, entry, fallback)
        return self.modules[name]

    def runner(self):
        """The export running a chain's table (_chain_loops.run_table), or None."""
        symbol = self.manifest.get("runner")
        return getattr(self.ext, symbol) if symbol else None



_LOADED = []   # the library this process loaded (library() asked and found one)


def report() -> str | None:
    """One line on what the library served this process: None where it served nothing (not
    asked for, or none built)."""
    if not _LOADED:
        return None
    lib = _LOADED[0]
    missed = sorted({f"{m.__name__.rpartition('.')[2]}.{attr}" for m in lib.modules.values()
                     for attr, _ in m.fallbacks})
    where = f"CPU kernels served ahead of time ({lib.path})"
    if not missed and "numba" in sys.modules:   # an engine of two or more threads started the pool
        return (where + "; numba was loaded all the same, for the compute pool's threads (runs of one thread, "
                "--omp_num_threads 1, need no numba)")
    if not missed:
        return where + "; numba was not loaded"
    return (f"{where}, except {len(missed)} loop(s) it does not hold, which numba compiled or loaded "
            f"(so it was imported): {', '.join(missed[:6])}{' ...' if len(missed) > 6 else ''}")


@functools.lru_cache(maxsize=None)
def library() -> Library | None:
    """This machine's library (MACE_AOT=1), or None where none is built for it (said once)."""
    try:
        so, manifest = paths()
    except OSError as e:   # the kernels' sources cannot be read (e.g. run from a zipapp): no stamp
        log.warning("note: MACE_AOT=1, but the kernel sources cannot be read to name the library (%s); "
                    "numba compiles the kernels", e)
        return None
    if not (so.is_file() and manifest.is_file()):
        log.warning("note: MACE_AOT=1, but no ahead-of-time kernel library for this machine and these kernels "
                    "in %s: `%s` builds it; numba compiles the kernels meanwhile", so.parent, AOT_HINT)
        return None
    try:
        spec = importlib.util.spec_from_file_location(module_name(), so)
        ext = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ext)
        data = ast.literal_eval(manifest.read_text())
    except Exception as e:   # a damaged or foreign file: as none (numba serves every loop)
        log.warning("note: the ahead-of-time kernel library %s cannot be loaded (%s): `%s` builds it again; "
                    "numba compiles the kernels meanwhile", so, e, AOT_HINT)
        return None
    _LOADED.append(Library(ext, data, so))
    return _LOADED[0]
