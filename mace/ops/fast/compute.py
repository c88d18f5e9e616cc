"""One engine's CPU threading: how many threads its runs get, how the pool's idle threads wait,
and the steps its fast kernels bind onto the compute pool.

    compute = ComputeContext.from_options({"num_threads": 2, "cpu_wait_policy": "passive"})
    compute = compute.for_run(macs)   # one thread for a run of a few million multiply-adds
    engine = Engine(graph, compute=compute)      # or Engine(graph, options=...): it makes one
    kernel: compute_of(self.ctx).loop(...), .matmul(...), .width()   (ctx.compute, or SERIAL)

The engine makes one from its options and hands it to every kernel through its KernelContext
(`ctx.compute`); its runs enter `compute.session()`. Everything a context knows is read once,
when it is made (MACE_NO_POOL included): nothing here reads the environment per call, so two
engines of one process can run with different thread counts, each binding and running at its
own width. What cannot be per engine (numba's one OpenMP team, OpenBLAS's one thread count,
libgomp's wait policy read as it loads, a forked child) is the compute pool's, one per
process: mace/ops/fast/_pool.py says why each is process-wide.
"""
from __future__ import annotations

import contextlib
import os
from functools import partial

import numpy as np

from mace.ops.fast import _pool
from mace.ops.fast._jit import ahead_of_time, loops
from mace.util import omp_wait

_UNSET = object()
# A run of fewer multiply-adds than this runs on one thread whatever the thread count asked:
# its steps are a few microseconds each, and splitting one costs a fork-join (~1.5 us) and
# its data moving between cores. Measured on the corpus at 2 threads (2-core x86 VM):
# openWakeWord's heads (0.2-0.4 M MACs), silero VAD (0.4 M), MTCNN's R-net (1.5 M) and a
# tiny Xception (3.4 M) all ran slower than at one thread; onnxruntime, whose thread pool
# runs such ops inline, ran them at its one-thread speed.
SMALL_RUN_MACS = 4_000_000


class ComputeContext:
    """threads: the width runs get (None: OpenBLAS's count outside runs, which `--omp_num_threads`
    / threadpoolctl set); wait_policy: mace/util/omp_wait.py's name (None: the user's
    OMP_WAIT_POLICY / GOMP_SPINCOUNT, else the default); pooled: False keeps every kernel on its
    serial path (MACE_NO_POOL=1)."""

    def __init__(self, threads: int | None = None, wait_policy: str | None = None, pooled: bool = True):
        if wait_policy is not None and wait_policy not in omp_wait.POLICIES:
            raise ValueError(f"cpu_wait_policy '{wait_policy}': expected one of {', '.join(omp_wait.POLICIES)}")
        self.threads = int(threads) if threads and int(threads) > 0 else None
        self.wait_policy = wait_policy
        self.pooled = pooled
        self._pool = _UNSET
        self.narrowed = None   # why this context runs on one thread though more were asked
        self.split_small = False   # for_run keeps this context's width for any run

    @classmethod
    def from_options(cls, options: dict | None = None, environ=os.environ) -> "ComputeContext":
        """An engine's context from its options (`num_threads`, `cpu_wait_policy`), MACE_NO_POOL
        read here, once."""
        options = options or {}
        no_pool = environ.get("MACE_NO_POOL", "") not in ("", "0")
        context = cls(options.get("num_threads"), options.get("cpu_wait_policy"), pooled=not no_pool)
        # split even a small run (for_run): the test suite's tiny graphs exercise the pooled paths
        context.split_small = bool(options["split_small_runs"]) if "split_small_runs" in options else \
            environ.get("MACE_SPLIT_SMALL_RUNS", "") not in ("", "0")
        return context

    def for_run(self, macs: int, streamed: int = 0) -> "ComputeContext":
        """The context a model whose whole run is `macs` multiply-adds gets: this one, or one
        thread (same wait policy) where the run is below SMALL_RUN_MACS and this context would
        split it (it says why in `notes`); options {"split_small_runs": True} (or, where the
        options do not say, MACE_SPLIT_SMALL_RUNS=1) keep the width. So does a one-row product
        streaming `streamed` >= _pool.FEW_ROWS_SPLIT weight elements (opstats.streamed_weight):
        its step is the run, and split it pays (openWakeWord timer's 3264 -> 128 head: 0.4 M
        multiply-adds, 31 -> 18 us at two threads)."""
        wanted = self.threads or _pool.blas_threads() or 1   # as width(), without starting the pool
        if (macs >= SMALL_RUN_MACS or streamed >= _pool.FEW_ROWS_SPLIT or self.split_small
                or not self.pooled or wanted <= 1):
            return self
        narrow = ComputeContext(1, self.wait_policy, self.pooled)
        narrow.narrowed = (f"runs on one thread: a run is {macs / 1e6:.2f} M multiply-adds (below "
                           f"{SMALL_RUN_MACS / 1e6:.0f} M), where splitting steps across "
                           f"{wanted} threads costs more than it saves")
        return narrow

    def __repr__(self) -> str:
        return (f"ComputeContext(threads={self.threads}, wait_policy={self.wait_policy!r}, "
                f"pooled={self.pooled})")

    # ---- the pool ----------------------------------------------------------
    @property
    def pool(self) -> _pool.Pool | None:
        """The process's compute pool (started under this context's wait policy when it is the
        first to ask), or None: no pool here, MACE_NO_POOL, a forked child, or the kernels served
        ahead of time on one thread (`serial_ahead`)."""
        if self._pool is _UNSET:
            self._pool = _pool.process_pool(self.wait_policy) if self.pooled and not self.serial_ahead() else None
        return None if self._pool is None or _pool.forked() else self._pool

    def serial_ahead(self) -> bool:
        """The kernels are served ahead of time (MACE_AOT=1) and this context's width is one thread
        (asked, or OpenBLAS's count where none is: `--omp_num_threads 1`): it runs every kernel's
        serial loop in the calling thread and starts no pool (the pool is numba's OpenMP team, and
        importing numba is the memory the library saves). Two or more threads start it as without
        the library."""
        return ahead_of_time() and (self.threads or _pool.blas_threads() or 1) == 1

    def notes(self) -> list:
        """Why this context's wait policy is not the one its runs get (the pool started first
        under another: libgomp reads it once per process). Asking does not start the pool: an
        engine whose kernels never asked for it (a GPU engine's) gets no note."""
        asked = self._pool is not _UNSET and self.pool is not None
        note = omp_wait.conflict(self.wait_policy) if asked else None
        return [n for n in (note, self.narrowed) if n]

    @property
    def contention(self):
        """The `auto` wait policy's sampler of the cores other processes keep busy (one per
        process: it measures the machine, not an engine), or None."""
        return None if self.pool is None else self.pool.contention

    def width(self) -> int:
        """Threads this context's runs split into (1 without a pool)."""
        p = self.pool
        return 1 if p is None else p.width(self.threads)

    def active(self) -> bool:
        """Whether kernels bind split steps: a pool, and more than one thread."""
        return self.width() > 1

    def gemm_width(self) -> int:
        """Threads _loops' packed GEMM gets: the pool's width; 1 where GEMMs would run on one
        thread anyway (OpenBLAS held at one, no pool); 0 where they are better left to
        OpenBLAS's own threads (no pool, OpenBLAS on several)."""
        if self.pool is None:
            return 1 if self.serial_ahead() else _pool.blas_gemm_width()
        return self.width()

    def session(self):
        """The context of a run: OpenBLAS held at one thread, the pool sized to this context
        (reusable, re-entrant); nothing without a pool."""
        p = self.pool
        return _pool.Session(p, self.threads) if p is not None else contextlib.nullcontext()

    # ---- steps -------------------------------------------------------------
    def gemms(self, chains: list, parts: int | None = None):
        """One step for independent chains of products (mace/ops/fast/_pool.py, Pool.gemms),
        split into `parts` (default: this context's width)."""
        return self.pool.gemms(chains, parts or self.width(), self._opener())

    def rows(self, name: str, args: tuple, rows: int, parts: int | None = None, lib=None):
        """One step running compiled loop `name` split over `rows` (Pool.rows)."""
        parts = min(parts or self.width(), max(rows, 1))
        return self.pool.rows(name, args, rows, parts, lib, self._opener())

    def loop(self, name: str, args: tuple, rows: int, work: int, parts: int | None = None, lib=None):
        """A step running compiled loop `name` (mace/ops/fast/_loops.py, or module `lib`) over
        rows 0:rows: split across the pool when it is active and `work` (elements touched)
        pays for the launch, else the serial loop in the calling thread. `parts`: split into
        that many (the width a kernel planned its split for at load; 1: never split)."""
        if work >= _pool.MIN_PARALLEL_WORK and rows > 1 and parts != 1 and self.active():
            return self.rows(name, args, rows, parts, lib)
        return partial(getattr(lib or loops(), name), *args, 0, rows)

    def matmul(self, a, b, out, trans_b: bool = False):
        """A step doing out = a @ b (b given as [.., n, k] and used transposed when trans_b):
        2-D, or a stack of 3-D products where either operand may be one 2-D matrix shared by
        the stack. On the pool when it is active and the operands are BLAS operands, else
        numpy's matmul. A product under MIN_PARALLEL_WORK multiply-adds stays numpy's too: split,
        it made a wake-word model (a 64 -> 1 FullyConnected with a sigmoid) a pool session whose
        thread wake-ups cost more than its run (oww_hey_mycroft at 2 threads: ~1-6 ms, not ~0.3)."""
        macs = out.size * a.shape[-1]
        if (a.dtype == b.dtype == out.dtype == np.float32 and out.ndim in (2, 3)
                and macs >= _pool.MIN_PARALLEL_WORK and self.active()):
            chains = [[(a, b, out, 0.0, trans_b)]] if out.ndim == 2 else \
                [[(a[i] if a.ndim == 3 else a, b[i] if b.ndim == 3 else b, out[i], 0.0, trans_b)]
                 for i in range(out.shape[0])]
            try:
                return self.gemms(chains)
            except ValueError:   # strides BLAS cannot take: numpy copies as it needs
                pass
        return partial(np.matmul, a, np.swapaxes(b, -1, -2) if trans_b else b, out=out)

    def with_blas_threads(self, step):
        """`step` (a reference kernel's, mostly BLAS work) run with OpenBLAS's threads back
        inside a session (Pool.with_blas_threads); `step` itself without a pool."""
        p = self.pool
        return step if p is None else p.with_blas_threads(step, self.threads)

    def _opener(self):
        """What a pooled step called outside any session opens: this context's session."""
        return _pool.Session(self._pool, self.threads)


# Kernels built outside an engine (a test's KernelContext, a convert-time fold) get this one:
# no pool, every step serial in the calling thread. A constant, never changed.
SERIAL = ComputeContext(pooled=False)


def compute_of(ctx) -> ComputeContext:
    """The ComputeContext a kernel built from KernelContext `ctx` binds with."""
    return getattr(ctx, "compute", None) or SERIAL
