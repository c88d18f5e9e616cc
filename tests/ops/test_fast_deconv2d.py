"""The fast Deconv2D (mace/ops/fast/deconv2d.py: packed GEMM + compiled col2im) against
onnxruntime's ConvTranspose and against the reference kernel, on the pool and off it."""
import os

import numpy as np
import pytest
from onnx import helper
from threadpoolctl import threadpool_limits

from mace.ops.fast import _pool
from mace.ops.fast._jit import op_loops
from mace.runtime.engine import Engine
from tests.ops.onnx_case import rand
from tests.ops.onnx_graph import check_model, graph_model
from tests.ops.test_fast_kernels import close, one_op_graph

pytestmark = pytest.mark.skipif(op_loops("_deconv_loops") is None, reason="no numba: the reference runs")

# k, stride, dilation, pads [t, l, b, r], output_padding, group, C_in, C_out
CASES = [
    ((3, 3), (1, 1), (1, 1), [1, 1, 1, 1], [0, 0], 1, 3, 5),
    ((3, 3), (2, 2), (1, 1), [0, 0, 0, 0], [0, 0], 1, 4, 6),
    ((3, 3), (2, 2), (1, 1), [1, 0, 0, 2], [1, 1], 1, 5, 3),      # asymmetric pads, output_padding
    ((4, 4), (2, 2), (1, 1), [1, 1, 1, 1], [0, 0], 1, 40, 36),    # the usual 2x upsampler, > 1 panel
    ((2, 2), (3, 3), (1, 1), [0, 1, 1, 0], [2, 1], 1, 3, 3),      # stride > kernel: cells no tap reaches
    ((3, 2), (2, 1), (2, 3), [2, 1, 0, 1], [1, 0], 1, 4, 7),      # dilation, rectangular
    ((3, 3), (2, 2), (1, 1), [1, 1, 1, 1], [1, 1], 2, 6, 4),      # grouped
    ((5, 5), (2, 2), (1, 1), [2, 2, 2, 2], [0, 0], 3, 6, 9),
    ((3, 3), (2, 2), (1, 1), [1, 1, 1, 1], [1, 1], 6, 6, 6),      # depthwise
    ((1, 1), (1, 1), (1, 1), [0, 0, 0, 0], [0, 0], 1, 7, 5),      # pointwise
    ((3, 3), (2, 2), (1, 1), [1, 1, 1, 1], [0, 1], 3, 3, 6),      # one input channel a group, two outputs
    ((2, 2), (2, 2), (1, 1), [0, 0, 0, 0], [0, 0], 1, 1, 1),      # one channel in and out (wechat_qr_sr's last)
]


def deconv_node_tag(engine) -> str:
    (node,) = [n for n in engine.nodes if n.op.type == "Deconv2D"]
    return node.tag


@pytest.mark.parametrize("k,stride,dilation,pads,out_pad,group,cin,cout", CASES)
@pytest.mark.parametrize("act", ["", "Relu", "LeakyRelu"])
def test_fast_deconv_matches_onnxruntime(k, stride, dilation, pads, out_pad, group, cin, cout, act):
    x = rand(2, cin, 7, 6)
    w, b = rand(cin, cout // group, *k, seed=1), rand(cout, seed=2)
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["t" if act else "y"], kernel_shape=list(k),
                              strides=list(stride), dilations=list(dilation), pads=pads,
                              output_padding=out_pad, group=group)]
    if act:
        nodes.append(helper.make_node(act, ["t"], ["y"], **({"alpha": 0.1} if act == "LeakyRelu" else {})))
    _, engine = check_model(graph_model(nodes, {"x": x}, {"y": np.float32}, {"w": w, "b": b}), {"x": x})
    assert deconv_node_tag(engine) == "cpu:fast"
    assert [op.type for op in engine.graph.net.op].count("Activation") == 0   # fused into the Deconv2D


def _case(rng, k, stride, dilation, pads, out_pad, group, cin, cout, n=2, act="RELUX", bias=True):
    x = rng.standard_normal((n, 7, 6, cin)).astype(np.float32)
    consts = [rng.standard_normal((cin, cout // group) + tuple(k)).astype(np.float32)]
    if bias:
        consts.append(rng.standard_normal(cout).astype(np.float32))
    args = dict(strides=list(stride), dilations=list(dilation), pads=pads, output_padding=out_pad, group=group)
    if act:
        args.update(activation=act, max_limit=1.5, activation_coefficient=0.1)
    return x, consts, args


def _both(x, consts, args):
    graph = one_op_graph("Deconv2D", x, consts, args)
    fast, ref = Engine(graph), Engine(graph, options={"reference_kernels": True})
    assert fast.nodes[0].tag == "cpu:fast" and ref.nodes[0].tag == "cpu"
    got, want = fast.run({"x": x})["y"], ref.run({"x": x})["y"]
    np.testing.assert_array_equal(fast.run({"x": x})["y"], got)   # scratch reused: same again
    return got, want, fast


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_fast_deconv_gives_the_references_bytes(case, threads, monkeypatch):
    """Our GEMM sums each column in the reference's order and col2im adds the taps in its
    order, the bias last: the same bytes, one thread or split across the pool."""
    pool = _pool.process_pool()
    if pool is not None:
        monkeypatch.setattr(pool, "_contention", None)
    with threadpool_limits(threads):
        for act, bias in [("RELUX", True), ("", False), ("LEAKYRELU", True)]:
            got, want, fast = _both(*_case(np.random.default_rng(3), *case, act=act, bias=bias))
            np.testing.assert_array_equal(got, want)
            if threads == 2 and pool is not None and case is CASES[3]:   # the others: too small to split
                assert fast.pooled


@pytest.mark.parametrize("case", CASES + [((3, 3), (1, 1), (3, 3), [4, 0, -2, 1], [0, 0], 1, 3, 4)])
@pytest.mark.parametrize("block_bytes", [1, 3000])
def test_columns_in_a_ring_of_a_few_input_rows_give_the_same_bytes(case, block_bytes, monkeypatch):
    """Blocks of one input row (or a few) and a ring of a few: every output row is gathered
    before the rows it reads are overwritten (dilated taps, pads cropping more than a window,
    negative pads growing the output)."""
    from mace.ops.fast import deconv2d
    monkeypatch.setattr(deconv2d, "BLOCK_BYTES", block_bytes)
    x, consts, args = _case(np.random.default_rng(7), *case)
    x = np.concatenate([x] * 3, axis=1)   # 21 input rows
    got, want, fast = _both(x, consts, args)
    kern = fast.nodes[0].kernel
    assert kern.algorithm_name == "direct" or kern.ring < x.shape[1] or block_bytes > 1
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", [CASES[8], CASES[10], CASES[11]])
def test_one_input_channel_a_group_runs_the_direct_loop(case):
    got, want, fast = _both(*_case(np.random.default_rng(8), *case))
    assert fast.nodes[0].kernel.algorithm_name == "direct" and fast.nodes[0].kernel.scratch_nbytes == 0
    np.testing.assert_array_equal(got, want)


def test_fast_deconv_without_the_pool_runs_numpys_gemm(monkeypatch):
    """MACE_NO_POOL=1 and OpenBLAS on two threads: the GEMM is np.matmul (OpenBLAS's own
    threads), col2im the same compiled loop."""
    monkeypatch.setitem(os.environ, "MACE_NO_POOL", "1")
    with threadpool_limits(2):
        got, want, fast = _both(*_case(np.random.default_rng(4), *CASES[6]))
    assert fast.nodes[0].kernel.algorithm_name == "blas+col2im"
    close(got, want)


def test_nan_and_inf_pass_through():
    """A NaN input reaches every output cell its taps land on (the clip keeps it), as in the
    reference; an inf too."""
    x, consts, args = _case(np.random.default_rng(5), *CASES[1], act="RELU")
    x[0, 2, 3, 1], x[1, 0, 0, 0] = np.nan, np.inf
    got, want, _ = _both(x, consts, args)
    assert np.isnan(got).any() and np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got, want)


def test_empty_batch():
    x, consts, args = _case(np.random.default_rng(6), *CASES[3], n=0)
    got, want, _ = _both(x, consts, args)
    assert got.shape == want.shape and got.shape[0] == 0
