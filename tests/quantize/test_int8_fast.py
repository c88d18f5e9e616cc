"""The fast int8 kernels (tag "int8:fast", mace/ops/fast/int8) against the exact int8 reference
kernels (mace/ops/int8): byte for byte, on one op and on whole quantized models through the CLI.

Every case quantizes a float graph on its own inputs, then runs it twice: the default engine
(int8:fast first) and Engine(options={"reference_kernels": True}) (int8 only), and compares
every uint8 tensor. Zero points at the extremes come from one-signed inputs (all >= 0: zero
point 0; all <= 0: 255) and outputs (a RELU's, a negated bias's). The portable tile (no
vpdpbusd) and the compute pool's splits (rows, panels) are run on this host too.
"""
from __future__ import annotations

import copy
import os

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from mace.ir.quant_params import params_from_info
from mace.ops.fast._pool import process_pool
from mace.ops.fast.int8 import _qjit
from mace.quantize.calibrate import collect_ranges
from mace.runtime.engine import Engine
from mace.transform.passes.quantize import quantize_graph
from tests.cli_helpers import cli, digits_model, workdir, write_deployment
from tests.ops.ir_graph import make_graph
from tests.quantize.qcase import kernel_alone

NO_POOL = "no compute pool here (numba's OpenMP layer or OpenBLAS's cblas missing)"
pytestmark = pytest.mark.skipif(_qjit.qloops() is None,
                                reason="numba is not installed (or MACE_NO_JIT is set): no int8:fast kernels")


def quantized(op_type, x, consts, args, per_channel=True):
    inputs = ["x"] + [name for name in ("w", "b") if name in consts]
    graph = make_graph(x.shape, [(op_type, inputs, ["y"], args)], consts)
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "per_channel": per_channel,
                           "runtime": "cpu"})
    return graph


def uint8_tensors(engine, x) -> dict:
    """Every uint8 tensor of a run, and its float outputs (after the Dequantize)."""
    outputs = engine.run({"x": x})
    tensors = {t: engine.buffers[t].copy() for t in engine.buffers if engine.buffers[t].dtype == np.uint8}
    return {**tensors, **{f"output {k}": v.copy() for k, v in outputs.items()}}


def assert_same_bytes(graph, x, op_type):
    """The op ran on int8:fast, the reference on int8, and every uint8 tensor (and the float
    outputs: the fast Quantize / Dequantize too) is identical."""
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert {n.op.type: n.tag for n in fast.nodes}[op_type] == "int8:fast"
    assert {n.op.type: n.tag for n in ref.nodes}[op_type] == "int8"
    assert {n.op.type: n.tag for n in fast.nodes}["Quantize"] == "int8:fast"
    got, want = uint8_tensors(fast, x), uint8_tensors(ref, x)
    assert got.keys() == want.keys() and got
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    return fast, want


def one_signed(rng, shape, sign):
    """Uniform in [-1, 1], or its absolute value times `sign` (zero point 0 or 255)."""
    x = rng.uniform(-1, 1, shape)
    return (np.abs(x) * sign if sign else x).astype(np.float32)


# shape (NHWC), filter (OIHW), args: ragged channel counts (K not a multiple of 4, O not of
# the 32-wide panel), strides, asymmetric pads, groups, a row dilation, 1x1 with stride
CONV_CASES = {
    "3x3_same": ((1, 9, 9, 4), (6, 4, 3, 3), {"padding": "SAME"}),
    "3x3_c3_o33": ((1, 8, 7, 3), (33, 3, 3, 3), {"padding": "SAME"}),
    "stride2_pads": ((2, 8, 7, 3), (5, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
    "5x3_stride_1x2": ((1, 9, 9, 5), (17, 5, 5, 3), {"strides": [1, 2], "padding": "VALID"}),
    "group2": ((1, 6, 6, 4), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "group4_1x1": ((1, 7, 5, 8), (12, 2, 1, 1), {"group": 4}),
    # ShuffleNet's: groups of 34 straddle the 32-column panels (column runs, see below)
    "group4_1x1_c136": ((1, 6, 5, 136), (136, 34, 1, 1), {"group": 4}),
    "group3_1x1_stride2_batch2": ((2, 7, 7, 48), (60, 16, 1, 1), {"group": 3, "strides": [2, 2]}),
    "dilation_rows": ((1, 10, 10, 4), (4, 4, 3, 3), {"dilations": [2, 1], "padding": "SAME"}),
    "pointwise_o70": ((1, 5, 5, 8), (70, 8, 1, 1), {}),
    "pointwise_c7_stride2": ((1, 9, 8, 7), (16, 7, 1, 1), {"strides": [2, 2]}),
    "7x7_stride2": ((1, 20, 20, 3), (64, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    "deep_k": ((1, 6, 6, 96), (40, 96, 3, 3), {"padding": "SAME"}),
    "relux": ((1, 7, 7, 3), (4, 3, 3, 3), {"padding": "SAME", "activation": "RELUX", "max_limit": 0.5}),
}


@pytest.mark.parametrize("sign", [0, 1, -1], ids=["mixed", "zero_point_0", "zero_point_255"])
@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("name", CONV_CASES)
def test_conv2d_fast_equals_reference(name, per_channel, sign):
    x_shape, w_shape, args = CONV_CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)) + 7 * sign)
    x = one_signed(rng, x_shape, sign)
    consts = {"w": rng.uniform(-1, 1, w_shape).astype(np.float32),
              "b": rng.uniform(-1, 1, w_shape[0]).astype(np.float32)}
    graph = quantized("Conv2D", x, consts, args, per_channel)
    if sign:
        quantize = graph.net.op[0]   # the input's Quantize
        assert quantize.type == "Quantize"
        assert graph.quant_params(quantize.output[0]).zero_point == (0 if sign > 0 else 255)
    assert_same_bytes(graph, x, "Conv2D")


GROUPED_1X1 = dict(CONV_CASES, pool_rows=((1, 40, 12, 136), (136, 34, 1, 1), {"group": 4}),
                   pool_panels=((1, 2, 2, 544), (544, 136, 1, 1), {"group": 4}))


@pytest.mark.parametrize("name", ["group4_1x1", "group4_1x1_c136", "group3_1x1_stride2_batch2",
                                  "pool_rows", "pool_panels"])
def test_grouped_1x1_convs_run_as_column_runs(name):
    """Per-channel int8 weights (zero points 0): one GEMM whose panels read only their
    groups' input channels, in place; each run's [k0, k1) covers its columns' groups. Two
    threads: split by output rows or by panels where there is a compute pool."""
    x_shape, w_shape, args = GROUPED_1X1[name]
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, x_shape).astype(np.float32)
    consts = {"w": rng.uniform(-1, 1, w_shape).astype(np.float32),
              "b": rng.uniform(-1, 1, w_shape[0]).astype(np.float32)}
    with threadpool_limits(2):
        fast, _ = assert_same_bytes(quantized("Conv2D", x, consts, args), x, "Conv2D")
    kernel = next(n for n in fast.nodes if n.op.type == "Conv2D").kernel
    og, cg = w_shape[0] // args["group"], w_shape[1]
    assert kernel.runs and len(kernel.gemms) == 1
    for c0, c1, k0, k1 in kernel.runs:
        assert k0 <= (c0 // og) * cg and ((c1 - 1) // og + 1) * cg <= k1 <= x_shape[3]
        assert k0 % 4 == 0 and (k1 - k0) % 4 == 0


def test_conv2d_output_zero_points_at_the_extremes_and_no_bias():
    """A RELU output (zero point 0) and an all-negative output (zero point 255), without bias."""
    rng = np.random.default_rng(5)
    x = np.abs(rng.uniform(-1, 1, (1, 6, 6, 5))).astype(np.float32)
    w = np.abs(rng.uniform(-1, 1, (9, 5, 3, 3))).astype(np.float32)
    for weights, args in ((w, {"padding": "SAME", "activation": "RELU"}), (-w, {"padding": "SAME"})):
        graph = quantized("Conv2D", x, {"w": weights}, args)
        conv = next(op for op in graph.net.op if op.type == "Conv2D")
        assert graph.quant_params(conv.output[0]).zero_point in (0, 255)
        assert_same_bytes(graph, x, "Conv2D")


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("rows,k,o", [(1, 64, 10), (1, 37, 1000), (3, 5, 33), (50, 128, 16)])
def test_fully_connected_fast_equals_reference(rows, k, o, per_channel):
    rng = np.random.default_rng(rows * 100 + k)
    x = rng.uniform(-1, 1, (rows, k)).astype(np.float32)
    consts = {"w": rng.uniform(-1, 1, (o, k)).astype(np.float32),
              "b": rng.uniform(-1, 1, o).astype(np.float32)}
    assert_same_bytes(quantized("FullyConnected", x, consts, {}, per_channel), x, "FullyConnected")


@pytest.mark.parametrize("vnni", [0, 1], ids=["portable_tile", "host_tile"])
@pytest.mark.parametrize("short", [False, True], ids=["full_epilogue", "short_epilogue_where_proved"])
def test_every_tile_mode_equals_the_reference(monkeypatch, vnni, short):
    """The portable tile (plain LLVM IR, what a CPU without AVX-512 VNNI runs) and the full
    epilogue even where the short one was proved equal: the same bytes."""
    from mace.ops.fast.int8._qgemm import QPanels

    lib = _qjit.qloops()
    if vnni and not lib.VNNI:
        pytest.skip("this CPU has no AVX-512 VNNI: the portable tile is what it runs")
    monkeypatch.setattr(lib, "VNNI", vnni)
    if not short:
        monkeypatch.setattr(QPanels, "_short", staticmethod(lambda *a: False))
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (1, 9, 8, 7)).astype(np.float32)
    consts = {"w": rng.uniform(-1, 1, (40, 7, 3, 3)).astype(np.float32),
              "b": rng.uniform(-1, 1, 40).astype(np.float32)}
    for per_channel in (True, False):
        graph = quantized("Conv2D", x, consts, {"padding": "SAME", "strides": [1, 2]}, per_channel)
        fast, _ = assert_same_bytes(graph, x, "Conv2D")
        conv = next(n for n in fast.nodes if n.op.type == "Conv2D")
        mode = conv.kernel.gemms[0].mode
        assert mode & lib.VNNI_MODE == vnni
        if not short:
            assert not mode & lib.SHORT
        elif per_channel:   # (per-tensor weights take the short one only when w_zero is 128)
            assert mode & lib.SHORT


@pytest.mark.skipif(process_pool() is None, reason=NO_POOL)
@pytest.mark.parametrize("shape,w_shape", [((1, 40, 12, 8), (24, 8, 3, 3)),     # split by output rows
                                           ((1, 3, 3, 64), (300, 64, 3, 3))])   # by filter panels
def test_split_across_the_compute_pool(shape, w_shape):
    rng = np.random.default_rng(shape[1])
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    consts = {"w": rng.uniform(-1, 1, w_shape).astype(np.float32),
              "b": rng.uniform(-1, 1, w_shape[0]).astype(np.float32)}
    graph = quantized("Conv2D", x, consts, {"padding": "SAME"}, per_channel=False)
    with threadpool_limits(2):
        fast, _ = assert_same_bytes(graph, x, "Conv2D")
        assert fast.pooled


@pytest.mark.skipif(process_pool() is None, reason=NO_POOL)
def test_the_other_loops_split_across_the_compute_pool():
    """Depthwise, pooling, eltwise and concat large enough for their pooled drivers."""
    rng = np.random.default_rng(21)
    x = rng.uniform(-1, 1, (1, 40, 40, 16)).astype(np.float32)
    ops = [("Conv2D", ["x", "w"], ["a"], {"padding": "SAME"}),
           ("DepthwiseConv2d", ["a", "dw"], ["b"], {"padding": "SAME"}),
           ("Eltwise", ["a", "b"], ["c"], {"type": "SUM"}),
           ("Pooling", ["c"], ["d"], {"pooling_type": "AVG", "kernels": [3, 3], "strides": [1, 1],
                                      "padding": "SAME"}),
           ("Pooling", ["c"], ["e"], {"pooling_type": "MAX", "kernels": [3, 3], "strides": [1, 1],
                                      "padding": "SAME"}),
           ("Concat", ["d", "e"], ["y"], {"axis": 3})]
    consts = {"w": rng.uniform(-1, 1, (16, 16, 3, 3)).astype(np.float32),
              "dw": rng.uniform(-1, 1, (16, 1, 3, 3)).astype(np.float32)}
    graph = make_graph(x.shape, ops, consts)
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    with threadpool_limits(2):
        fast, _ = assert_same_bytes(graph, x, "Concat")
        assert fast.pooled
        assert {n.tag for n in fast.nodes if n.op.type in ("DepthwiseConv2d", "Eltwise", "Pooling")} == \
            {"int8:fast"}


def test_concat_fast_equals_reference():
    """Inputs with their own ranges (rescaled by tables) and one sharing the output's (copied)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (1, 5, 5, 3)).astype(np.float32)
    ops = [("Conv2D", ["x", "w1"], ["a"], {"padding": "SAME"}),
           ("Conv2D", ["x", "w2"], ["b"], {"padding": "SAME", "activation": "RELU"}),
           ("Concat", ["a", "b", "a"], ["y"], {"axis": 3})]
    consts = {"w1": rng.uniform(-1, 1, (6, 3, 3, 3)).astype(np.float32),
              "w2": 3 * rng.uniform(-1, 1, (5, 3, 1, 1)).astype(np.float32)}
    graph = make_graph(x.shape, ops, consts)
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    assert_same_bytes(graph, x, "Concat")


def test_a_concats_own_producers_write_its_parameters_and_it_copies():
    """Convs made only for a Concat requantize straight to the Concat's range (as TFLite asks):
    the Concat copies (no rescale tables), byte-equal to the reference, and the result stays
    within a step of the float graph. `a` is read twice, so it keeps its own range."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (1, 6, 6, 3)).astype(np.float32)
    ops = [("Conv2D", ["x", "w1"], ["a"], {"padding": "SAME", "activation": "RELU"}),
           ("Conv2D", ["x", "w2"], ["b"], {"padding": "SAME", "activation": "RELU"}),
           ("Conv2D", ["x", "w3"], ["c"], {"padding": "SAME"}),
           ("Concat", ["b", "c"], ["y"], {"axis": 3}),
           ("Eltwise", ["a", "a"], ["z"], {"type": "SUM"})]
    consts = {"w1": rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32),
              "w2": 0.2 * rng.uniform(-1, 1, (6, 3, 3, 3)).astype(np.float32),
              "w3": 3 * rng.uniform(-1, 1, (5, 3, 1, 1)).astype(np.float32)}
    graph = make_graph(x.shape, ops, consts, outputs=["y", "z"])
    float_y = Engine(copy.deepcopy(graph)).run({"x": x})["y"]
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    fast, _ = assert_same_bytes(graph, x, "Concat")
    concat = next(n for n in fast.nodes if n.op.type == "Concat")
    assert all(t is None for t in concat.kernel.tables)
    producers = {op.output[0]: op for op in graph.net.op}
    params = [producers[t].quantize_info[0] for t in concat.op.input] + [concat.op.quantize_info[0]]
    assert len({(i.scale, i.zero_point) for i in params}) == 1
    out = fast.run({"x": x})["y"]
    step = params[0].scale
    assert np.abs(out - float_y).max() <= step, (np.abs(out - float_y).max(), step)


@pytest.mark.parametrize("pool", ["AVG", "MAX"])
def test_avg_pool_made_for_a_concat_writes_its_parameters(pool):
    """ShuffleNet's stride-2 unit: Concat(AvgPool(x), Conv(x)). AVG requantizes every output
    position anyway, so it takes the Concat's range and the Concat copies it; MAX copies codes
    (its output keeps its input's parameters): the Concat rescales it by a table. Same bytes
    as the reference either way; the pooled channels within a step of the float graph."""
    rng = np.random.default_rng(8)
    x = np.abs(rng.uniform(-1, 1, (1, 8, 8, 6))).astype(np.float32)
    ops = [("Pooling", ["x"], ["p"], {"pooling_type": pool, "kernels": [3, 3], "strides": [2, 2],
                                      "pads": [1, 1, 1, 1]}),
           ("Conv2D", ["x", "w"], ["c"], {"strides": [2, 2], "padding": "SAME"}),
           ("Concat", ["p", "c"], ["y"], {"axis": 3})]
    consts = {"w": 3 * rng.uniform(-1, 1, (10, 6, 1, 1)).astype(np.float32)}
    graph = make_graph(x.shape, ops, consts)
    float_y = Engine(copy.deepcopy(graph)).run({"x": x})["y"]
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    fast, _ = assert_same_bytes(graph, x, "Concat")
    concat = next(n for n in fast.nodes if n.op.type == "Concat")
    assert (concat.kernel.tables[0] is None) == (pool == "AVG") and concat.kernel.tables[1] is None
    step = concat.op.quantize_info[0].scale   # the pooled channels: within a step of float
    assert np.abs(fast.run({"x": x})["y"][..., :6] - float_y[..., :6]).max() <= step


DEPTHWISE_CASES = {
    "3x3_same": ((1, 9, 9, 8), (8, 1, 3, 3), {"padding": "SAME"}),
    "stride2_pads": ((2, 8, 7, 5), (5, 1, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
    "multiplier2": ((1, 6, 6, 3), (6, 1, 3, 3), {"padding": "SAME"}),
    "5x5_dilated_relu": ((1, 12, 11, 4), (4, 1, 5, 5), {"dilations": [2, 1], "padding": "SAME",
                                                        "activation": "RELU"}),
    # the int32 loop at 16, 37 and 70 channels (16-lane blocks, the last one overlapping its
    # neighbour; 8 channels above take the loop over channels); the 3x3 interior with strides
    # and a column dilation, interiors of odd and even widths (two pixels per call)
    "c16_same": ((1, 6, 7, 16), (16, 1, 3, 3), {"padding": "SAME"}),
    "c37_stride2_pads": ((1, 9, 10, 37), (37, 1, 3, 3), {"strides": [2, 2], "pads": [1, 0, 0, 1]}),
    "c70_dilated_w": ((2, 7, 11, 70), (70, 1, 3, 3), {"dilations": [1, 2], "padding": "SAME"}),
    "c24_valid_stride_1x2": ((1, 8, 9, 24), (24, 1, 3, 3), {"strides": [1, 2], "padding": "VALID"}),
    # 64 channels and more: the vpdpbusd quads (a block of exactly 64, an overlapping last
    # block, strides, a column dilation, batch 2)
    "c64_same": ((1, 6, 7, 64), (64, 1, 3, 3), {"padding": "SAME"}),
    # 32 (and c16 above) channels at stride 1: the quads take 2 (4) pixels per call, an odd rest
    "c32_same_w9": ((1, 5, 9, 32), (32, 1, 3, 3), {"padding": "SAME"}),
    "c136_stride2_batch2": ((2, 9, 8, 136), (136, 1, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "c200_stride_1x2_dilated_w": ((1, 7, 13, 200), (200, 1, 3, 3), {"strides": [1, 2], "dilations": [1, 2],
                                                                     "padding": "SAME"}),
    # border pixels through the quads' nine tap addresses: asymmetric pads, a row dilation,
    # images with no interior pixel at all (taps outside on every side), batch 2
    "c96_pads_dilated_h2_tiny": ((2, 4, 3, 96), (96, 1, 3, 3), {"dilations": [2, 1], "pads": [2, 0, 1, 2]}),
    "c64_one_pixel": ((1, 1, 1, 64), (64, 1, 3, 3), {"padding": "SAME"}),
    # the interior's float rows: kept between output rows (stride 1), across images (batch 2),
    # and slotted by row dilation 2 and 3 (a window's rows never share a slot)
    "c20_dilated_h3_batch2": ((2, 12, 8, 20), (20, 1, 3, 3), {"dilations": [3, 1], "padding": "SAME"}),
    "c33_dilated_h2_stride2": ((1, 13, 9, 33), (33, 1, 3, 3), {"dilations": [2, 2], "strides": [2, 1],
                                                               "pads": [2, 2, 2, 2]}),
}


@pytest.mark.parametrize("sign", [0, 1, -1], ids=["mixed", "zero_point_0", "zero_point_255"])
@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("name", DEPTHWISE_CASES)
def test_depthwise_fast_equals_reference(name, per_channel, sign):
    x_shape, w_shape, args = DEPTHWISE_CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)) + 3 * sign)
    x = one_signed(rng, x_shape, sign)
    consts = {"w": rng.uniform(-1, 1, w_shape).astype(np.float32),
              "b": rng.uniform(-1, 1, w_shape[0]).astype(np.float32)}
    fast, _ = assert_same_bytes(quantized("DepthwiseConv2d", x, consts, args, per_channel), x, "DepthwiseConv2d")
    node = next(n for n in fast.nodes if n.op.type == "DepthwiseConv2d")
    assert node.kernel.int32 == (name != "multiplier2")   # the int32 loop, but for a multiplier of 2
    quads, starts = node.kernel.columns[-2:] if node.kernel.int32 else (None, None)
    if not _qjit.qloops().VNNI:   # no vpdpbusd: the 16-channel path everywhere
        assert starts is None or len(starts) == 0
        return
    if per_channel and x_shape[-1] >= 64 and w_shape[2:] == (3, 3):   # int8 taps: the quads
        assert len(starts) == -(-x_shape[-1] // 64) and starts[-1] == x_shape[-1] - 64
    if per_channel and x_shape[-1] in (16, 32) and args.get("strides", [1, 1])[1] == 1 and w_shape[2:] == (3, 3):
        assert list(starts) == [0]


def test_depthwise_interior_without_the_short_requantization():
    """A bias at the int32 limit: the 3x3 interior's inline form must clip like the reference."""
    from mace.ops.fast.int8.depthwise_conv2d import DepthwiseConv2dInt8Fast

    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (1, 8, 8, 4)).astype(np.float32)
    bias = np.array([3e5, -3e5, 0.5, -0.5], np.float32)
    consts = {"w": rng.uniform(-1, 1, (4, 1, 3, 3)).astype(np.float32), "b": bias}
    graph = quantized("DepthwiseConv2d", x, consts, {"padding": "SAME"})
    fast, _ = assert_same_bytes(graph, x, "DepthwiseConv2d")
    node = next(n for n in fast.nodes if n.op.type == "DepthwiseConv2d")
    assert isinstance(node.kernel, DepthwiseConv2dInt8Fast) and node.kernel.int32 is False


@pytest.mark.parametrize("sign", [0, 1, -1], ids=["mixed", "zero_point_0", "zero_point_255"])
@pytest.mark.parametrize("args", [
    {"pooling_type": "MAX", "kernels": [3, 3], "strides": [2, 2]},
    {"pooling_type": "MAX", "kernels": [3, 3], "strides": [1, 1], "padding": "SAME"},
    {"pooling_type": "AVG", "kernels": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"pooling_type": "AVG", "kernels": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 0],
     "count_include_pad": 1},
    {"pooling_type": "AVG", "kernels": [7, 7], "strides": [1, 1]},
], ids=["max", "max_same", "avg_pads", "avg_count_pads", "avg_global"])
def test_pooling_fast_equals_reference(args, sign):
    rng = np.random.default_rng(len(args) + sign)
    x = one_signed(rng, (2, 7, 7, 5), sign)
    assert_same_bytes(quantized("Pooling", x, {}, args), x, "Pooling")


@pytest.mark.parametrize("channels", [1, 24, 32, 40, 70, 96])
@pytest.mark.parametrize("args", [
    {"pooling_type": "MAX", "kernels": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},   # ShuffleNet's
    {"pooling_type": "MAX", "kernels": [2, 3], "strides": [1, 2], "dilations": [2, 1], "padding": "SAME"},
], ids=["3x3_stride2_pads", "2x3_dilated_same"])
def test_max_pooling_channel_blocks_equal_reference(args, channels):
    """qmaxpool's 32-channel register blocks, the last one masked (1, 24, 40, 70 channels),
    or its 32-byte blocks and LLVM's loop for the rest without AVX-512BW; zero point 0
    (post-ReLU codes)."""
    rng = np.random.default_rng(channels)
    x = one_signed(rng, (2, 9, 8, channels), 1)
    assert_same_bytes(quantized("Pooling", x, {}, args), x, "Pooling")


@pytest.mark.parametrize("channels", [3, 32, 45])
def test_max_pooling_both_loop_forms_equal_numpy(channels):
    """Both forms of qmaxpool, whichever this host takes: pixel by pixel (AVX-512BW) and tap
    by tap, on a dilated, padded, strided window, against numpy's max over the taps inside."""
    lib = _qjit.qloops()
    rng = np.random.default_rng(channels)
    x = rng.integers(0, 256, (2, 9, 11, channels)).astype(np.uint8)
    kh, kw, sh, sw, dh, dw, pt, pl = 3, 2, 2, 3, 2, 1, 2, 1
    oh, ow = 5, 4
    want = np.zeros((2, oh, ow, channels), np.uint8)
    for oy in range(oh):
        for ox in range(ow):
            for i in range(kh):
                for j in range(kw):
                    iy, ix = oy * sh - pt + i * dh, ox * sw - pl + j * dw
                    if 0 <= iy < 9 and 0 <= ix < 11:
                        want[:, oy, ox] = np.maximum(want[:, oy, ox], x[:, iy, ix])
    for form in (lib._qmaxpool_pixels, lib._qmaxpool_taps):
        out = np.full(want.shape, 7, np.uint8)
        form(x, kh, kw, sh, sw, dh, dw, pt, pl, out, 0, 2 * oh)
        np.testing.assert_array_equal(out, want, err_msg=form.__name__)


def test_avg_pool_loop_both_requantizations():
    """qavgpool per output position: int32 sums requantized by the 32 x 32 -> 64-bit form
    (left 0), or by the int64 form where a multiplier >= 2^30 needs the left shift; both
    against the integer formula by hand, window sums at both ends of the codes."""
    lib = _qjit.qloops()
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (2, 4, 5, 19)).astype(np.uint8)
    x[0, :2, :2] = 255
    x[1, :2, :2] = 0
    zx, zero = 77, 130
    mult = np.array([[1 << 30, 1518500250, 2**31 - 1, 1 << 30]] * 3, np.int64)
    left = np.array([[0, 0, 1, 1]] * 3, np.int64)
    shift = np.array([[33, 36, 31, 40]] * 3, np.int64)
    out = np.empty((2, 3, 4, 19), np.uint8)
    lib.qavgpool(x, zx, 2, 2, 1, 1, 1, 1, 0, 0, mult, left, shift, zero, out, 0, 6)
    acc = sum(x[:, i:i + 3, j:j + 4].astype(np.int64) - zx for i in range(2) for j in range(2))
    m, sl, sr = mult[None, :, :, None], left[None, :, :, None], shift[None, :, :, None]
    want = np.clip((((acc << sl) * m + (np.int64(1) << (sr - 1))) >> sr) + zero, 0, 255)
    np.testing.assert_array_equal(out, want)
    assert out.min() < 100 < 160 < out.max()   # both ends of the range reached


def test_max_pooling_with_its_own_range_rescales_like_the_reference():
    """A MAX pool whose output got a range of its own (a rescale table, not the identity)."""
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (1, 8, 8, 4)).astype(np.float32)
    graph = make_graph(x.shape, [("Pooling", ["x"], ["y"], {"pooling_type": "MAX", "kernels": [2, 2],
                                                            "strides": [2, 2]})])
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    ranges["y"] = (-0.5, 3.0)
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    pool_op = next(op for op in graph.net.op if op.type == "Pooling")
    assert graph.quant_params(pool_op.output[0]).scale != graph.quant_params(pool_op.input[0]).scale
    assert_same_bytes(graph, x, "Pooling")


@pytest.mark.parametrize("kind,act,relu_a", [("SUM", "", False), ("SUM", "RELU", True), ("SUB", "", False),
                                             ("MEAN", "RELUX", False), ("PROD", "", True), ("MAX", "", False),
                                             ("MIN", "RELU", True)])
def test_eltwise_fast_equals_reference(kind, act, relu_a):
    """Every kind (add2's integer expression, or one table of all 65536 input pairs); relu_a:
    input a's zero point is 0."""
    rng = np.random.default_rng(len(kind) + len(act))
    x = rng.uniform(-1, 1, (1, 6, 5, 3)).astype(np.float32)
    ops = [("Conv2D", ["x", "w1"], ["a"], {"padding": "SAME", "activation": "RELU" if relu_a else ""}),
           ("Conv2D", ["x", "w2"], ["b"], {"padding": "SAME"}),
           ("Eltwise", ["a", "b"], ["y"], {"type": kind, "activation": act, "max_limit": 0.7})]
    consts = {"w1": rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32),
              "w2": 2 * rng.uniform(-1, 1, (4, 3, 1, 1)).astype(np.float32)}
    graph = make_graph(x.shape, ops, consts)
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    fast, _ = assert_same_bytes(graph, x, "Eltwise")
    node = next(n for n in fast.nodes if n.op.type == "Eltwise")
    assert node.kernel.sum == (kind in ("SUM", "SUB", "MEAN"))   # add2, else the pair table


def eltwise_kernels(kind, xs, params, out_param, act=""):
    """The int8:fast and the int8 Eltwise kernels alone on uint8 arrays with hand-picked
    quantization: (fast kernel, its output, the reference's output)."""
    args = {"type": kind, "activation": act, "max_limit": 0.7}
    fast, got = kernel_alone("Eltwise", args, xs, params, out_param, tag="int8:fast")
    return fast, got, kernel_alone("Eltwise", args, xs, params, out_param)[1]


@pytest.mark.parametrize("n", [1, 63, 64, 65, 130, 1037])
@pytest.mark.parametrize("kind, scales, zeros, act, levels", [
    ("SUM", (0.02, 0.05, 0.07), (128, 0, 40), "", 200),
    ("SUB", (0.02, 0.021, 0.003), (255, 0, 128), "", 70),      # B < 0, a step 7x finer out
    ("MEAN", (0.5, 0.25, 0.05), (0, 255, 128), "RELU", 50),    # sums far outside 0..255
    ("SUM", (1e-4, 3e-4, 0.5), (3, 250, 0), "RELUX", 1),       # a much coarser output: S = 46
    ("SUM", (0.9, 0.3, 5e-5), (0, 255, 17), "", 3),            # an 18000x finer output: S = 15, saturating
])
def test_eltwise_sum_loop_equals_reference(n, kind, scales, zeros, act, levels):
    """add2 (64 elements per explicit-vector step, the rest one by one) against the
    reference's integer expression: ragged lengths, zero points at 0 and 255, both signs of
    B, saturating sums, fused clamps; and every pair of codes once."""
    from mace.ir.quant_params import QuantParams

    rng = np.random.default_rng(n)
    params = [QuantParams(float(np.float32(sc)), z) for sc, z in zip(scales, zeros)]
    a, b = (rng.integers(0, 256, (1, n)).astype(np.uint8) for _ in range(2))
    a[0, :2], b[0, :2] = (0, 255)[:n], (255, 0)[:n]
    fast, got, want = eltwise_kernels(kind, [a, b], params[:2], params[2], act)
    assert fast.sum
    np.testing.assert_array_equal(got, want)
    every = [np.repeat(np.arange(256, dtype=np.uint8), 256)[None], np.tile(np.arange(256, dtype=np.uint8), 256)[None]]
    fast, got, want = eltwise_kernels(kind, every, params[:2], params[2], act)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) >= levels   # the case reaches the output range it is meant to


def test_eltwise_sum_split_across_the_pool():
    """add2_par: parts of ragged lengths, each with its own 64-element blocks and rest."""
    lib = _qjit.qloops()
    rng = np.random.default_rng(9)
    a, b = (rng.integers(0, 256, 10_001).astype(np.uint8) for _ in range(2))
    ca, cb, c = -3000 << 15, 2**30 - 1, -100 * 2**29 + 12345
    want = np.clip(7 + ((ca * a.astype(np.int64) + cb * b.astype(np.int64) + c) >> 29), 2, 250)
    assert len(np.unique(want)) > 100
    for parts in (1, 3, 7):
        out = np.zeros_like(a)
        lib.add2_par(a, b, ca, cb, c, 29, 7, 2, 250, out, parts)
        np.testing.assert_array_equal(out, want, err_msg=f"{parts} parts")


def test_eltwise_fine_output_step_takes_the_table():
    """A sum whose output step is 40000x finer than an input's: the shift that keeps its
    multiplier within 30 bits is under 15, so the fast kernel tabulates the reference
    instead; same bytes."""
    from mace.ir.quant_params import QuantParams

    params = [QuantParams(4.0, 128), QuantParams(1e-4, 0), QuantParams(1e-4, 100)]
    a = np.array([[128, 128, 129, 127, 0]], np.uint8)
    b = np.array([[0, 255, 3, 7, 9]], np.uint8)
    fast, got, want = eltwise_kernels("SUM", [a, b], params[:2], params[2])
    assert not fast.sum and fast.table.shape == (65536,)
    np.testing.assert_array_equal(got, want)
    assert want.tolist() == [[100, 255, 255, 0, 0]]


@pytest.mark.parametrize("sign", [0, 1, -1], ids=["mixed", "zero_point_0", "zero_point_255"])
def test_global_mean_fast_equals_reference(sign):
    rng = np.random.default_rng(30 + sign)
    x = one_signed(rng, (2, 7, 6, 33), sign)
    graph = quantized("Reduce", x, {}, {"reduce_type": "MEAN", "axis": [1, 2], "keepdims": 1})
    assert_same_bytes(graph, x, "Reduce")


def test_quantize_and_dequantize_edges_round_like_the_reference():
    """Half-step values (round half to even), values beyond the range (clamped), beyond int32
    once scaled (the fast Quantize's rounding domain), infinities."""
    x = rng_ties = (np.arange(-300, 300, dtype=np.float64) + 0.5) * (2 / 255)
    x = np.concatenate([rng_ties, [np.inf, -np.inf, 5.0, -5.0, 0.0, -0.0, 1e30, -1e30, 3e7, -3e7]])
    x = x.astype(np.float32).reshape(1, -1)
    graph = make_graph(x.shape, [("Activation", ["x"], ["y"], {"activation": "RELU"})])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": {"x": (-1.0, 1.0), "y": (0.0, 1.0)},
                           "runtime": "cpu"})
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert [n.tag for n in fast.nodes if n.op.type in ("Quantize", "Dequantize")] == ["int8:fast"] * 2
    got, want = uint8_tensors(fast, x), uint8_tensors(ref, x)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


# ---- whole models through the CLI --------------------------------------------------------

def dumped(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.npy"))}


def run_both_ways(work, model: str) -> tuple:
    """`run --dump_tensors` with the fast kernels and with MACE_NO_JIT=1 (the int8 reference
    kernels: no compiled loops, so int8:fast declines); every dumped tensor's bytes."""
    out = {}
    for label, extra in (("fast", {}), ("reference", {"MACE_NO_JIT": "1"})):
        r = cli("run", "--config=deploy.yml", f"--model_name={model}", f"--dump_tensors={label}",
                f"--output_dir={label}_out", "--vlog_level=2", cwd=work, env={**os.environ, **extra},
                timeout=600)
        assert r.returncode == 0, r.stderr
        # the per-op profile names each node's kernel: the two runs really took different ones
        # (vlog 2's fallback notes name int8:fast too, saying why it declined: not the profile)
        profile = "\n".join(ln for ln in r.stdout.splitlines() if "kernel fallback:" not in ln)
        assert ("int8:fast" in profile) == (label == "fast"), r.stdout[-2000:]
        if label == "reference":
            assert "int8:fast: no compiled loops" in r.stdout, r.stdout[-2000:]
        out[label] = {**dumped(work / label), **dumped(work / f"{label}_out")}
    return out["fast"], out["reference"]


def test_digits_quantized_gives_identical_bytes_on_the_fast_and_the_reference_path(tmp_path):
    work = workdir(tmp_path)
    write_deployment(work / "deploy.yml", {"digits_q8": digits_model(runtime="cpu", quantize=1)})
    r = cli("convert", "--config=deploy.yml", cwd=work, timeout=600)
    assert r.returncode == 0, r.stderr
    fast, ref = run_both_ways(work, "digits_q8")
    assert len(fast) > 5 and fast.keys() == ref.keys()
    assert [k for k in fast if fast[k] != ref[k]] == []


def test_onnx_light_squeezenet_quantized_gives_identical_bytes(tmp_path):
    """A real architecture (onnx's light SqueezeNet, seeded random weights), quantize: 1,
    calibrated on one sample: every node's output identical on both paths."""
    onnx = pytest.importorskip("onnx")
    from mace.testing.onnx_models import data_input, randomized
    from tests.cli_helpers import sha256

    work = workdir(tmp_path)
    model = randomized("squeezenet")
    onnx.save(model, str(work / "squeezenet.onnx"))
    name, shape = data_input(model)
    np.save(work / "sample.npy", np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    entry = {"platform": "onnx", "model_file_path": "squeezenet.onnx",
             "model_sha256_checksum": sha256(work / "squeezenet.onnx"), "runtime": "cpu", "quantize": 1,
             "subgraphs": [{"input_tensors": name, "input_shapes": ",".join(map(str, shape)),
                            "input_data_formats": "NCHW", "output_tensors": model.graph.output[0].name,
                            "output_data_formats": "NONE", "validation_inputs_data": ["sample.npy"]}]}
    write_deployment(work / "deploy.yml", {"squeezenet_q8": entry}, library="sq")
    r = cli("convert", "--config=deploy.yml", cwd=work, timeout=900)
    assert r.returncode == 0, r.stderr
    fast, ref = run_both_ways(work, "squeezenet_q8")
    assert len(fast) > 20 and fast.keys() == ref.keys()
    assert [k for k in fast if fast[k] != ref[k]] == []


# ---- the byte movers and one-byte functions ---------------------------------------------

def quantized_with_range(x, ops, own_range=None):
    """`ops` on x quantized; own_range: (lo, hi) given to 'y' (a rescale table after the op)."""
    graph = make_graph(x.shape, ops)
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    if own_range is not None:
        ranges["y"] = own_range
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "cpu"})
    return graph


MOVES = {   # op, args, input shape: each the float fast kernel's path for it
    "channel_shuffle": ("ChannelShuffle", {"group": 3}, (2, 5, 7, 12)),
    "transpose_blocked": ("Transpose", {"dims": [0, 3, 1, 2]}, (1, 20, 21, 12)),   # NHWC -> NCHW
    "transpose_narrow": ("Transpose", {"dims": [0, 2, 3, 1]}, (1, 3, 40, 41)),     # NCHW image -> NHWC
    "reshape": ("Reshape", {"dims": [2, -1]}, (2, 3, 5, 7)),
}


@pytest.mark.parametrize("own_range", [None, (-0.5, 3.0)], ids=["input_range", "own_range"])
@pytest.mark.parametrize("sign", [0, 1, -1], ids=["mixed", "zero_point_0", "zero_point_255"])
@pytest.mark.parametrize("name", MOVES)
def test_moves_fast_equal_reference(name, sign, own_range):
    op_type, args, shape = MOVES[name]
    x = one_signed(np.random.default_rng(len(name) + sign), shape, sign)
    graph = quantized_with_range(x, [(op_type, ["x"], ["y"], args)], own_range)
    op = next(op for op in graph.net.op if op.type == op_type)
    same = graph.quant_params(op.output[0]) == graph.quant_params(op.input[0])
    assert same == (own_range is None)   # the own range really makes a rescale table
    assert_same_bytes(graph, x, op_type)


@pytest.mark.parametrize("own_range", [None, (-0.2, 0.7)], ids=["input_range", "own_range"])
@pytest.mark.parametrize("sign", [0, 1, -1], ids=["mixed", "zero_point_0", "zero_point_255"])
@pytest.mark.parametrize("act", [{"activation": "RELU"}, {"activation": "RELUX", "max_limit": 0.4},
                                 {"activation": "CLIP", "activation_coefficient": -0.3, "max_limit": 0.5}],
                         ids=["relu", "relu6", "clip"])
def test_activation_fast_equals_reference(act, sign, own_range):
    x = one_signed(np.random.default_rng(11 + sign), (1, 9, 7, 13), sign)
    graph = quantized_with_range(x, [("Activation", ["x"], ["y"], act)], own_range)
    assert_same_bytes(graph, x, "Activation")


@pytest.mark.parametrize("shape", [(3, 1000), (2, 3, 7), (1, 1)])
def test_softmax_fast_equals_reference(shape):
    x = (4 * np.random.default_rng(shape[-1]).standard_normal(shape)).astype(np.float32)
    graph = quantized_with_range(x, [("Softmax", ["x"], ["y"], {})])
    assert_same_bytes(graph, x, "Softmax")


def _resize(size, in_hw, mode="half_pixel"):
    return {"size": list(size), "scale": [size[0] / in_hw[0], size[1] / in_hw[1]],
            "coordinate_transformation_mode": mode}


@pytest.mark.parametrize("shape, args, own_range", [
    ((1, 4, 5, 3), _resize((8, 10), (4, 5)), None),                       # 2x up, half_pixel
    ((2, 7, 3, 17), _resize((4, 5), (7, 3), "align_corners"), (-2.0, 5.0)),  # down/up, rescaled
    ((1, 6, 6, 1), _resize((9, 4), (6, 6), "asymmetric"), (0.0, 0.1)),   # a tiny range: clamps
    ((1, 40, 30, 8), _resize((80, 61), (40, 30)), None),                  # pooled split by rows
])
@pytest.mark.parametrize("sign", [0, 1, -1], ids=["mixed", "zero_point_0", "zero_point_255"])
def test_resize_bilinear_fast_equals_reference(shape, args, own_range, sign):
    x = one_signed(np.random.default_rng(shape[1]), shape, sign)
    graph = quantized_with_range(x, [("ResizeBilinear", ["x"], ["y"], args)], own_range)
    with threadpool_limits(2):
        assert_same_bytes(graph, x, "ResizeBilinear")


@pytest.mark.skipif(process_pool() is None, reason=NO_POOL)
@pytest.mark.parametrize("op_type,args,shape,own_range", [
    ("ChannelShuffle", {"group": 4}, (1, 40, 40, 24), (-0.5, 3.0)),   # the rescale's lookup_par
    ("Activation", {"activation": "RELUX", "max_limit": 0.4}, (1, 40, 40, 24), None),
    ("Softmax", {}, (40, 1000), None),
], ids=["channel_shuffle_rescaled", "activation", "softmax"])
def test_lookups_and_softmax_split_across_the_compute_pool(op_type, args, shape, own_range):
    x = np.random.default_rng(shape[0]).uniform(-1, 1, shape).astype(np.float32)
    graph = quantized_with_range(x, [(op_type, ["x"], ["y"], args)], own_range)
    with threadpool_limits(2):
        fast, _ = assert_same_bytes(graph, x, op_type)
        assert fast.pooled



@pytest.mark.parametrize("act", ["", "RELU", "RELUX"])
@pytest.mark.parametrize("shape", [(1, 7, 9, 20), (2, 3, 5, 67)])
def test_batchnorm_int8_fast_equals_reference_and_the_float_op(act, shape):
    """A lone BatchNorm (DenseNet's pre-activation form): int8, its [C, 256] tables looked up
    by the compiled loop; within half an output step of the float op on the dequantized input."""
    rng = np.random.default_rng(len(act) + shape[-1])
    x = rng.uniform(-2, 3, shape).astype(np.float32)
    c = shape[-1]
    consts = {"w": rng.uniform(-1.5, 1.5, c).astype(np.float32), "b": rng.uniform(-1, 1, c).astype(np.float32)}
    args = {"activation": act, "max_limit": 1.5} if act else {}
    graph = quantized("BatchNorm", x, consts, args)
    bn = next(op for op in graph.net.op if op.type == "BatchNorm")
    assert all(graph.consts[t].dtype == np.float32 for t in bn.input[1:])   # float_inputs
    fast, _ = assert_same_bytes(graph, x, "BatchNorm")
    quant = next(op for op in graph.net.op if op.type == "Quantize")
    p_in, p_out = params_from_info(quant.quantize_info[0]), params_from_info(bn.quantize_info[0])
    got = fast.run({"x": x})["y"]
    # the input's codes as the Quantize kernel computes them (its buffer is reused by then)
    codes = np.clip(np.rint(x * (1.0 / np.float64(p_in.scale))) + p_in.zero_point, 0, 255)
    want = (codes - p_in.zero_point) * p_in.scale * consts["w"] + consts["b"]
    if act:
        want = np.clip(want, 0, 1.5 if act == "RELUX" else None)
    # the output's codes hold its calibrated range (the float x's, not the rounded input's)
    want = np.clip(want, -p_out.zero_point * p_out.scale, (255 - p_out.zero_point) * p_out.scale)
    assert np.abs(got - want).max() <= 0.5 * p_out.scale + 1e-6
