"""Deconv2D (ConvTranspose), fast CPU kernel: one packed GEMM per group, then a compiled col2im.

cols[g] = x[:, group g's channels] @ W[g] (W [C/G, kh*kw*Cout/G], packed once at load into
our GEMM's panels, _conv_gemm.Panels), every tap's contribution of every input pixel; then
_deconv_loops.col2im gathers, for each output pixel, the taps that land on it, adds the bias
and clips, writing the output once (the reference: np.matmul, a zeroed buffer, kh*kw strided
adds, a crop, bias and activation passes). The two alternate over blocks of input rows: the
columns live in a ring of the last `ring` input rows (BLOCK_BYTES a block), and each block of
output rows is gathered as soon as the rows it reads are there, so col2im reads columns the
GEMM has just written to cache (a 56x56x32 -> 112x112x16 4x4 stride-2 deconv: col2im 0.70 ->
0.43 ms; whole columns were 3.2 MB) and scratch holds a few rows, not the whole map. With one
input channel a group (a depthwise deconv) there is no GEMM: _deconv_loops.direct sums each
output pixel's tap products straight from the input (wechat_qr_sr's 224x224x32 one had been
32 GEMMs of K = 1 per row). Both steps split across the compute pool (the GEMM by rows or
filter panels, col2im and direct by output rows). A fused clip or LEAKYRELU is applied in the
loops' row pass; any other fused activation follows in place (activation_fn: compiled where
_act_loops has it). Where GEMMs belong to OpenBLAS's threads (no pool, several OpenBLAS
threads) the GEMM is np.matmul.

Float32 NHWC with a constant filter; without numba the reference runs.
"""
from __future__ import annotations

import numpy as np

from mace.ops._common import activation_args, sequence
from mace.ops.deconv2d import deconv_geometry
from mace.ops.fast._base import FastKernel, activation_fn, carve, clip_bounds, loop_bias, scratch_size
from mace.ops.fast._conv_gemm import Panels
from mace.ops.fast._checks import NO_LOOPS, not_float32
from mace.ops.fast._jit import op_loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel

NO_CLIP = (np.float32(-np.inf), np.float32(np.inf))
# the columns of a block of input rows: about this many bytes, so they are still in L2 when
# col2im reads them
BLOCK_BYTES = 256 << 10


def deconv_check(ctx) -> str | None:
    w = ctx.consts[1]
    if ctx.arg("data_format", "NHWC") != "NHWC":
        return f"data_format {ctx.arg('data_format', 'NHWC')} (NHWC only)"
    if len(ctx.input_shapes[0]) != 4:
        return f"rank {len(ctx.input_shapes[0])} input (4-D only)"
    if w is None:
        return "filter is not constant"
    if w.ndim != 4 or w.dtype.kind != "f":
        return f"filter is {w.ndim}-D {w.dtype} (4-D float only)"
    return not_float32(ctx) or (
        "bias is not constant" if len(ctx.consts) >= 3 and ctx.consts[2] is None
        else NO_LOOPS if op_loops("_deconv_loops") is None else None)


@kernel("Deconv2D", "cpu:fast")
class Deconv2DFast(FastKernel):
    check = staticmethod(deconv_check)

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
        # a clip, or a LEAKYRELU with a slope in [0, 1] (np.maximum(x, x * slope) in the
        # reference: x * slope where x < 0), is fused into the loops' row epilogue; any other
        # activation follows in place (wechat_qr_sr's 447x447x32 deconv: a 25 MB pass saved)
        leaky = act["act"] == "LEAKYRELU" and 0 <= act["alpha"] <= 1
        self.slope = np.float32(act["alpha"] if leaky else 1.0)
        self.lo, self.hi = bounds if bounds is not None else NO_CLIP
        self.act = None if bounds is not None or leaky else activation_fn(act)
        self.gemms = self.taps = None
        if self.cg == 1:   # one input channel a group: no GEMM (a product per tap), _deconv_loops.direct
            self.taps = np.ascontiguousarray(w.reshape(g * self.og, kh, kw).transpose(1, 2, 0))
            return
        # per group [C/G, kh*kw*Cout/G]: one row of taps (filter row, column, channel) per input channel
        wg = w.reshape(g, self.cg, self.og, kh, kw).transpose(0, 1, 3, 4, 2)
        wmats = np.ascontiguousarray(wg.reshape(g, self.cg, kh * kw * self.og))
        compute = compute_of(ctx)
        width = compute.gemm_width()
        self.gemms = [Panels(wmats[i], None, NO_CLIP, width, compute=compute) for i in range(g)] if width else None
        self.wmats = None if width else wmats
        self.block, self.ring = ring_rows(h, wd * kh * kw * c_out * 4, (kh - 1) * dil[0] // strides[0] + 1)
        self.cols_spec = ((g, self.ring * wd, kh * kw * self.og), np.float32)
        self.scratch_nbytes = scratch_size([self.cols_spec])

    @property
    def algorithm_name(self) -> str:
        """What the profiler shows: our packed GEMM or OpenBLAS's, then the compiled col2im; or
        the direct loop (one input channel a group)."""
        return "direct" if self.taps is not None else "packed+col2im" if self.gemms else "blas+col2im"

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        steps = self.direct_steps(x, out) if self.taps is not None else self.block_steps(x, out, scratch)
        if self.act is not None:
            steps.append(lambda: self.act(out))
        return sequence(steps)

    def direct_steps(self, x, out) -> list:
        kh, kw = self.geo[2], self.geo[3]
        loop = compute_of(self.ctx).loop
        return [loop("direct", (x[n], self.taps, self.og, *self.geo, self.bias, self.lo, self.hi,
                                self.slope, out[n]),
                     out.shape[1], out[n].size * kh * kw, lib=op_loops("_deconv_loops"))
                for n in range(out.shape[0])]

    def block_steps(self, x, out, scratch) -> list:
        """Per image, the plan's GEMM blocks into the ring and col2im over the rows ready."""
        (cols,) = carve(scratch, [self.cols_spec])
        h, wd, kh, kw = self.geo[:4]
        x2d, lib, steps = x.reshape(-1, x.shape[-1]), op_loops("_deconv_loops"), []
        loop = compute_of(self.ctx).loop
        for n in range(out.shape[0]):
            for kind, a, b in self.plan(out.shape[1]):
                if kind == "gemm":
                    steps += self.gemm_steps(x2d[(n * h + a) * wd:(n * h + b) * wd], cols, a % self.ring, b - a)
                elif b > a:
                    args = (cols, self.ring, a, *self.geo, self.bias, self.lo, self.hi, self.slope, out[n, a:b])
                    steps.append(loop("col2im", args, b - a, (b - a) * out[n, 0].size * kh * kw, lib=lib))
        return steps

    def plan(self, oh: int) -> list:
        """[("gemm", iy0, iy1) | ("gather", oy0, oy1)] for one image, in order: a block of input
        rows' columns is computed once the next output row reads past what is there, the output
        rows before it gathered first (their rows are still in the ring)."""
        h, sh, pad_t = self.geo[0], self.geo[4], self.geo[8]
        done, start, plan = 0, 0, []
        for oy in range(oh):
            t = oy + pad_t
            need = min(h - 1, t // sh) if t >= 0 else -1   # the last input row oy reads
            while need >= done:
                plan.append(("gather", start, oy))
                start = oy
                plan.append(("gemm", done, min(h, done + self.block)))
                done += self.block
        plan.append(("gather", start, oh))
        return plan

    def gemm_steps(self, x_rows, cols, slot: int, rows: int) -> list:
        """Steps computing `rows` input rows' columns (x_rows: their pixels) into ring rows slot.."""
        wd, cg = self.geo[1], self.cg
        at = slice(slot * wd, (slot + rows) * wd)
        steps = []
        for i in range(self.group):
            a = x_rows[:, i * cg:(i + 1) * cg]
            if self.gemms:
                steps.append(self.gemms[i].step(a, cols[i, at]))
            else:
                steps.append(compute_of(self.ctx).matmul(a, self.wmats[i], cols[i, at]))   # a column slice: BLAS's lda
        return steps


def ring_rows(h: int, row_bytes: int, window: int) -> tuple:
    """(input rows a GEMM block computes, input rows the ring keeps): a block of about
    BLOCK_BYTES of columns; the ring holds a block beyond the `window` rows an output row reads
    (so a block never overwrites rows still to be read), rounded up to whole blocks (so a
    block never wraps), and no more than the image's rows."""
    block = max(1, min(h, BLOCK_BYTES // max(row_bytes, 1)))
    ring = -(-(block + window) // block) * block
    return block, min(ring, -(-h // block) * block)
