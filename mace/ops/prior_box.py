"""PriorBox (SSD): the default boxes of one feature map, as Caffe's SSD fork lays them out.

Inputs: the feature map (N, C, H, W) and the image (N, C, img_h, img_w); only their
shapes are read. Output (1, 2, H * W * num_priors * 4): row 0 the boxes
(xmin, ymin, xmax, ymax, normalised by the image size), row 1 their variances.
Per cell, per min_size: the min_size square, then sqrt(min_size * max_size) when
max sizes are given, then one box per aspect ratio other than 1. `aspect_ratio`
is expanded as Caffe does: 1 first, each new ratio r then (with flip) 1/r.
Args (Caffe's names): min_size, max_size, aspect_ratio, flip, clip, variance,
img_h, img_w, step_h, step_w (0: from the shapes), offset.
"""
import numpy as np

from mace.ops.registry import REQUIRED, Layout, OpSpec, SimpleKernel, kernel, register_op


def expand_aspect_ratios(ratios, flip: bool) -> list:
    """Caffe's list: 1.0, then each ratio not seen yet, and its inverse when flipping."""
    out = [1.0]
    for r in ratios:
        if any(abs(r - seen) < 1e-6 for seen in out):
            continue
        out.append(float(r))
        if flip:
            out.append(1.0 / float(r))
    return out


def num_priors(min_sizes, max_sizes, aspect_ratios) -> int:
    return len(aspect_ratios) * len(min_sizes) + len(max_sizes)


def _args(op_ctx) -> dict:
    return {"min": [float(v) for v in op_ctx.arg("min_size")],
            "max": [float(v) for v in op_ctx.arg("max_size", [])],
            "ratios": expand_aspect_ratios(op_ctx.arg("aspect_ratio", []), bool(op_ctx.arg("flip", 1))),
            "clip": bool(op_ctx.arg("clip", 0)),
            "variance": [float(v) for v in op_ctx.arg("variance", [0.1])],
            "img": (int(op_ctx.arg("img_h", 0)), int(op_ctx.arg("img_w", 0))),
            "step": (float(op_ctx.arg("step_h", 0.0)), float(op_ctx.arg("step_w", 0.0))),
            "offset": float(op_ctx.arg("offset", 0.5))}


@register_op("PriorBox", layout=Layout.ANY)
class PriorBox(OpSpec):
    attrs = {
        "aspect_ratio": [], "clip": 0, "flip": 1, "img_h": 0, "img_w": 0, "max_size": [],
        "min_size": REQUIRED, "offset": 0.5, "step_h": 0.0, "step_w": 0.0, "variance": [0.1]
    }

    @staticmethod
    def infer(ctx):
        a = _args(ctx)
        h, w = ctx.shapes[0][2], ctx.shapes[0][3]
        return [((1, 2, h * w * num_priors(a["min"], a["max"], a["ratios"]) * 4), np.float32)]


def prior_boxes(a: dict, layer_hw, image_hw) -> np.ndarray:
    """The (1, 2, count) output for a feature map of layer_hw on an image of image_hw."""
    lh, lw = layer_hw
    img_h, img_w = a["img"] if a["img"][0] and a["img"][1] else image_hw
    step_h, step_w = a["step"] if a["step"][0] and a["step"][1] else (img_h / lh, img_w / lw)
    sizes = []  # (width, height) of each prior of a cell, in Caffe's order
    for s, min_size in enumerate(a["min"]):
        sizes.append((min_size, min_size))
        if a["max"]:
            side = np.sqrt(min_size * a["max"][s])
            sizes.append((side, side))
        sizes += [(min_size * np.sqrt(r), min_size / np.sqrt(r)) for r in a["ratios"]
                  if abs(r - 1.0) >= 1e-6]
    bw, bh = (np.array(v, np.float64) for v in zip(*sizes))
    cy, cx = np.meshgrid((np.arange(lh) + a["offset"]) * step_h,
                         (np.arange(lw) + a["offset"]) * step_w, indexing="ij")
    cx, cy = cx[..., None], cy[..., None]   # (lh, lw, 1) against (num_priors,)
    boxes = np.stack([(cx - bw / 2) / img_w, (cy - bh / 2) / img_h,
                      (cx + bw / 2) / img_w, (cy + bh / 2) / img_h], axis=-1).reshape(-1)
    if a["clip"]:
        boxes = np.clip(boxes, 0.0, 1.0)
    variances = np.tile(np.asarray(a["variance"], np.float64), boxes.size // len(a["variance"]))
    return np.stack([boxes, variances])[None].astype(np.float32)


@kernel("PriorBox", "cpu")
class PriorBoxCpu(SimpleKernel):
    def setup(self, ctx):
        # The boxes depend on shapes only: computed once at load.
        shapes = ctx.input_shapes
        self.value = prior_boxes(_args(ctx), shapes[0][2:4], shapes[1][2:4])

    def compute(self, *inputs):
        return self.value
