"""Every supported Caffe layer type, converted and run, against the numpy Caffe reference."""
import numpy as np
import pytest

from tests.caffe.caffe_case import check, rand
from tests.caffe.caffe_net import CaffeNet


def one_input(shape, name="data", style="layer", seed=0):
    net = CaffeNet("case", seed=seed)
    net.input(name, shape, style)
    return net, {name: rand(*shape, seed=seed + 1)}


# ---- convolution family --------------------------------------------------------------
@pytest.mark.parametrize("cin,cout,k,stride,pad,group,dilation,bias", [
    (3, 8, 3, 1, 1, 1, 1, True),
    (5, 7, 3, 2, 0, 1, 1, True),
    (16, 12, 1, 1, 0, 1, 1, False),   # pointwise
    (4, 4, 3, 1, 2, 1, 2, True),      # dilation
    (6, 8, 5, 2, 2, 2, 1, True),      # grouped
    (6, 6, 3, 1, 1, 6, 1, True),      # depthwise
    (4, 8, 3, 2, 1, 4, 1, False),     # depthwise, multiplier 2
])
def test_convolution(tmp_path, cin, cout, k, stride, pad, group, dilation, bias):
    net, inputs = one_input([2, cin, 11, 9])
    net.conv("conv", "data", cin, cout, k, stride, pad, group, dilation, bias)
    check(tmp_path, net, inputs, ["conv"])


def test_convolution_hw_fields(tmp_path):
    """kernel_h/_w, stride_h/_w, pad_h/_w, and two-valued kernel_size / dilation lists."""
    net, inputs = one_input([1, 3, 12, 10])
    net.layer("Convolution", "a", ["data"],
              params="convolution_param { num_output: 4 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 "
                     "pad_h: 1 pad_w: 0 }", blobs=[net.rand(4, 3, 3, 2), net.rand(4)])
    net.layer("Convolution", "b", ["data"],
              params="convolution_param { num_output: 2 kernel_size: 3 kernel_size: 1 pad: 2 pad: 0 "
                     "dilation: 2 dilation: 1 bias_term: false }", blobs=[net.rand(2, 3, 3, 1)])
    check(tmp_path, net, inputs, ["a", "b"])


@pytest.mark.parametrize("cin,cout,k,stride,pad,group", [
    (3, 4, 3, 2, 1, 1), (4, 6, 4, 2, 1, 2), (5, 5, 2, 2, 0, 1), (4, 4, 4, 2, 1, 4)])
def test_deconvolution(tmp_path, cin, cout, k, stride, pad, group):
    net, inputs = one_input([1, cin, 5, 6])
    net.conv("up", "data", cin, cout, k, stride, pad, group, deconv=True)
    check(tmp_path, net, inputs, ["up"])


@pytest.mark.parametrize("shape,axis,transpose,bias", [
    ([2, 3, 4, 5], 1, False, True), ([2, 6], 1, False, False), ([2, 3, 8], 2, False, True),
    ([2, 3, 4, 5], 1, True, True)])
def test_inner_product(tmp_path, shape, axis, transpose, bias):
    net, inputs = one_input(shape)
    k = int(np.prod(shape[axis:]))
    blobs = [net.rand(k, 7) if transpose else net.rand(7, k)] + ([net.rand(7)] if bias else [])
    net.layer("InnerProduct", "ip", ["data"], blobs=blobs,
              params=f"inner_product_param {{ num_output: 7 axis: {axis} "
                     f"transpose: {str(transpose).lower()} bias_term: {str(bias).lower()} }}")
    check(tmp_path, net, inputs, ["ip"])


@pytest.mark.parametrize("legacy,double", [(True, False), (False, True)])
def test_legacy_and_double_blobs(tmp_path, legacy, double):
    """Pre-shape 4-D blobs (1, 1, N, K) and double_data weights read like float ones."""
    net, inputs = one_input([2, 3, 2, 2], style="input_dim")
    net.layer("InnerProduct", "ip", ["data"], params="inner_product_param { num_output: 5 }",
              blobs=[net.rand(5, 12), net.rand(5)], legacy=legacy, double=double)
    net.layer("Convolution", "conv", ["data"], params="convolution_param { num_output: 2 kernel_size: 1 }",
              blobs=[net.rand(2, 3, 1, 1), net.rand(2)], legacy=legacy, double=double)
    check(tmp_path, net, inputs, ["ip", "conv"])


# ---- pooling, normalisation ---------------------------------------------------------------
@pytest.mark.parametrize("pool", ["MAX", "AVE"])
@pytest.mark.parametrize("hw,k,stride,pad", [
    ((9, 9), 3, 2, 0), ((10, 10), 3, 2, 0),   # ceil adds a clipped last window at 10
    ((10, 11), 3, 2, 1), ((7, 8), 2, 2, 1),   # clipped to input + pad
    ((6, 6), 3, 3, 1), ((13, 13), 3, 2, 1), ((5, 7), 3, 1, 1), ((8, 8), 2, 2, 0)])
def test_pooling(tmp_path, pool, hw, k, stride, pad):
    net, inputs = one_input([2, 3, *hw])
    net.pool("pool", "data", k, stride, pad, pool)
    check(tmp_path, net, inputs, ["pool"])


@pytest.mark.parametrize("pool", ["MAX", "AVE"])
def test_pooling_hw_fields_and_floor(tmp_path, pool):
    net, inputs = one_input([1, 2, 11, 10])
    net.layer("Pooling", "a", ["data"], params=f"pooling_param {{ pool: {pool} kernel_h: 3 kernel_w: 2 "
                                               f"stride_h: 2 stride_w: 3 pad_h: 1 pad_w: 1 }}")
    net.layer("Pooling", "b", ["data"], params=f"pooling_param {{ pool: {pool} kernel_size: 3 stride: 2 "
                                               f"pad: 1 round_mode: FLOOR }}")
    check(tmp_path, net, inputs, ["a", "b"])


@pytest.mark.parametrize("pool", ["MAX", "AVE"])
def test_global_pooling(tmp_path, pool):
    net, inputs = one_input([2, 5, 6, 7])
    net.layer("Pooling", "gp", ["data"], params=f"pooling_param {{ pool: {pool} global_pooling: true }}")
    check(tmp_path, net, inputs, ["gp"])


@pytest.mark.parametrize("region,size", [("ACROSS_CHANNELS", 5), ("ACROSS_CHANNELS", 3),
                                         ("WITHIN_CHANNEL", 3), ("WITHIN_CHANNEL", 5)])
def test_lrn(tmp_path, region, size):
    net, inputs = one_input([2, 7, 6, 5])
    net.layer("LRN", "norm", ["data"], params=f"lrn_param {{ local_size: {size} alpha: 0.5 beta: 0.75 "
                                              f"k: 2 norm_region: {region} }}")
    check(tmp_path, net, inputs, ["norm"])


@pytest.mark.parametrize("shape,factor", [([2, 4, 5, 3], 3.5), ([2, 4, 5, 3], 0.0), ([3, 6], 1.0)])
def test_batch_norm(tmp_path, shape, factor):
    net, inputs = one_input(shape)
    c = shape[1]
    net.layer("BatchNorm", "bn", ["data"], params="batch_norm_param { eps: 0.001 }",
              blobs=[net.rand(c) * factor, np.abs(net.rand(c)) * factor + 0.1, [factor]])
    check(tmp_path, net, inputs, ["bn"])


@pytest.mark.parametrize("params,blob_shape", [
    ("", (4,)), ("bias_term: true", (4,)), ("axis: 1 num_axes: 2 bias_term: true", (4, 5)),
    ("axis: 2 num_axes: -1", (5, 3)), ("axis: -1", (3,)), ("num_axes: 0 bias_term: true", ()),
    ("axis: 0", (2,))])
def test_scale(tmp_path, params, blob_shape):
    net, inputs = one_input([2, 4, 5, 3])
    blobs = [net.rand(*blob_shape)] + ([net.rand(*blob_shape)] if "bias_term" in params else [])
    net.layer("Scale", "scale", ["data"], params=f"scale_param {{ {params} }}", blobs=blobs)
    check(tmp_path, net, inputs, ["scale"])


def test_scale_and_bias_with_second_bottom(tmp_path):
    net = CaffeNet("case")
    net.input("data", [2, 4, 5, 3])
    net.input("factor", [4, 5])
    net.layer("Scale", "scale", ["data", "factor"], params="scale_param { bias_term: true }",
              blobs=[net.rand(4, 5)])
    net.layer("Bias", "bias", ["scale", "factor"])
    net.layer("Bias", "bias2", ["bias"], params="bias_param { axis: 2 num_axes: 1 }", blobs=[net.rand(5)])
    check(tmp_path, net, {"data": rand(2, 4, 5, 3), "factor": rand(4, 5, seed=3)},
          ["scale", "bias", "bias2"])


# ---- neurons -----------------------------------------------------------------------------
@pytest.mark.parametrize("layer_type,params", [
    ("ReLU", ""), ("ReLU", "relu_param { negative_slope: 0.1 }"), ("Sigmoid", ""), ("TanH", ""),
    ("ELU", "elu_param { alpha: 0.5 }"), ("AbsVal", ""), ("BNLL", ""),
    ("Clip", "clip_param { min: -0.3 max: 0.6 }"),
    ("Power", "power_param { power: 2 scale: 0.5 shift: 1.5 }"),
    ("Power", "power_param { power: 0.5 scale: 0.5 shift: 2 }"),
    ("Power", "power_param { power: 1 scale: -2 }"), ("Power", ""),
    ("Exp", ""), ("Exp", "exp_param { base: 2 scale: 0.5 shift: 1 }"),
    ("Log", "log_param { shift: 2 }"), ("Log", "log_param { base: 10 scale: 3 shift: 4 }"),
    ("Threshold", "threshold_param { threshold: 0.2 }"), ("Dropout", "dropout_param { dropout_ratio: 0.3 }"),
])
def test_neuron(tmp_path, layer_type, params):
    net, inputs = one_input([2, 3, 4, 5])
    net.layer(layer_type, "y", ["data"], params=params)
    check(tmp_path, net, inputs, ["y"])


@pytest.mark.parametrize("shared,shape", [(False, [2, 3, 4, 5]), (True, [2, 3, 4, 5]), (False, [4, 6])])
def test_prelu(tmp_path, shared, shape):
    net, inputs = one_input(shape)
    net.layer("PReLU", "y", ["data"], params=f"prelu_param {{ channel_shared: {str(shared).lower()} }}",
              blobs=[net.rand(1 if shared else shape[1])])
    check(tmp_path, net, inputs, ["y"])


# ---- blob plumbing ---------------------------------------------------------------------
@pytest.mark.parametrize("params", ["", "operation: SUM coeff: 1 coeff: -1 coeff: 0.5",
                                    "operation: SUM coeff: 0.5 coeff: 2 coeff: -3",
                                    "operation: PROD", "operation: MAX"])
def test_eltwise(tmp_path, params):
    net = CaffeNet("case")
    for name in "abc":
        net.input(name, [2, 3, 4, 4])
    net.layer("Eltwise", "y", ["a", "b", "c"], params=f"eltwise_param {{ {params} }}")
    check(tmp_path, net, {n: rand(2, 3, 4, 4, seed=i) for i, n in enumerate("abc")}, ["y"])


@pytest.mark.parametrize("params", ["", "axis: 2", "axis: -1", "concat_dim: 1"])
def test_concat(tmp_path, params):
    net = CaffeNet("case")
    net.input("a", [2, 3, 4, 5])
    net.input("b", [2, 3, 4, 5])
    net.layer("Concat", "y", ["a", "b", "a"], params=f"concat_param {{ {params} }}")
    check(tmp_path, net, {"a": rand(2, 3, 4, 5), "b": rand(2, 3, 4, 5, seed=1)}, ["y"])


@pytest.mark.parametrize("params,tops", [("slice_point: 2 slice_point: 5", 3), ("", 2),
                                         ("axis: 2 slice_point: 1", 2), ("slice_dim: 3", 5)])
def test_slice(tmp_path, params, tops):
    net, inputs = one_input([2, 6, 4, 5])
    names = [f"s{i}" for i in range(tops)]
    net.layer("Slice", "slice", ["data"], names, params=f"slice_param {{ {params} }}")
    check(tmp_path, net, inputs, names)


def test_split_softmax_flatten_reshape(tmp_path):
    net, inputs = one_input([2, 6, 4, 5])
    net.layer("Split", "split", ["data"], ["a", "b"])
    net.layer("Softmax", "sm", ["a"])
    net.layer("Softmax", "sm_last", ["b"], params="softmax_param { axis: -1 }")
    net.layer("Flatten", "flat", ["sm"])
    net.layer("Flatten", "flat_mid", ["b"], params="flatten_param { axis: 1 end_axis: 2 }")
    net.layer("Reshape", "r1", ["b"], params="reshape_param { shape { dim: 0 dim: -1 dim: 10 } }")
    net.layer("Reshape", "r2", ["b"], params="reshape_param { shape { dim: 2 dim: 2 } axis: 2 num_axes: 1 }")
    net.layer("Reshape", "r3", ["b"], params="reshape_param { shape { dim: 1 } axis: -1 num_axes: 0 }")
    check(tmp_path, net, inputs, ["sm", "sm_last", "flat", "flat_mid", "r1", "r2", "r3"])


@pytest.mark.parametrize("params", ["axis: 2 offset: 1 offset: 2", "axis: 1 offset: 1", "axis: 2"])
def test_crop(tmp_path, params):
    net = CaffeNet("case")
    net.input("big", [2, 5, 9, 8])
    net.input("small", [2, 3, 5, 6])
    net.layer("Crop", "crop", ["big", "small"], params=f"crop_param {{ {params} }}")
    check(tmp_path, net, {"big": rand(2, 5, 9, 8), "small": rand(2, 3, 5, 6, seed=1)}, ["crop"])


@pytest.mark.parametrize("order", [[0, 2, 3, 1], [0, 3], [1, 0, 2, 3]])
def test_permute(tmp_path, order):
    net, inputs = one_input([2, 3, 4, 5])
    orders = " ".join(f"order: {o}" for o in order)
    net.layer("Permute", "perm", ["data"], params=f"permute_param {{ {orders} }}")
    check(tmp_path, net, inputs, ["perm"])


@pytest.mark.parametrize("params", ["", "out_max_val: true", "axis: 1", "axis: 1 out_max_val: true",
                                    "axis: -1"])
def test_argmax(tmp_path, params):
    net, inputs = one_input([2, 5, 3, 4])
    # Rounded values make ties: Caffe picks the last of equal maxima.
    inputs["data"] = np.round(inputs["data"] * 2) / 2
    net.layer("ArgMax", "am", ["data"], params=f"argmax_param {{ {params} }}")
    check(tmp_path, net, inputs, ["am"])


def test_argmax_of_2d_blob_is_3d(tmp_path):
    net, inputs = one_input([3, 7])
    net.layer("ArgMax", "am", ["data"], params="argmax_param { out_max_val: true }")
    got = check(tmp_path, net, inputs, ["am"])
    assert got["am"].shape == (3, 2, 1)
