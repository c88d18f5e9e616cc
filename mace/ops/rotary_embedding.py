"""RotaryEmbedding: rotate pairs of each head's first `rotary_dim` features by position angles
(ONNX RotaryEmbedding, opset 23; LLaMA-style RoPE).

Inputs: x (4-D (batch, heads, seq, head size), or 3-D (batch, seq, heads * head size) with arg
num_heads), cos, sin ((positions, rotary_dim / 2), indexed by the optional 4th input
position_ids (batch, seq); without it, already (batch, seq, rotary_dim / 2)). Args: interleaved
(pairs are (0,1), (2,3), ... instead of the two halves), rotary_dim (0: the whole head),
num_heads. Features past rotary_dim pass through. Layout ANY.
"""
import numpy as np

from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


@register_op("RotaryEmbedding", layout=Layout.ANY)
class RotaryEmbedding(OpSpec):
    attrs = {"interleaved": 0, "num_heads": 0, "rotary_dim": 0}

    @staticmethod
    def infer(ctx):
        shape = tuple(ctx.shapes[0])
        if len(shape) == 3 and (not ctx.arg("num_heads") or shape[2] % ctx.arg("num_heads")):
            raise ValueError(f"RotaryEmbedding '{ctx.op.name}': a 3-D input {list(shape)} needs num_heads "
                             f"that divides its last axis")
        if len(shape) not in (3, 4):
            raise ValueError(f"RotaryEmbedding '{ctx.op.name}': input rank {len(shape)}, expected 3 or 4")
        return [(shape, ctx.dtypes[0])]


def rotate(x, cos, sin, positions, interleaved, rotary_dim, num_heads):
    """x as (batch, seq, heads, head) -> rotated, in x's own layout."""
    four_d = x.ndim == 4
    h = x.transpose(0, 2, 1, 3) if four_d else x.reshape(x.shape[0], x.shape[1], num_heads, -1)
    rotary_dim = rotary_dim or h.shape[3]
    if positions is not None:
        cos, sin = cos[positions], sin[positions]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]   # (batch, seq, 1, rotary_dim / 2)
    part = h[..., :rotary_dim]
    a, b = (part[..., 0::2], part[..., 1::2]) if interleaved else np.split(part, 2, axis=-1)
    real, imag = cos * a - sin * b, sin * a + cos * b
    turned = np.stack([real, imag], -1).reshape(part.shape) if interleaved else \
        np.concatenate([real, imag], -1)
    out = np.concatenate([turned, h[..., rotary_dim:]], -1)
    return out.transpose(0, 2, 1, 3) if four_d else out.reshape(x.shape)


@kernel("RotaryEmbedding", "cpu")
class RotaryEmbeddingCpu(Kernel):
    def setup(self, ctx):
        self.interleaved = bool(ctx.arg("interleaved"))
        self.rotary_dim = int(ctx.arg("rotary_dim"))
        self.num_heads = int(ctx.arg("num_heads"))

    def run(self, inputs, outputs):
        positions = np.asarray(inputs[3], np.int64) if len(inputs) > 3 else None
        y = rotate(inputs[0], inputs[1], inputs[2], positions, self.interleaved, self.rotary_dim,
                   self.num_heads)
        np.copyto(outputs[0], y, casting="unsafe")
