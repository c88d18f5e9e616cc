"""What the CPU speed work added besides kernels: MobileNet v2 builder, winograd pass, thread
pinning, the zero-copy FC weight, reference-kernel engines and the benchmark scripts."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from mace.ir.args import get_arg
from mace.onnx_backend import prepare
from mace.runtime import affinity
from mace.runtime.engine import Engine
from mace.testing.mobilenet_v2 import INPUT_NAME, mobilenet_v2

ROOT = Path(__file__).resolve().parents[2]


def ort_run(model, feed):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)


def test_mobilenet_v2_matches_onnxruntime():
    model = mobilenet_v2(seed=3, resolution=96, classes=10)
    x = np.random.default_rng(0).standard_normal((1, 3, 96, 96)).astype(np.float32)
    want = ort_run(model, {INPUT_NAME: x})[0]
    engine = prepare(model, {INPUT_NAME: x})
    got = engine.run({INPUT_NAME: x})[model.graph.output[0].name]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
    kinds = {(n.op.type, n.tag) for n in engine.nodes}
    assert ("DepthwiseConv2d", "cpu:fast") in kinds and ("Conv2D", "cpu:fast") in kinds


def conv_model():
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.2, n)
             for n, s in (("w1", (8, 64, 3, 3)), ("w2", (8, 8, 3, 3)), ("w3", (8, 8, 1, 1)))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w2"], ["b"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Conv", ["b", "w3"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 40, 40])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_option_marks_3x3_stride_1_convs_only(m):
    model = conv_model()
    x = np.random.default_rng(2).standard_normal((1, 64, 40, 40)).astype(np.float32)
    engine = prepare(model, {"x": x}, options={"winograd": m})
    marks = [get_arg(n.op, "winograd", 0) for n in engine.nodes if n.op.type == "Conv2D"]
    assert marks == [m, 0, 0]
    first = engine.nodes[[n.op.type for n in engine.nodes].index("Conv2D")].kernel
    assert first.algorithm == "winograd" and first.algo.m == m
    want = ort_run(model, {"x": x})[0]
    np.testing.assert_allclose(engine.run({"x": x})["y"], want, rtol=0, atol=1e-4 * np.abs(want).max())
    assert all(get_arg(n.op, "winograd", 0) == 0 for n in prepare(model, {"x": x}).nodes)


def test_reference_kernels_option_and_fc_weight_without_copy():
    w = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w"),
                                           numpy_helper.from_array(np.ones(5, np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    engine = prepare(model, {"x": np.zeros((2, 7), np.float32)})
    fc = next(n for n in engine.nodes if n.op.type == "FullyConnected")
    assert np.shares_memory(fc.kernel.wt, engine.graph.consts[fc.op.input[1]])
    conv = prepare(conv_model(), {"x": np.zeros((1, 64, 40, 40), np.float32)})
    ref = Engine(conv.graph, options={"reference_kernels": True})
    assert {n.tag for n in ref.nodes} == {"cpu"} and "cpu:fast" in {n.tag for n in conv.nodes}


def test_affinity_policies_pick_cores_by_frequency(monkeypatch):
    freqs = {0: 2000, 1: 3500, 2: 3500, 3: 2000}
    monkeypatch.setattr(affinity, "_max_freq", lambda c: freqs[c])
    cpus = [0, 1, 2, 3]
    assert affinity.policy_cores(1, cpus=cpus) == [1, 2] == affinity.policy_cores(3, cpus=cpus)
    assert affinity.policy_cores(2, cpus=cpus) == [0, 3] == affinity.policy_cores(4, cpus=cpus)
    assert affinity.policy_cores(1, num_threads=1, cpus=cpus) == [1]
    assert affinity.policy_cores(0, cpus=cpus) == cpus
    with pytest.raises(ValueError, match="cpu_affinity_policy 7"):
        affinity.policy_cores(7, cpus=cpus)
    assert affinity.pin_threads(0) == []


def test_bench_ops_times_a_conv_shape():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_ops.py"), "--shape",
                          "1x12x12x8:8:3x3:s1:p1", "--runs", "2", "--reference", "--threads", "1"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert "cpu:fast" in out and "| cpu |" in out and "GMACPS" in out


def test_bench_cpu_runs_digits_in_variants(tmp_path):
    out = tmp_path / "perf.md"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_cpu.py"), "--models", "digits",
                        "--runs", "4", "--rounds", "2", "--warmup", "1", "--variants", "env,env+wino4",
                        "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    text = out.read_text()
    assert "| digits |" in text and "+ wino4" in text and "arena/bound" in text


def test_bench_cpu_load_mode_writes_only_its_section(tmp_path):
    """--load: a quiet and a loaded table per wait policy, in the file's load section; the
    rest of the file (a quiet run's tables, the GPU section) stays as it was."""
    out = tmp_path / "perf.md"
    out.write_text("# quiet tables\n\nkept\n\n<!-- GPU section: benchmarks/bench_gpu.py -->\ngpu rows\n")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_cpu.py"), "--load", "--models", "digits",
                        "--runs", "3", "--rounds", "1", "--warmup", "0", "--variants", "env@passive,env@gomp",
                        "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    text = out.read_text()
    assert text.startswith("# quiet tables\n\nkept") and text.rstrip().endswith("gpu rows")
    assert "### Quiet" in text and "### Loaded: one competing busy process" in text
    assert "| digits | env@passive (passive) |" in text and "| digits | env@gomp (environment) |" in text
    assert "ours p99/median" in text and "started a competing process" in r.stdout


def test_scale_and_shift_after_a_batchnorm_fold_into_it():
    rng = np.random.default_rng(4)
    c = 6
    inits = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in (
        ("s", rng.uniform(0.5, 1.5, c)), ("b", rng.standard_normal(c)), ("m", rng.standard_normal(c)),
        ("v", rng.uniform(0.5, 1.5, c)), ("k", rng.standard_normal((1, c, 1, 1))),
        ("a", rng.standard_normal((c, 1, 1))))]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"]),
             helper.make_node("Mul", ["bn", "k"], ["mul"]), helper.make_node("Add", ["a", "mul"], ["add"]),
             helper.make_node("Relu", ["add"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 5, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    x = rng.standard_normal((1, c, 5, 4)).astype(np.float32)
    engine = prepare(model, {"x": x})
    ops = [n.op.type for n in engine.nodes if n.op.type != "Transpose"]
    bn = next(n for n in engine.nodes if n.op.type == "BatchNorm")
    assert ops == ["BatchNorm"] and get_arg(bn.op, "activation") == "RELU"
    np.testing.assert_allclose(engine.run({"x": x})["y"], ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_planner_keeps_the_best_of_several_placement_orders():
    from mace.runtime.memory_planner import ORDERS, TensorLife, _greedy, plan_memory
    # largest-first alone needs 640 bytes here; another order reaches the 576-byte bound
    lives = [TensorLife("t0", 256, 5, 5), TensorLife("t1", 64, 2, 3), TensorLife("t2", 192, 4, 4),
             TensorLife("t3", 192, 2, 5), TensorLife("t4", 192, 1, 4)]
    assert _greedy(lives, 64, ORDERS[0]).arena_size == 640
    plan = plan_memory(lives)
    assert plan.arena_size == plan.lower_bound == 576
    for a in lives:   # no two tensors alive at once share bytes
        for b in lives:
            if a is not b and a.first <= b.last and b.first <= a.last:
                oa, ob = plan.offsets[a.name], plan.offsets[b.name]
                assert oa + a.size <= ob or ob + b.size <= oa
