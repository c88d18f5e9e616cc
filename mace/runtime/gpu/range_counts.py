"""Per-node counts of what fp16 storage does to a GPU op's outputs (engine option gpu_range_check).

With the check on, programs are built with `-DRANGE_CHECK=1` (cl/common.cl): every kernel that
stores an op's output takes one more argument, a slot of int counters, and each store counts
the values it saw before half storage changed them:

    non-finite (NaN/Inf) | clamped (|v| > 65504) | subnormal in half (2^-25 <= |v| < 2^-14)
    | flushed to zero (0 < |v| < 2^-25)

Each GPU node owns one slot (a sub-buffer, aligned as the device wants); the whole buffer is
zeroed when a run starts and read once, after it, by `read()`. An op's kernels are wrapped
(`CountedKernel`) so they keep calling `set_args` with their own arguments. Kernels that only
write float intermediates (Winograd's tiles) have no counter argument and are left alone.

Values also enter half images from the host: a CPU op's output (or a model input) uploaded for
a GPU reader. Those are counted on the host as they are copied (`half_counts`), under the CPU op
that made them (`NodeCounts.uploaded`): a CPU Reduce's 238,796 clamps as surely as a GPU conv's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

KINDS = ("nonfinite", "clamped", "subnormal", "flushed")   # the RANGE_* order of common.cl
COUNTER_ARG = "range_counts"
HALF_MAX = float(np.finfo(np.float16).max)        # 65504
HALF_TINY = float(np.finfo(np.float16).tiny)      # 2^-14, smallest normal
HALF_FLUSH = 2.0 ** -25                           # below this, half stores 0


def half_counts(x: np.ndarray) -> tuple:
    """What half storage does to float values x, as the OpenCL stores count it (KINDS order)."""
    x = np.asarray(x, dtype=np.float32)
    a = np.abs(x)
    finite = np.isfinite(x)
    return (int(x.size - np.count_nonzero(finite)), int(np.count_nonzero(finite & (a > HALF_MAX))),
            int(np.count_nonzero((a >= HALF_FLUSH) & (a < HALF_TINY))),
            int(np.count_nonzero((a > 0) & (a < HALF_FLUSH))))


@dataclass
class NodeCounts:
    """One node's counts for the last run (`values`: elements of its outputs)."""

    index: int
    name: str
    type: str
    values: int
    fp32: bool            # the node ran with float storage (per-node fallback): only NaN/Inf apply
    nonfinite: int = 0
    clamped: int = 0
    subnormal: int = 0
    flushed: int = 0
    output: str = ""      # the node's first output tensor
    uploaded: bool = False  # a CPU op (or a model input): its outputs as copied into half images

    @property
    def saturated(self) -> bool:
        return bool(self.nonfinite or self.clamped)

    @property
    def underflow_share(self) -> float:
        """Share of the node's values that half stores with lost precision or as zero."""
        return (self.subnormal + self.flushed) / max(self.values, 1)


class CountedKernel:
    """A cl.Kernel whose set_args appends the node's counter slot when the kernel takes one."""

    def __init__(self, kernel, slot, takes: bool):
        self.cl_kernel, self.slot, self.takes = kernel, slot, takes

    def set_args(self, *args):
        if self.takes:
            args = (*args, self.slot)
        self.cl_kernel.set_args(*args)

    def __getattr__(self, name):
        return getattr(self.__dict__["cl_kernel"], name)


class RangeCounters:
    """The counter buffer of one GPU runtime: a slot per node, zeroed per run, read after it."""

    def __init__(self, gpu, nodes: int):
        cl = gpu.cl
        self.cl, self.queue = cl, gpu.queue
        align = max(int(gpu.gctx.device.mem_base_addr_align) // 8, 4 * len(KINDS))
        self.stride = align // 4                       # ints per slot
        self.host = np.zeros(max(nodes, 1) * self.stride, np.int32)
        self.buffer = cl.Buffer(gpu.context, cl.mem_flags.READ_WRITE, self.host.nbytes)
        self.slots = {}                                # node index -> sub-buffer
        self.reset()

    def slot(self, index: int):
        if index not in self.slots:
            start = len(self.slots) * self.stride * 4
            self.slots[index] = (self.buffer.get_sub_region(start, self.stride * 4), len(self.slots))
        return self.slots[index][0]

    def wrap(self, kernel, index: int) -> CountedKernel:
        cl = self.cl
        last = kernel.get_info(cl.kernel_info.NUM_ARGS) - 1
        takes = last >= 0 and kernel.get_arg_info(last, cl.kernel_arg_info.NAME) == COUNTER_ARG
        return CountedKernel(kernel, self.slot(index), takes)

    def reset(self) -> None:
        self.cl.enqueue_fill_buffer(self.queue, self.buffer, np.int32(0), 0, self.host.nbytes)

    def read(self) -> dict:
        """node index -> (nonfinite, clamped, subnormal, flushed) of the last run."""
        self.cl.enqueue_copy(self.queue, self.host, self.buffer, is_blocking=True)
        rows = self.host.reshape(-1, self.stride)
        return {index: tuple(int(v) for v in rows[pos, :len(KINDS)]) for index, (_, pos) in self.slots.items()}


UNDERFLOW_SHARE = 0.10   # a node with this share of its values below half's normal range is named


def flagged(counts: list, underflow: bool = True) -> list:
    """Nodes of concern, in run order: saturating (clamped / NaN / Inf) or (`underflow`) underflowing."""
    return [c for c in counts if c.saturated
            or (underflow and not c.fp32 and c.underflow_share >= UNDERFLOW_SHARE)]


def problem(c: NodeCounts) -> str:
    where = " when copied into the GPU's half images" if c.uploaded else ""
    if c.nonfinite:
        return f"{c.nonfinite} of {c.values} values NaN/Inf{where}"
    if c.clamped:
        return f"saturates{where}: {c.clamped} of {c.values} values clamped at +-65504"
    return (f"underflows: {100 * c.underflow_share:.0f}% of {c.values} values below half's normal range "
            f"(2^-14; {c.flushed} flushed to 0)")


def range_notes(counts: list, data_type: str, underflow: bool = True) -> list:
    """What `run`, `debug` and the report print: the first node half cannot hold, and the fix.
    `underflow=False` (convert measured the ops left in half): saturation only."""
    bad = flagged(counts, underflow)
    if not bad:
        return []
    first = bad[0]
    others = ", ".join(c.name for c in bad[1:4]) + (", ..." if len(bad) > 4 else "")
    kind = f"{first.type} on the CPU" if first.uploaded else first.type
    line = (f"fp16 storage ({data_type}): first op it cannot hold is '{first.name}' ({kind}, node "
            f"{first.index}): {problem(first)}"
            + (f"; {len(bad) - 1} more op(s): {others}" if len(bad) > 1 else ""))
    what = "its GPU readers" if first.uploaded else "it"
    hint = (f"hint: keep {what} in float on the GPU with `gpu_fp32_ops: [{json.dumps(first.name)}]` (or "
            f"`gpu_fp32_ops: auto`, convert picks the ops) in the deployment file, or use `data_type: fp32_fp32`")
    return [line, hint]
