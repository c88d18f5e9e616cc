"""ResizeBicubic: bicubic resize of H and W (ONNX Resize "cubic"; MACE's ResizeBicubic).

Args: size, scale, coordinate_transformation_mode, data_format (see _resize.py), cubic_coeff_a
(-0.75, ONNX's default; TensorFlow's is -0.5), exclude_outside (0: taps outside the input repeat
the edge; 1: they get weight 0 and the other three are renormalised), weight_steps (0: exact
weights; TensorFlow's kernel reads them from a table of 1024 steps, so the fraction is rounded to
1/1024 first). Each output pixel blends four rows, then four columns, with Keys' cubic
convolution weights.
"""
import numpy as np

from mace.ops._resize import ResizeKernel, axis_params, resize_infer, source_coords
from mace.ops.registry import REQUIRED, Layout, OpSpec, kernel, register_op


@register_op("ResizeBicubic", layout=Layout.FIXED)
class ResizeBicubic(OpSpec):
    attrs = {
        "coordinate_transformation_mode": "half_pixel", "cubic_coeff_a": -0.75, "data_format": "NHWC",
        "exclude_outside": 0, "scale": REQUIRED, "size": REQUIRED, "weight_steps": 0
    }

    @staticmethod
    def infer(ctx):
        return resize_infer(ctx)


def _keys(s, a):
    """Keys' cubic convolution kernel at distances s (>= 0)."""
    return np.where(s <= 1, ((a + 2) * s - (a + 3)) * s * s + 1,
                    np.where(s < 2, ((a * s - 5 * a) * s + 8 * a) * s - 4 * a, 0.0))


def cubic_table(in_len, out_len, scale, coord_mode, a, exclude_outside, steps=0):
    """(indices, weights), each (out_len, 4): the four taps of each output index."""
    x = source_coords(out_len, in_len, scale, coord_mode).astype(np.float64)
    base = np.floor(x)
    t = (x - base)[:, None]
    if steps:
        t = np.rint(t * steps) / steps
    taps = base[:, None].astype(np.int64) + np.arange(-1, 3)
    weights = _keys(np.abs(t - np.arange(-1, 3)), a)
    if exclude_outside:
        weights = np.where((taps >= 0) & (taps < in_len), weights, 0.0)
        weights /= weights.sum(axis=1, keepdims=True)
    # intp: np.take refuses int64 indices where intp is 32 bits (armhf boards)
    return np.clip(taps, 0, in_len - 1).astype(np.intp), weights.astype(np.float32)


@kernel("ResizeBicubic", "cpu")
class ResizeBicubicCpu(ResizeKernel):
    def setup(self, ctx):
        self.setup_layout(ctx)
        axes, coord_mode = axis_params(ctx, ctx.input_shapes[0])
        a = float(ctx.arg("cubic_coeff_a"))
        exclude = bool(ctx.arg("exclude_outside"))
        steps = int(ctx.arg("weight_steps"))
        self.rows = cubic_table(*axes[0], coord_mode, a, exclude, steps)
        self.cols = cubic_table(*axes[1], coord_mode, a, exclude, steps)

    def run(self, inputs, outputs):
        x, out = self.nhwc_views(inputs[0], outputs[0])
        rows = self._blend(x.astype(np.float32, copy=False), *self.rows, axis=1)
        np.copyto(out, self._blend(rows, *self.cols, axis=2), casting="unsafe")
        self.finish(outputs[0])

    @staticmethod
    def _blend(src, taps, weights, axis):
        shape = [1, 1, 1, 1]
        shape[axis] = -1
        total = None
        for k in range(4):
            term = np.take(src, taps[:, k], axis=axis) * weights[:, k].reshape(shape)
            total = term if total is None else total + term
        return total
