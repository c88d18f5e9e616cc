"""Deconv2D: 2-D transposed convolution (ONNX ConvTranspose), with a fused activation.

Inputs: x, filter, optional bias (O). The filter keeps ONNX's layout
(C_in, C_out / group, kh, kw): input channel first, unlike Conv2D's OIHW.
Args: strides, dilations, group, data_format, output_padding [h, w] (extra
cells at the bottom/right), pads [top, left, bottom, right] (cells cropped
from the full result), padding (SAME_UPPER / SAME_LOWER / VALID, resolved
from the input size: output = input * stride, but no larger than the full
result, as onnxruntime does), output_shape [oh, ow] (when set, pads are
derived from it and `pads` is ignored), and the fused activation
(activation, max_limit, activation_coefficient).

The CPU kernel runs NHWC: one (grouped) GEMM of the input against the filter
(a broadcast multiply when each group has one input channel) gives every
tap's contribution in a column buffer; a col2im pass then adds the kh*kw
taps into the output as strided slices.
"""
import numpy as np

from mace.ops._common import activation_args, apply_activation, from_nhwc_shape, to_nhwc_shape
from mace.ops.registry import FUSED_ACTIVATION, Kernel, Layout, OpSpec, kernel, register_op


def _split_total(total, padding):
    """(begin, end) cells to crop from `total`; a negative total grows the end."""
    if total < 0:
        return 0, total
    small, big = total // 2, total - total // 2
    return (small, big) if padding == "SAME_UPPER" else (big, small)


def deconv_geometry(ctx, x_shape, w_shape):
    """(N, H, W, C), (kh, kw), strides, dilations, pads, (oh, ow), C_out in NHWC terms."""
    n, h, w, c = to_nhwc_shape(x_shape, ctx.arg("data_format", "NHWC"))
    kh, kw = w_shape[2], w_shape[3]
    strides = list(ctx.arg("strides", [1, 1]))
    dil = list(ctx.arg("dilations", [1, 1]))
    extra = list(ctx.arg("output_padding", [0, 0]))
    padding = (ctx.arg("padding", "") or "").upper()
    target = list(ctx.arg("output_shape", []))
    full = [strides[d] * (size - 1) + extra[d] + (k - 1) * dil[d] + 1
            for d, (size, k) in enumerate(((h, kh), (w, kw)))]
    if target:
        (top, bottom), (left, right) = (_split_total(full[d] - target[d], padding) for d in range(2))
        pads = [top, left, bottom, right]
    elif padding in ("SAME_UPPER", "SAME_LOWER"):
        # Aim for input * stride but never grow past the full result (onnxruntime does
        # the same; the ONNX spec would grow it, leaving bias-only cells).
        totals = [max(0, full[0] - h * strides[0]), max(0, full[1] - w * strides[1])]
        (top, bottom), (left, right) = (_split_total(t, padding) for t in totals)
        pads = [top, left, bottom, right]
    elif padding == "VALID":
        pads = [0, 0, 0, 0]
    else:
        pads = list(ctx.arg("pads", [0, 0, 0, 0]))
    out_hw = (full[0] - pads[0] - pads[2], full[1] - pads[1] - pads[3])
    if min(out_hw) <= 0:
        raise ValueError(f"output size {list(out_hw)} is not positive")
    c_out = w_shape[1] * int(ctx.arg("group", 1))
    return (n, h, w, c), (kh, kw), strides, dil, pads, out_hw, c_out


@register_op("Deconv2D", layout=Layout.FIXED)
class Deconv2D(OpSpec):
    attrs = {
        **FUSED_ACTIVATION, "data_format": "NHWC", "dilations": [1, 1], "group": 1, "output_padding": [0, 0],
        "output_shape": [], "padding": "", "pads": [0, 0, 0, 0], "strides": [1, 1]
    }

    @staticmethod
    def infer(ctx):
        (n, _, _, _), _, _, _, _, (oh, ow), c_out = deconv_geometry(ctx, ctx.shapes[0], ctx.shapes[1])
        return [(from_nhwc_shape((n, oh, ow, c_out), ctx.arg("data_format")), ctx.dtypes[0])]


@kernel("Deconv2D", "cpu")
class Deconv2DCpu(Kernel):
    uses_blas = True

    def setup(self, ctx):
        assert ctx.arg("data_format") == "NHWC", "CPU Deconv2D runs NHWC (to_nhwc pass)"
        w = ctx.consts[1]
        if w is None:
            raise ValueError(f"Deconv2D '{ctx.op.name}': filter must be constant")
        geo = deconv_geometry(ctx, ctx.input_shapes[0], w.shape)
        (n, h, wd, c), (kh, kw), self.strides, self.dil, pads, out_hw, self.c_out = geo
        self.in_shape, self.k = (n, h, wd, c), (kh, kw)
        self.group = int(ctx.arg("group"))
        self._pack_filter(w.astype(np.float32), n * h * wd)
        bias = ctx.consts[2] if len(ctx.consts) > 2 else None
        self.bias = None if bias is None else bias.astype(np.float32)
        self.act = activation_args(ctx)
        self._plan_buffer(pads, out_hw)

    def _pack_filter(self, w, m):
        """Filter operand and column buffer; `self.taps` views the columns as
        (N, H, W, kh, kw, group, C_out/group) for the scatter."""
        n, h, wd, c = self.in_shape
        g, (kh, kw) = self.group, self.k
        cin_g, cout_g = c // g, w.shape[1]
        taps = (n, h, wd, kh, kw)
        if cin_g == 1 and g > 1:
            # Depthwise-like: each column is one input value times its group's filter, a
            # broadcast multiply written straight in scatter order (a batched GEMM with K=1 is slow).
            self.wmat = np.ascontiguousarray(
                w.reshape(g, cout_g, kh, kw).transpose(2, 3, 0, 1).reshape(1, kh * kw, g, cout_g))
            self.cols = np.empty((m, kh * kw, g, cout_g), np.float32)
            self.taps = self.cols.reshape(taps + (g, cout_g))
            return
        # GEMM operand [group, C_in/g, kh*kw*C_out/g]: one row of taps per input channel.
        wg = w.reshape(g, cin_g, cout_g, kh, kw).transpose(0, 1, 3, 4, 2)
        self.wmat = np.ascontiguousarray(wg.reshape(g, cin_g, kh * kw * cout_g))
        self.cols = np.empty((g, m, kh * kw * cout_g), np.float32)
        self.taps = self.cols.reshape((g,) + taps + (cout_g,)).transpose(1, 2, 3, 4, 5, 0, 6)

    def _plan_buffer(self, pads, out_hw):
        """Size the scatter buffer to cover both every tap and the (maybe larger) output."""
        n, h, w, _ = self.in_shape
        span = [self.strides[d] * (size - 1) + (self.k[d] - 1) * self.dil[d] + 1
                for d, size in enumerate((h, w))]
        lo = [min(0, pads[d]) for d in range(2)]  # negative pads extend before the taps
        hi = [max(span[d], pads[d] + out_hw[d]) for d in range(2)]
        self.origin = [-lo[0], -lo[1]]  # buffer index of full-result cell (0, 0)
        self.crop = (slice(self.origin[0] + pads[0], self.origin[0] + pads[0] + out_hw[0]),
                     slice(self.origin[1] + pads[1], self.origin[1] + pads[1] + out_hw[1]))
        shape = (n, hi[0] - lo[0], hi[1] - lo[1], self.c_out)
        # When the output is exactly the scatter area, scatter straight into it.
        self.direct = shape == (n, out_hw[0], out_hw[1], self.c_out)
        self.buf = None if self.direct else np.empty(shape, np.float32)

    def run(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        self._columns(x)
        buf = out if self.direct else self.buf
        self._col2im(buf)
        if not self.direct:
            out[...] = buf[:, self.crop[0], self.crop[1], :]
        if self.bias is not None:
            out += self.bias
        apply_activation(out, **self.act)

    def _columns(self, x):
        g = self.group
        x2d = x.reshape(-1, x.shape[-1])
        if self.cols.ndim == 4:  # depthwise-like broadcast
            np.multiply(x2d[:, None, :, None], self.wmat, out=self.cols)
        elif g == 1:
            np.matmul(x2d, self.wmat[0], out=self.cols[0])
        else:
            xg = x2d.reshape(x2d.shape[0], g, -1).transpose(1, 0, 2)
            np.matmul(xg, self.wmat, out=self.cols)

    def _col2im(self, buf):
        _, h, w, _ = self.in_shape
        g, (kh, kw), s, d = self.group, self.k, self.strides, self.dil
        buf[...] = 0
        # `buf` is contiguous, so this reshape is a view and the adds land in it.
        dst = buf.reshape(buf.shape[:3] + (g, self.c_out // g))
        for i in range(kh):
            r0 = self.origin[0] + i * d[0]
            for j in range(kw):
                c0 = self.origin[1] + j * d[1]
                dst[:, r0:r0 + s[0] * (h - 1) + 1:s[0], c0:c0 + s[1] * (w - 1) + 1:s[1]] += \
                    self.taps[:, :, :, i, j]
