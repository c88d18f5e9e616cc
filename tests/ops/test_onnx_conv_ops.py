"""Conv, pooling, BatchNormalization, LRN against onnxruntime (random shapes and attributes)."""
import numpy as np
import pytest

from tests.ops.onnx_case import check, rand


@pytest.mark.parametrize("k,stride,dilation,pads,group,cin,cout", [
    (3, 1, 1, [1, 1, 1, 1], 1, 3, 8),
    (3, 2, 1, [0, 1, 2, 0], 1, 5, 7),      # odd, asymmetric pads
    (1, 1, 1, [0, 0, 0, 0], 1, 16, 12),    # pointwise fast path
    (1, 2, 1, [0, 0, 0, 0], 1, 6, 4),
    (3, 1, 2, [2, 2, 2, 2], 1, 4, 4),      # dilation
    (5, 2, 1, [2, 2, 2, 2], 2, 6, 8),      # grouped
    (3, 1, 1, [1, 1, 1, 1], 3, 6, 9),
    (3, 1, 1, [1, 1, 1, 1], 6, 6, 6),      # depthwise
    (3, 2, 1, [1, 1, 1, 1], 4, 4, 8),      # depthwise, multiplier 2
])
def test_conv(k, stride, dilation, pads, group, cin, cout):
    x = rand(2, cin, 11, 9)
    w = rand(cout, cin // group, k, k, seed=1)
    b = rand(cout, seed=2)
    check("Conv", {"x": x}, {"w": w, "b": b},
          {"kernel_shape": [k, k], "strides": [stride, stride], "dilations": [dilation, dilation],
           "pads": pads, "group": group})


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_auto_pad(auto_pad):
    check("Conv", {"x": rand(1, 3, 10, 7)}, {"w": rand(4, 3, 3, 2, seed=1)},
          {"auto_pad": auto_pad, "strides": [2, 2]})


def test_conv_1d():
    check("Conv", {"x": rand(1, 3, 17)}, {"w": rand(5, 3, 3, seed=1)}, {"pads": [1, 1]})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("k,stride,pads,ceil,include", [
    (3, 2, [0, 0, 0, 0], 0, 0), (3, 2, [1, 1, 1, 1], 1, 0), (2, 2, [0, 0, 1, 1], 0, 1),
    (3, 1, [1, 0, 1, 2], 0, 1), (3, 2, [1, 1, 1, 1], 1, 1),
])
def test_pool(op, k, stride, pads, ceil, include):
    attrs = {"kernel_shape": [k, k], "strides": [stride, stride], "pads": pads, "ceil_mode": ceil}
    if op == "AveragePool":
        attrs["count_include_pad"] = include
    check(op, {"x": rand(2, 3, 12, 11)}, attrs=attrs)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(op):
    check(op, {"x": rand(2, 5, 7, 6)})


def test_batchnorm():
    c = 6
    check("BatchNormalization", {"x": rand(2, c, 5, 4)},
          {"s": rand(c, seed=1), "b": rand(c, seed=2), "m": rand(c, seed=3),
           "v": rand(c, seed=4, low=0.1, high=2.0)}, {"epsilon": 1e-3})


def test_lrn():
    check("LRN", {"x": rand(1, 10, 5, 5)}, attrs={"size": 5, "alpha": 1e-2, "beta": 0.75, "bias": 2.0})
