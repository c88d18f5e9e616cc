"""ResizeBilinear: bilinear resize of H and W (ONNX Resize/Upsample "linear").

Args: size, scale, coordinate_transformation_mode, data_format (see _resize.py).
Source coordinates are clamped to the input, so edges repeat; each output
pixel blends its two nearest rows, then its two nearest columns.
"""
import numpy as np

from mace.ops._resize import ResizeKernel, axis_params, resize_infer, source_coords
from mace.ops.registry import REQUIRED, Layout, OpSpec, kernel, register_op


@register_op("ResizeBilinear", layout=Layout.FIXED)
class ResizeBilinear(OpSpec):
    attrs = {
        "coordinate_transformation_mode": "half_pixel", "data_format": "NHWC", "scale": REQUIRED,
        "size": REQUIRED
    }

    @staticmethod
    def infer(ctx):
        return resize_infer(ctx)


def linear_table(in_len, out_len, scale, coord_mode):
    """(lower index, upper index, lower weight, upper weight) per output index."""
    x = np.clip(source_coords(out_len, in_len, scale, coord_mode), 0, in_len - 1)
    lo = np.floor(x).astype(np.intp)
    hi = np.minimum(lo + 1, in_len - 1)
    w_hi = (x - lo).astype(np.float32)
    return lo, hi, np.float32(1) - w_hi, w_hi


@kernel("ResizeBilinear", "cpu")
class ResizeBilinearCpu(ResizeKernel):
    def setup(self, ctx):
        self.setup_layout(ctx)
        axes, coord_mode = axis_params(ctx, ctx.input_shapes[0])
        (h, oh, sh), (w, ow, sw) = axes
        r_lo, r_hi, r_wlo, r_whi = linear_table(h, oh, sh, coord_mode)
        c_lo, c_hi, c_wlo, c_whi = linear_table(w, ow, sw, coord_mode)
        # Weights shaped to broadcast over NHWC: rows along axis 1, columns along axis 2.
        self.rows = (r_lo, r_hi, r_wlo[:, None, None], r_whi[:, None, None])
        self.cols = (c_lo, c_hi, c_wlo[:, None], c_whi[:, None])
        n, c = ctx.output_shapes[0][0], ctx.output_shapes[0][1 if self.nchw else 3]
        self.row_a = np.empty((n, oh, w, c), np.float32)
        self.row_b = np.empty_like(self.row_a)
        self.col_b = np.empty((n, oh, ow, c), np.float32)

    def run(self, inputs, outputs):
        x, out = self.nhwc_views(inputs[0], outputs[0])
        self._blend(x, self.rows, 1, self.row_a, self.row_b)
        self._blend(self.row_a, self.cols, 2, out, self.col_b)
        self.finish(outputs[0])

    @staticmethod
    def _blend(src, table, axis, out, scratch):
        """out = src[lo] * w_lo + src[hi] * w_hi along `axis`."""
        lo, hi, w_lo, w_hi = table
        np.take(src, lo, axis=axis, out=out, mode="clip")  # indices are in range already
        out *= w_lo
        np.take(src, hi, axis=axis, out=scratch, mode="clip")
        scratch *= w_hi
        out += scratch
