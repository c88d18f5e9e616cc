"""Conv2D on the GPU: direct kernels (1x1, 3x3, general) or Winograd F(2x2|4x4, 3x3).

Group 1, NHWC, constant filter. The placement pass marks eligible 3x3 stride-1
convs with arg `wino_block_size` (2 or 4) when the .yml asks for winograd; the
transforms run on the GPU, the filter transform G g G^T once on the host.
"""

import numpy as np

from mace.ir.args import get_arg
from mace.ops.conv2d import conv_geometry
from mace.ops.gpu.images import cdiv, conv_filter_size, height_major_size
from mace.ops.gpu.kernel import GpuKernel, act_args, fusable, i32, image_fits, tensors
from mace.ops.registry import kernel

G = {2: np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]]),
     4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])}


def conv_reason(op, shapes, consts) -> str | None:
    """Checks shared by the convolution kernels."""
    if get_arg(op, "data_format", "NHWC") != "NHWC" or len(shapes[0]) != 4:
        return "not a 4-D NHWC convolution"
    if consts[1] is None:
        return "filter is not constant"
    if len(op.input) > 2 and consts[2] is None:
        return "bias is not constant"
    return fusable(op)


def winograd_eligible(op, w_shape) -> bool:
    return (tuple(w_shape[2:]) == (3, 3) and list(get_arg(op, "strides", [1, 1])) == [1, 1]
            and list(get_arg(op, "dilations", [1, 1])) == [1, 1] and get_arg(op, "group", 1) == 1)


def bias_image(kern, ctx, index: int, length: int):
    """(image, has_bias) for an optional constant bias input."""
    b = ctx.consts[index] if len(ctx.consts) > index else None
    if b is None:
        return kern.dummy(), 0
    return kern.upload(np.asarray(b, np.float32).reshape(length), "arg"), 1


@kernel("Conv2D", "gpu")
class Conv2DGpu(GpuKernel):
    @classmethod
    def check(cls, ctx):
        op, shapes, dtypes, consts = tensors(ctx)
        reason = super().check(ctx) or conv_reason(op, shapes, consts)
        if reason:
            return reason
        if get_arg(op, "group", 1) != 1:
            return "grouped convolution"
        if not image_fits(conv_filter_size(consts[1].shape)):
            return "filter too large for a 2-D image"
        return None

    def prepare(self, ctx):
        w = np.asarray(ctx.consts[1], np.float32)
        (n, h, wd, c), (kh, kw), s, d, pads, (oh, ow) = conv_geometry(ctx, ctx.input_shapes[0], w.shape)
        o = w.shape[0]
        self.bias, has_bias = bias_image(self, ctx, 2, o)
        self.wino = int(ctx.arg("wino_block_size") or 0)
        if self.wino in (2, 4) and winograd_eligible(ctx.op, w.shape):
            self._winograd(ctx, w, (n, h, wd, c), pads, (oh, ow), has_bias)
            return
        self.wino = 0
        name = "conv2d_1x1" if (kh, kw) == (1, 1) else "conv2d_3x3" if (kh, kw) == (3, 3) else "conv2d"
        self.filter = self.upload(w, "filter")
        self.k = self.kernel("conv2d", name)
        self.name = name
        self.k.set_args(self.image_in(0), self.filter, self.bias, self.outs[0].image,
                        *i32(h, wd, c, oh, ow, o, n * oh, kh, kw, s[0], s[1], d[0], d[1], pads[0],
                             pads[1], has_bias), *act_args(ctx))
        self.gws = (cdiv(o, 4), cdiv(ow, 4), n * oh)

    def _winograd(self, ctx, w, in_shape, pads, out_hw, has_bias):
        m, (n, h, wd, c), (oh, ow), o = self.wino, in_shape, out_hw, w.shape[0]
        alpha = m + 2
        th, tw = cdiv(oh, m), cdiv(ow, m)
        tiles = n * th * tw
        g = G[m]
        v = np.einsum("ik,ockl,jl->ijoc", g, w.astype(np.float64), g).reshape(alpha * alpha, o, c, 1)
        self.v = self.upload(v.astype(np.float32), "hm")
        # The transformed tiles grow with m (F(4x4) sums 36 scaled inputs): kept in float.
        self.u = self.scratch(*height_major_size((alpha * alpha, c, tiles, 1)), fp32=True)
        self.m = self.scratch(*height_major_size((alpha * alpha, o, tiles, 1)), fp32=True)
        self.k_in = self.kernel("winograd", f"winograd_input_{m}")
        self.k_in.set_args(self.image_in(0), self.u, *i32(h, wd, c, th, tw, tiles, pads[0], pads[1]))
        self.k_mm = self.kernel("winograd", "winograd_gemm")
        self.k_mm.set_args(self.u, self.v, self.m, *i32(c, o, tiles, alpha * alpha))
        self.k_out = self.kernel("winograd", f"winograd_output_{m}")
        self.k_out.set_args(self.m, self.bias, self.outs[0].image,
                            *i32(oh, ow, o, th, tw, tiles, has_bias), *act_args(ctx))
        self.gws = [(tiles, cdiv(c, 4)), (cdiv(o, 4), tiles, alpha * alpha), (cdiv(o, 4), tiles)]

    def enqueue(self):
        if not self.wino:
            self.launch(self.k, self.name, self.gws)
            return
        self.launch(self.k_in, f"winograd_input_{self.wino}", self.gws[0])
        self.launch(self.k_mm, "winograd_gemm", self.gws[1])
        self.launch(self.k_out, f"winograd_output_{self.wino}", self.gws[2])
