"""A small BERT-style encoder written with onnx.helper, node for node as torch.onnx exports one.

torch is not a test dependency (its PyPI wheel pulls ~3 GB of CUDA libraries), so this
module reproduces the node patterns the TorchScript exporter emits for a Hugging Face
`BertModel` (and its sentence-transformers mean pooling) instead:

- sequence length and batch size read at run time: `Shape -> Gather(scalar) -> Unsqueeze`
  pieces joined by `Concat` into Reshape / Expand targets;
- position ids as a buffered `Slice` (older exports) or `Range(0, seq_len, 1)` (newer);
  token type ids as a buffered zeros tensor `Expand`ed through torch's
  `ConstantOfShape -> Mul(-1) -> Equal -> Where` pattern for `expand(-1, ...)`;
- `Gather` embeddings of int64 token ids;
- the extended attention mask: `Unsqueeze`, `Cast`, `Sub(1, m)`, `Mul(finfo.min)` (older) or
  `Expand`, `Sub`, `Cast(bool)`, `Where(.., finfo.min, ..)` (newer);
- batched 4-D `MatMul` for scores and context, `Div(sqrt(d))`, `Softmax(-1)`;
- LayerNorm decomposed (`ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add`) before
  opset 17, `LayerNormalization` from 17; GELU as `Div(sqrt 2), Erf, Add(1), Mul, Mul(0.5)`
  (or the `Gelu` op at opset 20);
- mean pooling: `Unsqueeze(mask, -1) -> Expand(Shape(h)) -> Cast -> Mul -> ReduceSum / Clip`.

Weights are random but scaled like a trained model's (so the softmax is not flat).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F32_MIN = float(np.finfo(np.float32).min)


class _Builder:
    def __init__(self, opset: int, seed: int):
        self.opset = opset
        self.nodes, self.inits = [], []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def name(self, hint: str) -> str:
        self.count += 1
        return f"/{hint}_{self.count}"

    def const(self, value, hint="Constant") -> str:
        """A Constant node, as torch.onnx emits for literals (scalars stay 0-d)."""
        out = self.name(hint) + "_output_0"
        self.nodes.append(helper.make_node("Constant", [], [out], name=self.name(hint),
                                           value=numpy_helper.from_array(np.asarray(value))))
        return out

    def init(self, value, hint) -> str:
        name = f"{hint}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type, inputs, n_out=1, **attrs):
        base = self.name(op_type)
        outs = [f"{base}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=base, **attrs))
        return outs[0] if n_out == 1 else outs

    # ---- shape idioms ------------------------------------------------------------------
    def unsqueeze(self, x, axes):
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.const(np.array(axes, np.int64))])
        return self.op("Unsqueeze", [x], axes=axes)

    def dim(self, x, i):
        """x.size(i): Shape -> Gather(0-d index) -> a 0-d int64."""
        return self.op("Gather", [self.op("Shape", [x]), self.const(np.array(i, np.int64))], axis=0)

    def reduce_mean(self, x, axes):
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.const(np.array(axes, np.int64))], keepdims=1)
        return self.op("ReduceMean", [x], axes=axes, keepdims=1)

    def expand_like_torch(self, x, sizes):
        """x.expand(sizes) as torch exports it: -1 entries replaced through a Where."""
        n = self.const(np.array([2], np.int64))
        ones = self.op("ConstantOfShape", [n], value=helper.make_tensor("v", TensorProto.INT64, [1], [1]))
        minus = self.op("Mul", [ones, self.const(np.array(-1, np.int64))])
        eq = self.op("Equal", [sizes, minus])
        return self.op("Expand", [x, self.op("Where", [eq, ones, sizes])])

    # ---- layers ------------------------------------------------------------------------
    def weight(self, shape, hint, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return self.init((self.rng.standard_normal(shape) * scale).astype(np.float32), hint)

    def linear(self, x, n_in, n_out, hint):
        w = self.weight((n_in, n_out), f"onnx::MatMul_{hint}")  # torch stores W^T for MatMul
        b = self.init((self.rng.standard_normal(n_out) * 0.1).astype(np.float32), f"{hint}.bias")
        return self.op("Add", [b, self.op("MatMul", [x, w])])  # torch: Add(bias, MatMul)

    def layer_norm(self, x, hidden, hint):
        g = self.init((1 + 0.1 * self.rng.standard_normal(hidden)).astype(np.float32), f"{hint}.weight")
        b = self.init((0.1 * self.rng.standard_normal(hidden)).astype(np.float32), f"{hint}.bias")
        if self.opset >= 17:
            return self.op("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-12)
        mean = self.reduce_mean(x, [-1])
        centred = self.op("Sub", [x, mean])
        var = self.reduce_mean(self.op("Pow", [centred, self.const(np.array(2.0, np.float32))]), [-1])
        std = self.op("Sqrt", [self.op("Add", [var, self.const(np.array(1e-12, np.float32))])])
        normed = self.op("Div", [centred, std])
        return self.op("Add", [self.op("Mul", [normed, g]), b])

    def gelu(self, x):
        if self.opset >= 20:
            return self.op("Gelu", [x])
        erf = self.op("Erf", [self.op("Div", [x, self.const(np.array(1.4142135381698608, np.float32))])])
        half = self.op("Mul", [x, self.op("Add", [erf, self.const(np.array(1.0, np.float32))])])
        return self.op("Mul", [half, self.const(np.array(0.5, np.float32))])

    def split_heads(self, x, heads, head_dim):
        """transpose_for_scores: view(B, S, heads, d) with B and S read at run time."""
        b = self.unsqueeze(self.dim(x, 0), [0])
        s = self.unsqueeze(self.dim(x, 1), [0])
        target = self.op("Concat", [b, s, self.const(np.array([heads], np.int64)),
                                    self.const(np.array([head_dim], np.int64))], axis=0)
        return self.op("Transpose", [self.op("Reshape", [x, target])], perm=[0, 2, 1, 3])


def bert_encoder(opset: int = 14, vocab: int = 100, hidden: int = 32, heads: int = 4,
                 layers: int = 2, intermediate: int = 64, max_pos: int = 64, seed: int = 0,
                 newer: bool = False, pooled: bool = True):
    """(ModelProto, output names). Inputs: input_ids, attention_mask (int64 [batch, seq]).

    `newer` switches to the patterns recent transformers/torch versions emit (Range
    position ids, Where-based mask); outputs are last_hidden_state, pooler_output and
    (with `pooled`) the mean-pooled sentence embedding.
    """
    bld = _Builder(opset, seed)
    head_dim = hidden // heads
    ids, mask = "input_ids", "attention_mask"

    # embeddings
    seq_len = bld.dim(ids, 1)
    if newer:
        positions = bld.unsqueeze(bld.op("Range", [bld.const(np.array(0, np.int64)), seq_len,
                                                   bld.const(np.array(1, np.int64))]), [0])
    else:
        buffered = bld.init(np.arange(max_pos, dtype=np.int64)[None], "embeddings.position_ids")
        positions = bld.op("Slice", [buffered, bld.const(np.array([0], np.int64)),
                                     bld.unsqueeze(seq_len, [0]), bld.const(np.array([1], np.int64)),
                                     bld.const(np.array([1], np.int64))])
    zeros = bld.init(np.zeros((1, max_pos), np.int64), "embeddings.token_type_ids")
    tt = bld.op("Slice", [zeros, bld.const(np.array([0], np.int64)), bld.unsqueeze(seq_len, [0]),
                          bld.const(np.array([1], np.int64)), bld.const(np.array([1], np.int64))])
    batch = bld.unsqueeze(bld.dim(ids, 0), [0])
    tt = bld.expand_like_torch(tt, bld.op("Concat", [batch, bld.unsqueeze(seq_len, [0])], axis=0))
    word = bld.op("Gather", [bld.weight((vocab, hidden), "embeddings.word_embeddings.weight", 1.0), ids])
    typ = bld.op("Gather", [bld.weight((2, hidden), "embeddings.token_type_embeddings.weight", 0.5), tt])
    pos = bld.op("Gather", [bld.weight((max_pos, hidden), "embeddings.position_embeddings.weight", 0.5),
                            positions])
    h = bld.layer_norm(bld.op("Add", [bld.op("Add", [word, typ]), pos]), hidden, "embeddings.LayerNorm")

    # extended attention mask [B, 1, 1, S]: 0 where attended, float32 min where padded
    m4 = bld.unsqueeze(bld.unsqueeze(mask, [1]), [2])
    one = bld.const(np.array(1.0, np.float32))
    if newer:
        shape4 = bld.op("Concat", [batch, bld.const(np.array([1, 1], np.int64)),
                                   bld.unsqueeze(seq_len, [0])], axis=0)
        inverted = bld.op("Sub", [one, bld.op("Cast", [bld.op("Expand", [m4, shape4])], to=TensorProto.FLOAT)])
        ext = bld.op("Where", [bld.op("Cast", [inverted], to=TensorProto.BOOL),
                               bld.const(np.array(F32_MIN, np.float32)), inverted])
    else:
        inverted = bld.op("Sub", [one, bld.op("Cast", [m4], to=TensorProto.FLOAT)])
        ext = bld.op("Mul", [inverted, bld.const(np.array(F32_MIN, np.float32))])

    for i in range(layers):
        p = f"encoder.layer.{i}"
        q = bld.split_heads(bld.linear(h, hidden, hidden, f"{p}.attention.self.query"), heads, head_dim)
        k = bld.split_heads(bld.linear(h, hidden, hidden, f"{p}.attention.self.key"), heads, head_dim)
        v = bld.split_heads(bld.linear(h, hidden, hidden, f"{p}.attention.self.value"), heads, head_dim)
        scores = bld.op("MatMul", [q, bld.op("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = bld.op("Add", [bld.op("Div", [scores, bld.const(np.array(np.sqrt(head_dim), np.float32))]),
                                ext])
        probs = bld.op("Softmax", [scores], axis=-1 if opset >= 13 else 3)
        ctx = bld.op("Transpose", [bld.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        # context.view(B, S, hidden): Shape -> Slice(0, -2) -> Concat with the new last dim
        lead = bld.op("Slice", [bld.op("Shape", [ctx]), bld.const(np.array([0], np.int64)),
                                bld.const(np.array([-2], np.int64)), bld.const(np.array([0], np.int64))])
        ctx = bld.op("Reshape", [ctx, bld.op("Concat", [lead, bld.const(np.array([hidden], np.int64))], axis=0)])
        attn = bld.linear(ctx, hidden, hidden, f"{p}.attention.output.dense")
        h = bld.layer_norm(bld.op("Add", [attn, h]), hidden, f"{p}.attention.output.LayerNorm")
        inter = bld.gelu(bld.linear(h, hidden, intermediate, f"{p}.intermediate.dense"))
        out = bld.linear(inter, intermediate, hidden, f"{p}.output.dense")
        h = bld.layer_norm(bld.op("Add", [out, h]), hidden, f"{p}.output.LayerNorm")

    outputs = {"last_hidden_state": h}
    first = bld.op("Gather", [h, bld.const(np.array(0, np.int64))], axis=1)
    outputs["pooler_output"] = bld.op("Tanh", [bld.linear(first, hidden, hidden, "pooler.dense")])
    if pooled:  # sentence-transformers mean pooling over the attended tokens
        m3 = bld.op("Cast", [bld.op("Expand", [bld.unsqueeze(mask, [-1]), bld.op("Shape", [h])])],
                    to=TensorProto.FLOAT)
        summed = bld.op("ReduceSum", [bld.op("Mul", [h, m3]), bld.const(np.array([1], np.int64))],
                        keepdims=0) if opset >= 13 else \
            bld.op("ReduceSum", [bld.op("Mul", [h, m3])], axes=[1], keepdims=0)
        counts = bld.op("ReduceSum", [m3, bld.const(np.array([1], np.int64))], keepdims=0) if opset >= 13 \
            else bld.op("ReduceSum", [m3], axes=[1], keepdims=0)
        clip_min = bld.const(np.array(1e-9, np.float32))
        counts = bld.op("Clip", [counts, clip_min]) if opset >= 11 else bld.op("Clip", [counts], min=1e-9)
        outputs["sentence_embedding"] = bld.op("Div", [summed, counts])

    # rename the final tensors to the output names
    for name, tensor in outputs.items():
        bld.nodes.append(helper.make_node("Identity", [tensor], [name], name=f"/{name}"))
    graph = helper.make_graph(
        bld.nodes, "bert",
        [helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT,
                                       ["batch", "sequence", hidden] if n == "last_hidden_state"
                                       else ["batch", hidden]) for n in outputs],
        initializer=bld.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pytorch", producer_version="2.1.0")
    model.ir_version = 7 if opset <= 15 else (8 if opset <= 18 else 10)
    return model, list(outputs)


def token_batch(batch: int = 2, seq: int = 8, vocab: int = 100, seed: int = 0):
    """(input_ids, attention_mask): [CLS] ... [SEP] then padding, rows of different lengths."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((batch, seq), np.int64)
    mask = np.zeros((batch, seq), np.int64)
    for r in range(batch):
        n = seq - (r * 3) % (seq - 2)  # first row full, later rows padded
        ids[r, :n] = rng.integers(5, vocab, n)
        ids[r, 0], ids[r, n - 1] = 1, 2  # [CLS], [SEP]
        mask[r, :n] = 1
    return ids, mask
