"""One data type's view of the OpenCL device: queue, programs, tuner, images, launches.

GpuRuntime (the engine's GPU side) is a GpuDevice; tests and tools use a bare
one to run transforms and kernels without a model.

Options read here: opencl_cache_dir (with the library name: where the cache
files go), opencl_cache_name (the device part of their names; default the OpenCL
device's name, a board names them `<model>.<soc>` as MACE does), opencl_tuning,
limit_opencl_kernel_time, gpu_perf_hint, gpu_priority_hint, gpu_range_check (counting
stores: range_counts.py). Programs of the fp32_fp32 build serve the nodes that keep float
storage in an fp16 model (the per-node fallback, docs/gpu.md); they are compiled when first
asked for and not written to the binary cache file.
"""
from __future__ import annotations

import numpy as np

from mace.runtime.gpu.cache_files import KERNELS, TUNING, cache_path
from mace.runtime.gpu.context import gpu_context
from mace.runtime.gpu.programs import ProgramCache, is_fp16
from mace.runtime.gpu.transfer import upload_const
from mace.runtime.gpu.tuner import Tuner, round_up

LIMIT_ITEMS = 1 << 14   # work items per slice when limit_opencl_kernel_time is on


class GpuDevice:
    def __init__(self, data_type: str = "fp16_fp32", options: dict | None = None, library: str = "model"):
        opts = options or {}
        self.gctx = gpu_context()
        self.cl, self.context = self.gctx.cl, self.gctx.context
        self.data_type, self.fp16 = data_type, is_fp16(data_type)
        self.library, self.cache_dir = library, opts.get("opencl_cache_dir")
        self.cache_name = opts.get("opencl_cache_name") or self.gctx.name
        self.queue = self.gctx.queue_for(int(opts.get("gpu_perf_hint") or 0),
                                         int(opts.get("gpu_priority_hint") or 0))
        self.notes = list(self.gctx.notes)
        self.range_check = bool(opts.get("gpu_range_check"))
        self.programs = ProgramCache(self.gctx, data_type, self._cache_file(KERNELS), self.range_check)
        self._programs32 = None
        self.tuner = Tuner(self.gctx, self.queue, self._cache_file(TUNING), bool(opts.get("opencl_tuning")))
        self.limit_kernel_time = bool(opts.get("limit_opencl_kernel_time"))
        self.launches = 0
        self._dummy = None

    def _cache_file(self, kind: str):
        if not self.cache_dir:
            return None
        return cache_path(self.cache_dir, self.library, kind, self.cache_name)

    def new_image(self, width: int, height: int, fp32: bool = False):
        """An RGBA image of the data type's storage (`fp32`: float whatever the data type,
        for intermediates whose range or precision half cannot hold)."""
        cl = self.cl
        ctype = cl.channel_type.HALF_FLOAT if self.fp16 and not fp32 else cl.channel_type.FLOAT
        fmt = cl.ImageFormat(cl.channel_order.RGBA, ctype)
        return cl.create_image(self.context, cl.mem_flags.READ_WRITE, fmt,
                               shape=(max(int(width), 1), max(int(height), 1)))

    def upload_const(self, array, layout: str, fp32: bool = False):
        """A new image holding a constant `array` in `layout` (what kernels call at setup);
        `fp32`: a float image whatever the data type."""
        return upload_const(self, array, layout, fp32)

    def dummy_image(self):
        """A 1x1 image for image arguments a kernel variant does not read."""
        if self._dummy is None:
            self._dummy = self.new_image(1, 1)
        return self._dummy

    def kernel(self, program: str, name: str, fp32: bool = False):
        """A kernel of the data type's build, or of the float build (`fp32`, in an fp16 model)."""
        programs = self.programs
        if fp32 and self.fp16:
            if self._programs32 is None:
                self._programs32 = ProgramCache(self.gctx, "fp32_fp32", None, self.range_check)
            programs = self._programs32
        return self.cl.Kernel(programs.program(program), name)

    def launch(self, kern, name: str, gws: tuple) -> None:
        kern = getattr(kern, "cl_kernel", kern)   # a CountedKernel (range check) wraps one
        lws = self.tuner.lws(name, kern, gws, lambda l: self._enqueue(kern, gws, l, False))
        self._enqueue(kern, gws, lws, self.limit_kernel_time)

    def _enqueue(self, kern, gws, lws, split: bool) -> None:
        cl = self.cl
        full = round_up(gws, lws)   # kernels bound-check their logical sizes
        if not split:
            cl.enqueue_nd_range_kernel(self.queue, kern, full, lws)
            self.launches += 1
            return
        # A long kernel stalls a GPU that also draws the screen: run slices of the last
        # dimension and wait for each (MACE's limit_opencl_kernel_time).
        per_row = int(np.prod(full[:-1]))
        rows = max(lws[-1], LIMIT_ITEMS // max(per_row, 1) // lws[-1] * lws[-1])
        for start in range(0, full[-1], rows):
            size = full[:-1] + (min(rows, full[-1] - start),)
            offset = (0,) * (len(full) - 1) + (start,)
            cl.enqueue_nd_range_kernel(self.queue, kern, size, lws, global_work_offset=offset)
            self.queue.finish()
            self.launches += 1

    def finish(self) -> None:
        self.queue.finish()
