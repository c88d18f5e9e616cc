"""Attention: scaled dot-product attention (ONNX Attention, opsets 23-25).

Inputs: Q, K, V, then those of mask / past_key, past_value / nonpad_kv_seqlen that args
has_mask / has_past / has_nonpad say are present. Q/K/V are 4-D (batch, heads, seq, head size),
or 3-D (batch, seq, heads * head size) with args q_num_heads / kv_num_heads. Fewer K/V heads
than Q heads (grouped- and multi-query attention) are repeated to match.
Args: scale (default 1/sqrt(head size), applied as sqrt(scale) to each of Q and K), is_causal
(bottom-right aligned: query i sees key j <= i + offset, offset = the past length, or per batch
nonpad_kv_seqlen - q length), left_window / right_window (-1: unbounded), softcap, qk_mode
(what the 4th output holds: 0/1 the product (soft-capped), 2 with the bias, 3 the softmax).
A boolean mask marks the keys to attend; a float mask is added to the scores. A query row
with no key left gives zeros, not NaN. Outputs: Y, present_key, present_value, qk_output.
Computed in float32 at least (float16 inputs are widened, the outputs narrowed back).
Layout ANY.
"""
import numpy as np

from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op


def _heads(shape, n):
    """(batch, heads, seq, head size) of a 3-D (batch, seq, hidden) input split in n heads."""
    b, s, hidden = shape
    if not n or hidden % n:
        raise ValueError(f"hidden size {hidden} does not split into {n} heads")
    return (b, n, s, hidden // n)


def _shapes(ctx):
    """4-D Q, K, V shapes; the total key length; whether the inputs were 3-D."""
    q, k, v = (tuple(s) for s in ctx.shapes[:3])
    three_d = len(q) == 3
    if three_d:
        q = _heads(q, ctx.arg("q_num_heads", 0))
        k = _heads(k, ctx.arg("kv_num_heads", 0))
        v = _heads(v, ctx.arg("kv_num_heads", 0))
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise ValueError("Q, K and V must all be 3-D or all 4-D")
    if q[1] % k[1] or k[1] != v[1] or q[3] != k[3] or k[2] != v[2]:
        raise ValueError(f"Q {list(q)}, K {list(k)}, V {list(v)} do not fit together")
    past = tuple(ctx.shapes[3 + int(ctx.arg("has_mask", 0))])[2] if ctx.arg("has_past", 0) else 0
    return q, k, v, past + k[2], three_d


@register_op("Attention", layout=Layout.ANY)
class Attention(OpSpec):
    attrs = {
        "has_mask": 0, "has_nonpad": 0, "has_past": 0, "is_causal": 0, "kv_num_heads": 0, "left_window": -1,
        "q_num_heads": 0, "qk_mode": 0, "right_window": -1, "scale": 0.0, "softcap": 0.0
    }

    @staticmethod
    def infer(ctx):
        try:
            q, k, v, total, three_d = _shapes(ctx)
        except ValueError as e:
            raise ValueError(f"Attention '{ctx.op.name}': {e}") from None
        b, hq, sq, _ = q
        dtype = ctx.dtypes[0]
        y = (b, sq, hq * v[3]) if three_d else (b, hq, sq, v[3])
        outs = [(y, dtype), ((b, k[1], total, k[3]), dtype), ((b, k[1], total, v[3]), dtype),
                ((b, hq, sq, total), dtype)]
        return outs[:len(ctx.op.output)]


def _split_heads(x, n):
    b, s, hidden = x.shape
    return x.reshape(b, s, n, hidden // n).transpose(0, 2, 1, 3)


def _allowed(a, sq, total, offset):
    """Boolean (batch or 1, 1, sq, total) of the keys each query may see (causal, window)."""
    i = np.arange(sq).reshape(1, 1, sq, 1) + np.reshape(offset, (-1, 1, 1, 1))  # absolute position
    j = np.arange(total).reshape(1, 1, 1, total)
    ok = np.ones(np.broadcast_shapes(i.shape, j.shape), bool)
    if a["is_causal"]:
        ok &= j <= i
    if a["left"] >= 0:
        ok &= i - j <= a["left"]
    if a["right"] >= 0:
        ok &= j - i <= a["right"]
    return ok


def _mask_bias(mask, total, dtype):
    """A float bias from the user's mask, its key axis padded to `total` (padding: masked)."""
    pad = total - mask.shape[-1]
    if mask.dtype == np.bool_:
        if pad > 0:
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=False)
        return np.where(mask, dtype.type(0), dtype.type(-np.inf))
    mask = mask.astype(dtype)
    if pad > 0:
        mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=-np.inf)
    return mask


def attention(q, k, v, mask, past_k, past_v, nonpad, a):
    """Reference attention; returns Y, present K, present V, the qk output (numpy)."""
    out_dtype = q.dtype
    dtype = np.result_type(q.dtype, np.float32)
    q, k, v = (x.astype(dtype, copy=False) for x in (q, k, v))
    three_d = q.ndim == 3
    if three_d:
        q, k, v = _split_heads(q, a["q_heads"]), _split_heads(k, a["kv_heads"]), _split_heads(v, a["kv_heads"])
    if past_k is not None:
        k = np.concatenate([past_k.astype(dtype), k], axis=2)
        v = np.concatenate([past_v.astype(dtype), v], axis=2)
    present_k, present_v = k, v
    sq, total = q.shape[2], k.shape[2]
    if past_k is not None:
        offset = past_k.shape[2]
    elif nonpad is not None:
        offset = np.asarray(nonpad, np.int64).reshape(-1) - sq
    else:
        offset = 0
    bias = np.where(_allowed(a, sq, total, offset), dtype.type(0), dtype.type(-np.inf))
    if nonpad is not None:
        keep = np.arange(total) < np.asarray(nonpad, np.int64).reshape(-1, 1, 1, 1)
        bias = bias + np.where(keep, dtype.type(0), dtype.type(-np.inf))
    if mask is not None:
        bias = bias + _mask_bias(mask, total, dtype)
    reps = q.shape[1] // k.shape[1]
    if reps > 1:
        k, v = np.repeat(k, reps, axis=1), np.repeat(v, reps, axis=1)
    root = dtype.type(np.sqrt(a["scale"] if a["scale"] else 1.0 / np.sqrt(q.shape[3])))
    scores = (q * root) @ (k * root).transpose(0, 1, 3, 2)
    if a["softcap"] > 0:
        scores = a["softcap"] * np.tanh(scores / a["softcap"])
    qk = scores
    scores = scores + bias
    if a["qk_mode"] == 2:
        qk = scores
    dead = np.isneginf(bias.max(axis=-1, keepdims=True))  # no key left for this query
    top = np.where(dead, 0, scores.max(axis=-1, keepdims=True))
    e = np.exp(scores - top)
    total_e = e.sum(axis=-1, keepdims=True)
    probs = np.where(dead, dtype.type(0), e / np.where(total_e == 0, 1, total_e))
    if a["qk_mode"] == 3:
        qk = probs
    y = probs @ v
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], sq, -1)
    return [x.astype(out_dtype, copy=False) for x in (y, present_k, present_v, qk)]


@kernel("Attention", "cpu")
class AttentionCpu(Kernel):
    def setup(self, ctx):
        self.has = [bool(ctx.arg(n, 0)) for n in ("has_mask", "has_past", "has_nonpad")]
        self.args = {"q_heads": int(ctx.arg("q_num_heads")), "kv_heads": int(ctx.arg("kv_num_heads")),
                     "scale": float(ctx.arg("scale")), "is_causal": bool(ctx.arg("is_causal")),
                     "left": int(ctx.arg("left_window")), "right": int(ctx.arg("right_window")),
                     "softcap": float(ctx.arg("softcap")), "qk_mode": int(ctx.arg("qk_mode"))}

    def run(self, inputs, outputs):
        rest = iter(inputs[3:])
        mask = next(rest) if self.has[0] else None
        past_k, past_v = (next(rest), next(rest)) if self.has[1] else (None, None)
        nonpad = next(rest) if self.has[2] else None
        results = attention(*inputs[:3], mask, past_k, past_v, nonpad, self.args)
        for out, value in zip(outputs, results):
            np.copyto(out, value, casting="unsafe")
