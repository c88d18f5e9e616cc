"""Local work-group sizes: a default per launch, a search when tuning, and the tuned file.

Every launch asks `lws(name, kernel, gws)`. Without a tuned value the default is
a power-of-two shape bounded by the global size (few distinct shapes, so
compilers that specialise per work-group size, like PoCL, compile few
variants). With tuning on, the first launch of each kernel + global size times
a handful of candidates (after a warm-up run each) and keeps the fastest; the
results are saved as <library>_tuned_opencl_parameter.<device>.bin (keyed by
kernel name and global size, as MACE keys them) and loaded by later runs.
"""
from __future__ import annotations

import json
import time

from mace.runtime.gpu.cache_files import TUNING, read_cache, write_cache

TUNE_RUNS = 2


def _pow2_floor(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def default_lws(gws: tuple, max_size: int) -> tuple:
    """dim 0 (channel blocks) up to 4, dim 1 (width) filling up to 32 work items, dim 2 1."""
    lws = [min(_pow2_floor(gws[0]), 4 if len(gws) == 3 else 16)]
    if len(gws) > 1:
        lws.append(min(_pow2_floor(gws[1]), max(1, 32 // lws[0])))
    if len(gws) > 2:
        lws.append(1)
    while _prod(lws) > max_size:
        lws[lws.index(max(lws))] //= 2
    return tuple(lws)


def candidates(gws: tuple, max_size: int) -> list:
    """The shapes a search tries: the default first, then a few others of other proportions."""
    base = default_lws(gws, max_size)
    shapes = [base]
    for scale in ((2, 1, 1), (1, 2, 1), (1, 1, 2), (2, 2, 1), (1, 4, 1)):
        lws = tuple(min(b * s, _pow2_floor(g)) for b, s, g in zip(base, scale, gws))
        if _prod(lws) <= max_size and lws not in shapes:
            shapes.append(lws)
    if len(shapes) < 3 and gws[0] > 1:
        shapes.append(tuple([1] + list(base[1:])))
    return shapes


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def round_up(gws: tuple, lws: tuple) -> tuple:
    return tuple(-(-g // l) * l for g, l in zip(gws, lws))


class Tuner:
    def __init__(self, gctx, queue, tuned_file=None, tuning: bool = False):
        self.gctx, self.queue = gctx, queue
        self.tuned_file, self.tuning = tuned_file, tuning
        raw = read_cache(tuned_file, TUNING, gctx.fingerprint()) if tuned_file else {}
        self.params = {k: tuple(json.loads(v)) for k, v in raw.items()}
        self.loaded = len(self.params)
        self.tuned = 0
        self._max = {}

    def lws(self, name: str, kernel, gws: tuple, launch) -> tuple:
        """The work-group size for this launch; `launch(lws)` runs the kernel once (for tuning)."""
        key = f"{name}:{'x'.join(map(str, gws))}"
        if key in self.params and len(self.params[key]) == len(gws):
            return self.params[key]
        max_size = self._max_size(name, kernel)
        if not self.tuning:
            return default_lws(gws, max_size)
        self.params[key] = best = self._search(gws, max_size, launch)
        self.tuned += 1
        return best

    def _max_size(self, name, kernel) -> int:
        if name not in self._max:
            cl = self.gctx.cl
            self._max[name] = min(self.gctx.device.max_work_group_size, kernel.get_work_group_info(
                cl.kernel_work_group_info.WORK_GROUP_SIZE, self.gctx.device))
        return self._max[name]

    def _search(self, gws, max_size, launch) -> tuple:
        timings = []
        for lws in candidates(gws, max_size):
            launch(lws)                       # warm-up: compiles this shape where drivers do
            self.queue.finish()
            start = time.perf_counter()
            for _ in range(TUNE_RUNS):
                launch(lws)
            self.queue.finish()
            timings.append((time.perf_counter() - start, lws))
        return min(timings)[1]

    def save(self) -> bool:
        if not self.tuned_file or not self.tuned:
            return False
        write_cache(self.tuned_file, TUNING, self.gctx.fingerprint(),
                    {k: json.dumps(list(v)).encode() for k, v in self.params.items()})
        self.tuned = 0
        return True
