"""One compiled call for a run of consecutive compiled steps (`chained`).

A small model's run is a few dozen steps of a few hundred nanoseconds each, and each call from
Python into a compiled loop costs ~0.3 us on top (the call, and numba unboxing every array
argument, ~40 ns each): microWakeWord's 19 steps took 9.8 us a run, ~5 of them in calls. A chain
is a generated function that calls those steps' machine code in order from compiled code
(mace/ops/fast/_chain_loops.py), their arrays and scalars passed in one int64 and one float64
array: one call a run (5.1 us).

Served ahead of time (MACE_AOT=1, mace/ops/fast/_aot.py), a run of steps calling the library's
exports is a table the library's one runner walks, each step through its signature's trampoline:
nothing compiles per model, so the chain needs no numba.

Which steps: a `partial` of a numba dispatcher (no keywords, not a parallel loop) whose machine
code for these very argument types exists (the step has run) and returns nothing, its arguments
arrays of at least one dimension, int / float / bool scalars or tuples of them. Anything else
(a numpy call, a Python closure, a run-time If) ends a chain and runs as it did.

On the compute pool's threads (an engine of two or more) a run of steps that holds split steps
(_pool.Split: a loop's rows split by its `_par` driver, each call a parallel region of its own:
~1.3 us of opening and closing on two threads, beside the Python call) becomes a
`ParallelChain`: one parallel region for the whole run, each thread taking its part of every
split step and the steps between run once, each step done before the next begins
(_chain_loops.run_part: parts claimed by atomic exchange, so a thread the pool did not start
leaves its parts to the others and nobody waits on a part no thread runs). mp_face_detection's
72 calls at two threads: 763 -> 611 us a run; gender_v1 291 -> 272 us. Split steps call their
serial loop over a row range, compiled once for these types where no run had made it. What a
model compiles is the serial body each thread runs (`chain(v, d, flags, p)`); the parallel
region around it is `_chain_loops.launch`, one function for every model, which calls the body
by address: mp_face_detection's chain compiled in 7 s as a parallel function of its own, 1.5 s
as a body.

The chain's source depends only on its steps' argument types and order, not on shapes, values
or addresses: models of the same structure share it (an LSTM's unrolled steps share one). It is
written to the user's cache folder (`chain_dir`), named by a hash of itself, and numba caches
its machine code beside it: 0.1-0.5 s of compiling the first time on a machine, ~20 ms to load
later. The engine decides when to chain (mace/runtime/engine.py `_chain_after`: small runs,
after some runs).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mace.ops.fast import _aot
from mace.ops.fast._aot import AotStep
from mace.ops.fast._compile_events import CHAIN_MODULES
from mace.ops.fast._jit import op_loops
from mace.ops.fast._pool import Split, forked

log = logging.getLogger("mace.jit")

MIN_STEPS = 2      # a chain of one step saves nothing
MAX_STEPS = 256    # compiling grows with the calls: a longer run is cut into several chains
# chains kept in chain_dir() (each a small source file and ~100-200 KB of numba's cache): past
# this many, writing a new one removes those least recently used (`_prune`)
MAX_CACHED = 256


class Chain(partial):
    """A program call running several steps in one compiled call: `chain(ints, floats)`.
    `at` is the node of the step running (or that failed): the chain records its progress in
    the last int slot before each step."""

    @property
    def at(self):
        ints = self.args[0]
        return self.indices[int(ints[-1])]


def _entry(step, compile_missing: bool = False):
    """The address of the machine code `step` (a partial of a numba dispatcher) calls with its
    arguments (compiled now if `compile_missing`), or None where the step cannot be chained."""
    func = getattr(step, "func", None)
    if type(step) is not partial or step.keywords or not hasattr(func, "overloads"):
        return None
    if func.targetoptions.get("parallel") or any(_kind(a) is None for a in step.args):
        return None
    try:
        from numba import types
        compiled = _overload(func, step.args, compile_missing)
        if compiled is None or compiled.signature.return_type != types.none:
            return None
        return compiled.library.get_pointer_to_function(compiled.fndesc.llvm_func_name)
    except Exception:   # numba's internals differ: the step runs as it does
        return None


def _overload(func, args: tuple, compile_missing: bool = True):
    """numba dispatcher `func`'s compiled overload for `args`' types (compiled now where there is
    none and `compile_missing`), or None."""
    from numba import typeof
    sig = tuple(typeof(a) for a in args)
    if not compile_missing:
        return func.overloads.get(sig)
    if sig not in func.overloads:
        func.compile(sig)
    return func.overloads[sig]


def _split_entry(step):
    """(address, parts, rows) of a compute pool split step (_pool.Split): the machine code of its
    serial loop for its arguments and a row range (compiled now where no run made it: a split
    step runs the `_par` driver, which compiles the loop into itself), or None."""
    if type(step) is not Split or any(_kind(a) is None for a in step.args):
        return None
    entry = _entry(partial(step.serial, *step.args, 0, step.rows), compile_missing=True)
    # one piece (a map of fewer rows than threads): its serial loop over all rows, run once
    return None if entry is None else (entry, step.pieces if step.pieces > 1 else 0, step.rows)


def _kind(value):
    """How an argument reaches a chain: 'array', 'int', 'float', 'float32', 'bool', 'tuple' (of
    scalars), or None (the step cannot be chained)."""
    if isinstance(value, np.ndarray):
        ok = value.ndim >= 1 and value.dtype.kind in "biuf" and not value.dtype.byteorder == ">"
        return "array" if ok else None
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.int64)):
        return "int" if -2**63 <= value < 2**63 else None
    if isinstance(value, float):
        return "float"
    if isinstance(value, np.float32):
        return "float32"
    if type(value) is tuple and all(_kind(v) not in (None, "array") for v in value):
        return "tuple"   # of scalars (a kernel's epilogue: addresses, a code, parameters)
    return None


class Planned(NamedTuple):
    """A program call a chain takes: `call` (the program's), its node `owner`, the machine code
    `entry` the plan calls, a split step's `parts` and `rows` (0 and 0 otherwise), and `step`,
    the partial whose arguments the plan passes (a split step's serial loop)."""
    call: object
    owner: int
    entry: int
    parts: int
    rows: int
    step: partial


def chained(calls: list, owners: list, width: int = 1) -> tuple:
    """(calls, owners) with each run of MIN_STEPS or more consecutive chainable calls replaced
    by one `Chain` (its owner None: the chain says which node runs, as a Guarded call does).
    With `width` > 1 (the engine's threads on the compute pool) the compute pool's split steps
    (_pool.Split) chain too: a run holding one becomes a `ParallelChain`. A chain that cannot be
    built (numba refuses it, the cache folder is not writable) leaves its steps as they were."""
    out_calls, out_owners, run = [], [], []

    def flush():
        for start in range(0, len(run), MAX_STEPS):
            part = run[start:start + MAX_STEPS]
            made = None
            if len(part) >= MIN_STEPS:
                if type(part[0].call) is AotStep:   # served ahead: the library's runner, no compile
                    made = _aot.chain([p.call for p in part], [p.owner for p in part])
                elif any(p.parts for p in part):
                    made = _parallel_chain(part, width)
                else:
                    made = _chain([p.step for p in part], [p.owner for p in part], [p.entry for p in part])
            if made is None:
                out_calls.extend(p.call for p in part)
                out_owners.extend(p.owner for p in part)
            else:
                out_calls.append(made)
                out_owners.append(None)
        run.clear()

    for call, owner in zip(calls, owners):
        ahead = _aot.as_step(call) if owner is not None else None
        if ahead is not None and ahead.tramp:
            if run and type(run[0].call) is not AotStep:
                flush()   # a chain is all numba's steps or all the library's
            run.append(Planned(ahead, owner, None, 0, 0, ahead))
            continue
        if run and type(run[0].call) is AotStep:
            flush()
        entry = _entry(call) if owner is not None else None
        if entry is not None:
            run.append(Planned(call, owner, entry, 0, 0, call))
            continue
        split = _split_entry(call) if owner is not None and width > 1 else None
        if split is not None:   # the step the plan calls: the serial loop, with or without rows
            entry, parts, rows = split
            run.append(Planned(call, owner, entry, parts, rows, partial(call.serial, *call.args) if parts
                               else partial(call.serial, *call.args, 0, rows)))
            continue
        flush()
        out_calls.append(call)
        out_owners.append(owner)
    flush()
    return out_calls, out_owners


def _chain(steps: tuple, indices: tuple, entries: tuple):
    try:
        source, ints, floats, keep = _generated(steps, entries)
        func = _compiled(source)
        ints_arr = np.array(ints + [0], np.int64)   # the last slot: the step running
        floats_arr = np.array(floats or [0.0], np.float64)
        compiled = _overload(func, (ints_arr, floats_arr))
    except Exception as e:   # the steps run one by one, as before
        log.debug("steps not chained: %s: %s", type(e).__name__, e)
        return None
    made = Chain(compiled.entry_point, ints_arr, floats_arr)
    made.indices, made.keep = list(indices), keep
    return made


class ParallelChain:
    """A program call running a run of steps, some split across the compute pool's threads, in
    one parallel region (_chain_loops.run_part): `width` threads each take their part of every
    split step and the steps between run once, each step finished before the next starts. A
    split step alone opens and closes a region of its own (~1.3 us on two threads beside its
    work) and every step is a Python call: mp_face_detection makes 72 calls a run, most split.
    `at` is the node of the step that failed. After a fork (GNU OpenMP cannot run there) the
    steps run one by one, as they would unchained."""

    def __init__(self, func, ints, floats, flags, width, calls, indices, keep):
        self.func, self.ints, self.floats, self.flags, self.width = func, ints, floats, flags, width
        self.calls, self.indices, self.keep = calls, indices, keep
        self.at = indices[0]

    def __call__(self):
        if forked():
            for i, call in zip(self.indices, self.calls):
                self.at = i
                call()
            return
        self.func(self.ints, self.floats, self.flags, self.width)
        failed = int(self.flags[-1])
        if failed:   # run that step alone: it raises its own error (the engine names the node)
            self.at, call = self.indices[failed - 1], self.calls[failed - 1]
            if hasattr(call, "serial"):   # a split step: its serial loop (numba's parallel
                call.serial(*call.args, 0, call.rows)   # region does not carry an exception out)
            else:
                call()
            raise RuntimeError("a step failed in a parallel chain")


def _parallel_chain(run: list, width: int):
    calls, indices, entries, parts, rows, steps = zip(*run)   # the fields of Planned
    try:
        source, ints, floats, keep = _generated(steps, entries, list(zip(parts, rows)))
        func = _compiled(source)
        ints_arr = np.array(ints or [0], np.int64)
        floats_arr = np.array(floats or [0.0], np.float64)
        flags = np.zeros(sum(max(p, 1) + 1 for p in parts) + 1, np.int64)
        body = _overload(func, (ints_arr, floats_arr, flags, 0))
        address = body.library.get_pointer_to_function(body.fndesc.llvm_func_name)
        launch = _overload(op_loops("_chain_loops").launch, (address, ints_arr, floats_arr, flags, int(width)))
    except Exception as e:   # the steps run one by one, as before
        log.debug("steps not chained in parallel: %s: %s", type(e).__name__, e)
        return None
    return ParallelChain(partial(launch.entry_point, address), ints_arr, floats_arr, flags, int(width),
                         list(calls), list(indices), keep)


def _generated(steps, entries, split=None) -> tuple:
    """(source, ints, floats, arrays kept alive) of a chain calling `steps` in order, each by its
    machine code's address (`entries`, from _entry): one call of _chain_loops.run_steps over a plan of where each
    argument lies in ints / floats and what type it has (see that module)."""
    ints, floats, keep = [], [], []

    def planned(a) -> tuple:
        """Argument `a`'s plan entry, its values appended to ints / floats."""
        kind = _kind(a)
        if kind == "array":
            keep.append(a)
            ints.extend([a.ctypes.data, *a.shape, *a.strides])
            return ("a", len(ints) - 1 - 2 * a.ndim, a.dtype.str, a.ndim, _layout(a),
                    not a.flags.writeable, bool(a.flags.aligned))
        if kind == "tuple":
            return ("t", tuple(planned(v) for v in a))
        if kind in ("int", "bool"):
            ints.append(int(a))
            return ("i" if kind == "int" else "b", len(ints) - 1)
        floats.append(float(a))
        return ("f" if kind == "float" else "s", len(floats) - 1)

    from numba import typeof

    arg_type = op_loops("_chain_loops").arg_type
    plan = []
    for k, (step, entry) in enumerate(zip(steps, entries)):
        ints.append(entry)
        at = len(ints) - 1
        args = tuple(planned(a) for a in step.args)
        # the chain calls the machine code of these very types: a plan that would pass others
        # (a kind of argument typed differently from numba.typeof) is refused, not called
        if tuple(arg_type(a) for a in args) != tuple(typeof(a) for a in step.args):
            raise TypeError(f"a step's arguments plan as other types than numba gives them: {args}")
        if split is None:
            plan.append((at, args))
        else:   # a split step's rows: a value in ints, not in the source (one chain, every shape)
            parts, rows = split[k]
            ints.append(rows)
            plan.append((at, args, parts, len(ints) - 1))
    if split is None:
        header, body = ["@njit(cache=True, nogil=True)", "def chain(v, d):"], ["    run_steps(v, d, PLAN)"]
        imports = "from numba import njit\nfrom mace.ops.fast._chain_loops import run_steps"
    else:   # thread p's body: _chain_loops.launch runs it on each thread
        header = ["@njit(cache=True, nogil=True)", "def chain(v, d, flags, p):"]
        body = ["    run_part(v, d, flags, p, PLAN)"]
        imports = "from numba import njit\nfrom mace.ops.fast._chain_loops import run_part"
    source = "\n".join([
        "# generated by mace/ops/fast/chain.py: one compiled call for a run of steps",
        f"# _chain_loops {_loops_stamp()}", imports, "",
        f"PLAN = {repr(tuple(plan))!r}", "", "", *header, *body, ""])
    return source, ints, floats, keep


@functools.lru_cache(maxsize=None)
def _loops_stamp() -> str:
    """A hash of _chain_loops.py, written into every chain: numba checks a cached function
    against its own file only, so a chain compiled against another version of run_steps /
    run_part (an upgrade) would load stale; with the stamp its source, and so its name, differ."""
    return hashlib.sha256(Path(op_loops("_chain_loops").__file__).read_bytes()).hexdigest()[:16]


def _layout(a: np.ndarray) -> str:
    return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "A"


def chain_dir() -> Path:
    """Where the generated chains live: NUMBA_CACHE_DIR/pymace_chains when the user names numba's
    cache folder, else the user's cache folder (XDG_CACHE_HOME or ~/.cache)/pymace/chains."""
    numba_dir = os.environ.get("NUMBA_CACHE_DIR")
    if numba_dir:
        return Path(numba_dir) / "pymace_chains"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pymace" / "chains"


_loaded: dict = {}


def _prune(folder: Path, keep: Path, limit: int | None = None) -> int:
    """Remove the least recently used chains (by access time, which `_compiled` sets on each
    use) past `limit` (MAX_CACHED) from `folder`, each with numba's cache files for it; `keep`
    (the one just written) stays. Returns how many went.
    Another process loading a chain removed meanwhile fails to build it and runs its steps
    unchained (`chained`)."""
    limit = MAX_CACHED if limit is None else limit
    found = []
    for path in folder.glob("chain_*.py"):
        try:
            found.append((path.stat().st_atime, path))
        except OSError:   # removed meanwhile
            pass
    found.sort(reverse=True)
    old = [path for _, path in found[limit:] if path != keep]
    for path in old:
        for f in [path, *(folder / "__pycache__").glob(f"{path.stem}.*")]:
            try:
                f.unlink()
            except OSError:
                pass
    return len(old)


def _compiled(source: str):
    """The numba dispatcher `chain` of `source`, written to chain_dir() (once) and imported."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    if digest in _loaded:
        return _loaded[digest]
    folder = chain_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"chain_{digest}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        os.replace(tmp, path)   # another process writing the same chain writes the same bytes
        _prune(folder, keep=path)
    else:   # used now, on its access time: its modification time is numba's cache stamp
        os.utime(path, ns=(time.time_ns(), path.stat().st_mtime_ns))
    name = f"{CHAIN_MODULES}{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    _loaded[digest] = module.chain
    return module.chain
