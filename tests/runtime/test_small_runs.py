"""A model whose whole run is a few million multiply-adds runs on one thread whatever the
thread count asked (mace/ops/fast/compute.py, for_run): splitting its microsecond steps costs
more than it saves. Its outputs are the same; a bigger model keeps the width it asked for;
`split_small_runs` keeps the width; the note says why."""
import numpy as np
from onnx import helper

from mace import onnx_backend
from mace.ir.opstats import run_macs, streamed_weight
from mace.ops.fast._pool import FEW_ROWS_SPLIT
from mace.ops.fast.compute import SMALL_RUN_MACS
from mace.runtime.engine import Engine
from tests.ops.onnx_case import rand
from tests.ops.onnx_graph import graph_model, run_ort

ONE_THREAD = {"num_threads": 2, "split_small_runs": False}


def _conv_model(size: int, channels: int):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    x = rand(1, channels, size, size, seed=1)
    return graph_model(nodes, {"x": x}, {"y": np.float32}, {"w": rand(channels, channels, 3, 3, seed=2)}), x


def _engine(model, x, options=ONE_THREAD):
    return Engine(onnx_backend.prepare(model, {"x": x}).graph, options=options)


def test_a_small_run_gets_one_thread_and_says_why():
    model, x = _conv_model(8, 16)   # 8 * 8 * 16 * 16 * 9 = 0.15 M multiply-adds
    engine = _engine(model, x)
    assert run_macs(engine.graph) < SMALL_RUN_MACS
    assert engine.compute.threads == 1 and engine.compute.width() == 1 and not engine.pooled
    (note,) = [n for n in engine.compute.notes() if "one thread" in n]
    assert "0.15 M multiply-adds" in note and "across 2 threads" in note
    np.testing.assert_allclose(engine.run({"x": x})["y"], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_a_bigger_run_keeps_its_threads():
    model, x = _conv_model(48, 32)   # 48 * 48 * 32 * 32 * 9 = 21 M
    engine = _engine(model, x)
    assert run_macs(engine.graph) > SMALL_RUN_MACS
    assert engine.compute.threads == 2 and not engine.compute.narrowed
    np.testing.assert_allclose(engine.run({"x": x})["y"], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_split_small_runs_keeps_the_width_with_the_same_outputs():
    model, x = _conv_model(8, 16)
    one = _engine(model, x)
    split = _engine(model, x, {"num_threads": 2, "split_small_runs": True})
    assert split.compute.threads == 2 and not split.compute.narrowed
    np.testing.assert_array_equal(one.run({"x": x})["y"], split.run({"x": x})["y"])


def test_recurrent_and_integer_products_count():
    """opstats' MACE counts leave out LSTM gates and MatMulInteger; the run's count has them."""
    x = rand(20, 1, 64, seed=3)
    w, r = rand(1, 4 * 128, 64, seed=4), rand(1, 4 * 128, 128, seed=5)
    model = graph_model([helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=128)],
                        {"x": x}, {"y": np.float32}, {"w": w, "r": r})
    engine = _engine(model, x)
    assert run_macs(engine.graph) == 20 * (w.size + r.size)   # 3.9 M


def _gemv_model(k: int, n: int):
    """Flatten + Gemm + Relu: one input row through a k x n weight (openWakeWord's timer head)."""
    x = rand(1, k // 32, 32, seed=6)
    nodes = [helper.make_node("Flatten", ["x"], ["f"]),
             helper.make_node("Gemm", ["f", "w", "b"], ["g"], transB=1),
             helper.make_node("Relu", ["g"], ["y"])]
    consts = {"w": rand(n, k, seed=7), "b": rand(n, seed=8)}
    return graph_model(nodes, {"x": x}, {"y": np.float32}, consts), x


def test_a_run_streaming_a_big_weight_keeps_its_threads():
    """A one-row product's time is its weight's stream: 0.4 M multiply-adds over a 1.6 MB
    weight split across the threads (each streams half), where a conv of as many would not."""
    model, x = _gemv_model(3264, 128)
    engine = _engine(model, x)
    assert run_macs(engine.graph) < SMALL_RUN_MACS
    assert streamed_weight(engine.graph) == 3264 * 128 >= FEW_ROWS_SPLIT
    assert engine.compute.threads == 2 and not engine.compute.narrowed
    fc = next(n for n in engine.nodes if n.op.type == "FullyConnected")
    if engine.compute.width() > 1:   # a pool here: the weight's rows split across it
        assert fc.kernel.algorithm_name == "rows"
    np.testing.assert_allclose(engine.run({"x": x})["y"], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
    small = _engine(*_gemv_model(1024, 128))   # 0.5 MB: one thread's stream is short
    assert streamed_weight(small.graph) < FEW_ROWS_SPLIT and small.compute.narrowed
