"""The Caffe rules other frameworks do not share, worked out by hand: both the numpy
reference and the converted model must give these numbers."""
import numpy as np
import pytest

from mace.runtime.engine import Engine
from mace.validate.caffe_reference import run_caffe
from tests.caffe.caffe_case import convert_net
from tests.caffe.caffe_net import CaffeNet


def both(tmp_path, net, inputs, outputs) -> list:
    """[(who, outputs)] from the reference and from our converted model."""
    graph, prototxt, caffemodel = convert_net(tmp_path, net, inputs, outputs)
    ours = Engine(graph).run(inputs)
    ref = run_caffe(prototxt, inputs, outputs, weight_path=caffemodel)
    return [("reference", ref), ("converted", ours)]


def pool_net(hw, pool, kernel, stride, pad):
    net = CaffeNet("pool")
    net.input("data", [1, 1, *hw])
    net.pool("pool", "data", kernel, stride, pad, pool)
    return net


# 4x4 input 1..16, kernel 3, stride 2, pad 1: Caffe rounds 1.5 windows up to 3 per axis.
# Row windows: {0,1} (start in the top pad), {1,2,3}, {3} + the bottom pad row.
# AVE divides by the window clipped to input + pad: 3, 3, 2 cells per axis (not 2, 3, 1).
X4 = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
AVE_4X4 = np.array([[14 / 9, 30 / 9, 12 / 6],
                    [57 / 9, 99 / 9, 36 / 6],
                    [27 / 6, 45 / 6, 16 / 4]], np.float32)
MAX_4X4 = np.array([[6, 8, 8], [14, 16, 16], [14, 16, 16]], np.float32)


@pytest.mark.parametrize("pool,expected", [("AVE", AVE_4X4), ("MAX", MAX_4X4)])
def test_ceil_pooling_by_hand(tmp_path, pool, expected):
    for who, out in both(tmp_path, pool_net((4, 4), pool, 3, 2, 1), {"data": X4}, ["pool"]):
        np.testing.assert_allclose(out["pool"][0, 0], expected, rtol=1e-6, err_msg=who)


def test_ceil_pooling_without_pad_by_hand(tmp_path):
    """6x6, kernel 3, stride 2, no pad: ceil gives a third window {4, 5}, averaged over its 4 cells."""
    x = np.arange(36, dtype=np.float32).reshape(1, 1, 6, 6)
    for who, out in both(tmp_path, pool_net((6, 6), "AVE", 3, 2, 0), {"data": x}, ["pool"]):
        assert out["pool"].shape == (1, 1, 3, 3), who
        assert out["pool"][0, 0, 2, 2] == pytest.approx((28 + 29 + 34 + 35) / 4), who
        assert out["pool"][0, 0, 0, 0] == pytest.approx(x[0, 0, :3, :3].mean()), who


def test_last_window_must_start_inside_input_plus_pad(tmp_path):
    """5 rows, kernel 2, stride 2, pad 1: ceil((5+2-2)/2)+1 = 4 windows, but the 4th would
    start at row 5 (in the bottom pad), so Caffe keeps 3."""
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    for who, out in both(tmp_path, pool_net((5, 5), "MAX", 2, 2, 1), {"data": x}, ["pool"]):
        assert out["pool"].shape == (1, 1, 3, 3), who
        np.testing.assert_array_equal(out["pool"][0, 0, :, 2], [4, 14, 24], err_msg=who)


def test_batch_norm_scale_factor_by_hand(tmp_path):
    """Blobs hold running sums: mean * f, var * f and f. With f = 2: mean (1, 2), var (4, 9);
    with f = 0 the statistics are zero and y = x / sqrt(eps)."""
    net = CaffeNet("bn")
    net.input("data", [1, 2, 1, 1])
    net.layer("BatchNorm", "bn", ["data"], params="batch_norm_param { eps: 0 }",
              blobs=[[2, 4], [8, 18], [2]])
    net.layer("BatchNorm", "bn_zero", ["data"], params="batch_norm_param { eps: 4 }",
              blobs=[[5, 5], [7, 7], [0]])
    x = np.array([3, 8], np.float32).reshape(1, 2, 1, 1)
    for who, out in both(tmp_path, net, {"data": x}, ["bn", "bn_zero"]):
        np.testing.assert_allclose(out["bn"].reshape(-1), [1, 2], rtol=1e-6, err_msg=who)
        np.testing.assert_allclose(out["bn_zero"].reshape(-1), [1.5, 4], rtol=1e-6, err_msg=who)


def test_eltwise_coeff_by_hand(tmp_path):
    net = CaffeNet("elt")
    net.input("a", [1, 2])
    net.input("b", [1, 2])
    net.layer("Eltwise", "diff", ["a", "b"], params="eltwise_param { coeff: 1 coeff: -1 }")
    net.layer("Eltwise", "mix", ["a", "b"], params="eltwise_param { operation: SUM coeff: 2 coeff: -0.5 }")
    a, b = np.array([[1, 2]], np.float32), np.array([[10, 20]], np.float32)
    for who, out in both(tmp_path, net, {"a": a, "b": b}, ["diff", "mix"]):
        np.testing.assert_allclose(out["diff"], [[-9, -18]], err_msg=who)
        np.testing.assert_allclose(out["mix"], [[-3, -6]], err_msg=who)


def test_in_place_layers_by_hand(tmp_path):
    """A blob rewritten in place is read at the version current when each layer runs;
    an output name means the blob after the last write."""
    net = CaffeNet("inplace")
    net.input("data", [1, 1, 2, 3])
    net.layer("Power", "double", ["data"], ["a"], params="power_param { scale: 2 }")
    net.layer("ReLU", "relu", ["a"], ["a"])                                          # a = relu(2x)
    net.layer("Power", "plus_one", ["a"], ["b"], params="power_param { shift: 1 }")  # b = relu(2x) + 1
    net.layer("Power", "negate", ["a"], ["a"], params="power_param { scale: -1 }")   # a = -relu(2x)
    net.layer("Eltwise", "sum", ["a", "b"], ["out"])                                 # out = 1
    x = np.array([-1, 0.5, 2, -3, 1, 0], np.float32).reshape(1, 1, 2, 3)
    relu2x = np.maximum(2 * x, 0)
    for who, out in both(tmp_path, net, {"data": x}, ["a", "b", "out"]):
        np.testing.assert_allclose(out["a"], -relu2x, err_msg=who)
        np.testing.assert_allclose(out["b"], relu2x + 1, err_msg=who)
        np.testing.assert_allclose(out["out"], np.ones_like(x), err_msg=who)


def test_in_place_on_the_net_input(tmp_path):
    """Layers may rewrite an input blob in place (a Scale/Power on `data`); the graph input
    itself is never written."""
    net = CaffeNet("inplace_input")
    net.input("data", [1, 2, 2, 2])
    net.layer("Power", "pre", ["data"], ["data"], params="power_param { scale: 3 shift: -1 }")
    net.layer("ReLU", "relu", ["data"], ["data"])
    net.layer("Pooling", "pool", ["data"], params="pooling_param { pool: MAX global_pooling: true }")
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2) / 8 - 0.4
    expected = np.maximum(3 * x - 1, 0).max(axis=(2, 3), keepdims=True)
    for who, out in both(tmp_path, net, {"data": x}, ["pool"]):
        np.testing.assert_allclose(out["pool"], expected, rtol=1e-6, err_msg=who)


def test_in_place_chain_names(tmp_path):
    """conv -> in-place BatchNorm, Scale, ReLU: `conv` names the final value, and the
    converted graph writes each tensor once."""
    net = CaffeNet("chain")
    net.input("data", [1, 3, 6, 6])
    net.conv("conv", "data", 3, 4, 3, pad=1)
    net.batch_norm_scale("bn", "conv", 4)
    net.relu("relu", "conv")
    graph, _, _ = convert_net(tmp_path, net, {"data": np.zeros((1, 3, 6, 6), np.float32)}, ["conv"])
    written = [t for op in graph.net.op for t in op.output]
    assert len(written) == len(set(written))
    assert graph.output_names == ["conv"]
