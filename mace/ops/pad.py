"""Pad: pad (or, with negative amounts, crop) every axis of a tensor.

Args: paddings [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}] (ONNX's order,
for the layout the tensor is stored in), pad_type CONSTANT (default), REFLECT
(mirror without repeating the edge), SYMMETRIC (mirror repeating the edge,
TensorFlow's MirrorPad), EDGE (repeat the edge) or WRAP (cyclic), constant_value
(CONSTANT only). An AXIS op: the layout pass permutes `paddings`, so a Pad
between NHWC convs stays NHWC.
"""
import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op

NUMPY_MODES = {"CONSTANT": "constant", "REFLECT": "reflect", "EDGE": "edge", "WRAP": "wrap",
               "SYMMETRIC": "symmetric"}


def split_paddings(paddings, rank):
    """[(begin, end)] per axis; raises on a wrong length."""
    paddings = list(paddings)
    if len(paddings) != 2 * rank:
        raise ValueError(f"paddings has {len(paddings)} values, expected {2 * rank} for rank {rank}")
    return list(zip(paddings[:rank], paddings[rank:]))


@register_op("Pad", layout=Layout.AXIS)
class Pad(OpSpec):
    attrs = {"constant_value": 0.0, "pad_type": "CONSTANT", "paddings": REQUIRED}

    @staticmethod
    def infer(ctx):
        pairs = split_paddings(ctx.arg("paddings"), len(ctx.shapes[0]))
        out = tuple(d + b + e for d, (b, e) in zip(ctx.shapes[0], pairs))
        if min(out, default=1) < 0:
            raise ValueError(f"paddings {ctx.arg('paddings')} crop below zero size")
        return [(out, ctx.dtypes[0])]

    @staticmethod
    def remap_axes(op, perm, ranks):
        pairs = split_paddings(get_arg(op, "paddings"), ranks[0])
        stored = [pairs[p] for p in perm]  # stored axis i holds logical axis perm[i]
        set_arg(op, "paddings", [b for b, _ in stored] + [e for _, e in stored])
        return perm


@kernel("Pad", "cpu")
class PadCpu(Kernel):
    def setup(self, ctx):
        pairs = split_paddings(ctx.arg("paddings"), len(ctx.input_shapes[0]))
        self.mode = NUMPY_MODES[ctx.arg("pad_type")]
        self.value = ctx.arg("constant_value")
        # Negative amounts crop the input first; the rest is ordinary padding.
        self.crop = tuple(slice(max(-b, 0), d - max(-e, 0))
                          for d, (b, e) in zip(ctx.input_shapes[0], pairs))
        self.widths = [(max(b, 0), max(e, 0)) for b, e in pairs]
        self.inner = tuple(slice(b, b + s.stop - s.start) for (b, _), s in zip(self.widths, self.crop))

    def run(self, inputs, outputs):
        x, out = inputs[0][self.crop], outputs[0]
        if self.mode == "constant":
            out[...] = self.value  # border first, then the interior
            out[self.inner] = x
        else:
            np.copyto(out, np.pad(x, self.widths, mode=self.mode))
