"""Deconv2D (ConvTranspose), fast CPU kernel: one packed GEMM per group, then a compiled col2im.

cols[g] = x[:, group g's channels] @ W[g] (W [C/G, kh*kw*Cout/G], packed once at load into
our GEMM's panels, _conv_gemm.Panels), every tap's contribution of every input pixel; then
_deconv_loops.col2im gathers, for each output pixel, the taps that land on it, adds the bias
and clips, writing the output once (the reference: np.matmul, a zeroed buffer, kh*kw strided
adds, a crop, bias and activation passes). Both steps split across the compute pool (the
GEMM by rows or filter panels, col2im by output rows). A fused activation other than a clip
follows in place (activation_fn: compiled where _act_loops has it). Where GEMMs belong to
OpenBLAS's threads (no pool, several OpenBLAS threads) the GEMM is np.matmul.

Float32 NHWC with a constant filter; without numba the reference runs.
"""
from __future__ import annotations

import numpy as np

from mace.ops._common import activation_args, sequence
from mace.ops.deconv2d import deconv_geometry
from mace.ops.fast._base import F32, FastKernel, activation_fn, carve, clip_bounds, loop_bias, scratch_size
from mace.ops.fast._conv_gemm import Panels
from mace.ops.fast._jit import op_loops
from mace.ops.fast._pool import gemm_width, loop, matmul
from mace.ops.registry import kernel

NO_CLIP = (np.float32(-np.inf), np.float32(np.inf))


def float_deconv(ctx) -> bool:
    w = ctx.consts[1]
    return (ctx.arg("data_format", "NHWC") == "NHWC" and len(ctx.input_shapes[0]) == 4
            and w is not None and w.ndim == 4 and w.dtype.kind == "f"
            and np.dtype(ctx.input_dtypes[0]) == F32 and np.dtype(ctx.output_dtypes[0]) == F32
            and (len(ctx.consts) < 3 or ctx.consts[2] is not None)
            and op_loops("_deconv_loops") is not None)


@kernel("Deconv2D", "cpu:fast")
class Deconv2DFast(FastKernel):
    accepts = staticmethod(float_deconv)

    def setup(self, ctx):
        w = np.asarray(ctx.consts[1], np.float32)
        (n, h, wd, c), (kh, kw), strides, dil, pads, (oh, ow), c_out = \
            deconv_geometry(ctx, ctx.input_shapes[0], w.shape)
        self.group = g = int(ctx.arg("group", 1))
        self.cg, self.og = c // g, w.shape[1]
        self.geo = (h, wd, kh, kw, strides[0], strides[1], dil[0], dil[1], pads[0], pads[1])
        bias = ctx.consts[2] if len(ctx.consts) > 2 else None
        self.bias = loop_bias(None if bias is None else np.asarray(bias, np.float32).reshape(-1), c_out)
        act = activation_args(ctx)
        bounds = clip_bounds(act)
        # a clip is fused into col2im; any other activation follows in place
        self.lo, self.hi = bounds if bounds is not None else NO_CLIP
        self.act = None if bounds is not None else activation_fn(act)
        # per group [C/G, kh*kw*Cout/G]: one row of taps (filter row, column, channel) per input channel
        wg = w.reshape(g, self.cg, self.og, kh, kw).transpose(0, 1, 3, 4, 2)
        wmats = np.ascontiguousarray(wg.reshape(g, self.cg, kh * kw * self.og))
        m = n * h * wd
        width = gemm_width()
        self.gemms = [Panels(wmats[i], None, NO_CLIP, width) for i in range(g)] if width else None
        self.wmats = None if width else wmats
        self.cols_spec = ((g, m, kh * kw * self.og), np.float32)
        self.scratch_nbytes = scratch_size([self.cols_spec])

    @property
    def algorithm_name(self) -> str:
        """What the profiler shows: our packed GEMM or OpenBLAS's, then the compiled col2im."""
        return "packed+col2im" if self.gemms else "blas+col2im"

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        (cols,) = carve(scratch, [self.cols_spec])
        x2d = x.reshape(-1, x.shape[-1])
        cg = self.cg
        steps = []
        for i in range(self.group):
            a = x2d[:, i * cg:(i + 1) * cg]
            if self.gemms:
                steps.append(self.gemms[i].step(a, cols[i]))
            else:
                steps.append(matmul(a, self.wmats[i], cols[i]))   # a column slice: BLAS's lda
        work = out.size * self.geo[2] * self.geo[3]
        steps.append(loop("col2im", (cols, *self.geo, self.bias, self.lo, self.hi, out),
                          out.shape[0] * out.shape[1], work, lib=op_loops("_deconv_loops")))
        if self.act is not None:
            steps.append(lambda: self.act(out))
        return sequence(steps)
