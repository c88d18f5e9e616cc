"""ResizeNearestNeighbor: nearest-neighbour resize of H and W (ONNX Resize/Upsample "nearest").

Args: size, scale, coordinate_transformation_mode, data_format (see _resize.py)
and nearest_mode, how a source coordinate picks its pixel: round_prefer_floor
(default), round_prefer_ceil, floor, ceil, or legacy (floor when the axis is
upsampled, ceil when downsampled: what onnxruntime does for Resize-10 and
Upsample, which predate nearest_mode).
"""
import numpy as np

from mace.ops._resize import ResizeKernel, axis_params, resize_infer, source_coords
from mace.ops.registry import REQUIRED, Layout, OpSpec, kernel, register_op

NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "legacy")
# A coordinate this close to a .5 tie is the tie: float32 error (e.g. 7.5 computed as
# 7.4999995) must not decide the rounding. onnxruntime resolves such ties the same way.
TIE_TOLERANCE = 1e-6


@register_op("ResizeNearestNeighbor", layout=Layout.FIXED)
class ResizeNearestNeighbor(OpSpec):
    attrs = {
        "coordinate_transformation_mode": "half_pixel", "data_format": "NHWC",
        "nearest_mode": "round_prefer_floor", "scale": REQUIRED, "size": REQUIRED
    }

    @staticmethod
    def infer(ctx):
        return resize_infer(ctx)


def nearest_index(in_len, out_len, scale, coord_mode, nearest_mode) -> np.ndarray:
    x = source_coords(out_len, in_len, scale, coord_mode)
    if nearest_mode == "legacy":
        nearest_mode = "ceil" if scale < 1 else "floor"
    tie = np.abs(x - np.floor(x) - 0.5) <= TIE_TOLERANCE
    if nearest_mode == "round_prefer_floor":
        idx = np.where(tie, np.floor(x), np.round(x))
    elif nearest_mode == "round_prefer_ceil":
        idx = np.where(tie, np.floor(x) + 1, np.round(x))
    elif nearest_mode == "floor":
        idx = np.floor(x)
    elif nearest_mode == "ceil":
        idx = np.ceil(x)
    else:
        raise ValueError(f"unsupported nearest_mode '{nearest_mode}'")
    return np.clip(idx, 0, in_len - 1).astype(np.intp)


@kernel("ResizeNearestNeighbor", "cpu")
class ResizeNearestNeighborCpu(ResizeKernel):
    def setup(self, ctx):
        self.setup_layout(ctx)
        axes, coord_mode = axis_params(ctx, ctx.input_shapes[0])
        nearest_mode = ctx.arg("nearest_mode")
        self.rows, self.cols = (nearest_index(i, o, s, coord_mode, nearest_mode) for i, o, s in axes)
        n, h, w, c = (ctx.input_shapes[0][i] for i in ((0, 2, 3, 1) if self.nchw else (0, 1, 2, 3)))
        self.tmp = np.empty((n, len(self.rows), w, c), ctx.input_dtypes[0])

    def run(self, inputs, outputs):
        x, out = self.nhwc_views(inputs[0], outputs[0])
        np.take(x, self.rows, axis=1, out=self.tmp, mode="clip")  # indices are in range already
        np.take(self.tmp, self.cols, axis=2, out=out, mode="clip")
        self.finish(outputs[0])
