"""Conv2D, fast int8: the integer GEMM (_qgemm.QPanels) over the uint8 input's windows,
read in place (implicit im2col: one A row per output pixel, kh runs of kw * C bytes).

The input is copied into scratch only where the windows need it: pads (filled with
the input's zero point, i.e. real 0.0), a group's channels (one compact copy per
group), or a window row whose bytes are not a multiple of 4 (the 4-byte loads then
run a few bytes past the last row: the copy has slack). Declines, for the reference
kernel, column dilations, non-constant filters and K beyond _qgemm.MAX_K.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import sequence
from mace.ops.fast._base import carve, scratch_size
from mace.ops.fast._conv_gemm import pad_steps
from mace.ops.fast.conv2d import geometry
from mace.ops.fast.int8._qgemm import MAX_K, SLACK, QPanels, pool_width
from mace.ops.fast.int8._qjit import qloops
from mace.ops.int8._gemm import OutputStage
from mace.ops.int8.conv2d import Conv2DInt8
from mace.ops.registry import kernel

U8 = np.dtype(np.uint8)


def quantized_weights(ctx) -> bool:
    """A constant integer filter (and bias, when there is one) on 4-D uint8 NHWC tensors."""
    w = ctx.consts[1] if len(ctx.consts) > 1 else None
    return (w is not None and w.dtype in (np.int8, np.uint8) and len(ctx.input_shapes[0]) == 4
            and ctx.arg("data_format", "NHWC") == "NHWC"
            and np.dtype(ctx.output_dtypes[0]) == U8
            and (len(ctx.consts) < 3 or ctx.consts[2] is not None))


@kernel("Conv2D", "int8:fast")
class Conv2DInt8Fast(Conv2DInt8):
    @staticmethod
    def accepts(ctx) -> bool:
        if qloops() is None or not Conv2DInt8.accepts(ctx) or not quantized_weights(ctx):
            return False
        geo = geometry(ctx, ctx.consts[1].shape)
        return geo.dilations[1] == 1 and geo.kh * geo.kw * geo.cg <= MAX_K

    def setup(self, ctx):
        lib = qloops()
        wq = ctx.consts[1]
        self.geo = g = geometry(ctx, wq.shape)
        self.zero = int(ctx.input_quant[0].zero_point)
        stage = OutputStage(ctx, ctx.input_quant[1], g.o, self.bias_input)
        w_zero = np.asarray(ctx.input_quant[1].zero_point).reshape(-1)
        parts = pool_width()
        self.gemms = []
        for i in range(g.group):
            rows = slice(i * g.og, (i + 1) * g.og)
            w3 = wq[rows].transpose(0, 2, 3, 1).reshape(g.og, g.kh, g.kw * g.cg)
            zeros = w_zero[rows] if w_zero.size > 1 else w_zero[0]
            self.gemms.append(QPanels(lib, w3, zeros, stage, self.zero, rows, parts))
        self.packed = np.stack([q.panels for q in self.gemms])   # what observers list as the weights
        hp, wp = g.padded_hw
        self.copy = any(g.pads) or g.group > 1 or (g.kw * g.cg) % lib.KB != 0
        self.buffer = (g.group, g.n, hp, wp, g.cg)
        self.specs = [((g.oh * g.ow,), np.int64)]
        if self.copy:
            self.specs.append(((int(np.prod(self.buffer)) + SLACK,), U8))
        self.scratch_nbytes = scratch_size(self.specs)

    def bind(self, inputs, outputs, scratch=None):
        g, x = self.geo, inputs[0]
        sums, *rest = carve(scratch, self.specs)
        steps = []
        if self.copy:
            xps = rest[0][:int(np.prod(self.buffer))].reshape(self.buffer)
            for i in range(g.group):
                steps += pad_steps(xps[i], x[..., i * g.cg:(i + 1) * g.cg], g.pads, self.zero)
        else:
            xps = np.ascontiguousarray(x)[None]   # arena tensors are contiguous: a view
            if not np.may_share_memory(xps, x):
                steps.append(partial(np.copyto, xps[0], x))
        out = outputs[0].reshape(g.n, g.oh * g.ow, g.o)
        for image in range(g.n):
            for i, gemm in enumerate(self.gemms):
                steps += gemm.conv_steps(xps[i, image], g.ow, g.strides, g.dilations[0],
                                         out[image, :, i * g.og:(i + 1) * g.og], sums)
        return sequence(steps)

    def run(self, inputs, outputs):
        self.bind(inputs, outputs, None)()

