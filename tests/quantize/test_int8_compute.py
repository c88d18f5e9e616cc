"""int8 Conv2D, DepthwiseConv2d, Deconv2D, FullyConnected, MatMul against float and integers.

Error bound (asserted per output element, computed per case). With x^, w^ the dequantized
input and weight, x^*w^ - x*w = (x^ - x)*w^ + x*(w^ - w), rounding errors are at most half
a step (ranges are calibrated on the same inputs, so nothing saturates beyond rounding),
and |w^| <= |w| + w_step/2. Summed over each output's receptive field:

    |out - ref| <= out_step                                  requantization: 0.5 step, plus the
                                                             RELUX bound's own rounding (0.5 step)
                 + 0.5 * in_step * sum(|w| + 0.5 * w_step)   input rounding
                 + 0.5 * sum(|x| * w_step)                   weight rounding (w_step per channel)
                 + 0.5 * in_step * max(w_step)               int32 bias rounding
                 + 1e-5                                      float32 reference arithmetic

The sums are the op itself run in float on (ones, |w| + w_step/2) and (|x|, w_step): the
same geometry, pads contributing nothing (0.0 is exact). Fused RELU/RELUX are 1-Lipschitz,
so the bound before the activation holds after it. `test_bound_catches_a_wrong_zero_point`
shows the bound fails a kernel that pads with q = 0 instead of the input zero point.

Bit-exactness: two engines give byte-identical outputs, and on tiny cases each kernel's
uint8 output equals a plain int64 loop (centred products, int32 bias, M * 2^-shift round
half up, clamp) computed here by hand.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

from mace.frontends.base import add_input_info, add_output_info
from mace.config.specs import TensorSpec
from mace.ir.graph import Graph
from mace.ops.conv2d import conv_geometry, padded_buffer
from mace.ops.fast.int8.conv2d import Conv2DInt8Fast
from mace.ops.int8.conv2d import Conv2DInt8
from mace.ops.registry import CONVERT, graph_context
from mace.ir.quant_params import activation_clamp, quantize_multiplier
from mace.runtime.engine import Engine
from mace.transform.shape_inference import infer_shapes
from tests.ops.ir_graph import make_graph
from tests.quantize.qcase import kernel_tags, output_step, quantize_and_run

RNG = np.random.default_rng(1234)


def rand(*shape, scale=1.0):
    return (RNG.uniform(-1.0, 1.0, shape) * scale).astype(np.float32)


# ---- float graphs and the bound -------------------------------------------------------

def single_op_graph(op_type, x_shape, consts, args):
    inputs = ["x", "w"] + (["b"] if "b" in consts else [])
    return make_graph(x_shape, [(op_type, inputs, ["y"], args)], consts)


def float_op(op_type, x, w, args):
    """The float op on (x, w) without bias or activation: the bound's weighted sums."""
    plain = {k: v for k, v in args.items() if k not in ("activation", "max_limit")}
    graph = single_op_graph(op_type, x.shape, {"w": w.astype(np.float32)}, plain)
    return Engine(graph).run({"x": x.astype(np.float32)})["y"].astype(np.float64)


def quantized_op(qgraph, op_type):
    return next(op for op in qgraph.net.op if op.type == op_type)


def error_bound(op_type, args, x, w, qgraph):
    op = quantized_op(qgraph, op_type)
    in_step = qgraph.quant_params(op.input[0]).scale
    wp = qgraph.quant_params(op.input[1])
    w_step = np.broadcast_to(wp.broadcast(np.asarray(wp.scale, np.float64), w.ndim), w.shape)
    from_input = 0.5 * in_step * float_op(op_type, np.ones_like(x), np.abs(w) + 0.5 * w_step, args)
    from_weight = 0.5 * float_op(op_type, np.abs(x), w_step, args)
    bias = 0.5 * in_step * float(np.max(w_step))
    return output_step(qgraph, "y") + from_input + from_weight + bias + 1e-5


def check_case(op_type, x_shape, consts, args, per_channel=True):
    """Quantize one op, assert the int8 kernel ran and the error is within the bound."""
    x = rand(*x_shape)
    graph = single_op_graph(op_type, x_shape, consts, args)
    ref, out, qgraph = quantize_and_run(graph, {"x": x}, per_channel=per_channel)
    assert kernel_tags(qgraph)[op_type].startswith("int8")
    err = np.abs(ref["y"].astype(np.float64) - out["y"])
    bound = error_bound(op_type, args, x, consts["w"], qgraph)
    assert np.all(err <= bound), f"error {err.max():.4g} exceeds bound {bound.min():.4g}.." \
                                 f" by {np.max(err - bound):.4g}"
    assert err.max() > 0 or op_type == "MatMul"   # the comparison sees real quantization
    return ref, out, qgraph, x


# ---- error vs float -------------------------------------------------------------------

CONV_CASES = {
    "3x3_same_bias": ((1, 9, 9, 4), (6, 4, 3, 3), {"padding": "SAME"}),
    "stride2_pads": ((2, 8, 7, 3), (5, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
    "dilation2": ((1, 10, 10, 4), (4, 4, 3, 3), {"dilations": [2, 2], "padding": "SAME"}),
    "group2": ((1, 6, 6, 4), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "pointwise": ((1, 5, 5, 8), (7, 8, 1, 1), {}),
    "valid_5x3_stride_1x2": ((1, 9, 9, 3), (4, 3, 5, 3), {"strides": [1, 2], "padding": "VALID"}),
    "relu": ((1, 7, 7, 3), (4, 3, 3, 3), {"padding": "SAME", "activation": "RELU"}),
    "relux": ((1, 7, 7, 3), (4, 3, 3, 3), {"padding": "SAME", "activation": "RELUX",
                                           "max_limit": 0.5}),
}


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("name", CONV_CASES)
def test_conv2d_within_bound(name, per_channel):
    x_shape, w_shape, args = CONV_CASES[name]
    consts = {"w": rand(*w_shape), "b": rand(w_shape[0], scale=0.5)}
    if name == "pointwise":
        del consts["b"]
    _, out, _, _ = check_case("Conv2D", x_shape, consts, args, per_channel)
    if args.get("activation") in ("RELU", "RELUX"):
        assert out["y"].min() >= 0
    if args.get("activation") == "RELUX":
        assert out["y"].max() == pytest.approx(0.5, abs=0.01)   # the clamp really bites


DW_CASES = {
    "m1_same": ((1, 8, 8, 4), (4, 1, 3, 3), {"padding": "SAME"}),
    "m2_stride2": ((1, 9, 9, 3), (6, 1, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "m2_dilation2_relux": ((1, 9, 9, 2), (4, 1, 3, 3), {"dilations": [2, 2], "padding": "SAME",
                                                        "activation": "RELUX", "max_limit": 0.6}),
    "m1_relu_valid": ((2, 6, 6, 5), (5, 1, 3, 3), {"activation": "RELU"}),
}


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("name", DW_CASES)
def test_depthwise_within_bound(name, per_channel):
    x_shape, w_shape, args = DW_CASES[name]
    consts = {"w": rand(*w_shape), "b": rand(w_shape[0], scale=0.5)}
    check_case("DepthwiseConv2d", x_shape, consts, args, per_channel)


DECONV_CASES = {
    "stride2_outpad": ((1, 5, 5, 4), (4, 5, 3, 3), {"strides": [2, 2], "output_padding": [1, 1],
                                                    "pads": [1, 1, 1, 1]}),
    "stride1_valid": ((1, 4, 6, 3), (3, 4, 3, 3), {}),
    "same_upper_stride2": ((2, 4, 4, 3), (3, 2, 4, 4), {"strides": [2, 2], "padding": "SAME_UPPER"}),
    "group2": ((1, 5, 5, 4), (4, 3, 3, 3), {"strides": [2, 2], "group": 2}),
    "depthwise_like_relu": ((1, 5, 5, 4), (4, 1, 3, 3), {"strides": [2, 2], "group": 4,
                                                         "activation": "RELU"}),
    "dilation2_relux": ((1, 5, 5, 3), (3, 4, 3, 3), {"dilations": [2, 2], "activation": "RELUX",
                                                     "max_limit": 0.7}),
}


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("name", DECONV_CASES)
def test_deconv_within_bound(name, per_channel):
    x_shape, w_shape, args = DECONV_CASES[name]
    group = args.get("group", 1)
    consts = {"w": rand(*w_shape), "b": rand(w_shape[1] * group, scale=0.5)}
    _, _, qgraph, _ = check_case("Deconv2D", x_shape, consts, args, per_channel)
    wp = qgraph.quant_params(quantized_op(qgraph, "Deconv2D").input[1])
    assert wp.axis == (1 if per_channel and group == 1 else None)


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("act", ["", "RELU"])
def test_fully_connected_within_bound(bias, per_channel, act):
    consts = {"w": rand(10, 24)}
    if bias:
        consts["b"] = rand(10, scale=0.5)
    check_case("FullyConnected", (3, 24), consts, {"activation": act} if act else {}, per_channel)


# ---- MatMul: constant b, two activations ----------------------------------------------

def two_input_graph(a_shape, b_shape, args):
    graph = Graph()
    for name, shape in (("a", a_shape), ("b", b_shape)):
        add_input_info(graph, TensorSpec(name, tuple(shape), "NONE"))
    graph.add_op("MatMul", ["a", "b"], ["y"], **args)
    add_output_info(graph, TensorSpec("y", None, "NONE"))
    infer_shapes(graph)
    return graph


def matmul_bound(a, b, args, steps):
    """out_step + 0.5*sa*sum(|b| + sb/2) + 0.5*sb*sum(|a|), with numpy's matmul."""
    sa, sb, so = steps
    ta = lambda m: np.swapaxes(m, -1, -2) if args.get("transpose_a") else m   # noqa: E731
    tb = lambda m: np.swapaxes(m, -1, -2) if args.get("transpose_b") else m   # noqa: E731
    a64, b64 = ta(a.astype(np.float64)), tb(b.astype(np.float64))
    return (so + 0.5 * sa * (np.ones_like(a64) @ (np.abs(b64) + 0.5 * sb))
            + 0.5 * sb * (np.abs(a64) @ np.ones_like(b64)) + 1e-5)


MATMUL_CASES = {
    "2d": ((5, 12), (12, 7), {}),
    "batched_transpose_b": ((2, 4, 9), (2, 6, 9), {"transpose_b": 1}),
    "broadcast_transpose_a": ((3, 8, 4), (8, 5), {"transpose_a": 1}),
}


def _steps(qgraph):
    op = quantized_op(qgraph, "MatMul")
    return (qgraph.quant_params(op.input[0]).scale, qgraph.quant_params(op.input[1]).scale,
            output_step(qgraph, "y"))


@pytest.mark.parametrize("name", MATMUL_CASES)
def test_matmul_two_activations_within_bound(name):
    a_shape, b_shape, args = MATMUL_CASES[name]
    a, b = rand(*a_shape), rand(*b_shape, scale=2.0)
    ref, out, qgraph = quantize_and_run(two_input_graph(a_shape, b_shape, args), {"a": a, "b": b})
    assert kernel_tags(qgraph)["MatMul"].startswith("int8")
    assert not qgraph.consts   # both operands are activations
    err = np.abs(ref["y"].astype(np.float64) - out["y"])
    assert np.all(err <= matmul_bound(a, b, args, _steps(qgraph))), err.max()


@pytest.mark.parametrize("name", MATMUL_CASES)
def test_matmul_const_b_within_bound(name):
    a_shape, b_shape, args = MATMUL_CASES[name]
    b = rand(*b_shape)
    graph = make_graph(a_shape, [("MatMul", ["x", "w"], ["y"], args)], {"w": b})
    a = rand(*a_shape)
    ref, out, qgraph = quantize_and_run(graph, {"x": a})
    assert kernel_tags(qgraph)["MatMul"].startswith("int8")
    assert qgraph.quant_params(quantized_op(qgraph, "MatMul").input[1]).axis is None
    err = np.abs(ref["y"].astype(np.float64) - out["y"])
    assert np.all(err <= matmul_bound(a, b, args, _steps(qgraph))), err.max()


# ---- what stays float -------------------------------------------------------------------

def test_unsupported_activation_stays_float():
    graph = single_op_graph("Conv2D", (1, 5, 5, 2), {"w": rand(3, 2, 3, 3)},
                            {"activation": "LEAKYRELU", "activation_coefficient": 0.1})
    ref, out, qgraph = quantize_and_run(graph, {"x": rand(1, 5, 5, 2)})
    assert kernel_tags(qgraph)["Conv2D"] != "int8"
    why = Conv2DInt8.check(graph_context(qgraph, quantized_op(qgraph, "Conv2D"), CONVERT))
    assert why.startswith("fused activation LEAKYRELU")
    np.testing.assert_allclose(out["y"], ref["y"], rtol=1e-5, atol=1e-6)


# ---- the bound is sharp enough to catch a broken kernel -------------------------------

def test_bound_catches_a_wrong_zero_point(monkeypatch):
    """Padding with q = 0 (real -x_zero*step) instead of the zero point must fail the bound."""
    setup = Conv2DInt8.setup

    def broken(self, ctx):
        setup(self, ctx)
        self.xp[...] = -self.zero   # only the pads keep it: run() overwrites the interior
    monkeypatch.setattr(Conv2DInt8, "setup", broken)
    # the broken reference kernel must be the one that runs: the fast one (int8:fast) declines
    monkeypatch.setattr(Conv2DInt8Fast, "check", staticmethod(lambda ctx: "declined by the test"))
    x_shape, w_shape, args = CONV_CASES["3x3_same_bias"]
    with pytest.raises(AssertionError, match="exceeds bound"):
        check_case("Conv2D", x_shape, {"w": rand(*w_shape), "b": rand(w_shape[0])}, args)


# ---- bit-exactness ------------------------------------------------------------------------

def test_two_engines_give_identical_bytes():
    x_shape, w_shape, args = CONV_CASES["stride2_pads"]
    _, out, qgraph, x = check_case("Conv2D", x_shape, {"w": rand(*w_shape), "b": rand(w_shape[0])},
                                   args)
    again = Engine(copy.deepcopy(qgraph)).run({"x": x})["y"]
    assert again.tobytes() == out["y"].tobytes()


def int_requantize(acc: int, real: float, zero: int, qmin: int, qmax: int) -> int:
    """One accumulator to uint8 by hand: Python integers, round half up, clamp."""
    m, shift = quantize_multiplier(real)
    assert abs(m * 2.0 ** -shift / real - 1) < 2 ** -30
    return min(max(zero + ((acc * m + (1 << (shift - 1))) >> shift), qmin), qmax)


def int_parts(qgraph, op_type):
    """(op, centred int64 weight, weight scale per output channel, int bias or None, ...)."""
    op = quantized_op(qgraph, op_type)
    wq, wp = qgraph.consts[op.input[1]], qgraph.quant_params(op.input[1])
    zero_w = wp.broadcast(np.asarray(wp.zero_point, np.int64), wq.ndim)
    bias = qgraph.consts[op.input[2]].astype(np.int64) if len(op.input) > 2 else None
    return op, wq.astype(np.int64) - zero_w, wp, bias


def kernel_output(qgraph, op_type, xq):
    """Run the op's int8 reference kernel alone on uint8 input xq (and its fast kernel, where
    one takes the op: the same bytes)."""
    outs = []
    for options in ({"reference_kernels": True}, {}):
        node = next(n for n in Engine(qgraph, options=options).nodes if n.op.type == op_type)
        assert node.tag.startswith("int8")
        out = np.empty(node.outputs[0].shape, np.uint8)
        node.kernel.run([xq] + node.inputs[1:], [out])
        outs.append(out)
    np.testing.assert_array_equal(outs[1], outs[0])
    return outs[0]


def requantize_all(acc, qgraph, op, w_scale, act="", max_limit=0.0):
    xp_, out_p = qgraph.quant_params(op.input[0]), qgraph.quant_params(op.output[0])
    qmin, qmax = activation_clamp(act, out_p, max_limit)
    res = np.empty(acc.shape, np.uint8)
    for idx in np.ndindex(acc.shape):
        real = float(xp_.scale) * float(w_scale[idx[-1]]) / float(out_p.scale)
        res[idx] = int_requantize(int(acc[idx]), real, int(out_p.zero_point), qmin, qmax)
    return res


def test_conv2d_equals_integer_loop():
    args = {"strides": [2, 1], "pads": [1, 2, 0, 1], "group": 2, "activation": "RELUX",
            "max_limit": 0.8}
    graph = single_op_graph("Conv2D", (1, 6, 5, 4), {"w": rand(4, 2, 3, 2), "b": rand(4)}, args)
    _, _, qgraph = quantize_and_run(graph, {"x": rand(1, 6, 5, 4)})
    op, w, wp, bias = int_parts(qgraph, "Conv2D")
    zx = int(qgraph.quant_params(op.input[0]).zero_point)
    xq = RNG.integers(0, 256, (1, 6, 5, 4), dtype=np.uint8)
    geo = conv_geometry(type("C", (), {"arg": lambda self, k, d=None: args.get(k, d)})(),
                        xq.shape, w.shape)
    _, (kh, kw), s, d, pads, (oh, ow) = geo
    xpad = padded_buffer(xq.shape, pads, zx, np.int64)      # pads hold the zero point
    xpad[:, pads[0]:pads[0] + 6, pads[1]:pads[1] + 5] = xq
    acc = np.zeros((1, oh, ow, 4), np.int64)
    for y, x_, o in np.ndindex(oh, ow, 4):
        g = o // 2
        for i, j, ci in np.ndindex(kh, kw, 2):
            v = xpad[0, y * s[0] + i * d[0], x_ * s[1] + j * d[1], g * 2 + ci]
            acc[0, y, x_, o] += (v - zx) * w[o, ci, i, j]
        acc[0, y, x_, o] += bias[o]
    expect = requantize_all(acc, qgraph, op, np.broadcast_to(wp.scale, 4), "RELUX", 0.8)
    np.testing.assert_array_equal(kernel_output(qgraph, "Conv2D", xq), expect)


def test_depthwise_equals_integer_loop():
    graph = single_op_graph("DepthwiseConv2d", (1, 5, 5, 2), {"w": rand(4, 1, 3, 3), "b": rand(4)},
                            {"padding": "SAME", "strides": [2, 2]})
    _, _, qgraph = quantize_and_run(graph, {"x": rand(1, 5, 5, 2)})
    op, w, wp, bias = int_parts(qgraph, "DepthwiseConv2d")
    zx = int(qgraph.quant_params(op.input[0]).zero_point)
    xq = RNG.integers(0, 256, (1, 5, 5, 2), dtype=np.uint8)
    xpad = np.full((7, 7, 2), zx, np.int64)                 # SAME, 3x3, stride 2 on 5: pads 1
    xpad[1:6, 1:6] = xq[0]
    acc = np.zeros((1, 3, 3, 4), np.int64)
    for y, x_, o in np.ndindex(3, 3, 4):
        patch = xpad[2 * y:2 * y + 3, 2 * x_:2 * x_ + 3, o // 2] - zx   # multiplier 2
        acc[0, y, x_, o] = int(np.sum(patch * w[o, 0])) + bias[o]
    expect = requantize_all(acc, qgraph, op, wp.scale)
    np.testing.assert_array_equal(kernel_output(qgraph, "DepthwiseConv2d", xq), expect)


def test_deconv_equals_integer_loop():
    args = {"strides": [2, 2], "output_padding": [1, 0], "pads": [1, 0, 0, 1], "activation": "RELU"}
    graph = single_op_graph("Deconv2D", (1, 3, 3, 2), {"w": rand(2, 3, 3, 3), "b": rand(3)}, args)
    _, _, qgraph = quantize_and_run(graph, {"x": rand(1, 3, 3, 2)})
    op, w, wp, bias = int_parts(qgraph, "Deconv2D")
    zx = int(qgraph.quant_params(op.input[0]).zero_point)
    xq = RNG.integers(0, 256, (1, 3, 3, 2), dtype=np.uint8)
    full = np.zeros((2 * 2 + 1 + 3, 2 * 2 + 0 + 3, 3), np.int64)     # s*(h-1) + outpad + k
    for y, x_, ci, i, j, o in np.ndindex(3, 3, 2, 3, 3, 3):
        full[2 * y + i, 2 * x_ + j, o] += (int(xq[0, y, x_, ci]) - zx) * w[ci, o, i, j]
    acc = (full[1:, :-1] + bias)[None]                     # crop pads [top 1, right 1]
    expect = requantize_all(acc, qgraph, op, wp.scale, "RELU")
    np.testing.assert_array_equal(kernel_output(qgraph, "Deconv2D", xq), expect)


def test_fully_connected_equals_integer_loop():
    graph = single_op_graph("FullyConnected", (4, 32), {"w": rand(5, 32), "b": rand(5)}, {})
    _, _, qgraph = quantize_and_run(graph, {"x": rand(4, 32)}, per_channel=False)
    op, w, wp, bias = int_parts(qgraph, "FullyConnected")
    zx = int(qgraph.quant_params(op.input[0]).zero_point)
    assert wp.axis is None and int(wp.zero_point) != 0        # asymmetric per-tensor weights
    xq = RNG.integers(0, 256, (4, 32), dtype=np.uint8)
    acc = np.array([[sum((int(xq[r, k]) - zx) * int(w[o, k]) for k in range(32)) + int(bias[o])
                     for o in range(5)] for r in range(4)], np.int64)
    expect = requantize_all(acc, qgraph, op, np.full(5, wp.scale))
    np.testing.assert_array_equal(kernel_output(qgraph, "FullyConnected", xq), expect)


def test_matmul_equals_integer_loop():
    a_shape, b_shape = (2, 3, 4), (2, 4, 5)
    qgraph = quantize_and_run(two_input_graph(a_shape, b_shape, {}),
                              {"a": rand(*a_shape), "b": rand(*b_shape)})[2]
    op = quantized_op(qgraph, "MatMul")
    pa, pb = (qgraph.quant_params(t) for t in op.input)
    aq = RNG.integers(0, 256, a_shape, dtype=np.uint8)
    bq = RNG.integers(0, 256, b_shape, dtype=np.uint8)
    acc = np.einsum("bik,bkj->bij", aq.astype(np.int64) - int(pa.zero_point),
                    bq.astype(np.int64) - int(pb.zero_point))
    expect = requantize_all(acc, qgraph, op, np.full(5, pb.scale))
    node = next(n for n in Engine(qgraph).nodes if n.op.type == "MatMul")
    out = np.empty(node.outputs[0].shape, np.uint8)
    node.kernel.run([aq, bq], [out])
    np.testing.assert_array_equal(out, expect)


def test_matmul_const_b_equals_integer_loop():
    graph = make_graph((3, 6), [("MatMul", ["x", "w"], ["y"], {"transpose_b": 1})], {"w": rand(4, 6)})
    qgraph = quantize_and_run(graph, {"x": rand(3, 6)})[2]
    op = quantized_op(qgraph, "MatMul")
    pa, pb = (qgraph.quant_params(t) for t in op.input)
    bq = qgraph.consts[op.input[1]].astype(np.int64)
    aq = RNG.integers(0, 256, (3, 6), dtype=np.uint8)
    acc = np.array([[sum((int(aq[i, k]) - int(pa.zero_point)) * (int(bq[j, k]) - int(pb.zero_point))
                         for k in range(6)) for j in range(4)] for i in range(3)], np.int64)
    expect = requantize_all(acc, qgraph, op, np.full(4, pb.scale))
    np.testing.assert_array_equal(kernel_output(qgraph, "MatMul", aq), expect)
