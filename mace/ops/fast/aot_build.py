"""Build the library of kernels compiled ahead of time (mace/ops/fast/_aot.py says why and how it
is served): `converter.py warmup --aot` runs `build`.

Each recorded signature of a serial loop (kernel_signatures.txt) becomes one export of a numba
ahead-of-time module (`numba.pycc`): a one-line function that calls the loop's dispatcher, so
the loop is compiled with its own options (error_model, fastmath, inlining) and linked in.
What a module built ahead cannot hold is left to numba at run time: parallel loops (no threading
layer), signatures with literal or omitted arguments (numba specialises on a value). A `cfunc`
of a loop module (store_rows: the packed GEMM's fused activation, called by address) is linked
in too, and an export returns its address in the loaded library. Module constants (numbers,
strings, tuples of them) go in the manifest, so the kernels' Python side reads them without
numba.

Built for the CPU numba compiles for (its CPU name and feature list: NUMBA_CPU_NAME /
NUMBA_CPU_FEATURES or the host's), into a temporary folder, then moved into place: a failed
build leaves no library behind.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mace.ops.fast import _aot, _isa, kernel_cache
from mace.ops.fast._jit import jitted


@dataclass
class Built:
    exported: int = 0
    skipped: dict = field(default_factory=dict)   # why -> count
    seconds: float = 0.0
    path: str = ""
    size_mb: float = 0.0


def type_key(t):
    """The key `_aot.value_key` gives a value numba types as `t`; None for a type no export
    can take (a literal or omitted argument, anything else numba specialises on)."""
    from numba.core import types
    if isinstance(t, (types.Literal, types.Omitted)):
        return None
    if isinstance(t, types.Array):   # numba's typeof gives every array aligned=True
        return ("a", str(t.dtype), t.ndim, t.layout, not t.mutable) if t.aligned else None
    if isinstance(t, types.Boolean):
        return "bool"
    if isinstance(t, (types.Integer, types.Float)):
        return str(t)
    if isinstance(t, types.NoneType):
        return "none"
    if isinstance(t, types.BaseTuple):
        items = tuple(type_key(e) for e in t.types)
        return None if None in items else ("t",) + items
    return None


def _caller(kernel, n: int):
    """def call(a0, ..., a{n-1}): return kernel(a0, ...): an export's body, calling the loop's
    dispatcher (compiled with the loop's own options and linked into the module). Generated for
    the arity only: no name or value from outside goes into the source."""
    names = ", ".join(f"a{i}" for i in range(int(n)))
    scope = {"kernel": kernel}
    exec(f"def call({names}):\n    return kernel({names})\n", scope)
    return scope["call"]


def _address_of(cfunc):
    """An export body returning `cfunc`'s C entry point as linked into the module built ahead."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def address(typingctx):
        def codegen(context, builder, sig, args):
            context.active_code_library.add_linking_library(cfunc._library)
            fn = builder.module.globals.get(cfunc.native_name) or ir.Function(
                builder.module, ir.FunctionType(ir.VoidType(), []), name=cfunc.native_name)
            return builder.ptrtoint(fn, ir.IntType(64))
        return types.int64(), codegen

    def body():
        return address()
    return body


def _constant(value) -> bool:
    if isinstance(value, tuple):
        return all(_constant(v) for v in value)
    if type(value) is float:
        return value == value and abs(value) != float("inf")   # the manifest is read by literal_eval
    return type(value) in (int, bool, str) or value is None


@contextlib.contextmanager
def _features(features: str):
    """numba's ahead-of-time codegen picks features from the CPU name alone; ours are the feature
    list its JIT uses (the loops chose their intrinsics from it: mace/ops/fast/_isa.py)."""
    from numba.core.codegen import AOTCPUCodegen
    before = AOTCPUCodegen._customize_tm_features
    AOTCPUCodegen._customize_tm_features = lambda self: features
    try:
        yield
    finally:
        AOTCPUCodegen._customize_tm_features = before


def serial_twins(rows: list, found: dict) -> list:
    """For each recorded `X_par(args, parts)` the serial `X(args, r0, r1)` the same step calls
    without the compute pool (mace/ops/fast/compute.py `loop`, _pool.Split after a fork): an
    engine served ahead of time starts no pool, so it calls these, and a model recorded only with
    the pool still finds them. Rows already listed are not repeated."""
    listed, out = set(rows), []
    for name, text in rows:
        if not name.endswith("_par") or name[:-4] not in found:
            continue
        try:
            sig = kernel_cache.parse_signature(text)
        except (ValueError, SyntaxError):
            continue
        twin = (name[:-4], repr(sig[:-1] + (sig[-1], sig[-1])))   # the parts count's int64 as r0, r1
        if twin not in listed:
            listed.add(twin)
            out.append(twin)
    return out


def build(rows: list | None = None, where: Path | None = None, on_step=None, on_compile=None) -> Built:
    """Compile `rows` ([(kernel name, signature text)]; default: the recorded ones) and those runs
    served ahead had numba supply here (_aot.seen_file) into this machine's library in `where`
    (default: _aot.folder()). `on_step(name)` before each signature,
    `on_compile(count)` before the one long compile."""
    from numba.core import config
    from numba.pycc import CC
    where = Path(where) if where is not None else _aot.folder()
    rows = kernel_cache.recorded() if rows is None else rows
    rows = rows + [r for r in kernel_cache.recorded(_aot.seen_file(where)) if r not in set(rows)]
    out = Built()
    t0 = time.perf_counter()
    reals = {name: m for name in kernel_cache.module_names() for m in [jitted(name)] if m is not None}
    found = kernel_cache.dispatchers(list(reals.values()))
    mods = {name: {"kernels": {}, "addresses": {}, "constants": {}} for name in reals}
    cc = CC(_aot.module_name())
    cc.verbose = False
    cc.target_cpu = config.CPU_NAME or "host"

    def skip(why: str) -> None:
        out.skipped[why] = out.skipped.get(why, 0) + 1

    for name, text in rows + serial_twins(rows, found):
        if on_step:
            on_step(name)
        module, _, attr = name.partition(":")
        d = found.get(name)
        if d is None:
            skip("stale")
            continue
        if d.targetoptions.get("parallel"):
            skip("parallel")
            continue
        try:
            sig = kernel_cache.parse_signature(text)
            keys = tuple(type_key(t) for t in sig)
            if None in keys:
                skip("literal")
                continue
            d.compile(sig)
            ret = d.overloads[sig].signature.return_type
        except Exception:   # a signature the kernel no longer types
            skip("stale")
            continue
        table = mods[module]["kernels"].setdefault(attr, [])
        if any(k == keys for k, _ in table):
            continue
        symbol = f"k{out.exported}"
        cc.export(symbol, ret(*sig))(_caller(d, len(sig)))
        table.append((keys, symbol))
        out.exported += 1
    addresses = 0
    for module, real in reals.items():
        entry = mods[module]
        for attr, value in vars(real).items():
            if hasattr(value, "native_name") and hasattr(value, "_library"):   # a numba cfunc
                symbol = f"address{addresses}"
                addresses += 1
                cc.export(symbol, "int64()")(_address_of(value))
                entry["addresses"][attr] = symbol
            elif f"{module}:{attr}" in found:
                # a loop with no signature here is still a loop: numba's only if it is called
                # (a kernel may look one up at load and never call it)
                entry["kernels"].setdefault(attr, [])
            elif _constant(value) and not attr.startswith("__"):
                entry["constants"][attr] = value
    if not out.exported:
        out.seconds = time.perf_counter() - t0
        return out
    if on_compile:
        on_compile(out.exported)
    so, manifest = _aot.paths(where)
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=where, prefix=".building-") as tmp:
        cc.output_dir = tmp
        with _features(_isa.cpu_features()):
            cc.compile()
        built = Path(tmp) / so.name
        (Path(tmp) / manifest.name).write_text(repr({"stamp": _aot.stamp(), "modules": mods}) + "\n")
        os.replace(built, so)
        os.replace(Path(tmp) / manifest.name, manifest)   # last: a library is whole once it has one
    out.path = str(so)
    out.size_mb = so.stat().st_size / 1e6
    out.seconds = time.perf_counter() - t0
    return out

