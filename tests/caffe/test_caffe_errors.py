"""What the Caffe frontend refuses, and that each refusal names the file, layer or blob at fault."""
import numpy as np
import pytest

from mace.errors import ModelError, UnsupportedOpError
from mace.frontends import convert
from mace.config.specs import ModelSpec, TensorSpec
from mace.frontends.caffe import caffe_pb2
from tests.caffe.caffe_case import convert_net
from tests.caffe.caffe_net import CaffeNet

V1_PROTOTXT = """name: "old"
input: "data"
input_dim: 1 input_dim: 3 input_dim: 8 input_dim: 8
layers {
  name: "conv1" type: CONVOLUTION bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 }
}
"""


def spec(prototxt, caffemodel=None, inputs=(("data", (1, 3, 8, 8), "NCHW"),), outputs=("y",)):
    return ModelSpec(prototxt, [TensorSpec(n, s, f) for n, s, f in inputs],
                     [TensorSpec(o, None, "NONE") for o in outputs], caffemodel)


def error_of(tmp_path, net, inputs=(("data", (1, 3, 8, 8), "NCHW"),), outputs=("y",)) -> str:
    prototxt, caffemodel = net.save(tmp_path)
    with pytest.raises(ModelError) as e:
        convert("caffe", spec(prototxt, caffemodel, inputs, outputs))
    return str(e.value)


def small_net(**kw):
    net = CaffeNet("small")
    net.input("data", [1, 3, 8, 8], **kw)
    return net


def test_v1_prototxt_asks_for_an_upgrade(tmp_path):
    path = tmp_path / "old.prototxt"
    path.write_text(V1_PROTOTXT)
    with pytest.raises(ModelError, match="upgrade_net_proto_text"):
        convert("caffe", spec(path))


def test_v1_caffemodel_asks_for_an_upgrade(tmp_path):
    prototxt, _ = small_net().save(tmp_path)
    old = caffe_pb2.NetParameter()
    old.layers.add(name="conv1")
    weights = tmp_path / "old.caffemodel"
    weights.write_bytes(old.SerializeToString())
    net = small_net()
    net.layer("ReLU", "y", ["data"])
    prototxt, _ = net.save(tmp_path)
    with pytest.raises(ModelError, match="upgrade_net_proto_binary"):
        convert("caffe", spec(prototxt, weights))


def test_files_swapped(tmp_path):
    net = small_net()
    net.layer("ReLU", "y", ["data"])
    prototxt, caffemodel = net.save(tmp_path)
    with pytest.raises(ModelError, match="not a text .prototxt"):
        convert("caffe", spec(caffemodel, prototxt))


def test_unsupported_layers_are_listed_together(tmp_path):
    net = small_net()
    net.layer("ROIPooling", "roi", ["data"])
    net.layer("SPP", "spp1", ["roi"])
    net.layer("SPP", "spp2", ["spp1"], ["y"])
    with pytest.raises(UnsupportedOpError) as e:
        convert("caffe", spec(net.save(tmp_path)[0]))
    assert "ROIPooling (layer roi)" in str(e.value) and "SPP (layer spp1, spp2)" in str(e.value)
    assert "Convolution" in str(e.value)  # the supported list


def test_unknown_field_in_an_unsupported_layer_names_the_layer(tmp_path):
    path = tmp_path / "rcnn.prototxt"
    path.write_text('input: "data" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                    'layer { name: "roi" type: "ROIPooling" bottom: "data" top: "y"\n'
                    '  roi_pooling_param { pooled_h: 7 pooled_w: 7 spatial_scale: 0.0625 } }\n')
    with pytest.raises(UnsupportedOpError, match="ROIPooling"):
        convert("caffe", spec(path))


def test_detection_output_with_one_bottom_names_the_layer(tmp_path):
    path = tmp_path / "ssd.prototxt"
    path.write_text('input: "data" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                    'layer { name: "det" type: "DetectionOutput" bottom: "data" top: "y"\n'
                    '  detection_output_param { num_classes: 21 nms_param { nms_threshold: 0.45 } } }\n')
    with pytest.raises(ModelError, match="layer 'det' \\(DetectionOutput\\): has 1 bottoms"):
        convert("caffe", spec(path))


def test_unknown_field_in_a_supported_layer_is_an_error(tmp_path):
    path = tmp_path / "odd.prototxt"
    path.write_text('input: "data" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                    'layer { name: "y" type: "ReLU" bottom: "data" top: "y" relu_param { mystery: 2 } }\n')
    with pytest.raises(ModelError, match=r"odd.prototxt:2:69 .*mystery.*Caffe schema"):
        convert("caffe", spec(path))


def test_train_only_layers_are_skipped(tmp_path):
    net = small_net()
    net.layer("ReLU", "y", ["data"])
    net.layer("SoftmaxWithLoss", "loss", ["y", "label"], params="include { phase: TRAIN }")
    net.layer("Accuracy", "acc", ["y", "label"], params="exclude { phase: TEST }")
    graph, _, _ = convert_net(tmp_path, net, {"data": np.zeros((1, 3, 8, 8), np.float32)}, ["y"])
    assert [op.type for op in graph.net.op] == ["Activation"]


def test_missing_weights(tmp_path):
    net = small_net()
    net.layer("Convolution", "y", ["data"], params="convolution_param { num_output: 2 kernel_size: 1 }")
    assert "layer 'y' (Convolution): has 0 weight blob(s), expected 2" in error_of(tmp_path, net)
    prototxt, _ = net.save(tmp_path)
    with pytest.raises(ModelError, match="no weight_file_path"):
        convert("caffe", spec(prototxt, None))


def test_weight_shape_mismatch(tmp_path):
    net = small_net()
    net.layer("Convolution", "y", ["data"], params="convolution_param { num_output: 2 kernel_size: 3 }",
              blobs=[np.zeros((2, 3, 1, 1)), np.zeros(2)])
    assert "layer 'y' (Convolution): weight blob 0 has shape [2, 3, 1, 1], expected [2, 3, 3, 3]" \
        in error_of(tmp_path, net)


def test_input_name_and_shape(tmp_path):
    net = small_net(style="input_shape")
    net.layer("ReLU", "y", ["data"])
    assert "input tensor 'image' is not an input of the net; its inputs" in \
        error_of(tmp_path, net, inputs=(("image", (1, 3, 8, 8), "NCHW"),))
    msg = error_of(tmp_path, net, inputs=(("data", (1, 3, 8, 8), "NHWC"),))
    assert "shape [1, 3, 8, 8] (NHWC) is [1, 8, 3, 8]" in msg and "set input_data_formats: NCHW" in msg


def test_input_size_may_differ(tmp_path):
    """Caffe nets reshape to their input: N, H and W may differ from the prototxt's."""
    net = small_net(style="input_dim")
    net.layer("ReLU", "y", ["data"])
    graph, _, _ = convert_net(tmp_path, net, {"data": np.zeros((2, 3, 5, 7), np.float32)}, ["y"])
    assert graph.shape("y") == (2, 3, 5, 7)


def test_outputs(tmp_path):
    net = small_net()
    net.layer("ReLU", "relu", ["data"], ["r"])
    net.layer("Sigmoid", "sig", ["r"], ["s"])
    assert "output tensor 'y' is not a top of any layer; the net's outputs are ['s']" in \
        error_of(tmp_path, net)
    assert "output tensor 'data' is an input of the net" in error_of(tmp_path, net, outputs=("data",))


def test_unread_input_and_unknown_blob(tmp_path):
    net = small_net()
    net.input("other", [1, 3, 8, 8])
    net.layer("Eltwise", "y", ["data", "other"])
    assert "layer 'y' (Eltwise): reads net input 'other', which is not in the deployment file's " \
           "input_tensors" in error_of(tmp_path, net)
    net = small_net()
    net.layer("Eltwise", "y", ["data", "ghost"])
    assert "reads blob 'ghost', which no earlier layer writes" in error_of(tmp_path, net)


@pytest.mark.parametrize("layer_type,params,message", [
    ("Pooling", "pooling_param { pool: STOCHASTIC kernel_size: 2 }", "STOCHASTIC pooling is not supported"),
    ("Pooling", "pooling_param { kernel_size: 1 stride: 3 }", "windows that lie wholly outside"),
    ("Pooling", "pooling_param { kernel_size: 2 pad: 2 }", "must be smaller than the kernel"),
    ("Pooling", "pooling_param { kernel_size: 2 kernel_h: 2 kernel_w: 2 }", "give kernel_size, or both"),
    ("LRN", "lrn_param { local_size: 4 }", "local_size 4 must be odd"),
    ("BatchNorm", "batch_norm_param { use_global_stats: false }", "use_global_stats: false"),
    ("ArgMax", "argmax_param { top_k: 2 }", "top_k 2 is not supported"),
    ("Convolution", "convolution_param { num_output: 4 kernel_size: 3 pad: 1 pad_h: 1 }",
     "give pad or pad_h/pad_w, not both"),
    ("Eltwise", "eltwise_param { operation: MAX coeff: 1 }", "coeff is only allowed with operation SUM"),
    ("Clip", "clip_param { min: 0 }", "needs both min and max"),
    ("Softmax", "softmax_param { axis: 4 }", "axis 4 is out of range for a 4-D input"),
])
def test_refused_parameters(tmp_path, layer_type, params, message):
    net = small_net()
    blobs = [np.zeros(3), np.ones(3), [1]] if layer_type == "BatchNorm" else ()
    net.layer(layer_type, "y", ["data"], params=params, blobs=blobs)
    msg = error_of(tmp_path, net)
    assert f"layer 'y' ({layer_type})" in msg and message in msg, msg


INPUT_THEN_RELU = """name: "n"
layer {{ name: "data" type: "Input" top: "data" input_param {{ shape {{ dim: 1 dim: {c} dim: 4 dim: 4 }} }} }}
layer {{ name: "r" type: "ReLU" bottom: "data" {top} }}
"""


def test_a_layer_without_top_is_named(tmp_path):
    path = tmp_path / "n.prototxt"
    path.write_text(INPUT_THEN_RELU.format(c=3, top=""))
    with pytest.raises(ModelError, match="layer 'r' \\(ReLU\\) has no top blob"):
        convert("caffe", spec(path, inputs=(("data", (1, 3, 4, 4), "NCHW"),), outputs=("r",)))


@pytest.mark.parametrize("dim", [0, -1, 2**31])
def test_input_dims_that_are_no_size_are_refused(tmp_path, dim):
    """Even when the deployment file agrees (a 0 there is a valid MACE shape)."""
    path = tmp_path / "n.prototxt"
    path.write_text(INPUT_THEN_RELU.format(c=dim, top='top: "y"'))
    with pytest.raises(ModelError, match=f"input blob 'data' is declared with shape \\[1, {dim}, 4, 4\\]"):
        convert("caffe", spec(path, inputs=(("data", (1, max(dim, 0), 4, 4), "NCHW"),)))
