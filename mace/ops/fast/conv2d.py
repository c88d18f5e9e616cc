"""Conv2D, fast CPU kernel: picks one GEMM formulation per conv at load.

tiny convs -> one compiled loop with the epilogue fused (_conv_direct, numba);
tiny maps -> one dense matrix (_conv_dense); 1x1 without pads -> GEMM on the
input itself (_conv_gemm.Pointwise); 3x3 stride 1 with arg `winograd` 2|4 (set
by the mark_winograd pass from the .yml) -> Winograd where _winograd.pick_block
says it pays; where our packed GEMM applies (_conv_gemm.packed_width: filter
packed at load, windows read in place from the padded input, bias, clip and any
activation with a compiled loop fused into its store step) -> that (_conv_gemm.Im2col); else k x k stride-1 convs on large maps ->
kh*kw shifted OpenBLAS GEMMs accumulating in place (_conv_shifted, bias and
activation fused into its crop); everything else -> chunked im2col + GEMM
(_conv_gemm.Im2col). OpenBLAS GEMMs of at most _conv_gemm.SMALL_M rows run
transposed. Bias and activation follow in place on the output where the
algorithm has not fused them: one compiled pass (_loops.bias_clip) when numba is
there and the activation is a clip, else numpy's add and clip.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import activation_args, sequence
from mace.ops.conv2d import conv_geometry
from mace.ops.fast import _conv_dense, _conv_direct, _conv_shifted, _winograd
from mace.ops.fast._base import (NO_STORE, FastKernel, activation_fn, carve, clip_bounds, fused_slope,
                                 loop_bias, scratch_size, store_epilogue)
from mace.ops.fast._checks import not_float32
from mace.ops.fast._conv_gemm import ConvGeometry, Im2col, Pointwise, is_pointwise, pack_filter, packed_width
from mace.ops.fast._jit import loops
from mace.ops.fast.compute import SERIAL, ComputeContext, compute_of
from mace.ops.registry import kernel


# our packed GEMM (windows read in place, bias and clip fused) beats the shifted
# OpenBLAS GEMMs wherever it applies; shifted stays the choice where the packed
# GEMM does not apply (OpenBLAS on several threads of its own, no numba) on large maps.
PREFER_PACKED_IM2COL = True


def geometry(ctx, w_shape) -> ConvGeometry:
    (n, h, w, c), (kh, kw), strides, dilations, pads, (oh, ow) = \
        conv_geometry(ctx, ctx.input_shapes[0], w_shape)
    return ConvGeometry(n, h, w, c, kh, kw, tuple(strides), tuple(dilations), tuple(pads),
                        oh, ow, w_shape[0], int(ctx.arg("group", 1)))


def const_bias(ctx):
    b = ctx.consts[2] if len(ctx.consts) > 2 else None
    return None if b is None else np.asarray(b, np.float32).reshape(-1)


def conv_check(ctx) -> str | None:
    """The fast kernels take float32 NHWC tensors with a constant filter (and bias)."""
    if ctx.arg("data_format", "NHWC") != "NHWC":
        return f"data_format {ctx.arg('data_format', 'NHWC')} (NHWC only)"
    if len(ctx.input_shapes[0]) != 4:
        return f"rank {len(ctx.input_shapes[0])} input (4-D only)"
    if ctx.consts[1] is None:
        return "filter is not constant"
    if ctx.consts[1].dtype.kind != "f":
        return f"filter is {ctx.consts[1].dtype}, not float"
    return not_float32(ctx) or (
        "bias is not constant" if len(ctx.consts) >= 3 and ctx.consts[2] is None else None)


def choose(geo: ConvGeometry, w: np.ndarray, winograd: int, bias=None, bounds=None, act=None, store=None,
           compute: ComputeContext = SERIAL, act_args=None, slope=None):
    """`bounds`: the activation as a clip (clip_bounds), else None; `store`: as the packed GEMM's
    store step does it (_base.store_epilogue: lo, hi, epi), else None; `compute`: the engine's;
    `act_args`, `slope`: the fused activation's arguments (activation_args) and PRELU slope."""
    if _conv_direct.fits(geo, bounds):
        return _conv_direct.Direct(geo, w, bias, bounds)
    if _conv_dense.fits(geo):
        return _conv_dense.Dense(geo, w, bias, act_args, slope, compute)
    packed, epi = (store[:2], store[2]) if store is not None else (None, NO_STORE)
    if is_pointwise(geo):
        return Pointwise(geo, pack_filter(w, geo.group), bias, packed, epi, compute)
    block = _winograd.pick_block(geo, winograd)
    if block:
        return _winograd.Winograd(geo, w, block, compute)
    if _conv_shifted.fits(geo) and not (PREFER_PACKED_IM2COL and packed_width(geo, packed, compute)):
        return _conv_shifted.Shifted(geo, w, bias, act, bounds, compute)
    return Im2col(geo, pack_filter(w, geo.group), bias, packed, epi, compute)


@kernel("Conv2D", "cpu:fast")
class Conv2DFast(FastKernel):
    check = staticmethod(conv_check)

    def setup(self, ctx):
        self.geo = geometry(ctx, ctx.consts[1].shape)
        self.bias = const_bias(ctx)
        act = activation_args(ctx)
        self.slope = fused_slope(ctx)   # kept: the store step reads it by address
        self.act = activation_fn(act, slope=self.slope)
        self.bounds = clip_bounds(act)
        self.algo = choose(self.geo, ctx.consts[1], int(ctx.arg("winograd", 0)),
                           self.bias, self.bounds, self.act, store_epilogue(act, self.slope), compute_of(ctx),
                           act, self.slope)
        # the packed filter, as an attribute of its own: observers list it among kernel buffers
        self.packed = next(getattr(self.algo, a) for a in ("wmat", "u", "t", "taps") if hasattr(self.algo, a))
        self.scratch_nbytes = scratch_size(self.algo.specs)

    @property
    def strided_output(self) -> bool:
        """Whether bind takes an output whose pixels are evenly spaced rows wider than O (a
        channel slice of a Concat's output: the engine's in-place concat)."""
        return isinstance(self.algo, (Pointwise, Im2col)) and self.algo.fused_epilogue

    @property
    def algorithm(self) -> str:
        """Which formulation runs this conv: direct, dense, pointwise, winograd, shifted, im2col."""
        return type(self.algo).__name__.lower()

    @property
    def algorithm_name(self) -> str:
        """The formulation with its inner choice (`im2col-packed`, `pointwise-blas-t`, `winograd-f4`):
        what the profiler and benchmark's per-op table show (Node.kernel_name)."""
        return self.algo.name

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        steps = self.algo.steps(x, out, carve(scratch, self.algo.specs))
        if getattr(self.algo, "fused_epilogue", False):
            return sequence(steps)
        return sequence(steps + epilogue(compute_of(self.ctx), out, self.bias, self.act, self.bounds))


def epilogue(compute: ComputeContext, out, bias, act, bounds=None) -> list:
    """In-place bias add and activation `act` over `out` (channels last); `bounds` (lo, hi)
    says `act` is that clip (or none), which the compiled loop fuses with the bias (split on
    `compute`'s pool)."""
    out2d = out.reshape(-1, out.shape[-1])
    fused = loops() if bounds is not None and (bias is not None or act is not None) else None
    if fused is not None:   # np.clip alone costs ~2 us of call overhead on a small tensor
        bias = loop_bias(bias, out2d.shape[-1])
        return [compute.loop("bias_clip", (out2d, bias, *bounds), out2d.shape[0], out2d.size)]
    return ([partial(np.add, out2d, bias, out=out2d)] if bias is not None else []) + \
        ([partial(act, out2d)] if act is not None else [])
