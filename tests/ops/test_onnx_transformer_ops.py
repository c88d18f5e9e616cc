"""What transformer exports need (issue 22, frontend depth), against onnxruntime:

1-element tensors where ONNX means a scalar; shape sub-graphs of mixed ranks folded at
convert; int64/int32 token ids and masks; batched 4-D MatMul, Softmax on any axis,
LayerNormalization and its decomposed form, Erf / Gelu, Einsum; opsets 7 to 21; a
fully masked Softmax row; Cast to DOUBLE; and a BERT-style encoder written node for node
as torch.onnx exports one (tests/ops/onnx_encoder.py).
"""
import numpy as np
import pytest
from onnx import TensorProto, helper

from mace import onnx_backend
from mace.errors import ModelError
from mace.runtime.engine import Engine
from tests.ops.onnx_case import check, rand, run_ort
from tests.ops.onnx_encoder import bert_encoder, token_batch
from tests.ops.onnx_graph import check_model, check_op, graph_model, op_types

I64 = np.int64
F32 = np.float32


def ints(*v):
    return np.array(v, I64)


# ---- 1-element tensors where a scalar is meant -------------------------------------------
@pytest.mark.parametrize("opset", [11, 13, 21])
@pytest.mark.parametrize("shape", [(1,), ()])
def test_clip_min_max_as_one_element_tensors(opset, shape):
    """Paddle2ONNX gives Clip's min/max as shape [1]; onnxruntime runs them."""
    x = rand(2, 3, 4, low=-2, high=8)
    lo, hi = np.full(shape, 0.0, F32), np.full(shape, 6.0, F32)
    check("Clip", {"x": x}, {"lo": lo, "hi": hi}, opset=opset)
    check("Clip", {"x": x}, {"hi": np.full(shape, 0.5, F32)}, input_order=["x", "", "hi"], opset=opset)
    check("Clip", {"x": x}, {"lo": np.full(shape, -0.25, F32)}, opset=opset)


def test_clip_many_element_min_is_refused_naming_the_node():
    from tests.ops.onnx_case import make_model

    model = make_model("Clip", {"x": rand(2, 3)}, {"lo": np.zeros(2, F32)})
    with pytest.raises(ModelError, match=r"Clip 'Clip_y0': min \(input 'lo'\) must be a scalar or a "
                                         r"1-element tensor, got shape \[2\]"):
        onnx_backend.prepare(model, {"x": rand(2, 3)})


def _same_as_scalar_model(nodes, inputs, consts_1d, out_type=F32, opset=13):
    """Run `nodes` with `consts_1d` as [1]-shaped tensors through us, and with them as 0-d
    scalars through onnxruntime (which refuses [1] where the spec says scalar)."""
    ours = graph_model(nodes, inputs, {"y": out_type}, {k: v.reshape(1) for k, v in consts_1d.items()}, opset)
    ref = graph_model(nodes, inputs, {"y": out_type}, {k: v.reshape(()) for k, v in consts_1d.items()}, opset)
    got = onnx_backend.run(ours, inputs)[0]
    want = run_ort(ref, inputs)[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)
    return got


def test_clip_min_max_of_any_one_element_shape():
    """[1, 1] too (onnxruntime itself takes only 0-d and [1]; the 0-d model is the reference)."""
    x = rand(2, 3, 4, low=-2, high=8)
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])]
    consts = {"lo": np.array(0.5, F32), "hi": np.array(6.0, F32)}
    ours = graph_model(nodes, {"x": x}, {"y": F32}, {k: v.reshape(1, 1) for k, v in consts.items()})
    want = run_ort(graph_model(nodes, {"x": x}, {"y": F32}, consts), {"x": x})[0]
    np.testing.assert_array_equal(onnx_backend.run(ours, {"x": x})[0], want)


def test_range_from_one_element_tensors():
    """Range(start, S * 2, delta) with every operand of shape [1]; onnxruntime refuses [1]
    here, so it runs the same model with 0-d operands."""
    x = rand(2, 4)
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["n"]),
             helper.make_node("Mul", ["n", "two"], ["limit"]),
             helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
             helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "rf"], ["y"])]
    got = _same_as_scalar_model(nodes, {"x": x}, {"start": ints(0), "delta": ints(2), "one": ints(1),
                                                  "two": ints(2)})
    np.testing.assert_allclose(got, x + np.arange(0, 8, 2, dtype=F32))


def test_pad_constant_value_as_one_element_tensor():
    x = rand(1, 2, 3, 3)
    check("Pad", {"x": x}, {"pads": ints(0, 0, 1, 2, 0, 0, 2, 1), "v": np.array([2.5], F32)})


def test_constant_of_shape_value_and_shape():
    """A [1]-shaped `value` attribute (the spec's form) and a shape read from Shape."""
    x = rand(2, 3)
    model = graph_model(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("ConstantOfShape", ["s"], ["c"],
                          value=helper.make_tensor("v", TensorProto.INT64, [1], [3])),
         helper.make_node("Cast", ["c"], ["cf"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x", "cf"], ["y"])], {"x": x}, {"y": F32})
    _, engine = check_model(model, {"x": x})
    assert op_types(engine) == ["Eltwise"]


# ---- shape sub-graphs of mixed ranks fold at convert ---------------------------------------
def _unsqueeze(name, out, axes, opset):
    if opset >= 13:
        return [helper.make_node("Constant", [], [f"{out}_axes"], value_ints=axes),
                helper.make_node("Unsqueeze", [name, f"{out}_axes"], [out])]
    return [helper.make_node("Unsqueeze", [name], [out], axes=axes)]


def _squeeze(name, out, axes, opset):
    if opset >= 13:
        return [helper.make_node("Constant", [], [f"{out}_axes"], value_ints=axes),
                helper.make_node("Squeeze", [name, f"{out}_axes"], [out])]
    return [helper.make_node("Squeeze", [name], [out], axes=axes)]


@pytest.mark.parametrize("opset", [11, 13, 17, 21])
def test_reshape_target_from_mixed_rank_pieces(opset):
    """x.view(B, S, heads, hidden // heads): 0-d Gathers, Unsqueezes, a Squeezed Slice,
    int64 Div, and 1-D constants joined by one Concat, as torch.onnx exports it."""
    x = rand(2, 5, 12)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),             # 0-d
             helper.make_node("Slice", ["s", "one", "two", "zero"], ["s1"]),     # [1]
             *_squeeze("s1", "seq", [0], opset),                                  # 0-d
             helper.make_node("Gather", ["s", "i2"], ["hid"], axis=0),           # 0-d
             helper.make_node("Div", ["hid", "heads"], ["hd"]),                  # 0-d int64
             *_unsqueeze("b", "b1", [0], opset), *_unsqueeze("seq", "s2", [0], opset),
             *_unsqueeze("hd", "hd1", [0], opset),
             helper.make_node("Concat", ["b1", "s2", "heads1", "hd1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    consts = {"i0": np.array(0, I64), "i2": np.array(2, I64), "one": ints(1), "two": ints(2),
              "zero": ints(0), "heads": np.array(3, I64), "heads1": ints(3)}
    model = graph_model(nodes, {"x": x}, {"y": F32}, consts, opset)
    got, engine = check_model(model, {"x": x})
    assert got[0].shape == (2, 5, 3, 4)
    assert op_types(engine) == ["Reshape"]  # the whole shape computation folded


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_torch_expand_pattern_and_range_fold(opset):
    """tensor.expand(B, -1) and arange(S) with B, S read from the input's shape."""
    x = rand(3, 6)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"]), helper.make_node("Gather", ["s", "i1"], ["n"]),
             helper.make_node("Range", ["zero", "n", "step"], ["pos"]),                     # [S]
             *_unsqueeze("pos", "pos2", [0], opset),                                      # [1, S]
             *_unsqueeze("b", "b1", [0], opset),
             helper.make_node("Concat", ["b1", "minus1"], ["sizes"], axis=0),
             helper.make_node("ConstantOfShape", ["two"], ["ones"],
                              value=helper.make_tensor("v", TensorProto.INT64, [1], [1])),
             helper.make_node("Mul", ["ones", "m1"], ["neg"]),
             helper.make_node("Equal", ["sizes", "neg"], ["is_neg"]),
             helper.make_node("Where", ["is_neg", "ones", "sizes"], ["fixed"]),
             helper.make_node("Expand", ["pos2", "fixed"], ["grid"]),                     # [B, S]
             helper.make_node("Cast", ["grid"], ["gf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "gf"], ["y"])]
    consts = {"i0": np.array(0, I64), "i1": np.array(1, I64), "zero": np.array(0, I64),
              "step": np.array(1, I64), "minus1": ints(-1), "two": ints(2), "m1": np.array(-1, I64)}
    model = graph_model(nodes, {"x": x}, {"y": F32}, consts, opset)
    got, engine = check_model(model, {"x": x})
    np.testing.assert_allclose(got[0], x + np.arange(6, dtype=F32))
    assert op_types(engine) == ["Eltwise"]


# ---- int64 / int32 token ids and masks ------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_gather_embedding_of_token_ids(dtype):
    ids = np.random.default_rng(0).integers(0, 50, (2, 7)).astype(dtype)
    check("Gather", {"ids": ids}, {"w": rand(50, 16)}, input_order=["w", "ids"])


def test_attention_mask_arithmetic_on_int64_input():
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], I64)
    nodes = [*_unsqueeze("mask", "m4", [1, 2], 13),
             helper.make_node("Cast", ["m4"], ["mf"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "mf"], ["inv"]),
             helper.make_node("Mul", ["inv", "fmin"], ["y"])]
    model = graph_model(nodes, {"mask": mask}, {"y": F32},
                        {"one": np.array(1.0, F32), "fmin": np.array(np.finfo(F32).min, F32)})
    got, _ = check_model(model, {"mask": mask})
    assert got[0].shape == (2, 1, 1, 4)


# ---- transformer ops --------------------------------------------------------------------------
def test_batched_4d_matmul_both_at_run_time():
    check("MatMul", {"q": rand(2, 4, 6, 8), "k": rand(2, 4, 8, 6, seed=1)})


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_any_axis(op, axis, opset):
    check(op, {"x": rand(2, 3, 4, 5, low=-4, high=4)}, attrs={"axis": axis}, opset=opset)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("reference", [False, True])
def test_softmax_fully_masked_row(op, reference):
    """An all -inf row gives NaN as in onnxruntime, not a division-by-zero error in the
    compiled loop; partly masked rows give exact zeros; float32-min rows stay uniform."""
    x = rand(4, 6, low=-3, high=3)
    x[0] = -np.inf
    x[1, 2:] = -np.inf
    x[2] = np.finfo(F32).min
    from tests.ops.onnx_case import make_model

    model = make_model(op, {"x": x})
    want = run_ort(model, {"x": x})[0]
    # prepare's options reach the passes only: the engine's own pick the kernels
    engine = Engine(onnx_backend.prepare(model, {"x": x}).graph, options={"reference_kernels": reference})
    assert [n.tag for n in engine.nodes] == (["cpu"] if reference else ["cpu:fast"])
    got = engine.run({"x": x})["y0"]
    assert np.isnan(want[0]).all() and np.isnan(got[0]).all()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # NaNs compare equal here


@pytest.mark.parametrize("axis", [-1, -2, 1])
def test_layer_normalization(axis):
    x = rand(2, 5, 8)
    shape = x.shape[axis % 3:]
    check("LayerNormalization", {"x": x}, {"g": rand(*shape, seed=1), "b": rand(*shape, seed=2)},
          attrs={"axis": axis, "epsilon": 1e-6})


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_decomposed_layer_norm(opset):
    x = rand(2, 5, 16, low=-3, high=5)
    if opset >= 18:
        mean = lambda a, o: [helper.make_node("ReduceMean", [a, "axes"], [o])]  # noqa: E731
    else:
        mean = lambda a, o: [helper.make_node("ReduceMean", [a], [o], axes=[-1])]  # noqa: E731
    nodes = [*mean("x", "mu"), helper.make_node("Sub", ["x", "mu"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["d2"]), *mean("d2", "var"),
             helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["n"]), helper.make_node("Mul", ["n", "g"], ["ng"]),
             helper.make_node("Add", ["ng", "b"], ["y"])]
    consts = {"two": np.array(2.0, F32), "eps": np.array(1e-12, F32), "g": rand(16, seed=1),
              "b": rand(16, seed=2), "axes": ints(-1)}
    check_model(graph_model(nodes, {"x": x}, {"y": F32}, consts, opset), {"x": x})


def test_erf_gelu():
    x = rand(2, 8, low=-4, high=4)
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["a"]), helper.make_node("Erf", ["a"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["x", "e1"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    consts = {"sqrt2": np.array(1.4142135381698608, F32), "one": np.array(1.0, F32),
              "half": np.array(0.5, F32)}
    check_model(graph_model(nodes, {"x": x}, {"y": F32}, consts), {"x": x})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_op(approximate):
    check_op("Gelu", {"x": rand(3, 7, low=-5, high=5)}, attrs={"approximate": approximate}, opset=20)


@pytest.mark.parametrize("equation,shapes", [
    ("bhid,bhjd->bhij", [(2, 3, 4, 8), (2, 3, 5, 8)]),     # attention scores
    ("bhij,bhjd->bhid", [(2, 3, 4, 5), (2, 3, 5, 8)]),     # attention context
    ("bnqd,bnkd->bnqk", [(1, 2, 6, 4), (1, 2, 6, 4)]),
    ("bqhd,bkhd->bhqk", [(2, 5, 3, 4), (2, 6, 3, 4)]),     # heads not yet transposed
    ("bsd,hd->bsh", [(2, 3, 4), (5, 4)]),                  # a projection
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),                           # implicit output
    ("ij->ji", [(3, 4)]), ("ii->i", [(3, 3)]), ("abc->", [(2, 3, 4)]), ("i,i", [(5,), (5,)]),
])
def test_einsum(equation, shapes):
    check("Einsum", {f"x{i}": rand(*s, seed=i) for i, s in enumerate(shapes)}, attrs={"equation": equation})


def test_einsum_const_operand():
    check("Einsum", {"x": rand(2, 3, 4)}, {"w": rand(5, 4, seed=1)}, attrs={"equation": "bsd,hd->bsh"})


def test_einsum_bad_equation_is_refused_naming_the_node():
    from tests.ops.onnx_case import make_model

    model = make_model("Einsum", {"a": rand(2, 3), "b": rand(4, 5)}, attrs={"equation": "ij,jk->ik"})
    with pytest.raises(ModelError, match="Einsum 'Einsum_y0': label 'j' has sizes 3 and 4"):
        onnx_backend.prepare(model, {"a": rand(2, 3), "b": rand(4, 5)})


# ---- opsets 7 to 10 -----------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [7, 8, 9, 10])
def test_old_opsets(opset):
    x = rand(2, 3, 4, low=-3, high=3)
    check_op("Softmax", {"x": x}, attrs={"axis": 2}, opset=opset)
    check_op("Softmax", {"x": x}, attrs={"axis": 1}, opset=opset)  # flattens [1, rank)
    check_op("MatMul", {"a": rand(2, 3, 4, 5), "b": rand(2, 3, 5, 6, seed=1)}, opset=opset)
    check_op("Gather", {"i": ints(2, 0, 1)}, {"w": rand(4, 6)}, input_order=["w", "i"], opset=opset)
    check_op("Unsqueeze", {"x": x}, attrs={"axes": [0, 3]}, opset=opset)
    check_op("Squeeze", {"x": rand(2, 1, 4)}, attrs={"axes": [1]}, opset=opset)
    check_op("Clip", {"x": x}, attrs={"min": -1.0, "max": 2.0}, opset=opset)
    check_op("Concat", {"a": x, "b": rand(2, 3, 2, seed=1)}, attrs={"axis": -1}, opset=opset)
    check_op("ReduceMean", {"x": x}, attrs={"axes": [-1]}, opset=opset)
    check_op("Pow", {"x": rand(2, 3, low=0.5, high=2)}, {"e": np.array(2.0, F32)}, opset=opset)
    if opset >= 9:
        check_op("Erf", {"x": x}, opset=opset)
        check_op("Where", {"c": x > 0, "a": x, "b": -x}, opset=opset)
    if opset >= 8:
        check_op("Expand", {"x": rand(3, 1)}, {"s": ints(2, 3, 4)}, opset=opset)


# ---- Cast to DOUBLE ---------------------------------------------------------------------------
def test_cast_to_double_at_run_time_is_refused():
    from tests.ops.onnx_case import make_model

    model = make_model("Cast", {"x": rand(2, 3)}, attrs={"to": TensorProto.DOUBLE}, out_types=[np.float64])
    with pytest.raises(ModelError, match=r"node 'Cast_y0' \(Cast\) computes with tensor 'y0' in float64 "
                                         r"\(ONNX DOUBLE\) at run time"):
        onnx_backend.prepare(model, {"x": rand(2, 3)})


def test_cast_to_double_on_shapes_folds_exactly():
    """sqrt(float64(S)) computed while converting, then cast back: no double at run time."""
    x = rand(2, 3)
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "i"], ["g"]),
             helper.make_node("Cast", ["g"], ["d"], to=TensorProto.DOUBLE),
             helper.make_node("Sqrt", ["d"], ["r"]), helper.make_node("Cast", ["r"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "f"], ["y"])]
    _, engine = check_model(graph_model(nodes, {"x": x}, {"y": F32}, {"i": np.array(1, I64)}), {"x": x})
    assert op_types(engine) == ["Eltwise"]


# ---- a BERT-style encoder as torch.onnx exports it -----------------------------------------------
@pytest.mark.parametrize("opset,newer", [(10, False), (11, False), (13, True), (14, False), (17, True),
                                         (18, False), (20, True), (21, False)])
def test_bert_style_encoder(opset, newer):
    model, outputs = bert_encoder(opset=opset, newer=newer)
    ids, mask = token_batch()
    got, engine = check_model(model, {"input_ids": ids, "attention_mask": mask}, rtol=1e-4, atol=1e-4)
    assert [g.shape for g in got] == [(2, 8, 32), (2, 32), (2, 32)]
    # every shape computation folded: only the model's math is left to run
    left = set(op_types(engine))
    assert not left & {"Shape", "Range", "ConstantOfShape", "Concat", "StridedSlice"}, left
    assert "Gather" in left  # the word embedding of the run-time ids


# ---- ONNX Attention (opset 23) ----------------------------------------------------------
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_op_grouped_query_with_a_kv_cache_against_onnxruntime(causal):
    """torch.onnx at opset 23 exports scaled_dot_product_attention as one Attention node."""
    from tests.ops.onnx_case import run_ort

    rng = np.random.default_rng(12)
    q = rng.standard_normal((2, 4, 3, 8)).astype(F32)         # 4 query heads
    k = rng.standard_normal((2, 2, 3, 8)).astype(F32)         # 2 key/value heads (GQA)
    v = rng.standard_normal((2, 2, 3, 6)).astype(F32)
    past_k = rng.standard_normal((2, 2, 5, 8)).astype(F32)
    past_v = rng.standard_normal((2, 2, 5, 6)).astype(F32)
    mask = rng.random((3, 8)) > 0.2
    mask[:, 0] = True
    node = helper.make_node("Attention", ["q", "k", "v", "mask", "pk", "pv"], ["y", "present_k", "present_v"],
                            is_causal=causal)
    inputs = {"q": q, "k": k, "v": v, "pk": past_k, "pv": past_v}
    model = graph_model([node], inputs, {"y": F32, "present_k": F32, "present_v": F32}, {"mask": mask}, opset=23)
    got = onnx_backend.run(model, inputs)
    want = run_ort(model, inputs)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_with_position_ids_against_onnxruntime(interleaved):
    from tests.ops.onnx_case import run_ort

    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 5, 3 * 8)).astype(F32)          # 3-D: 3 heads of 8
    angles = np.arange(16)[:, None] / (10000 ** (np.arange(0, 6, 2) / 6))  # partial: 6 of 8 rotate
    cos, sin = np.cos(angles).astype(F32), np.sin(angles).astype(F32)
    pos = np.array([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]], I64)
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], num_heads=3,
                            rotary_embedding_dim=6, interleaved=interleaved)
    model = graph_model([node], {"x": x, "pos": pos}, {"y": F32}, {"cos": cos, "sin": sin}, opset=23)
    got = onnx_backend.run(model, {"x": x, "pos": pos})[0]
    np.testing.assert_allclose(got, run_ort(model, {"x": x, "pos": pos})[0], rtol=1e-5, atol=1e-6)


def test_onnxruntime_quantize_dynamic_encoder_against_onnxruntime(tmp_path):
    """quantize_dynamic turns every MatMul into DynamicQuantizeLinear -> MatMulInteger -> Mul,
    as the int8 transformer models people download are made."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from tests.ops.onnx_case import run_ort

    model, _ = bert_encoder(opset=14)
    onnx.save(model, tmp_path / "f.onnx")
    quantize_dynamic(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), weight_type=QuantType.QUInt8)
    qmodel = onnx.load(tmp_path / "q.onnx")
    kinds = {n.op_type for n in qmodel.graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= kinds
    ids, mask = token_batch()
    feeds = {"input_ids": ids, "attention_mask": mask}
    got = onnx_backend.run(qmodel, feeds)
    want = run_ort(qmodel, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        cos = float(np.dot(g.ravel(), w.ravel()) / (np.linalg.norm(g) * np.linalg.norm(w)))
        assert cos > 0.9999, cos
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3)
