"""Shared parts of ResizeNearestNeighbor and ResizeBilinear (ONNX Resize / Upsample).

Both resize H and W of a 4-D tensor. Args:
  size [oh, ow]        output spatial size (-1: floor(input x scale) on that axis)
  scale [sh, sw]       the scale the coordinate transform divides by (the
                       model's scale when it gave one, else out / in)
  coordinate_transformation_mode   half_pixel (default), half_pixel_symmetric,
                       pytorch_half_pixel, align_corners, asymmetric,
                       tf_half_pixel_for_nn
  data_format          NCHW or NHWC
Each output row/column maps to a source coordinate once, at load; running is
gathers along H then W (plus weighted adds for bilinear). Coordinates are
computed in float32 with onnxruntime's formulas, so picks and weights match it;
an axis whose scale is 1 and size unchanged maps 1:1 in every mode.
"""
import numpy as np

from mace.ops._common import from_nhwc_shape, to_nhwc_shape
from mace.ops.registry import Kernel

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric", "tf_half_pixel_for_nn")


def resolved_size(size, scale, h: int, w: int) -> tuple:
    """The output (oh, ow): `size`, where an entry of -1 is floor(input x scale) on that axis
    (convert writes -1 where a model's output size follows its input: variable input shapes,
    mace/transform/variable_shapes.py)."""
    return tuple(int(np.floor(n * np.float64(f))) if s == -1 else int(s) for s, n, f in zip(size, (h, w), scale))


def resize_infer(ctx):
    fmt = ctx.arg("data_format", "NHWC")
    n, h, w, c = to_nhwc_shape(ctx.shapes[0], fmt)
    oh, ow = resolved_size(ctx.arg("size"), ctx.arg("scale"), h, w)
    return [(from_nhwc_shape((n, oh, ow, c), fmt), ctx.dtypes[0])]


def source_coords(out_len: int, in_len: int, scale: float, mode: str) -> np.ndarray:
    """Source coordinate of each output index along one axis (float32, like onnxruntime)."""
    f32 = np.float32
    x = np.arange(out_len, dtype=f32)
    scale = f32(scale)
    if scale == 1 and out_len == in_len:
        return x  # an axis that is not resized maps 1:1 in every mode (tf_half_pixel_for_nn too)
    if mode == "half_pixel":
        return (x + f32(0.5)) / scale - f32(0.5)
    if mode == "half_pixel_symmetric":  # the final sum in float64, as onnxruntime does
        adjustment = f32(out_len) / (scale * f32(in_len))
        offset = f32(in_len) / f32(2) * (f32(1) - adjustment)
        return (np.float64(offset) + (x + 0.5) / np.float64(scale) - 0.5).astype(f32)
    if mode == "pytorch_half_pixel":
        return (x + f32(0.5)) / scale - f32(0.5) if out_len > 1 else np.zeros(out_len, f32)
    if mode == "align_corners":
        if out_len == 1:
            return np.zeros(1, f32)
        return x * f32(in_len - 1) / f32(out_len - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + f32(0.5)) / scale
    raise ValueError(f"unsupported coordinate_transformation_mode '{mode}'")


def axis_params(ctx, x_shape):
    """[(in_len, out_len, scale), ...] for H and W, and the mode, in NHWC terms."""
    _, h, w, _ = to_nhwc_shape(x_shape, ctx.arg("data_format", "NHWC"))
    scale = ctx.arg("scale")
    size = resolved_size(ctx.arg("size"), scale, h, w)
    mode = ctx.arg("coordinate_transformation_mode", "half_pixel")
    return [(h, size[0], scale[0]), (w, size[1], scale[1])], mode


class ResizeKernel(Kernel):
    """Base of the resize kernels: NHWC gathers into preallocated buffers. NCHW (met
    only when folding a constant before the layout pass) works on transposed views."""

    def setup_layout(self, ctx):
        self.nchw = ctx.arg("data_format", "NHWC") == "NCHW"
        shape = to_nhwc_shape(ctx.output_shapes[0], "NCHW" if self.nchw else "NHWC")
        self.out_nhwc = np.empty(shape, ctx.output_dtypes[0]) if self.nchw else None

    def nhwc_views(self, x, out):
        if not self.nchw:
            return x, out
        return x.transpose(0, 2, 3, 1), self.out_nhwc

    def finish(self, out):
        if self.nchw:
            np.copyto(out, self.out_nhwc.transpose(0, 3, 1, 2))
