"""RoiAlign: pool each region of interest of a feature map to a fixed grid by averaging (or taking
the max of) bilinear samples (ONNX RoiAlign; Mask R-CNN style detectors).

Inputs: x (N, C, H, W), rois (R, 4) as (x1, y1, x2, y2) in image coordinates, batch_indices (R).
Args: mode (avg | max), output_height, output_width, sampling_ratio (samples per bin side; 0:
ceil(roi size / bins), per ROI), spatial_scale (image -> feature map), half_pixel (1: shift by
half a pixel, opset 16's default; 0: opset 10's output_half_pixel, ROIs at least 1x1). Samples
outside [-1, size] count as 0. max mode takes, per sample, the largest of its four weighted
corner values (onnxruntime's rule), then the largest over the bin. Output (R, C, oh, ow).
Layout ANY (NCHW).
"""
import numpy as np

from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("RoiAlign", layout=Layout.ANY)
class RoiAlign(OpSpec):
    attrs = {
        "half_pixel": 1, "mode": "avg", "output_height": 1, "output_width": 1, "sampling_ratio": 0,
        "spatial_scale": 1.0
    }

    @staticmethod
    def infer(ctx):
        x, rois, idx = (tuple(s) for s in ctx.shapes[:3])
        if len(x) != 4 or len(rois) != 2 or rois[1] != 4 or idx != (rois[0],):
            raise ValueError(f"RoiAlign '{ctx.op.name}': x {list(x)}, rois {list(rois)}, batch_indices "
                             f"{list(idx)} do not fit (N, C, H, W), (R, 4), (R,)")
        return [((rois[0], x[1], int(ctx.arg("output_height")), int(ctx.arg("output_width"))),
                 ctx.dtypes[0])]


def _axis_weights(start, bin_size, bins, grid, size):
    """(low, high) weight matrices (bins * grid, size) of the samples along one axis."""
    pos = start + np.arange(bins)[:, None] * bin_size + (np.arange(grid) + 0.5) * bin_size / grid
    pos = pos.ravel()
    valid = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, 0)
    low = pos.astype(np.int64)
    edge = low >= size - 1
    low = np.where(edge, size - 1, low)
    high = np.where(edge, size - 1, low + 1)
    frac = np.where(edge, 0.0, pos - low)
    w_low, w_high = np.zeros((pos.size, size)), np.zeros((pos.size, size))
    rows = np.arange(pos.size)
    w_low[rows, low] = np.where(valid, 1 - frac, 0)
    w_high[rows, high] = np.where(valid, frac, 0)
    return w_low, w_high


def roi_align(x, rois, batch, a):
    n_rois, (c, h, w) = rois.shape[0], x.shape[1:]
    oh, ow = a["oh"], a["ow"]
    out = np.zeros((n_rois, c, oh, ow), np.float64)
    shift = 0.5 if a["half_pixel"] else 0.0
    for r in range(n_rois):
        x1, y1, x2, y2 = rois[r].astype(np.float64) * a["scale"] - shift
        rh, rw = y2 - y1, x2 - x1
        if not a["half_pixel"]:
            rh, rw = max(rh, 1.0), max(rw, 1.0)
        gh = a["ratio"] if a["ratio"] > 0 else int(np.ceil(rh / oh))
        gw = a["ratio"] if a["ratio"] > 0 else int(np.ceil(rw / ow))
        ys = _axis_weights(y1, rh / oh, oh, gh, h)
        xs = _axis_weights(x1, rw / ow, ow, gw, w)
        fmap = x[int(batch[r])].astype(np.float64)                       # (C, H, W)
        if gh * gw == 0:
            continue
        if a["mode"] == "avg":
            samples = (ys[0] + ys[1]) @ fmap @ (xs[0] + xs[1]).T            # (C, oh*gh, ow*gw)
            out[r] = samples.reshape(c, oh, gh, ow, gw).mean(axis=(2, 4))
        else:
            corners = [wy @ fmap @ wx.T for wy in ys for wx in xs]
            samples = np.maximum.reduce(corners)
            out[r] = samples.reshape(c, oh, gh, ow, gw).max(axis=(2, 4))
    return out


@kernel("RoiAlign", "cpu")
class RoiAlignCpu(Kernel):
    def setup(self, ctx):
        self.args = {"mode": ctx.arg("mode"), "oh": int(ctx.arg("output_height")),
                     "ow": int(ctx.arg("output_width")), "ratio": int(ctx.arg("sampling_ratio")),
                     "scale": float(ctx.arg("spatial_scale")), "half_pixel": bool(ctx.arg("half_pixel"))}

    def run(self, inputs, outputs):
        np.copyto(outputs[0], roi_align(inputs[0], np.asarray(inputs[1]), np.asarray(inputs[2]), self.args),
                  casting="unsafe")
