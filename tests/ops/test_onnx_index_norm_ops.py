"""Index, sort, scatter and normalisation ops deployed models use, against onnxruntime.

TopK + GatherElements as a detector's post-processing picks its best boxes, CumSum of an
attention mask into position ids (int64), a causal mask from Trilu, OneHot labels, ScatterND /
ScatterElements updates (KV-cache style, reductions), GatherND, GroupNormalization (both
opsets' scale shapes), MeanVarianceNormalization, LpNormalization, Hardmax, the new unary math
and activations. RMSNormalization is newer than onnxruntime's opset: against numpy.
"""
import numpy as np
import pytest
from onnx import helper

from mace import onnx_backend
from mace.errors import ModelError
from tests.ops.onnx_case import check, make_model, rand
from tests.ops.onnx_graph import check_model, graph_model

I64 = np.int64
F32 = np.float32


def test_topk_then_gather_elements_picks_the_best_boxes():
    scores = rand(1, 100, seed=1)
    scores[0, 7] = scores[0, 3]  # a tie: the lower index comes first
    boxes = rand(1, 100, 4, seed=2)
    nodes = [helper.make_node("TopK", ["scores", "k"], ["best", "idx"], axis=1),
             helper.make_node("Unsqueeze", ["idx", "ax"], ["idx3"]),
             helper.make_node("Expand", ["idx3", "shape4"], ["idx4"]),
             helper.make_node("GatherElements", ["boxes", "idx4"], ["picked"], axis=1)]
    model = graph_model(nodes, {"scores": scores, "boxes": boxes}, {"best": F32, "idx": I64, "picked": F32},
                        {"k": np.array([10], I64), "ax": np.array([2], I64),
                         "shape4": np.array([1, 10, 4], I64)}, opset=17)
    check_model(model, {"scores": scores, "boxes": boxes})


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_topk_on_inner_axes_and_integer_ties(largest, dtype):
    x = np.random.default_rng(3).integers(-5, 5, (2, 9, 3)).astype(dtype)
    check("TopK", {"x": x}, {"k": np.array([4], I64)}, {"axis": 1, "largest": largest}, n_outputs=2,
          out_types=[dtype, I64])


def test_position_ids_from_an_attention_mask_with_cumsum():
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], I64)
    nodes = [helper.make_node("CumSum", ["mask", "axis"], ["cs"]),
             helper.make_node("Sub", ["cs", "one"], ["pos0"]),
             helper.make_node("Mul", ["pos0", "mask"], ["pos"])]
    model = graph_model(nodes, {"mask": mask}, {"pos": I64}, {"axis": np.array(1, I64), "one": np.array(1, I64)})
    check_model(model, {"mask": mask})


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("op,opset", [("CumSum", 17), ("CumProd", 26)])
def test_cumulative_modes(op, opset, exclusive, reverse):
    check(op, {"x": rand(3, 4, 5, low=0.5, high=1.5)}, {"axis": np.array(-2, I64)},
          {"exclusive": exclusive, "reverse": reverse}, opset=opset)


@pytest.mark.parametrize("upper,k", [(0, 0), (1, 1), (0, -1), (1, -2)])
def test_trilu_causal_masks(upper, k):
    check("Trilu", {"x": rand(2, 5, 7)}, {"k": np.array(k, I64)}, {"upper": upper})


def test_one_hot_labels_with_negative_indices_and_axis():
    idx = np.array([[0, 3, -1], [2, 9, -4]], I64)  # 9 is out of range: an all-off row
    check("OneHot", {"idx": idx}, {"depth": np.array(5, I64), "values": np.array([-1.0, 2.0], F32)},
          {"axis": 1})


def test_scatter_nd_writes_a_kv_cache_slot():
    cache = rand(1, 8, 6)
    new = rand(1, 1, 6, seed=4)
    check("ScatterND", {"cache": cache, "new": new}, {"idx": np.array([[[0, 5]]], I64)},
          input_order=["cache", "idx", "new"])


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_nd_reductions_with_duplicate_indices(reduction):
    data = rand(4, 3)
    check("ScatterND", {"data": data, "upd": rand(3, 3, seed=5)}, {"idx": np.array([[1], [1], [3]], I64)},
          {"reduction": reduction}, input_order=["data", "idx", "upd"], opset=18)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_along_each_axis(axis):
    data = rand(3, 4)
    idx = np.array([[1, 0, 2, -1], [0, 2, 1, 0]], I64) % 3
    check("ScatterElements", {"data": data, "upd": rand(2, 4, seed=6)}, {"idx": idx}, {"axis": axis},
          input_order=["data", "idx", "upd"])


def test_gather_nd_with_batch_dims():
    data = rand(2, 3, 4, 5)
    idx = np.array([[[0, 1], [2, 3]], [[1, 0], [0, -1]]], I64)
    check("GatherND", {"data": data}, {"idx": idx}, {"batch_dims": 1})


def test_group_norm_opset_21_and_opset_18_per_group_scale():
    x = rand(2, 6, 4, 4, low=-3, high=5)
    c = rand(6, seed=7)
    check("GroupNormalization", {"x": x}, {"s": c, "b": rand(6, seed=8)}, {"num_groups": 3, "epsilon": 1e-3},
          opset=21)
    # opset 18: one scale/bias per group; we expand them per channel
    g = rand(3, seed=9)
    model = make_model("GroupNormalization", {"x": x}, {"s": g, "b": rand(3, seed=10)}, {"num_groups": 3},
                       opset=18)
    got = onnx_backend.run(model, {"x": x})[0]
    xr = x.reshape(2, 3, -1)
    want = ((xr - xr.mean(2, keepdims=True)) / np.sqrt(xr.var(2, keepdims=True) + 1e-5))
    want = want.reshape(x.shape) * np.repeat(g, 2)[None, :, None, None] + \
        np.repeat(rand(3, seed=10), 2)[None, :, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_rms_norm_against_numpy():
    x, scale = rand(2, 5, 16, low=-4, high=4), rand(16, seed=11)
    model = make_model("RMSNormalization", {"x": x}, {"s": scale}, {"epsilon": 1e-6}, opset=23)
    got = onnx_backend.run(model, {"x": x})[0]
    want = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + 1e-6) * scale
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_mean_variance_and_lp_normalization():
    check("MeanVarianceNormalization", {"x": rand(2, 3, 4, 5)}, attrs={"axes": [0, 2, 3]})
    x = rand(3, 4)
    x[1] = 0  # an all-zero row stays zero
    for p in (1, 2):
        check("LpNormalization", {"x": x}, attrs={"axis": -1, "p": p})


@pytest.mark.parametrize("opset,axis", [(11, 1), (13, 1), (13, -1)])
def test_hardmax_old_and_new_axis_rules(opset, axis):
    check("Hardmax", {"x": rand(2, 3, 4)}, attrs={"axis": axis}, opset=opset)


@pytest.mark.parametrize("op", ["Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh"])
def test_unary_math(op):
    check(op, {"x": rand(3, 4, low=-0.9, high=0.9)})


def test_acosh_and_is_nan_is_inf():
    check("Acosh", {"x": rand(3, 4, low=1.0, high=5.0)})
    x = np.array([1.0, np.inf, -np.inf, np.nan, 0.0], F32)
    check("IsNaN", {"x": x}, out_types=[np.bool_])
    for pos, neg in [(1, 1), (1, 0), (0, 1)]:
        check("IsInf", {"x": x}, attrs={"detect_positive": pos, "detect_negative": neg}, out_types=[np.bool_])


def test_is_inf_detecting_nothing_is_refused_naming_the_node():
    model = make_model("IsInf", {"x": rand(3)}, attrs={"detect_positive": 0, "detect_negative": 0},
                       out_types=[np.bool_])
    with pytest.raises(ModelError, match="IsInf 'IsInf_y0'"):
        onnx_backend.prepare(model, {"x": rand(3)})


@pytest.mark.parametrize("op,attrs", [("Celu", {"alpha": 0.7}), ("ThresholdedRelu", {"alpha": 0.3}),
                                      ("Shrink", {"bias": 0.2, "lambd": 0.4})])
def test_activations(op, attrs):
    check(op, {"x": rand(4, 5, low=-3, high=3)}, attrs=attrs)


def test_size_is_a_constant_of_the_static_shape():
    x = rand(2, 3, 5)
    check("Size", {"x": x}, out_types=[I64])
