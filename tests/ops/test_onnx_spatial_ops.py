"""ConvTranspose, Resize/Upsample, DepthToSpace/SpaceToDepth, Pad, InstanceNormalization
against onnxruntime (random shapes and attributes), plus a multi-node NHWC layout check."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mace import onnx_backend
from mace.errors import ModelError
from tests.ops.onnx_case import check, make_model, rand, run_ort


# ---- ConvTranspose -----------------------------------------------------------
@pytest.mark.parametrize("k,stride,dilation,pads,out_pad,group,cin,cout", [
    (3, 1, 1, [1, 1, 1, 1], [0, 0], 1, 3, 5),
    (3, 2, 1, [0, 0, 0, 0], [0, 0], 1, 4, 6),
    (3, 2, 1, [1, 0, 0, 2], [1, 1], 1, 5, 3),     # asymmetric pads, output_padding
    (4, 2, 1, [1, 1, 1, 1], [0, 0], 1, 8, 4),     # the usual 2x upsampler
    (2, 3, 1, [0, 1, 1, 0], [2, 1], 1, 3, 3),     # stride > kernel: gaps between taps
    (3, 1, 2, [2, 2, 2, 2], [0, 0], 1, 4, 4),     # dilation
    (3, 2, 2, [1, 2, 0, 1], [1, 0], 1, 2, 7),
    (3, 2, 1, [1, 1, 1, 1], [1, 1], 2, 6, 4),     # grouped
    (5, 2, 1, [2, 2, 2, 2], [0, 0], 3, 6, 9),
    (3, 2, 1, [1, 1, 1, 1], [1, 1], 6, 6, 6),     # depthwise
    (1, 1, 1, [0, 0, 0, 0], [0, 0], 1, 7, 5),     # pointwise
])
def test_conv_transpose(k, stride, dilation, pads, out_pad, group, cin, cout):
    x = rand(2, cin, 7, 6)
    w = rand(cin, cout // group, k, k, seed=1)
    b = rand(cout, seed=2)
    check("ConvTranspose", {"x": x}, {"w": w, "b": b},
          {"kernel_shape": [k, k], "strides": [stride, stride], "dilations": [dilation, dilation],
           "pads": pads, "output_padding": out_pad, "group": group})


@pytest.mark.parametrize("opset", [1, 11, 17])
def test_conv_transpose_rect_kernel_no_bias(opset):
    check("ConvTranspose", {"x": rand(1, 3, 5, 8)}, {"w": rand(3, 2, 2, 3, seed=1)},
          {"strides": [2, 1], "dilations": [1, 3], "pads": [0, 1, 1, 0], "output_padding": [1, 0]},
          opset=opset)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("stride", [1, 2, 3])
def test_conv_transpose_auto_pad(auto_pad, stride):
    check("ConvTranspose", {"x": rand(1, 3, 5, 4)}, {"w": rand(3, 4, 3, 2, seed=1)},
          {"auto_pad": auto_pad, "strides": [stride, stride]})


@pytest.mark.parametrize("output_shape,auto_pad", [
    ([10, 9], "NOTSET"), ([11, 10], "NOTSET"),  # W larger than the full result
    ([9, 8], "SAME_UPPER"), ([8, 7], "SAME_LOWER"), ([10, 9], "SAME_UPPER"),
])
def test_conv_transpose_output_shape(output_shape, auto_pad):
    check("ConvTranspose", {"x": rand(2, 3, 5, 4)}, {"w": rand(3, 2, 3, 3, seed=1), "b": rand(2, seed=2)},
          {"strides": [2, 2], "output_shape": output_shape, "auto_pad": auto_pad})


def test_conv_transpose_1d():
    check("ConvTranspose", {"x": rand(2, 3, 9)}, {"w": rand(3, 4, 3, seed=1), "b": rand(4, seed=2)},
          {"strides": [2], "pads": [1, 0], "output_padding": [1]})


def test_conv_transpose_fused_relu():
    """Deconv2D hosts the Relu after it (fuse_activation) and still matches."""
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["t"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["t"], ["y"])]
    model = _model(nodes, {"x": [1, 4, 5, 5]}, {"w": rand(4, 3, 3, 3, seed=1)})
    x = rand(1, 4, 5, 5)
    engine = _compare(model, {"x": x})
    deconv = [op for op in engine.graph.net.op if op.type == "Deconv2D"]
    assert len(deconv) == 1 and [op.type for op in engine.graph.net.op].count("Activation") == 0
    assert [a.s.decode() for a in deconv[0].arg if a.name == "activation"] == ["RELU"]


def test_conv_transpose_dynamic_filter_rejected():
    model = make_model("ConvTranspose", {"x": rand(1, 2, 3, 3), "w": rand(2, 2, 3, 3)})
    with pytest.raises(ModelError, match="ConvTranspose.*constant"):
        onnx_backend.run(model, {"x": rand(1, 2, 3, 3), "w": rand(2, 2, 3, 3)})


# ---- Resize / Upsample -------------------------------------------------------
COORD_MODES = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
               "tf_half_pixel_for_nn"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def _resize_inputs(opset, scales=None, sizes=None):
    """Node inputs and initializers of Resize-11+ (roi, scales, sizes)."""
    consts, order = {}, ["x", "", "", ""]
    if opset < 13:  # roi and scales may not be omitted before opset 13
        consts["roi"], order[1] = np.zeros(0, np.float32), "roi"
        consts["scales"], order[2] = np.asarray(scales if scales is not None else [], np.float32), "scales"
    elif scales is not None:
        consts["scales"], order[2] = np.asarray(scales, np.float32), "scales"
    if sizes is not None:
        consts["sizes"], order[3] = np.asarray(sizes, np.int64), "sizes"
    return consts, order[:4 if sizes is not None else 3]


@pytest.mark.parametrize("coord", COORD_MODES)
@pytest.mark.parametrize("nearest", NEAREST_MODES)
# 0.6, 1.3 and 0.3 put some source coordinates within float32 error of a .5 tie.
@pytest.mark.parametrize("hw_scales", [(2.0, 3.0), (0.5, 0.75), (1.7, 0.6), (1.3, 0.3), (1.0, 2.5)])
def test_resize_nearest_scales(coord, nearest, hw_scales):
    consts, order = _resize_inputs(13, scales=[1, 1, *hw_scales])
    # 30 x 20 keeps every resized length whole (align_corners refuses fractional ones).
    check("Resize", {"x": rand(2, 3, 30, 20)}, consts,
          {"mode": "nearest", "coordinate_transformation_mode": coord, "nearest_mode": nearest},
          opset=13, input_order=order)


@pytest.mark.parametrize("coord", [c for c in COORD_MODES if c != "tf_half_pixel_for_nn"])  # nearest only
@pytest.mark.parametrize("hw_scales", [(2.0, 3.0), (0.5, 0.75), (1.7, 0.6), (1.0, 2.5)])
def test_resize_linear_scales(coord, hw_scales):
    consts, order = _resize_inputs(13, scales=[1, 1, *hw_scales])
    check("Resize", {"x": rand(2, 3, 10, 20)}, consts,
          {"mode": "linear", "coordinate_transformation_mode": coord}, opset=13, input_order=order)


@pytest.mark.parametrize("coord", ["half_pixel", "align_corners", "pytorch_half_pixel", "asymmetric"])
@pytest.mark.parametrize("a,exclude", [(-0.75, 0), (-0.5, 1)])  # ONNX's default; TensorFlow's
@pytest.mark.parametrize("hw_scales", [(2.0, 3.0), (0.5, 1.5)])
def test_resize_cubic_scales(coord, a, exclude, hw_scales):
    consts, order = _resize_inputs(13, scales=[1, 1, *hw_scales])
    check("Resize", {"x": rand(2, 3, 10, 20, low=0, high=255)}, consts,
          {"mode": "cubic", "coordinate_transformation_mode": coord, "cubic_coeff_a": a,
           "exclude_outside": exclude}, opset=13, input_order=order, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_align_corners_fractional_length_refused(mode):
    """4 * 0.6 = 2.4: onnx's reference divides by 1.4, onnxruntime by 1; we refuse."""
    consts, order = _resize_inputs(13, scales=[1, 1, 0.6, 0.6])
    model = make_model("Resize", {"x": rand(1, 1, 5, 4)}, consts,
                       {"mode": mode, "coordinate_transformation_mode": "align_corners"},
                       opset=13, input_order=order)
    model.graph.node[0].name = "ac"
    with pytest.raises(ModelError, match="Resize 'ac'.*align_corners.*axis 3.*sizes"):
        onnx_backend.run(model, {"x": rand(1, 1, 5, 4)})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_same_size_is_a_copy(mode):
    """A scale that does not change the size (5 * 1.1 -> 5) leaves the tensor as it is."""
    consts, order = _resize_inputs(13, scales=[1, 1, 1.1, 1.15])
    check("Resize", {"x": rand(1, 2, 5, 6)}, consts,
          {"mode": mode, "coordinate_transformation_mode": "asymmetric"}, opset=13, input_order=order)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("coord", ["half_pixel", "align_corners", "pytorch_half_pixel", "asymmetric"])
@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("size_hw", [(13, 5), (1, 1), (3, 17)])
def test_resize_sizes(mode, coord, opset, size_hw):
    consts, order = _resize_inputs(opset, sizes=[2, 3, *size_hw])
    check_new("Resize", {"x": rand(2, 3, 6, 9)}, consts,
              {"mode": mode, "coordinate_transformation_mode": coord}, opset=opset, input_order=order)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_resize_opset18_axes_and_aspect_policy(mode, policy):
    check_new("Resize", {"x": rand(1, 2, 6, 9)}, {"sizes": np.array([10, 12], np.int64)},
          {"mode": mode, "axes": [2, 3], "keep_aspect_ratio_policy": policy},
          opset=18, input_order=["x", "", "", "sizes"])


def test_resize_opset18_axes_scales():
    check_new("Resize", {"x": rand(1, 2, 6, 9)}, {"scales": np.array([1.5, 2.0], np.float32)},
          {"mode": "linear", "axes": [-2, -1]}, opset=18, input_order=["x", "", "scales"])


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_half_pixel_symmetric(mode):
    check_new("Resize", {"x": rand(1, 2, 5, 7)}, {"scales": np.array([1, 1, 1.6, 0.7], np.float32)},
          {"mode": mode, "coordinate_transformation_mode": "half_pixel_symmetric"},
          opset=19, input_order=["x", "", "scales"])


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("hw_scales", [(2.0, 2.0), (1.5, 2.5), (0.6, 0.35)])
def test_resize_opset10(mode, hw_scales):
    check("Resize", {"x": rand(2, 3, 7, 10)}, {"scales": np.array([1, 1, *hw_scales], np.float32)},
          {"mode": mode}, opset=10)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("opset", [7, 9])
def test_upsample(mode, opset):
    x, scales = rand(2, 3, 5, 4), [1.0, 1.0, 2.0, 1.5]
    if opset == 7:
        check("Upsample", {"x": x}, attrs={"mode": mode, "scales": scales}, opset=7)
    else:
        check("Upsample", {"x": x}, {"scales": np.array(scales, np.float32)}, {"mode": mode}, opset=9)


def test_resize_antialiased_cubic_downscale_rejected():
    consts, order = _resize_inputs(18, scales=[1, 1, 0.5, 0.5])
    model = make_model("Resize", {"x": rand(1, 1, 4, 4)}, consts, {"mode": "cubic", "antialias": 1},
                       opset=18, input_order=order)
    model.graph.node[0].name = "down_cubic"
    with pytest.raises(ModelError, match="Resize 'down_cubic'.*antialiased cubic"):
        onnx_backend.run(model, {"x": rand(1, 1, 4, 4)})


def test_resize_channel_scale_rejected():
    consts, order = _resize_inputs(13, scales=[1, 2, 2, 2])
    model = make_model("Resize", {"x": rand(1, 2, 4, 4)}, consts, {"mode": "nearest"},
                       opset=13, input_order=order)
    model.graph.node[0].name = "bad_resize"
    with pytest.raises(ModelError, match="Resize 'bad_resize'.*N and C"):
        onnx_backend.run(model, {"x": rand(1, 2, 4, 4)})


# ---- DepthToSpace / SpaceToDepth ---------------------------------------------
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("block,c,h,w", [(2, 8, 3, 5), (3, 18, 2, 4), (2, 4, 1, 1)])
def test_depth_to_space(mode, block, c, h, w):
    check("DepthToSpace", {"x": rand(2, c, h, w)}, attrs={"blocksize": block, "mode": mode})


def test_depth_to_space_opset1():
    check("DepthToSpace", {"x": rand(1, 12, 3, 3)}, attrs={"blocksize": 2}, opset=1)


@pytest.mark.parametrize("block,c,h,w", [(2, 3, 4, 6), (3, 2, 6, 9), (2, 1, 2, 2)])
def test_space_to_depth(block, c, h, w):
    check("SpaceToDepth", {"x": rand(2, c, h, w)}, attrs={"blocksize": block})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_nhwc_channel_order(mode):
    """Between convs the op runs on NHWC data; the channel order must still be ONNX's."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("DepthToSpace", ["a"], ["b"], blocksize=2, mode=mode),
             helper.make_node("SpaceToDepth", ["b"], ["c"], blocksize=2),
             helper.make_node("Conv", ["c", "w2"], ["y"])]
    model = _model(nodes, {"x": [2, 3, 5, 4]},
                   {"w1": rand(12, 3, 3, 3, seed=1), "w2": rand(5, 12, 1, 1, seed=2)})
    engine = _compare(model, {"x": rand(2, 3, 5, 4)})
    _assert_nhwc_between(engine, ["Conv2D", "DepthToSpace", "SpaceToDepth", "Conv2D"])


# ---- Pad ------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", [[0, 0, 1, 2, 0, 0, 3, 0], [0, 1, 2, 1, 0, 2, 0, 3],
                                  [1, 0, 0, 0, 0, 1, 1, 1]])
@pytest.mark.parametrize("opset", [2, 11, 13, 18])
def test_pad(mode, pads, opset):
    x = rand(2, 3, 5, 6)
    if opset < 11:
        check("Pad", {"x": x}, attrs={"mode": mode, "pads": pads, "value": 1.5}, opset=opset)
    else:
        check_new("Pad", {"x": x}, {"pads": np.array(pads, np.int64), "value": np.array(1.5, np.float32)},
                  {"mode": mode}, opset=opset)


def test_pad_negative_crops():
    check("Pad", {"x": rand(2, 3, 7, 6)}, {"pads": np.array([0, 0, -1, 2, 0, -1, 1, -2], np.int64)},
          opset=13)


def test_pad_axes_opset18():
    check_new("Pad", {"x": rand(2, 3, 5, 6)},
          {"pads": np.array([1, 2, 3, 0], np.int64), "axes": np.array([-1, 1], np.int64)},
          {"mode": "reflect"}, opset=18, input_order=["x", "pads", "", "axes"])


def test_pad_wrap_opset19():
    check_new("Pad", {"x": rand(1, 2, 4, 5)}, {"pads": np.array([0, 0, 1, 2, 0, 0, 2, 3], np.int64)},
          {"mode": "wrap"}, opset=19)


def test_pad_3d_and_int():
    check("Pad", {"x": rand(3, 4, 5)}, {"pads": np.array([1, 0, 2, 0, 3, 1], np.int64)}, opset=13)
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    check("Pad", {"x": x}, {"pads": np.array([1, 2, 0, 1], np.int64), "v": np.array(7, np.int64)},
          opset=13, out_types=[np.int64])


def test_pad_stays_nhwc_between_convs():
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]),
             helper.make_node("Pad", ["a", "pads"], ["b"], mode="reflect"),
             helper.make_node("Conv", ["b", "w2"], ["y"], strides=[2, 2])]
    model = _model(nodes, {"x": [2, 3, 7, 6]},
                   {"w1": rand(4, 3, 3, 3, seed=1), "w2": rand(5, 4, 3, 3, seed=2),
                    "pads": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)})
    engine = _compare(model, {"x": rand(2, 3, 7, 6)})
    _assert_nhwc_between(engine, ["Conv2D", "Pad", "Conv2D"])


# ---- InstanceNormalization --------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 5, 7, 6), (3, 4, 9), (1, 3, 2, 3, 4)])
def test_instance_norm(shape):
    c = shape[1]
    check("InstanceNormalization", {"x": rand(*shape, low=-3, high=5)},
          {"s": rand(c, seed=1), "b": rand(c, seed=2)}, {"epsilon": 1e-3}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op,attrs", [
    ("Resize", {"mode": "nearest"}), ("Resize", {"mode": "linear"}),
    ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}), ("SpaceToDepth", {"blocksize": 2}),
    ("InstanceNormalization", {}), ("Pad", {"mode": "reflect"}),
])
def test_constant_input_folds(op, attrs):
    """Ops on a constant fold at conversion, running their kernels on NCHW data."""
    extra = {"Resize": (["", "scales"], {"scales": np.array([1, 1, 1.5, 2], np.float32)}),
             "InstanceNormalization": (["s", "b"], {"s": rand(4, seed=3), "b": rand(4, seed=4)}),
             "Pad": (["pads"], {"pads": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)})}
    names, consts = extra.get(op, ([], {}))
    nodes = [helper.make_node(op, ["c"] + names, ["t"], **attrs),
             helper.make_node("Add", ["t", "x"], ["y"])]
    c = rand(1, 4, 4, 6, seed=2)
    shape = run_ort(_model(nodes[:1], {}, {"c": c, **consts}), {})[0].shape
    engine = _compare(_model(nodes, {"x": list(shape)}, {"c": c, **consts}), {"x": rand(*shape)})
    assert [o.type for o in engine.graph.net.op] == ["Eltwise"]


# ---- a small network ------------------------------------------------------------------
def test_conv_resize_conv_depth_to_space_stays_nhwc():
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["a", "", "scales"], ["r"], mode="linear"),
             helper.make_node("Conv", ["r", "w2"], ["c"], pads=[0, 1, 1, 0], kernel_shape=[2, 2]),
             helper.make_node("DepthToSpace", ["c"], ["y"], blocksize=2, mode="CRD")]
    model = _model(nodes, {"x": [2, 3, 5, 6]},
                   {"w1": rand(6, 3, 3, 3, seed=1), "b1": rand(6, seed=2),
                    "scales": np.array([1, 1, 2, 1.5], np.float32), "w2": rand(8, 6, 2, 2, seed=3)})
    engine = _compare(model, {"x": rand(2, 3, 5, 6)})
    _assert_nhwc_between(engine, ["Conv2D", "ResizeBilinear", "Conv2D", "DepthToSpace"])


# ---- helpers ------------------------------------------------------------------------
def _model(nodes, inputs: dict, consts: dict, opset=17):
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.asarray(v), n) for n, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def check_new(op_type, inputs, consts=None, attrs=None, opset=18, input_order=None, **tol):
    """`check` for opsets >= 18: onnx_case.make_model leaves those at an IR version newer
    than onnxruntime accepts, so cap it here."""
    if opset <= 17:
        return check(op_type, inputs, consts, attrs, opset=opset, input_order=input_order, **tol)
    model = make_model(op_type, inputs, consts, attrs, opset=opset, input_order=input_order)
    model.ir_version = 10
    _compare(model, inputs, **tol)


def _compare(model, inputs, rtol=1e-4, atol=1e-5):
    """Run on our engine and onnxruntime; assert they agree; return our engine."""
    expected = run_ort(model, inputs)
    engine = onnx_backend.prepare(model, inputs)
    got = engine.run(inputs)
    for name, e in zip(engine.graph.output_names, expected):
        np.testing.assert_allclose(got[name], e, rtol=rtol, atol=atol, err_msg=name)
    return engine


def _assert_nhwc_between(engine, chain):
    """The ops of `chain` run in this order, with no Transpose among them."""
    types = [op.type for op in engine.graph.net.op]
    first = types.index(chain[0])
    span = types[first:first + len(chain)]
    assert span == chain, f"ops {types}: expected {chain} back to back"
    for op in engine.graph.net.op[first:first + len(chain)]:
        fmt = [a.s.decode() for a in op.arg if a.name == "data_format"]
        assert fmt in ([], ["NHWC"]), f"{op.name} ({op.type}) runs {fmt}"
