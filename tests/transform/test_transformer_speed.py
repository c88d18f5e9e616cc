"""What makes a transformer encoder run at speed (issue 22, real-model latency), against
onnxruntime: torch.onnx's decomposed GELU fused into one Activation (fuse_gelu), and
attention's 4-D MatMuls on the fast kernel (a reference MatMul runs on OpenBLAS's threads,
not the compute pool)."""
import numpy as np
import pytest
from onnx import helper

from mace.ops.fast.binding import FAST_TAG, reference_blas
from tests.ops.onnx_case import rand
from tests.ops.onnx_encoder import bert_encoder, token_batch
from tests.ops.onnx_graph import check_model, graph_model, op_types

F32 = np.float32
SQRT2 = np.array(1.4142135381698608, F32)


def _gelu_nodes(x, y, half_first=False, by_mul=False):
    scale = (helper.make_node("Mul", [x, "rsqrt2"], ["a"]) if by_mul
             else helper.make_node("Div", [x, "sqrt2"], ["a"]))
    nodes = [scale, helper.make_node("Erf", ["a"], ["e"]), helper.make_node("Add", ["one", "e"], ["e1"])]
    if half_first:   # (x * 0.5) * (1 + erf)
        return nodes + [helper.make_node("Mul", [x, "half"], ["xh"]),
                        helper.make_node("Mul", ["xh", "e1"], [y])]
    return nodes + [helper.make_node("Mul", [x, "e1"], ["m"]), helper.make_node("Mul", ["m", "half"], [y])]


GELU_CONSTS = {"sqrt2": SQRT2, "rsqrt2": np.array(1 / np.sqrt(2), F32), "one": np.array(1.0, F32),
               "half": np.array(0.5, F32)}


@pytest.mark.parametrize("half_first,by_mul", [(False, False), (True, False), (False, True)])
def test_decomposed_gelu_after_a_dense_layer_becomes_one_activation(half_first, by_mul):
    x = rand(1, 16, 24, low=-2, high=2)
    w = rand(24, 40, seed=1)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), *_gelu_nodes("h", "y", half_first, by_mul)]
    got, engine = check_model(graph_model(nodes, {"x": x}, {"y": F32}, {**GELU_CONSTS, "w": w}), {"x": x})
    assert op_types(engine) == ["FullyConnected", "Activation"]
    (act,) = [op for op in engine.graph.net.op if op.type == "Activation"]
    assert [a.s for a in act.arg if a.name == "activation"] == [b"GELU"]
    assert len(act.framework_op) == 5   # the five framework ops it replaced, for the reports
    assert np.abs(got[0]).max() > 0.5   # not a degenerate (flat) output


def test_gelu_pieces_read_elsewhere_stay_as_they_are():
    """An intermediate (here erf's output) that is also a model output keeps the ops."""
    x = rand(2, 8, low=-3, high=3)
    model = graph_model(_gelu_nodes("x", "y"), {"x": x}, {"y": F32, "e": F32}, GELU_CONSTS)
    _, engine = check_model(model, {"x": x})
    assert "Activation" not in op_types(engine)


def test_gelu_with_another_constant_is_not_fused():
    """x * 0.6 * (1 + erf(x / sqrt 2)) is not a GELU."""
    x = rand(2, 8, low=-3, high=3)
    consts = {**GELU_CONSTS, "half": np.array(0.6, F32)}
    model = graph_model(_gelu_nodes("x", "y"), {"x": x}, {"y": F32}, consts)
    _, engine = check_model(model, {"x": x})
    assert "Activation" not in op_types(engine)


@pytest.mark.parametrize("a_shape,b_shape", [((1, 12, 16, 32), (1, 12, 32, 16)),   # attention scores
                                             ((2, 3, 4, 5, 6), (2, 3, 4, 6, 7)),    # rank 5
                                             ((1, 3, 4, 5), (5, 7)),                # one shared matrix
                                             ((1, 1, 4, 5), (2, 3, 5, 7))])         # a batch of one
def test_batched_matmul_of_any_rank_runs_on_the_fast_kernel(a_shape, b_shape):
    a, b = rand(*a_shape), rand(*b_shape, seed=1)
    model = graph_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, {"y": F32})
    _, engine = check_model(model, {"a": a, "b": b})
    (node,) = engine.nodes
    assert node.tag == FAST_TAG
    assert not reference_blas(engine.nodes)


def test_broadcast_batch_matmul_stays_on_the_reference():
    """[2, 1] x [1, 3] batch axes broadcast element-wise: the reference's np.matmul does it."""
    a, b = rand(2, 1, 4, 5), rand(1, 3, 5, 6, seed=1)
    model = graph_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, {"y": F32})
    _, engine = check_model(model, {"a": a, "b": b})
    assert engine.nodes[0].tag != FAST_TAG


@pytest.mark.parametrize("opset", [13, 17])
def test_bert_encoder_has_no_reference_blas_kernel_and_one_gelu_per_layer(opset):
    model, _ = bert_encoder(opset=opset, newer=True, layers=2)
    ids, mask = token_batch()
    _, engine = check_model(model, {"input_ids": ids, "attention_mask": mask}, rtol=1e-4, atol=1e-4)
    gelus = [op for op in engine.graph.net.op if op.type == "Activation"
             and any(a.name == "activation" and a.s == b"GELU" for a in op.arg)]
    assert len(gelus) == 2
    assert op_types(engine).count("LayerNorm") == 5   # embeddings + 2 a layer, decomposed or not
    assert not any(a.s == b"ERF" for op in engine.graph.net.op for a in op.arg)
    assert not reference_blas(engine.nodes)


# ---- onnxruntime QDQ exports: HardSwish inlined with a Q/DQ pair on its gate -----------------
def _qdq_hardswish_model(gate_scale):
    """Conv -> HardSigmoid(1/6, 1/2) -> QuantizeLinear/DequantizeLinear (uint8, `gate_scale`)
    -> Mul by the Conv's output: what quantize_static writes for a HardSwish."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("HardSigmoid", ["c"], ["g"], alpha=1 / 6, beta=0.5),
             helper.make_node("QuantizeLinear", ["g", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
             helper.make_node("Mul", ["c", "dq"], ["y"])]
    consts = {"w": rand(8, 3, 3, 3, seed=1), "b": rand(8, seed=2), "s": np.array(gate_scale, F32),
              "z": np.array(0, np.uint8)}
    return graph_model(nodes, {"x": rand(1, 3, 12, 12, low=-4, high=4)}, {"y": F32}, consts, opset=13)


def _ours(model, x, skip=(), lowered=True):
    """Our output and op types; `lowered`: the pairs become clamps, as when quantizing
    (lower_fake_quantize), the quantize pass itself left out so the graph stays float."""
    from mace import onnx_backend

    options = {"skip_passes": list(skip) + ["quantize"], "quantize": lowered}
    engine = onnx_backend.prepare(model, {"x": x}, options=options)
    return engine.run({"x": x})["y"], op_types(engine)


def test_qdq_hardswish_becomes_the_convs_fused_activation():
    model = _qdq_hardswish_model(1 / 255)   # the gate's range [0, 1]: its clamp is the identity
    x = rand(1, 3, 12, 12, low=-4, high=4)
    got, types = _ours(model, x)
    unfused, before = _ours(model, x, skip=["fuse_hardswish"])
    assert before.count("Activation") == 2 and "Eltwise" in before   # HardSigmoid, clamp; Mul
    assert "Activation" not in types and "Eltwise" not in types, types
    np.testing.assert_allclose(got, unfused, rtol=1e-5, atol=1e-5)   # the pass changes nothing
    from tests.ops.onnx_case import run_ort
    want = run_ort(model, {"x": x})[0]   # onnxruntime also rounds the gate to 1/255 steps
    np.testing.assert_allclose(got, want, atol=np.abs(want).max() / 255)
    # a float run keeps the gate's rounding (FakeQuantize): no HardSwish to fuse
    exact, float_types = _ours(model, x, lowered=False)
    assert "FakeQuantize" in float_types and "FakeQuantize" not in types
    np.testing.assert_allclose(exact, want, rtol=1e-5, atol=1e-5)


def test_qdq_gate_clamped_below_one_is_kept():
    """A gate quantized to [0, 0.6] (its calibration range) really clamps: not a HardSwish."""
    model = _qdq_hardswish_model(0.6 / 255)
    x = rand(1, 3, 12, 12, low=-4, high=4)
    got, types = _ours(model, x)
    assert "Eltwise" in types
    unfused, _ = _ours(model, x, skip=["fuse_hardswish"])
    np.testing.assert_allclose(got, unfused, rtol=1e-6, atol=1e-6)


# ---- torch.onnx's decomposed LayerNorm (opset < 17) --------------------------------------------
def _decomposed_layer_norm(opset, eps_reader=False):
    from onnx import helper as h

    if opset >= 18:
        mean = lambda a, o: [h.make_node("ReduceMean", [a, "axes"], [o])]  # noqa: E731
    else:
        mean = lambda a, o: [h.make_node("ReduceMean", [a], [o], axes=[-1])]  # noqa: E731
    nodes = [*mean("x", "mu"), h.make_node("Sub", ["x", "mu"], ["d"]),
             h.make_node("Pow", ["d", "two"], ["d2"]), *mean("d2", "var"),
             h.make_node("Add", ["var", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["sd"]),
             h.make_node("Div", ["d", "sd"], ["n"]), h.make_node("Mul", ["n", "g"], ["ng"]),
             h.make_node("Add", ["ng", "b"], ["y"])]
    consts = {"two": np.array(2.0, F32), "eps": np.array(1e-12, F32), "g": rand(16, seed=1),
              "b": rand(16, seed=2), "axes": np.array([-1], np.int64)}
    outputs = {"y": F32, **({"sd": F32} if eps_reader else {})}
    return graph_model(nodes, {"x": rand(2, 5, 16, low=-3, high=5)}, outputs, consts, opset)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_decomposed_layer_norm_becomes_one_op(opset):
    x = rand(2, 5, 16, low=-3, high=5)
    _, engine = check_model(_decomposed_layer_norm(opset), {"x": x})
    assert op_types(engine) == ["LayerNorm"]
    assert len(engine.graph.net.op[0].framework_op) == 9


def test_decomposed_layer_norm_with_a_piece_read_elsewhere_stays():
    x = rand(2, 5, 16, low=-3, high=5)
    _, engine = check_model(_decomposed_layer_norm(13, eps_reader=True), {"x": x})
    assert "LayerNorm" not in op_types(engine)
