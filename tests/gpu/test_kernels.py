"""Every GPU kernel against the numpy CPU kernel (the reference) on random shapes.

Shapes have channels that are not multiples of 4, batch 2, stride 2 and dilation 2 where
the op has them; each case runs in fp32_fp32 and fp16_fp32 (tolerances in gpu_case.py).
"""
import numpy as np
import pytest

from tests.gpu.gpu_case import DATA_TYPES, check_op


def r(*shape, seed=0, positive=False):
    a = np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)
    return np.abs(a) + 0.1 if positive else a


X = (2, 7, 9, 6)          # batch 2, odd spatial sizes, 6 channels (not a multiple of 4)
PADS = [1, 1, 1, 1]

# (id, op type, inputs, constants, args)
CASES = [
    ("conv3x3", "Conv2D", {"x": r(*X)}, {"w": r(7, 6, 3, 3), "b": r(7)}, dict(pads=PADS, activation="RELU")),
    ("conv1x1", "Conv2D", {"x": r(*X)}, {"w": r(5, 6, 1, 1)}, {}),
    ("conv1x1_s2", "Conv2D", {"x": r(*X)}, {"w": r(9, 6, 1, 1), "b": r(9)}, dict(strides=[2, 2])),
    ("conv3x3_s2_asym", "Conv2D", {"x": r(*X)}, {"w": r(7, 6, 3, 3)}, dict(strides=[2, 2], pads=[1, 0, 1, 2])),
    ("conv5x5_d2", "Conv2D", {"x": r(*X)}, {"w": r(3, 6, 5, 5), "b": r(3)},
     dict(dilations=[2, 2], pads=[2, 3, 2, 3], activation="LEAKYRELU", activation_coefficient=0.1)),
    ("conv2x3_same", "Conv2D", {"x": r(*X)}, {"w": r(4, 6, 2, 3)}, dict(padding="SAME_UPPER", strides=[2, 1])),
    ("winograd2", "Conv2D", {"x": r(*X)}, {"w": r(9, 6, 3, 3), "b": r(9)},
     dict(pads=PADS, wino_block_size=2, activation="RELUX", max_limit=6.0)),
    ("winograd4", "Conv2D", {"x": r(*X)}, {"w": r(10, 6, 3, 3)}, dict(pads=[0, 1, 2, 0], wino_block_size=4)),
    ("depthwise_s2", "DepthwiseConv2d", {"x": r(*X)}, {"w": r(6, 1, 3, 3), "b": r(6)},
     dict(strides=[2, 2], pads=PADS, activation="RELUX", max_limit=6.0)),
    ("depthwise_d2", "DepthwiseConv2d", {"x": r(*X)}, {"w": r(6, 1, 3, 3)}, dict(dilations=[2, 2], pads=[2, 2, 2, 2])),
    ("deconv_s2", "Deconv2D", {"x": r(*X)}, {"w": r(6, 5, 3, 3), "b": r(5)}, dict(strides=[2, 2], pads=[1, 1, 0, 0])),
    ("deconv_d2_outpad", "Deconv2D", {"x": r(*X)}, {"w": r(6, 3, 4, 4)},
     dict(strides=[2, 2], dilations=[2, 2], output_padding=[1, 1], activation="SIGMOID")),
    ("maxpool_s2", "Pooling", {"x": r(*X)}, None, dict(pooling_type="MAX", kernels=[3, 3], strides=[2, 2], pads=PADS)),
    ("avgpool_ceil_incl", "Pooling", {"x": r(*X)}, None,
     dict(pooling_type="AVG", kernels=[3, 3], strides=[2, 2], pads=PADS, count_include_pad=1, ceil_mode=1)),
    ("avgpool_d2", "Pooling", {"x": r(*X)}, None,
     dict(pooling_type="AVG", kernels=[2, 3], strides=[1, 2], dilations=[2, 2], pads=[0, 1, 1, 1])),
    ("reduce_mean_hw", "Reduce", {"x": r(*X)}, None, dict(reduce_type="MEAN", axis=[1, 2], keepdims=1)),
    ("reduce_max_hw", "Reduce", {"x": r(*X)}, None, dict(reduce_type="MAX", axis=[1, 2], keepdims=0)),
    ("add", "Eltwise", {"a": r(*X), "b": r(*X, seed=1)}, None, dict(type="SUM")),
    ("sub_relu", "Eltwise", {"a": r(*X), "b": r(*X, seed=1)}, None, dict(type="SUB", activation="RELU")),
    ("div", "Eltwise", {"a": r(*X), "b": r(*X, seed=1, positive=True)}, None, dict(type="DIV")),
    ("min", "Eltwise", {"a": r(*X), "b": r(*X, seed=1)}, None, dict(type="MIN")),
    ("max", "Eltwise", {"a": r(*X), "b": r(*X, seed=1)}, None, dict(type="MAX")),
    ("sqr_diff", "Eltwise", {"a": r(*X), "b": r(*X, seed=1)}, None, dict(type="SQR_DIFF")),
    ("mul_channel", "Eltwise", {"a": r(*X)}, {"b": r(6)}, dict(type="PROD")),
    ("add_n11c", "Eltwise", {"a": r(*X), "b": r(2, 1, 1, 6)}, None, dict(type="SUM")),
    ("scalar_minus_x", "Eltwise", {"a": r(*X)}, {"b": np.float32(2.5)}, dict(type="SUB", input_order=["b", "a"])),
    ("pow", "Eltwise", {"a": r(*X, positive=True)}, {"b": np.float32(1.5)}, dict(type="POW")),
    ("sqrt", "Eltwise", {"a": r(*X, positive=True)}, None, dict(type="SQRT")),
    ("exp", "Eltwise", {"a": r(*X)}, None, dict(type="EXP")),
    ("abs", "Eltwise", {"a": r(*X)}, None, dict(type="ABS")),
    ("round", "Eltwise", {"a": r(*X) * 3}, None, dict(type="ROUND")),
    ("mean2", "Eltwise", {"a": r(*X), "b": r(*X, seed=2)}, None, dict(type="MEAN")),
    ("relu", "Activation", {"x": r(*X)}, None, dict(activation="RELU")),
    # a quarter step off the grid (exact in half): the rounding is never a near-tie; both clamps hit
    ("fake_quantize", "FakeQuantize",
     {"x": ((np.random.default_rng(5).integers(-150, 200, X) + 0.25) * 0.0625).astype(np.float32)},
     None, dict(scale=0.0625, zero_point=100, quant_min=0, quant_max=255)),
    ("relu6", "Activation", {"x": r(*X) * 4}, None, dict(activation="RELUX", max_limit=6.0)),
    ("leaky", "Activation", {"x": r(*X)}, None, dict(activation="LEAKYRELU", activation_coefficient=0.2)),
    ("sigmoid", "Activation", {"x": r(*X)}, None, dict(activation="SIGMOID")),
    ("tanh", "Activation", {"x": r(*X)}, None, dict(activation="TANH")),
    ("hardswish", "Activation", {"x": r(*X) * 4}, None, dict(activation="HARDSWISH")),
    ("hardsigmoid", "Activation", {"x": r(*X)}, None,
     dict(activation="HARDSIGMOID", activation_coefficient=0.2, max_limit=0.5)),
    ("elu", "Activation", {"x": r(*X)}, None, dict(activation="ELU", activation_coefficient=1.0)),
    ("gelu", "Activation", {"x": r(*X)}, None, dict(activation="GELU")),
    ("clip", "Activation", {"x": r(*X)}, None, dict(activation="CLIP", activation_coefficient=-0.5, max_limit=0.7)),
    ("softplus", "Activation", {"x": r(*X) * 5}, None, dict(activation="SOFTPLUS")),
    ("softsign", "Activation", {"x": r(*X)}, None, dict(activation="SOFTSIGN")),
    ("selu", "Activation", {"x": r(*X)}, None, dict(activation="SELU", activation_coefficient=1.67, beta=1.05)),
    ("mish", "Activation", {"x": r(*X)}, None, dict(activation="MISH")),
    ("prelu_channel", "Activation", {"x": r(*X)}, {"s": r(6)}, dict(activation="PRELU")),
    ("batchnorm", "BatchNorm", {"x": r(*X)}, {"s": r(6), "o": r(6)}, dict(activation="RELU")),
    ("fc", "FullyConnected", {"x": r(2, 13)}, {"w": r(7, 13), "b": r(7)}, dict(activation="RELU")),
    ("matmul_batched", "MatMul", {"a": r(2, 5, 7), "b": r(2, 7, 6)}, None, {}),
    ("matmul_transposed", "MatMul", {"a": r(2, 7, 5), "b": r(2, 6, 7)}, None, dict(transpose_a=1, transpose_b=1)),
    ("matmul_2d_const", "MatMul", {"a": r(5, 7)}, {"b": r(7, 9)}, {}),
    ("matmul_shared_b", "MatMul", {"a": r(3, 5, 7)}, {"b": r(9, 7)}, dict(transpose_b=1)),
    ("concat3", "Concat", {"a": r(2, 3, 4, 5), "b": r(2, 3, 4, 3), "c": r(2, 3, 4, 1)}, None, dict(axis=3)),
    ("concat6", "Concat", {f"i{i}": r(1, 3, 4, i + 1) for i in range(6)}, None, dict(axis=-1)),
    ("softmax_2d", "Softmax", {"x": r(2, 10) * 3}, None, {}),
    ("logsoftmax_4d", "Softmax", {"x": r(2, 3, 4, 7)}, None, dict(use_log=1)),
    ("bilinear_half_pixel", "ResizeBilinear", {"x": r(*X)}, None,
     dict(size=[11, 5], scale=[11 / 7, 5 / 9], coordinate_transformation_mode="half_pixel")),
    ("bilinear_align", "ResizeBilinear", {"x": r(*X)}, None,
     dict(size=[14, 18], scale=[2.0, 2.0], coordinate_transformation_mode="align_corners")),
    ("nearest", "ResizeNearestNeighbor", {"x": r(*X)}, None,
     dict(size=[14, 18], scale=[2.0, 2.0], coordinate_transformation_mode="asymmetric", nearest_mode="floor")),
    ("pad_constant", "Pad", {"x": r(*X)}, None, dict(paddings=[0, 1, 2, 1, 0, 2, 1, 3], constant_value=0.5)),
    ("pad_reflect", "Pad", {"x": r(*X)}, None, dict(paddings=[0, 2, 2, 0, 0, 3, 1, 0], pad_type="REFLECT")),
    ("pad_symmetric", "Pad", {"x": r(*X)}, None, dict(paddings=[0, 2, 2, 0, 0, 3, 1, 0], pad_type="SYMMETRIC")),
    ("pad_edge", "Pad", {"x": r(*X)}, None, dict(paddings=[0, 2, 2, 0, 0, 3, 1, 0], pad_type="EDGE")),
    ("pad_crop", "Pad", {"x": r(*X)}, None, dict(paddings=[0, -1, 2, 0, 0, 3, -2, 0])),
    ("space_to_depth", "SpaceToDepth", {"x": r(2, 4, 6, 3)}, None, dict(block_size=2)),
    ("space_to_depth_crd", "SpaceToDepth", {"x": r(2, 4, 6, 3)}, None, dict(block_size=2, mode="CRD")),
    ("depth_to_space", "DepthToSpace", {"x": r(2, 3, 2, 12)}, None, dict(block_size=2)),
    ("depth_to_space_crd", "DepthToSpace", {"x": r(2, 3, 2, 12)}, None, dict(block_size=2, mode="CRD")),
    ("reshape_flatten", "Reshape", {"x": r(2, 3, 4, 5)}, None, dict(dims=[2, 60])),
    ("reshape_unflatten", "Reshape", {"x": r(2, 30)}, None, dict(dims=[2, 5, 2, 3])),
    ("transpose_nhwc_nchw", "Transpose", {"x": r(2, 3, 4, 5)}, None, dict(dims=[0, 3, 1, 2])),
    ("transpose_3d", "Transpose", {"x": r(3, 5, 7)}, None, dict(dims=[2, 0, 1])),
    ("channel_shuffle", "ChannelShuffle", {"x": r(2, 3, 5, 12)}, None, dict(group=3)),
]


@pytest.mark.parametrize("data_type", DATA_TYPES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_kernel_matches_cpu(case, data_type):
    _, op_type, inputs, consts, args = case
    check_op(op_type, inputs, consts, data_type, **dict(args))


def test_every_gpu_kernel_is_covered():
    from mace.ops.registry import all_ops
    with_gpu = {name for name, s in all_ops().items() if "gpu" in s.kernels}
    assert with_gpu == {c[1] for c in CASES}


def test_fallback_when_the_kernel_refuses_the_op():
    # a channel multiplier of 2 has no GPU form: the op stays on the CPU, results still match
    engine = check_op("DepthwiseConv2d", {"x": r(1, 5, 5, 3)}, {"w": r(6, 1, 3, 3)}, on_gpu=False, pads=PADS)
    op = engine.graph.net.op[0]
    assert not engine.gpu.runs(op) and "multiplier" in engine.gpu.reasons[op.name]
