"""The numpy Caffe reference against onnxruntime, where ONNX defines the same arithmetic as
Caffe: convolution, deconvolution (ConvTranspose), inner product (Gemm), LRN (ONNX took
Caffe's formula), and ceil-mode pooling with pads counted (Caffe's divisor). This checks
the reference with an implementation nobody here wrote."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mace.validate.caffe_reference import run_caffe
from tests.caffe.caffe_case import rand
from tests.caffe.caffe_net import CaffeNet


def ort_run(op_type, x, consts=(), **attrs):
    names = ["x"] + [f"c{i}" for i in range(len(consts))]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.asarray(c, np.float32), f"c{i}") for i, c in enumerate(consts)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def reference(tmp_path, net, x, output="y"):
    prototxt, caffemodel = net.save(tmp_path)
    return run_caffe(prototxt, {"data": x}, [output], weight_path=caffemodel)[output]


def one_layer(x, layer_type, params, blobs=()):
    net = CaffeNet("ref")
    net.input("data", list(x.shape))
    net.layer(layer_type, "y", ["data"], params=params, blobs=blobs)
    return net


@pytest.mark.parametrize("k,stride,pad,dilation,group,cin,cout", [
    (3, 1, 1, 1, 1, 3, 5), (3, 2, 0, 1, 2, 4, 6), (5, 1, 2, 2, 1, 2, 3), (3, 2, 1, 1, 4, 4, 8)])
def test_convolution(tmp_path, k, stride, pad, dilation, group, cin, cout):
    x, w, b = rand(2, cin, 9, 8), rand(cout, cin // group, k, k, seed=1), rand(cout, seed=2)
    net = one_layer(x, "Convolution", f"convolution_param {{ num_output: {cout} kernel_size: {k} "
                    f"stride: {stride} pad: {pad} dilation: {dilation} group: {group} }}", [w, b])
    expected = ort_run("Conv", x, [w, b], kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4,
                       dilations=[dilation] * 2, group=group)
    np.testing.assert_allclose(reference(tmp_path, net, x), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("k,stride,pad,group,cin,cout", [(4, 2, 1, 1, 3, 4), (3, 2, 0, 2, 4, 6),
                                                         (3, 1, 1, 3, 3, 3)])
def test_deconvolution(tmp_path, k, stride, pad, group, cin, cout):
    x, w, b = rand(1, cin, 5, 4), rand(cin, cout // group, k, k, seed=1), rand(cout, seed=2)
    net = one_layer(x, "Deconvolution", f"convolution_param {{ num_output: {cout} kernel_size: {k} "
                    f"stride: {stride} pad: {pad} group: {group} }}", [w, b])
    expected = ort_run("ConvTranspose", x, [w, b], kernel_shape=[k, k], strides=[stride] * 2,
                       pads=[pad] * 4, group=group)
    np.testing.assert_allclose(reference(tmp_path, net, x), expected, rtol=1e-4, atol=1e-5)


def test_inner_product(tmp_path):
    x, w, b = rand(3, 12), rand(5, 12, seed=1), rand(5, seed=2)
    net = one_layer(x, "InnerProduct", "inner_product_param { num_output: 5 }", [w, b])
    expected = ort_run("Gemm", x, [w, b], transB=1)
    np.testing.assert_allclose(reference(tmp_path, net, x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size", [3, 5])
def test_lrn(tmp_path, size):
    x = rand(2, 7, 4, 3)
    net = one_layer(x, "LRN", f"lrn_param {{ local_size: {size} alpha: 0.3 beta: 0.75 k: 1.5 }}")
    expected = ort_run("LRN", x, size=size, alpha=0.3, beta=0.75, bias=1.5)
    np.testing.assert_allclose(reference(tmp_path, net, x), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pool,onnx_op", [("MAX", "MaxPool"), ("AVE", "AveragePool")])
@pytest.mark.parametrize("hw,k,stride,pad", [((10, 10), 3, 2, 0), ((9, 11), 3, 2, 1), ((7, 8), 2, 2, 1),
                                             ((56, 56), 3, 2, 0), ((13, 13), 3, 2, 1)])
def test_ceil_pooling(tmp_path, pool, onnx_op, hw, k, stride, pad):
    x = rand(1, 2, *hw)
    net = one_layer(x, "Pooling", f"pooling_param {{ pool: {pool} kernel_size: {k} stride: {stride} "
                                  f"pad: {pad} }}")
    extra = {"count_include_pad": 1} if onnx_op == "AveragePool" else {}
    expected = ort_run(onnx_op, x, kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4,
                       ceil_mode=1, **extra)
    got = reference(tmp_path, net, x)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
