"""Conv2D, fast int8: the integer GEMM (_qgemm.QPanels) over the uint8 input's windows,
read in place (implicit im2col: one A row per output pixel, kh runs of kw * C bytes).

The input is copied into scratch only where the windows need it: pads (filled with
the input's zero point, i.e. real 0.0), a group's channels (one compact copy per
group), or a window row whose bytes are not a multiple of 4 (the 4-byte loads then
run a few bytes past the last row: the copy has slack). Declines, for the reference
kernel, column dilations, non-constant filters and K beyond _qgemm.MAX_K.

A grouped 1x1 conv with int8 weights (zero points 0) runs as one GEMM whose panels
(runs of NR output columns, `column_runs`) each read, in place, only the input channels
of the groups their columns belong to; a column's weights outside its own group are 0,
so the bytes are the reference's. Per group, ShuffleNet's 34 columns took a full panel
and a 2-column one, a copy of the group's channels and a step per group; the runs skip
all three for ~20-60% more products (its 1x1 convs 1.4-2.5x faster).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import carve, scratch_size
from mace.ops.fast._checks import NO_LOOPS, not_uint8
from mace.ops.fast._conv_gemm import pad_steps
from mace.ops.fast.compute import compute_of
from mace.ops.fast.conv2d import geometry
from mace.ops.fast.int8._qgemm import MAX_K, SLACK, QPanels, pool_width, table_step
from mace.ops.fast.int8._qjit import qloops
from mace.ops.int8._gemm import OutputStage
from mace.ops.int8.conv2d import Conv2DInt8
from mace.ops.registry import kernel

U8 = np.dtype(np.uint8)
# column runs at up to this many times the per-group 16-column vector steps: measured 2x
# (112 channels in 4 groups) to 12x (128 in 32) faster than per group at up to 2x the
# products, where the per-group copies, ragged panels and steps cost more than the products
RUNS_MAX_COST = 2.5


def quantized_weights(ctx) -> str | None:
    """Why the node is not a constant integer filter (and bias, when there is one) on 4-D
    uint8 NHWC tensors, or None."""
    w = ctx.consts[1] if len(ctx.consts) > 1 else None
    if w is None:
        return "filter is not constant"
    if w.dtype not in (np.int8, np.uint8):
        return f"filter is {w.dtype}, not int8 / uint8"
    if len(ctx.input_shapes[0]) != 4:
        return f"rank {len(ctx.input_shapes[0])} input (4-D only)"
    if ctx.arg("data_format", "NHWC") != "NHWC":
        return f"data_format {ctx.arg('data_format', 'NHWC')} (NHWC only)"
    return not_uint8(ctx) or (
        "bias is not constant" if len(ctx.consts) >= 3 and ctx.consts[2] is None else None)


@kernel("Conv2D", "int8:fast")
class Conv2DInt8Fast(Conv2DInt8):
    @staticmethod
    def check(ctx) -> str | None:
        if qloops() is None:
            return NO_LOOPS
        reason = Conv2DInt8.check(ctx) or quantized_weights(ctx)
        if reason:
            return reason
        geo = geometry(ctx, ctx.consts[1].shape)
        if geo.dilations[1] != 1:
            return f"column dilation {geo.dilations[1]}"
        if geo.kh * geo.kw * geo.cg > MAX_K:
            return f"K = {geo.kh * geo.kw * geo.cg} per output beyond {MAX_K} (int32 sums could overflow)"
        return None

    def setup(self, ctx):
        lib = qloops()
        wq = ctx.consts[1]
        self.geo = g = geometry(ctx, wq.shape)
        self.zero = int(ctx.input_quant[0].zero_point)
        stage = OutputStage(ctx, ctx.input_quant[1], g.o, self.bias_input)
        w_zero = np.asarray(ctx.input_quant[1].zero_point).reshape(-1)
        parts = pool_width(compute_of(ctx))
        # zero weight zero points (per-channel int8, the default): no window sums to offset
        self.runs = column_runs(g, lib) if wq.dtype == np.int8 and not w_zero.any() else []
        self.specs = [((g.oh * g.ow,), np.int64)]
        self.stage = stage
        if self.runs:
            self._setup_runs(lib, wq, stage, parts)
            return
        self.gemms = []
        for i in range(g.group):
            rows = slice(i * g.og, (i + 1) * g.og)
            w3 = wq[rows].transpose(0, 2, 3, 1).reshape(g.og, g.kh, g.kw * g.cg)
            zeros = w_zero[rows] if w_zero.size > 1 else w_zero[0]
            self.gemms.append(QPanels(lib, w3, zeros, stage, self.zero, rows, parts, compute_of(self.ctx)))
        self.packed = np.stack([q.panels for q in self.gemms])   # what observers list as the weights
        hp, wp = g.padded_hw
        self.copy = any(g.pads) or g.group > 1 or (g.kw * g.cg) % lib.KB != 0
        self.buffer = (g.group, g.n, hp, wp, g.cg)
        if self.copy:
            self.specs.append(((int(np.prod(self.buffer)) + SLACK,), U8))
        self.scratch_nbytes = scratch_size(self.specs)

    def _setup_runs(self, lib, wq, stage, parts):
        """One QPanels whose panel j reads run j's input channels: each column's filter
        placed at its group's channels within the run's [k0, k1), zeros elsewhere."""
        g = self.geo
        width = max(k1 - k0 for _, _, k0, k1 in self.runs)
        w3 = np.zeros((g.o, 1, width), wq.dtype)
        for c0, c1, k0, _ in self.runs:
            for c in range(c0, c1):
                at = (c // g.og) * g.cg - k0
                w3[c, 0, at:at + g.cg] = wq[c, :, 0, 0]
        gemm = QPanels(lib, w3, 0, stage, self.zero, slice(0, g.o), parts, compute_of(self.ctx))
        gemm.read_runs([k0 for _, _, k0, _ in self.runs], [k1 - k0 for _, _, k0, k1 in self.runs])
        self.gemms, self.packed, self.copy = [gemm], gemm.panels, False
        self.scratch_nbytes = scratch_size(self.specs)

    def _bind_runs(self, x, out, sums):
        g, steps = self.geo, []
        if not x.flags.c_contiguous:   # arena tensors are; a caller's array may not be
            xs = np.empty(x.shape, x.dtype)
            steps.append(partial(np.copyto, xs, x))
            x = xs
        for image in range(g.n):
            steps += self.gemms[0].conv_steps(x[image], g.ow, g.strides, 1, out[image], sums)
        return sequence(steps + self._table(out))

    def _table(self, out) -> list:
        step = table_step(compute_of(self.ctx), qloops(), self.stage, out)
        return [] if step is None else [step]

    def bind(self, inputs, outputs, scratch=None):
        g, x = self.geo, inputs[0]
        sums, *rest = carve(scratch, self.specs)
        out = outputs[0].reshape(g.n, g.oh * g.ow, g.o)
        if self.runs:
            return self._bind_runs(x, out, sums)
        steps = []
        if self.copy:
            xps = rest[0][:int(np.prod(self.buffer))].reshape(self.buffer)
            for i in range(g.group):
                steps += pad_steps(xps[i], x[..., i * g.cg:(i + 1) * g.cg], g.pads, self.zero)
        else:
            xps = np.ascontiguousarray(x)[None]   # arena tensors are contiguous: a view
            if not np.may_share_memory(xps, x):
                steps.append(partial(np.copyto, xps[0], x))
        for image in range(g.n):
            for i, gemm in enumerate(self.gemms):
                steps += gemm.conv_steps(xps[i, image], g.ow, g.strides, g.dilations[0],
                                         out[image, :, i * g.og:(i + 1) * g.og], sums)
        return sequence(steps + self._table(out))

    def run(self, inputs, outputs):
        self.bind(inputs, outputs, None)()


def column_runs(g, lib) -> list:
    """(c0, c1, k0, k1) per run of NR output columns of a grouped 1x1 conv: the input
    channels [k0, k1) of the groups its columns belong to, widened to whole 4-byte steps
    within the row (C a multiple of 4: no load runs past the input). Empty where the runs
    would not pay: ungrouped, not 1x1, padded, or more than RUNS_MAX_COST times the
    per-group products (counted in 16-column vectors: a group of 34 columns costs three);
    or where a run's K passes _qgemm.MAX_K."""
    if g.group == 1 or (g.kh, g.kw) != (1, 1) or any(g.pads) or g.c % lib.KB:
        return []
    runs = []
    for c0 in range(0, g.o, lib.NR):
        c1 = min(g.o, c0 + lib.NR)
        k0 = (c0 // g.og) * g.cg // lib.KB * lib.KB
        k1 = min(g.c, -(-((c1 - 1) // g.og + 1) * g.cg // lib.KB) * lib.KB)
        runs.append((c0, c1, k0, k1))

    def vectors(cols):
        return -(-cols // 16)
    per_group = g.group * -(-g.cg // lib.KB) * lib.KB * sum(
        vectors(min(lib.NR, g.og - j)) for j in range(0, g.og, lib.NR))
    spans = sum((k1 - k0) * vectors(c1 - c0) for c0, c1, k0, k1 in runs)
    if max(k1 - k0 for _, _, k0, k1 in runs) > MAX_K:   # a run's int32 dot products could overflow
        return []
    return runs if spans <= RUNS_MAX_COST * per_group else []
