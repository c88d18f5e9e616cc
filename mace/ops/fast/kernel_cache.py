"""The compiled CPU kernels as one set: what compiling them costs, done once per machine.

numba compiles a loop the first time it is called with a new signature (argument types,
array layouts, read-only flags) and caches the machine code per machine. A model never seen
before meets signatures no earlier model used, so each new model paid 10-25 s of compiling
on its first run, with no word said. This module makes that visible and avoidable:

    LOOP_MODULES           the modules that hold our numba loops (float, activations, int8)
    recorded()             the signatures real models call them with (kernel_signatures.txt,
                           written by tools/gen_kernel_signatures.py from the corpus and examples)
    warm(on_step)          compile (or load from numba's cache) every recorded signature: what
                           `converter.py warmup` runs, so no later run compiles
    watch(observer)        tell an observer when a compile starts and ends (top-level compiles only)
    served_ahead()         one line on what the library built ahead served (MACE_AOT=1), or None;
                           notes the signatures numba had to supply for `warmup --aot`
    used()                 the signatures this process compiled or loaded (for the generator)

The signatures file is ours and parsed with `ast` (names and calls of numba's type classes
only), never evaluated.
"""
from __future__ import annotations

import ast
import inspect
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from mace.ops.fast._compile_events import CHAIN_NOTE, FIRST_NOTE, WARMUP_HINT, Tally, watch  # noqa: F401 (the API)
from mace.ops.fast import _aot
from mace.ops.fast._jit import jitted

log = logging.getLogger("mace.jit")

LOOP_MODULES = ("mace.ops.fast._loops", "mace.ops.fast._act_loops", "mace.ops.fast.int8._qloops")
# an op's own loops (mace/ops/fast/<name>.py)
OP_LOOP_MODULES = ("_deconv_loops", "_rnn_loops", "_resize_loops", "_detection_loops", "_normalize_loops",
                   "_quantize_loops", "_integer_loops", "_pad_loops", "_stream_loops", "_line_loops",
                   "_cast_loops", "_chain_loops", "_pixel_loops", "_transpose_loops")
SIGNATURES_FILE = Path(__file__).with_name("kernel_signatures.txt")


def module_names() -> list:
    return [*LOOP_MODULES, *(f"mace.ops.fast.{name}" for name in OP_LOOP_MODULES)]


def modules() -> list:
    """The loop modules numba can build here (numba's own, imported on demand, also where
    MACE_AOT=1 serves the kernels from a library built ahead), else []."""
    found = [jitted(name) for name in module_names()]
    return [m for m in found if m is not None]


def dispatchers(mods=None) -> dict:
    """{'module:function': numba dispatcher} of every cached loop in the loop modules."""
    found = {}
    for m in mods if mods is not None else modules():
        for name, obj in vars(m).items():
            if hasattr(obj, "py_func") and getattr(obj, "_cache", None) is not None:
                found[f"{m.__name__}:{name}"] = obj
    return found


def used(mods=None) -> dict:
    """{'module:function': [signature text]} compiled or loaded in this process."""
    return {name: sorted({repr(tuple(sig)) for sig in d.signatures})
            for name, d in dispatchers(mods).items() if d.signatures}


# ---- kernels served ahead of time (MACE_AOT=1, mace/ops/fast/_aot.py) -----------------------------

def served_ahead() -> str | None:
    """One line on what the library built ahead served this process (None: it served nothing).
    Where numba had to supply serial loops it lacks, their signatures are added to the
    library folder's seen_signatures.txt, which `warmup --aot` compiles in, and the line says so."""
    line = _aot.report()
    missed = _missed_serial()
    if not line or not missed:
        return line
    path = _aot.seen_file()
    rows = recorded(path)
    merged = {}
    for name, sig in rows + missed:
        merged.setdefault(name, set()).add(sig)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_recorded(merged, path, header="signatures runs served ahead of time (MACE_AOT=1) had numba supply "
                                            "on this machine; `warmup --aot` compiles them in")
    except OSError as e:
        return f"{line}; their signatures cannot be noted in {path} ({e})"
    return f"{line}; their {len(missed)} signature(s) are noted in {path}: `{_aot.AOT_HINT}` compiles them in"


def _missed_serial() -> list:
    """[(kernel, signature)] of serial loops numba supplied to a process served ahead."""
    lib = _aot.loaded()
    if lib is None:
        return []
    names = {f"{m.__name__}:{attr}" for m in lib.modules.values() for attr, _ in m.fallbacks}
    mods = [jitted(m.__name__) for m in lib.modules.values() if m.fallbacks]
    found = dispatchers([m for m in mods if m is not None]) if names else {}
    return [(name, repr(tuple(sig))) for name in sorted(names) for d in [found.get(name)]
            if d is not None and not d.targetoptions.get("parallel") for sig in d.signatures]


# ---- the signatures file ----------------------------------------------------------------------

def recorded(path: Path = SIGNATURES_FILE) -> list:
    """[(kernel name, signature text)] from the file (`name<TAB>signature` per line, # comments)."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, sig = line.partition("\t")
            rows.append((name.strip(), sig.strip()))
    return rows


def write_recorded(signatures: dict, path: Path = SIGNATURES_FILE, header: str = "") -> int:
    lines = [f"# {h}" for h in header.splitlines()]
    lines += [f"{name}\t{sig}" for name in sorted(signatures) for sig in sorted(signatures[name])]
    path.write_text("\n".join(lines) + "\n")
    return sum(len(s) for s in signatures.values())


def parse_signature(text: str) -> tuple:
    """A signature's text (the repr of a tuple of numba types) back into numba types."""
    from numba.core import types
    names = {"bool": types.boolean, "Array": types.Array, "UniTuple": types.UniTuple,
             "Tuple": types.Tuple, "omitted": types.Omitted}
    for n in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float32", "float64", "boolean", "none", "intp"):
        names[n] = getattr(types, n)

    def value(node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.Tuple):
            return tuple(value(e) for e in node.elts)
        literal = (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                   and isinstance(node.func.value, ast.Name) and node.func.value.id == "Literal")
        if literal and len(node.args) == 1:   # Literal[int](3): a constant argument numba specialised on
            return types.literal(value(node.args[0]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
            fn = names[node.func.id]
            return fn(*[value(a) for a in node.args], **{k.arg: value(k.value) for k in node.keywords})
        raise ValueError(f"unexpected {ast.dump(node)[:60]} in a kernel signature")

    sig = value(ast.parse(text, mode="eval").body)
    if not isinstance(sig, tuple):
        raise ValueError("a kernel signature is a tuple of argument types")
    return sig


def stale(rows: list, found: dict) -> list:
    """Rows naming a kernel that is gone or whose argument count changed since recording."""
    out = []
    for name, text in rows:
        d = found.get(name)
        try:
            fits = d is not None and len(parse_signature(text)) == len(inspect.signature(d.py_func).parameters)
        except (ValueError, TypeError, SyntaxError):
            fits = False
        if not fits:
            out.append((name, text))
    return out


# ---- warm-up ------------------------------------------------------------------------------------

@dataclass
class Warmed:
    total: int = 0
    compiled: int = 0     # compiled now (numba's cache held none for this machine)
    cached: int = 0       # loaded from numba's cache
    stale: int = 0        # recorded for a kernel that changed since (regenerate the file)
    seconds: float = 0.0
    cache_dir: str = ""


def warm(rows: list | None = None, on_step=None) -> Warmed:
    """Compile or load every recorded signature; `on_step(kernel name)` before each."""
    rows = recorded() if rows is None else rows
    found = dispatchers()
    out = Warmed(total=len(rows))
    gone = set(stale(rows, found))
    tally = Tally()
    t0 = time.perf_counter()
    with watch(tally):
        for name, text in rows:
            if on_step:
                on_step(name)
            if (name, text) in gone:
                out.stale += 1
                continue
            before = tally.compiled
            try:
                found[name].compile(parse_signature(text))
            except Exception as e:   # a signature the kernel no longer types: as stale
                log.debug("warmup: %s%s: %s", name, text, e)
                out.stale += 1
                continue
            if tally.compiled > before:
                out.compiled += 1
            else:
                out.cached += 1
    out.seconds = time.perf_counter() - t0
    out.cache_dir = cache_dir(found)
    return out


def cache_dir(found: dict) -> str:
    """Where numba keeps the compiled kernels (the first loop's cache folder)."""
    for d in found.values():
        try:
            return str(d._cache._cache_file._cache_path)
        except AttributeError:
            continue
    return ""

