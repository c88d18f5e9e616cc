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
numba. Each export returning nothing also gets a trampoline (`_trampoline`: its arguments loaded
from an int64 and a float64 array as _aot.pack lays them out) whose address an export returns,
and the module holds one chain runner (_chain_loops.run_table): a small model's steps chain
without compiling anything per model.

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

import numpy as np

from mace.ops.fast import _aot, _isa, kernel_cache
from mace.ops.fast._jit import jitted


@dataclass
class Built:
    exported: int = 0
    trampolines: int = 0
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


def _trampoline(kernel, keys: tuple):
    """step(ints, floats, bi, bf): `kernel` called with its arguments loaded from ints[bi:] and
    floats[bf:] as _aot.pack lays them out, compiled for (int64[::1], float64[::1], int64, int64).
    Its source is generated from the keys (numba's names of dtypes, checked by _aot.chainable)."""
    from numba import njit, types
    array_at = jitted("mace.ops.fast._chain_loops").array_at
    counts = [0, 0]   # ints, floats used so far

    def load(key) -> str:
        if isinstance(key, tuple) and key[0] == "a":
            _, dtype, ndim, layout, readonly = key
            text = f'array_at(ints, bi + {counts[0]}, "{dtype} {int(ndim)} {layout} {int(readonly)}")'
            counts[0] += 1 + 2 * int(ndim)
            return text
        if isinstance(key, tuple):   # ("t", items...): a tuple expression of its items' loads
            return "(" + "".join(load(k) + ", " for k in key[1:]) + ")"
        if key == "none":
            return "None"
        if key == "bool":
            counts[0] += 1
            return f"ints[bi + {counts[0] - 1}] != 0"
        side, at = ("floats", "bf") if key in _aot.FLOAT_KEYS else ("ints", "bi")
        k = 1 if side == "floats" else 0
        counts[k] += 1
        return f"np.{key}({side}[{at} + {counts[k] - 1}])"

    scope = {"kernel": kernel, "array_at": array_at, "np": np, "__name__": "mace_aot_trampolines"}
    exec("def step(ints, floats, bi, bf):\n    kernel(" + ", ".join(load(k) for k in keys) + ")\n", scope)
    step = njit(scope["step"])
    sig = (types.int64[::1], types.float64[::1], types.int64, types.int64)
    step.compile(sig)
    return step.overloads[sig]


def _address_export(library, name: str, fnty):
    """An export body returning the machine code address of function `name` of numba code
    library `library` (LLVM type `fnty`) as linked into the module built ahead: a cfunc's C entry
    point, a trampoline's (numba's calling convention)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def address(typingctx):
        def codegen(context, builder, sig, args):
            context.active_code_library.add_linking_library(library)
            fn = builder.module.globals.get(name) or ir.Function(builder.module, fnty(context), name=name)
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
    (default: _aot.folder()). `on_step(name)` before each signature, `on_compile(count)` before
    the one long compile."""
    where = Path(where) if where is not None else _aot.folder()
    rows = kernel_cache.recorded() if rows is None else rows
    rows = rows + [r for r in kernel_cache.recorded(_aot.seen_file(where)) if r not in set(rows)]
    t0 = time.perf_counter()
    b = _Builder()
    with kernel_cache.watch(kernel_cache.Tally()):   # the trampolines' compiles: no first-use note
        for name, text in rows + serial_twins(rows, b.found):
            if on_step:
                on_step(name)
            b.export(name, text)
    b.module_attributes()
    if b.out.exported:
        if on_compile:
            on_compile(b.out.exported)
        b.write(where)
    b.out.seconds = time.perf_counter() - t0
    return b.out


class _Builder:
    """One library being built: numba's ahead-of-time module, the manifest's entries, the tally."""

    def __init__(self):
        from numba.core import config
        from numba.pycc import CC
        self.out = Built()
        self.reals = {name: m for name in kernel_cache.module_names() for m in [jitted(name)] if m is not None}
        self.found = kernel_cache.dispatchers(list(self.reals.values()))
        self.mods = {name: {"kernels": {}, "addresses": {}, "constants": {}, "parallel": []} for name in self.reals}
        self.cc = CC(_aot.module_name())
        self.cc.verbose = False
        self.cc.target_cpu = config.CPU_NAME or "host"

    def skip(self, why: str) -> None:
        self.out.skipped[why] = self.out.skipped.get(why, 0) + 1

    def export(self, name: str, text: str) -> None:
        """Signature `text` of loop `name` as an export, with its trampoline where it can chain."""
        from numba.core import types
        module, _, attr = name.partition(":")
        d = self.found.get(name)
        if d is None or d.targetoptions.get("parallel"):
            return self.skip("stale" if d is None else "parallel")
        try:
            sig = kernel_cache.parse_signature(text)
            keys = tuple(type_key(t) for t in sig)
            if None in keys:
                return self.skip("literal")
            d.compile(sig)
            ret = d.overloads[sig].signature.return_type
        except Exception:   # a signature the kernel no longer types (or a serial twin it never took)
            return self.skip("stale")
        table = self.mods[module]["kernels"].setdefault(attr, [])
        if any(k == keys for k, _, _ in table):
            return None
        n = self.out.exported
        self.cc.export(f"k{n}", ret(*sig))(_caller(d, len(sig)))
        tramp = ""
        if ret == types.none and all(_aot.chainable(k) for k in keys):
            cres = _trampoline(d, keys)
            tramp = f"t{n}"
            self.cc.export(tramp, "int64()")(_address_export(
                cres.library, cres.fndesc.llvm_func_name,
                lambda context: context.call_conv.get_function_type(cres.signature.return_type,
                                                                    cres.signature.args)))
            self.out.trampolines += 1
        table.append((keys, f"k{n}", tramp))
        self.out.exported += 1
        return None

    def module_attributes(self) -> None:
        """Each loop module's cfuncs (an export returning the address), its loops without a
        signature here (numba's, if ever called: a kernel may look one up at load and never call
        it) and its constants."""
        from llvmlite import ir
        for module, real in self.reals.items():
            entry = self.mods[module]
            for attr, value in vars(real).items():
                if hasattr(value, "native_name") and hasattr(value, "_library"):   # a numba cfunc
                    symbol = f"address{sum(len(m['addresses']) for m in self.mods.values())}"
                    # declared without its arguments: only its address is taken, and linking
                    # resolves the name to the definition
                    self.cc.export(symbol, "int64()")(_address_export(
                        value._library, value.native_name, lambda context: ir.FunctionType(ir.VoidType(), [])))
                    entry["addresses"][attr] = symbol
                elif f"{module}:{attr}" in self.found:
                    entry["kernels"].setdefault(attr, [])
                    if self.found[f"{module}:{attr}"].targetoptions.get("parallel"):
                        entry["parallel"].append(attr)   # numba's by design: the pool's threads
                elif _constant(value) and not attr.startswith("__"):
                    entry["constants"][attr] = value

    def write(self, where: Path) -> None:
        """Compile the module (with the chain runner where there are trampolines) and move it and
        its manifest into `where`: built in a temporary folder there, so a failure leaves none."""
        runner = None
        if self.out.trampolines:
            runner = "run_table"
            self.cc.export(runner, "void(int64[:, ::1], int64[::1], float64[::1])")(
                _caller(jitted("mace.ops.fast._chain_loops").run_table, 3))
        so, manifest = _aot.paths(where)
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=where, prefix=".building-") as tmp:
            self.cc.output_dir = tmp
            with _features(_isa.cpu_features()):
                self.cc.compile()
            text = repr({"stamp": _aot.stamp(), "runner": runner, "modules": self.mods})
            (Path(tmp) / manifest.name).write_text(text + "\n")
            os.replace(Path(tmp) / so.name, so)
            os.replace(Path(tmp) / manifest.name, manifest)   # last: a library is whole once it has one
        self.out.path = str(so)
        self.out.size_mb = so.stat().st_size / 1e6
