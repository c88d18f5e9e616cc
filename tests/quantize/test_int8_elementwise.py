"""int8 kernels that are not GEMMs: Pooling, Eltwise, Concat, Activation, Resize, Softmax,
Reduce and the pass-through ops (mace/ops/int8/).

Every case quantizes a small float graph (tests/quantize/qcase.py), asserts the
int8 kernel ran, and compares with the float graph run on the *dequantized*
inputs (each input quantized and dequantized with the parameters the quantized
graph uses, float constants likewise): what is left is the kernel's own error.
Bounds (the kernels' module docstrings derive them):
  * max pooling, pass-through ops, nearest resize, Reduce MAX, RELU with the input's
    parameters: exact (bit for bit equal floats);
  * requantizing ops (AVG pool, Eltwise, Concat, ReLU6/CLIP, bilinear resize, Softmax,
    Reduce MEAN, and any op given an output range of its own): <= 1 output step.
Every quantized graph also runs on a second engine (device "dsp", int8 kernels only)
and must give the same bits; one tiny case per requantizing op is checked against
an integer reference computed by hand in int64 numpy.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

from mace.ir.graph import Graph
from mace.ir import quant_params as qp
from mace.runtime.engine import Engine
from mace.transform.passes.quantize import quantize_plan
from tests.ops.ir_graph import graph_of
from tests.quantize.qcase import kernel_alone, kernel_tags, output_step, quantize_and_run

RNG = np.random.default_rng(20240905)
QUANT_EDGES = ("Quantize", "Dequantize")


# ----------------------------------------------------------------------------- helpers

def build(inputs: dict, ops, consts=None, outputs=("y",)) -> Graph:
    """A float graph with inputs {name: shape} and `ops`: (type, inputs, outputs, args)."""
    return graph_of(inputs, ops, {k: np.asarray(v, np.float32) for k, v in (consts or {}).items()},
                    outputs)


def rand(shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def snapped_inputs(qgraph, inputs):
    """Each model input as the quantized graph sees it: quantized, then dequantized."""
    out = dict(inputs)
    for op in qgraph.net.op:
        if op.type == "Quantize" and op.input[0] in inputs:
            p = qgraph.quant_params(op.output[0])
            out[op.input[0]] = qp.dequantize(qp.quantize(inputs[op.input[0]], p), p)
    return out


def snapped_consts(graph):
    """The float graph with float constants rounded as the quantize pass rounds them."""
    g = copy.deepcopy(graph)
    for name, c in g.consts.items():
        if c.dtype.kind == "f":
            p = qp.activation_params(float(c.min(initial=0)), float(c.max(initial=0)))
            g.consts[name] = qp.dequantize(qp.quantize(c, p), p)
    return g


def check(graph, inputs, op_type, steps=1.0, ranges=None):
    """Quantize and run; assert the int8 kernel, the error bound and two-engine bit equality."""
    _, out, qgraph = quantize_and_run(graph, inputs, ranges=ranges)
    tags = kernel_tags(qgraph)
    assert tags[op_type].startswith("int8"), tags
    assert all(tag.startswith("int8") for t, tag in tags.items()), tags   # nothing float in between
    ref = Engine(snapped_consts(graph)).run(snapped_inputs(qgraph, inputs))
    for name, value in out.items():
        if steps == 0:
            np.testing.assert_array_equal(value, ref[name])
        else:
            err = float(np.max(np.abs(value.astype(np.float64) - ref[name])))
            assert err <= steps * output_step(qgraph, name) + 1e-6, (name, err)
    again = Engine(qgraph, device="dsp").run(inputs)
    for name, value in out.items():
        np.testing.assert_array_equal(value, again[name])
    return out, ref, qgraph


def input_only(x, name="x"):
    """Ranges naming only the input: outputs with output_range "input" inherit its params."""
    return {name: (float(x.min()), float(x.max()))}


def reason(graph):
    """The quantize plan's reason for the graph's first op (None: quantizable)."""
    return quantize_plan(graph)[graph.net.op[0].name]


def run_kernel(op_type, args, xs, in_params, out_params):
    """Run the int8 kernel of op_type alone on uint8 arrays with hand-picked params."""
    return kernel_alone(op_type, args, xs, in_params, out_params)[1]


def P(scale, zero):   # noqa: N802 - reads like the formula's (scale, zero point)
    return qp.QuantParams(float(np.float32(scale)), int(zero))


def rounding_multiply(acc, real):
    """acc * real rounded half up, via the (M, shift) integer multiplier, in int64."""
    m, s = qp.quantize_multiplier(real)
    a = np.asarray(acc, np.int64)
    if s < 1:
        a, s = a << (1 - s), 1
    return (a * m + (1 << (s - 1))) >> s


# ----------------------------------------------------------------------------- Pooling

def pool(kind, k, s, **extra):
    return {"pooling_type": kind, "kernels": [k, k], "strides": [s, s], **extra}


@pytest.mark.parametrize("args", [
    pool("MAX", 2, 2, padding="VALID"),
    pool("MAX", 3, 1, padding="SAME"),
    pool("MAX", 3, 2, pads=[0, 0, 1, 1], ceil_mode=1),
])
def test_max_pool_is_exact(args):
    x = rand((1, 7, 7, 3), -2.0, 3.0)
    g = build({"x": x.shape}, [("Pooling", ["x"], ["y"], args)])
    check(g, {"x": x}, "Pooling", steps=0, ranges=input_only(x))


@pytest.mark.parametrize("args, own_range", [
    (pool("AVG", 3, 1, padding="SAME"), False),
    (pool("AVG", 3, 1, padding="SAME", count_include_pad=1), False),
    (pool("AVG", 2, 2, padding="VALID"), True),
    (pool("MAX", 2, 2, padding="VALID"), True),
    (pool("AVG", 3, 2, pads=[1, 1, 1, 1], ceil_mode=1), True),
])
def test_pool_requantizes_within_one_step(args, own_range):
    x = rand((2, 6, 6, 4), -1.0, 4.0)
    g = build({"x": x.shape}, [("Pooling", ["x"], ["y"], args)])
    check(g, {"x": x}, "Pooling", ranges=None if own_range else input_only(x))


def test_avg_pool_integer_reference():
    # one 2x2 window, zero point 10: codes - 10 = 0, 10, 21, 40 -> sum 71, /4 = 17.75
    x = np.array([10, 20, 31, 50], np.uint8).reshape(1, 2, 2, 1)
    same = run_kernel("Pooling", pool("AVG", 2, 2, padding="VALID"), [x], [P(0.1, 10)], P(0.1, 10))
    assert same.item() == 10 + 18
    # output scale 0.25, zero point 3: 71 * 0.1 / (0.25 * 4) = 7.1 -> 7, + 3
    other = run_kernel("Pooling", pool("AVG", 2, 2, padding="VALID"), [x], [P(0.1, 10)], P(0.25, 3))
    assert other.item() == 3 + rounding_multiply(71, np.float64(np.float32(0.1)) /
                                                 (np.float64(np.float32(0.25)) * 4))
    assert other.item() == 10


# ----------------------------------------------------------------------------- Eltwise

def eltwise(kind, **extra):
    return {"type": kind, **extra}


@pytest.mark.parametrize("kind, b_shape, extra", [
    ("SUM", (1, 4, 4, 3), {}),
    ("SUB", (1, 1, 1, 3), {}),                       # broadcast along channels
    ("PROD", (1, 4, 1, 3), {}),
    ("SUM", (1, 4, 4, 3), {"activation": "RELU"}),
    ("SUM", (3,), {"activation": "RELUX", "max_limit": 2.0}),
    ("MAX", (1, 4, 4, 3), {}),
    ("MIN", (1, 1, 4, 1), {}),
])
def test_eltwise_two_inputs_different_scales(kind, b_shape, extra):
    a, b = rand((1, 4, 4, 3), -1.0, 1.0), rand(b_shape, 0.0, 5.0)
    g = build({"a": a.shape, "b": b.shape},
              [("Eltwise", ["a", "b"], ["y"], eltwise(kind, **extra))])
    check(g, {"a": a, "b": b}, "Eltwise")


@pytest.mark.parametrize("kind", ["SUM", "SUB", "PROD", "MAX"])
def test_eltwise_constant_operand(kind):
    x = rand((1, 3, 3, 4), -2.0, 2.0)
    c = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
    g = build({"x": x.shape}, [("Eltwise", ["x", "c"], ["y"], eltwise(kind))], {"c": c})
    _, _, qgraph = check(g, {"x": x}, "Eltwise")
    assert any(qgraph.consts[t].dtype == np.uint8 for t in qgraph.net.op[1].input[1:])


def test_eltwise_mean_of_three():
    xs = {n: rand((1, 2, 2, 5), lo, hi) for n, lo, hi in (("a", -1, 1), ("b", 0, 3), ("c", -4, 0))}
    g = build({n: x.shape for n, x in xs.items()},
              [("Eltwise", ["a", "b", "c"], ["y"], eltwise("MEAN"))])
    check(g, xs, "Eltwise")


def test_eltwise_sum_integer_reference():
    a = np.array([0, 7, 128, 255], np.uint8)
    b = np.array([255, 3, 100, 0], np.uint8)
    pa, pb, po = P(0.02, 128), P(0.05, 0), P(0.07, 40)
    out = run_kernel("Eltwise", eltwise("SUM"), [a, b], [pa, pb], po)
    # A, B = the ratios to the output scale in 30 bits: 0.05 / 0.07 * 2**30 < 2**30 (2**31
    # would not be), so S = 30; one rounding, half up
    ra, rb = (np.float64(p.scale) / np.float64(po.scale) for p in (pa, pb))
    ca, cb = int(np.rint(ra * 2**30)), int(np.rint(rb * 2**30))
    assert 2**29 < cb < 2**30 and abs(ca / 2**30 - 2 / 7) < 1e-7
    acc = ca * (a.astype(np.int64) - 128) + cb * b.astype(np.int64) + 2**29
    np.testing.assert_array_equal(out, np.clip(40 + (acc >> 30), 0, 255))
    exact = (pa.scale * (a - 128.0) + pb.scale * b) / po.scale + 40
    assert np.max(np.abs(out - np.clip(exact, 0, 255))) <= 0.5 + 1e-5
    # by hand: (0 - 128) * 0.02 / 0.07 + 255 * 0.05 / 0.07 + 40 = 185.57, then 7.57, 111.43, 76.29
    assert out.tolist() == [186, 8, 111, 76]


@pytest.mark.parametrize("ratios, coefs, shift", [
    ([0.5, 0.5], [2**29, 2**29], 30),
    ([1.0, -1.0], [2**29, -2**29], 29),                 # SUB: the second negated
    ([1e-6, 3e-7], [70368744, 21110623], 46),           # a much coarser output: the largest shift
    ([20000.0, 1.0], [655360000, 32768], 15),           # a much finer output: the fast kernel's least
    ([40000.0, 1.0], [655360000, 16384], 14),           # finer still: the fast kernel declines
    ([1e40, -1e40], [2**40, -2**40], 1),                # absurd (a hostile model's scales): capped
])
def test_eltwise_additive_coefficients(ratios, coefs, shift):
    from mace.ops.int8.eltwise import additive_coefficients
    assert additive_coefficients(ratios) == (coefs, shift)


def test_eltwise_mean_and_sub_error_within_one_step():
    """Every pair of codes: the integer result within 0.5 + the multipliers' rounding of the
    exact real one, for SUM, SUB and MEAN at scale ratios of all sizes."""
    a, b = np.repeat(np.arange(256, dtype=np.uint8), 256), np.tile(np.arange(256, dtype=np.uint8), 256)
    for kind, pa, pb, po in (("SUM", P(0.013, 7), P(0.9, 250), P(0.5, 100)),
                             ("SUB", P(0.02, 128), P(0.021, 120), P(0.003, 128)),
                             ("MEAN", P(1e-3, 0), P(2e-3, 255), P(1e-3, 30))):
        out = run_kernel("Eltwise", eltwise(kind), [a, b], [pa, pb], po).astype(np.float64)
        sign = -1.0 if kind == "SUB" else 1.0
        real = pa.scale * (a - float(pa.zero_point)) + sign * pb.scale * (b - float(pb.zero_point))
        real = real / (2.0 if kind == "MEAN" else 1.0) / po.scale + po.zero_point
        assert np.max(np.abs(out - np.clip(real, 0, 255))) <= 0.5 + 1e-5, kind


def test_eltwise_prod_integer_reference():
    a, b = np.array([[3, 200]], np.uint8), np.array([[21], [0]], np.uint8)
    pa, pb, po = P(0.1, 3), P(0.01, 0), P(0.04, 5)
    out = run_kernel("Eltwise", eltwise("PROD"), [a, b], [pa, pb], po)
    acc = (a.astype(np.int64) - 3) * b.astype(np.int64)         # (2, 2) by broadcasting
    real = np.float64(pa.scale) * np.float64(pb.scale) / np.float64(po.scale)
    np.testing.assert_array_equal(out, np.clip(5 + rounding_multiply(acc, real), 0, 255))
    assert out.tolist() == [[5, 5 + 103], [5, 5]]    # 197 * 21 * 0.1 * 0.01 / 0.04 = 103.4


@pytest.mark.parametrize("args, why", [
    (eltwise("DIV"), "DIV"),
    (eltwise("SUM", activation="TANH"), "TANH"),
    (eltwise("POW"), "POW"),
])
def test_eltwise_unsupported_stays_float(args, why):
    a, b = rand((1, 2, 2, 2), 0.5, 1.0), rand((1, 2, 2, 2), 0.5, 1.0)
    g = build({"a": a.shape, "b": b.shape}, [("Eltwise", ["a", "b"], ["y"], args)])
    assert why in reason(g)
    _, out, qgraph = quantize_and_run(g, {"a": a, "b": b})
    assert kernel_tags(qgraph)["Eltwise"] != "int8"


# ----------------------------------------------------------------------------- Concat

@pytest.mark.parametrize("axis", [3, 1])
def test_concat_requantizes_each_input(axis):
    a, b = rand((1, 3, 3, 2), -1.0, 1.0), rand((1, 3, 3, 2), 0.0, 6.0)
    g = build({"a": a.shape, "b": b.shape},
              [("Concat", ["a", "b", "c"], ["y"], {"axis": axis})],
              {"c": rand((1, 3, 3, 2), -3.0, 0.5)})
    check(g, {"a": a, "b": b}, "Concat")


def test_concat_integer_reference():
    a, b = np.array([[0, 100, 255]], np.uint8), np.array([[10, 20]], np.uint8)
    pa, pb, po = P(0.01, 0), P(0.1, 10), P(0.05, 20)
    out = run_kernel("Concat", {"axis": 1}, [a, b], [pa, pb], po)
    ra = rounding_multiply(a.astype(np.int64), np.float64(pa.scale) / np.float64(po.scale))
    rb = rounding_multiply(b.astype(np.int64) - 10, np.float64(pb.scale) / np.float64(po.scale))
    np.testing.assert_array_equal(out, np.clip(20 + np.concatenate([ra, rb], 1), 0, 255))
    assert out.tolist() == [[20, 40, 71, 20, 40]]


# ----------------------------------------------------------------------------- Activation

@pytest.mark.parametrize("args, steps, own_range", [
    ({"activation": "RELU"}, 0, False),                     # a clamp at the zero point
    ({"activation": "RELUX", "max_limit": 1.5}, 1, False),  # 1.5 rounds to a code
    ({"activation": "RELU"}, 1, True),
    ({"activation": "RELUX", "max_limit": 6.0}, 1, True),
    ({"activation": "CLIP", "activation_coefficient": -0.5, "max_limit": 1.0}, 1, True),
])
def test_activation_clamps(args, steps, own_range):
    x = rand((1, 4, 4, 3), -3.0, 8.0)
    g = build({"x": x.shape}, [("Activation", ["x"], ["y"], args)])
    check(g, {"x": x}, "Activation", steps=steps, ranges=None if own_range else input_only(x))


def test_relu6_integer_reference():
    x = np.array([0, 30, 31, 200, 255], np.uint8)
    out = run_kernel("Activation", {"activation": "RELUX", "max_limit": 6.0}, [x],
                     [P(0.1, 30)], P(6.0 / 255, 0))
    m = rounding_multiply(x.astype(np.int64) - 30, np.float64(np.float32(0.1)) /
                          np.float64(np.float32(6.0 / 255)))
    np.testing.assert_array_equal(out, np.clip(m, 0, 255))
    assert out.tolist() == [0, 0, 4, 255, 255]


@pytest.mark.parametrize("args", [
    {"activation": "HARDSWISH"}, {"activation": "SIGMOID"}, {"activation": "TANH"},
    {"activation": "LEAKYRELU", "activation_coefficient": 0.1},
    {"activation": "HARDSIGMOID", "activation_coefficient": 0.2, "max_limit": 0.5},
    {"activation": "SWISH", "activation_coefficient": 1.0}, {"activation": "ELU", "activation_coefficient": 1.0},
])
def test_activations_as_a_table_of_the_input_codes(args):
    """The activations that are no clamp: one 256-entry table, the float op on each dequantized
    code rounded to the output's grid (<= 0.5 output step against the float op on the
    dequantized input)."""
    from mace.ops._common import apply_activation

    x = rand((1, 4, 4, 3), -5.0, 4.0)
    g = build({"x": x.shape}, [("Activation", ["x"], ["y"], args)])
    assert reason(g) is None
    # the output's range covers the activation over the input's (no saturation at the edges)
    y = apply_activation(np.linspace(-5.0, 4.0, 1001), args["activation"],
                         args.get("activation_coefficient", 0.0), args.get("max_limit", 0.0))
    ranges = {"x": (-5.0, 4.0), "y": (float(y.min()), float(y.max()))}
    check(g, {"x": x}, "Activation", steps=0.5 + 1e-3, ranges=ranges)


def test_other_activations_stay_float():
    x = rand((1, 2, 2, 2))
    for kind in ("GELU", "SOFTPLUS", "MISH"):
        g = build({"x": x.shape}, [("Activation", ["x"], ["y"], {"activation": kind})])
        assert kind in reason(g)


# ----------------------------------------------------------------------------- Resize

def resize(size, in_hw, mode="half_pixel", **extra):
    return {"size": list(size), "scale": [size[0] / in_hw[0], size[1] / in_hw[1]],
            "coordinate_transformation_mode": mode, **extra}


@pytest.mark.parametrize("args", [
    resize((8, 10), (4, 5)),
    resize((3, 2), (4, 5), "align_corners", nearest_mode="floor"),
])
def test_resize_nearest_is_exact(args):
    x = rand((1, 4, 5, 3), -2.0, 2.0)
    g = build({"x": x.shape}, [("ResizeNearestNeighbor", ["x"], ["y"], args)])
    check(g, {"x": x}, "ResizeNearestNeighbor", steps=0, ranges=input_only(x))


@pytest.mark.parametrize("args, own_range", [
    (resize((8, 10), (4, 5)), False),
    (resize((7, 3), (4, 5), "align_corners"), True),
    (resize((6, 6), (4, 5), "asymmetric"), False),
])
def test_resize_bilinear_within_one_step(args, own_range):
    x = rand((2, 4, 5, 3), -1.0, 3.0)
    g = build({"x": x.shape}, [("ResizeBilinear", ["x"], ["y"], args)])
    check(g, {"x": x}, "ResizeBilinear", ranges=None if own_range else input_only(x))


def test_resize_bilinear_integer_reference():
    # 1x2 -> 1x4, half_pixel: source x = 0, 0.25, 0.75, 1 -> hi weights 0, 256, 768, 0 of 1024
    x = np.array([20, 120], np.uint8).reshape(1, 1, 2, 1)
    out = run_kernel("ResizeBilinear", resize((1, 4), (1, 2)), [x], [P(0.1, 20)], P(0.2, 0))
    vals = np.array([0, 100], np.int64)                      # codes - zero point
    cols = vals[[0, 0, 0, 1]] * np.array([1024, 768, 256, 1024]) \
        + vals[[0, 1, 1, 1]] * np.array([0, 256, 768, 0])
    expect = rounding_multiply(cols * 1024, np.float64(np.float32(0.1)) /
                               np.float64(np.float32(0.2)) / 2**20)   # rows: one row, weight 1
    np.testing.assert_array_equal(out.ravel(), np.clip(expect, 0, 255))
    assert out.ravel().tolist() == [0, 13, 38, 50]


# ----------------------------------------------------------------------------- Softmax

@pytest.mark.parametrize("shape, lo, hi", [((3, 10), -4.0, 4.0), ((1, 3, 3, 8), -1.0, 2.0)])
def test_softmax_within_one_step(shape, lo, hi):
    x = rand(shape, lo, hi)
    g = build({"x": x.shape}, [("Softmax", ["x"], ["y"], {"axis": -1})])
    _, _, qgraph = check(g, {"x": x}, "Softmax")
    p = qgraph.quant_params(qgraph.net.op[1].output[0])
    assert (p.zero_point, p.scale) == (0, float(np.float32(1 / 255)))   # fixed (0, 1) range


def test_softmax_integer_reference():
    x = np.array([[255, 255, 0], [10, 12, 9]], np.uint8)
    scale = np.float32(0.05)
    out = run_kernel("Softmax", {"axis": -1}, [x], [P(scale, 128)], P(1 / 255, 0))
    d = x.max(axis=1, keepdims=True).astype(np.int64) - x
    e = np.rint(np.exp(-d * np.float64(scale)) * 2**20).astype(np.int64)
    total = e.sum(axis=1, keepdims=True)
    q30 = (e * 2**30 + total // 2) // total
    expect = rounding_multiply(q30, 1 / (2**30 * np.float64(np.float32(1 / 255))))
    np.testing.assert_array_equal(out, np.clip(expect, 0, 255))
    assert out[0].tolist() == [127, 127, 0]     # exp(-12.75) * 255 / 2 rounds to 0


def test_softmax_unsupported_forms():
    x = rand((2, 3, 4))
    g = build({"x": x.shape}, [("Softmax", ["x"], ["y"], {"axis": 1})])
    assert "last axis" in reason(g)
    g = build({"x": x.shape}, [("Softmax", ["x"], ["y"], {"axis": -1, "use_log": 1})])
    assert "LogSoftmax" in reason(g)


# ----------------------------------------------------------------------------- pass-through

PASS_THROUGH = [
    ("Reshape", {"dims": [1, 16, 6]}, ("y",)),
    ("Transpose", {"dims": [0, 3, 1, 2]}, ("y",)),
    ("Identity", {}, ("y",)),
    ("Split", {"axis": 3, "split": [2, 4]}, ("y", "z")),
    ("Pad", {"paddings": [0, 1, 2, 0, 0, 2, 1, 0]}, ("y",)),
    ("Pad", {"paddings": [0, 1, 1, 0, 0, 1, 2, 0], "pad_type": "REFLECT"}, ("y",)),
    ("DepthToSpace", {"block_size": 2}, ("y",)),
    ("SpaceToDepth", {"block_size": 2}, ("y",)),
]


@pytest.mark.parametrize("op_type, args, outs", PASS_THROUGH)
def test_pass_through_is_exact(op_type, args, outs):
    x = rand((1, 4, 4, 4 if op_type == "DepthToSpace" else 6), -1.0, 2.5)
    g = build({"x": x.shape}, [(op_type, ["x"], list(outs), args)], outputs=outs)
    _, _, qgraph = check(g, {"x": x}, op_type, steps=0, ranges=input_only(x))
    p_in = qgraph.quant_params(qgraph.net.op[1].input[0])
    assert all(qgraph.quant_params(t) == p_in for t in qgraph.net.op[1].output)


@pytest.mark.parametrize("op_type, args, outs", [PASS_THROUGH[3], PASS_THROUGH[4]])
def test_pass_through_with_own_range_rescales(op_type, args, outs):
    x = rand((1, 4, 4, 6), -1.0, 2.5)
    g = build({"x": x.shape}, [(op_type, ["x"], list(outs), args)], outputs=outs)
    ranges = {**input_only(x), **{t: (-0.5, 1.0) for t in outs}}   # narrower: saturates too
    _, out, qgraph = quantize_and_run(g, {"x": x}, ranges=ranges)
    assert kernel_tags(qgraph)[op_type].startswith("int8")
    ref = Engine(g).run(snapped_inputs(qgraph, {"x": x}))
    for t in outs:
        assert np.max(np.abs(out[t] - np.clip(ref[t], -0.5, 1.0))) <= output_step(qgraph, t) + 1e-6


def test_pad_uses_the_zero_point():
    x = rand((1, 2, 2, 1), 1.0, 2.0)         # all positive: zero point 0 .. range [0, 2]
    g = build({"x": x.shape}, [("Pad", ["x"], ["y"], {"paddings": [0, 1, 1, 0, 0, 1, 1, 0]})])
    out, _, _ = check(g, {"x": x}, "Pad", steps=0, ranges={"x": (-1.0, 2.0)})
    assert np.all(out["y"][0, 0] == 0.0) and np.all(out["y"][0, :, 0] == 0.0)


# ----------------------------------------------------------------------------- Reduce

@pytest.mark.parametrize("args, steps, own_range", [
    ({"reduce_type": "MEAN", "axis": [1, 2], "keepdims": 1}, 1, False),   # global avg pool
    ({"reduce_type": "MEAN", "axis": [1, 2], "keepdims": 0}, 1, True),
    ({"reduce_type": "MAX", "axis": [3], "keepdims": 1}, 0, False),
    ({"reduce_type": "MIN", "axis": [1], "keepdims": 0}, 1, True),
])
def test_reduce(args, steps, own_range):
    x = rand((2, 5, 5, 3), -1.0, 3.0)
    g = build({"x": x.shape}, [("Reduce", ["x"], ["y"], args)])
    check(g, {"x": x}, "Reduce", steps=steps, ranges=None if own_range else input_only(x))


def test_reduce_mean_integer_reference():
    x = np.array([0, 1, 2, 255, 3, 3], np.uint8).reshape(1, 2, 3, 1)
    out = run_kernel("Reduce", {"reduce_type": "MEAN", "axis": [1, 2]}, [x], [P(0.1, 3)],
                     P(0.3, 1))
    total = int(x.astype(np.int64).sum()) - 6 * 3                    # 246
    assert out.item() == 1 + rounding_multiply(total, np.float64(np.float32(0.1)) /
                                               (np.float64(np.float32(0.3)) * 6))
    assert out.item() == 1 + 14                                        # 246 / 18 = 13.67


def test_reduce_sum_stays_float():
    x = rand((1, 2, 2, 2))
    g = build({"x": x.shape}, [("Reduce", ["x"], ["y"], {"reduce_type": "SUM", "axis": [1]})])
    assert "SUM" in reason(g)


# ----------------------------------------------------------------------------- a chain

def test_chain_quantized_end_to_end():
    """x -> Pad -> MaxPool -> SUM with an AvgPool branch -> Concat -> Softmax, all uint8."""
    x = rand((1, 8, 8, 4), -2.0, 2.0)
    ops = [
        ("Pad", ["x"], ["p"], {"paddings": [0, 1, 1, 0, 0, 1, 1, 0]}),
        ("Pooling", ["p"], ["m"], pool("MAX", 3, 2, padding="VALID")),
        ("Pooling", ["p"], ["a"], pool("AVG", 3, 2, padding="VALID")),
        ("Eltwise", ["m", "a"], ["s"], eltwise("SUM")),
        ("Concat", ["s", "a"], ["c"], {"axis": 3}),
        ("Softmax", ["c"], ["y"], {"axis": -1}),
    ]
    g = build({"x": x.shape}, ops)
    ref, out, qgraph = quantize_and_run(g, {"x": x})
    types = [op.type for op in qgraph.net.op]
    assert types.count("Quantize") == 1 and types.count("Dequantize") == 1
    assert types[0] == "Quantize" and types[-1] == "Dequantize"
    engine = Engine(qgraph)
    assert all(n.tag.startswith("int8") for n in engine.nodes), [(n.op.type, n.tag) for n in engine.nodes]
    inner = [t for op in qgraph.net.op[:-1] for t in op.output]
    assert all(qgraph.specs[t][1] == np.uint8 for t in inner)
    np.testing.assert_array_equal(out["y"], Engine(qgraph, device="dsp").run({"x": x})["y"])
    # Error budget against the float graph on the exact input: each logit is off by at
    # most h = 0.5 step of x on each of its two paths plus 0.5 step of every requantizing
    # op on the way (avg pool, sum, concat); softmax turns logit errors <= h into
    # probability errors <= p (1 - p) * 2h <= h / 2 (to first order), plus its own
    # rounding of 0.5 output step.
    step = {t: qgraph.quant_params(t).scale for t in ("a", "s", "c")}
    h = qgraph.quant_params(qgraph.net.op[0].output[0]).scale + 0.5 * sum(step.values())
    bound = 0.5 * output_step(qgraph, "y") + 0.5 * h * (1 + 2 * h)
    assert np.max(np.abs(out["y"] - ref["y"])) <= bound
    assert np.allclose(out["y"].sum(axis=-1), 1.0, atol=8 / 255)
