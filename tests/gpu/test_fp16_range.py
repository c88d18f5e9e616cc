"""fp16 storage is never silent: the GPU counts what half clamps or flushes per node, `run` names the
first such node with the fix, and `gpu_fp32_ops` (names or auto) keeps those nodes in float images.

Counts are checked against hand-computed values; the fallback against onnxruntime through the CLI.
"""
import json

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from mace.runtime.engine import Engine
from mace.runtime.gpu.range_counts import range_notes
from tests.cli_helpers import cli, save_onnx, workdir, write_deployment
from tests.gpu.gpu_case import chain_graph

GPU_TIMEOUT = 600


def counts_of(graph, feed, **options):
    engine = Engine(graph, device="gpu", options={"data_type": "fp16_fp32", "gpu_range_check": True,
                                                  **options})
    out = engine.run(feed)
    return out, {c.name: c for c in engine.gpu.range_counts(engine.nodes)}


def test_counts_are_the_hand_computed_ones():
    # 8 channels, every input exactly representable in half (uploads are not counted)
    x = np.array([1, 2, -3, 0.5, 0.25, 0, 4, -8], np.float32).reshape(1, 1, 1, 8)
    steps = [("Eltwise", ["x", "big"], ["a"], {"type": "PROD"}),     # x * 40000
             ("Eltwise", ["x", "tiny"], ["b"], {"type": "PROD"}),    # x * 2^-20
             ("Eltwise", ["x", "tinier"], ["c"], {"type": "PROD"}),  # x * 2^-27
             ("Eltwise", ["x"], ["d"], {"type": "SQRT"})]            # sqrt(-3), sqrt(-8): NaN
    g = chain_graph(steps, {"x": x}, {"big": np.float32([40000]), "tiny": np.float32([2.0 ** -20]),
                                      "tinier": np.float32([2.0 ** -27])}, outputs=("a", "b", "c", "d"))
    out, counts = counts_of(g, {"x": x})
    # a = 40000, 80000, -120000, 20000, 10000, 0, 160000, -320000: four beyond 65504
    assert (counts["op0"].clamped, counts["op0"].subnormal, counts["op0"].flushed) == (4, 0, 0)
    assert np.abs(out["a"]).max() == 65504.0          # what the store did: clamp
    # b = x * 2^-20: |b| in 2^-22 .. 2^-17, all below 2^-14 (subnormal), none below 2^-25; 0 is 0
    assert (counts["op1"].clamped, counts["op1"].subnormal, counts["op1"].flushed) == (0, 7, 0)
    # c = x * 2^-27: 2^-24 (x=8), 2^-25 (x=4: the boundary, still subnormal: rounds to 2^-24 or 0)
    # and 2^-26 (x=2), 3 * 2^-27, 2^-27, 2^-28, 2^-29 flushed
    assert (counts["op2"].subnormal, counts["op2"].flushed) == (2, 5)
    assert counts["op3"].nonfinite == 2 and counts["op3"].values == 8
    lines = range_notes(list(counts.values()), "fp16_fp32")
    assert "first op it cannot hold is 'op0'" in lines[0] and "4 of 8 values clamped" in lines[0]
    assert 'gpu_fp32_ops: ["op0"]' in lines[1] and "fp32_fp32" in lines[1]


def test_fp32_ops_keep_float_images_and_count_only_nan():
    x = np.array([1, 2, -3, 0.5, 0.25, 0, 4, -8], np.float32).reshape(1, 1, 1, 8)
    g = chain_graph([("Eltwise", ["x", "big"], ["a"], {"type": "PROD"}), ("Softmax", ["a"], ["y"], {})],
                    {"x": x}, {"big": np.float32([40000])})
    want = Engine(g).run({"x": x})["y"]
    half, counts = counts_of(g, {"x": x})
    assert counts["op0"].clamped == 4
    assert np.abs(half["y"] - want).max() > 0.4        # clamping made 80000 and 160000 equal
    kept, counts = counts_of(g, {"x": x}, gpu_fp32_ops=["op0"])
    assert counts["op0"].fp32 and counts["op0"].clamped == 0
    np.testing.assert_allclose(kept["y"], want, atol=1e-5)
    e = Engine(g, device="gpu", options={"data_type": "fp16_fp32", "gpu_fp32_ops": ["op0"]})
    # op0's output and the input it reads are float images (2 x 1 pixels of 16 bytes, live at
    # the same time: two blocks); softmax's output stays half (2 x 1 pixels of 8 bytes)
    assert e.gpu.float_tensors == {"x", "a"} and e.gpu.float_blocks == 2
    assert e.gpu.image_bytes == 2 * 32 + 16


# ---- through the CLI, against onnxruntime --------------------------------------------------------

def saturating_model(work):
    """x -> Conv (outputs ~1e5, beyond half) -> Softmax over channels -> y."""
    rng = np.random.default_rng(3)
    w = (rng.normal(size=(8, 4, 3, 3)) * 2e4).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["logits"], pads=[1, 1, 1, 1], name="big_conv"),
             helper.make_node("Softmax", ["logits"], ["y"], axis=1, name="softmax")]
    checksum = save_onnx(work / "sat.onnx", nodes, [("x", [1, 4, 8, 8])], [("y", [1, 8, 8, 8])],
                         [numpy_helper.from_array(w, "w")])
    x = rng.uniform(-1, 1, (1, 4, 8, 8)).astype(np.float32)
    np.save(work / "x.npy", x)
    return checksum, x


def deployment(work, checksum, output_shape="1,8,8,8", **keys):
    model = {"platform": "onnx", "model_file_path": "sat.onnx", "model_sha256_checksum": checksum,
             "runtime": "gpu", "data_type": "fp16_fp32", **keys,
             "subgraphs": [{"input_tensors": "x", "input_shapes": "1,4,8,8", "input_data_formats": "NCHW",
                            "output_tensors": "y", "output_shapes": output_shape, "output_data_formats": "NCHW",
                            "validation_inputs_data": ["x.npy"]}]}
    return write_deployment(work / "sat.yml", {"sat": model}, library="sat")


def flat(text):
    return " ".join(text.split())


@pytest.fixture
def work(tmp_path):
    return workdir(tmp_path)


def run_validate(work):
    report = work / "r.json"
    done = cli("run", "--config=sat.yml", "--validate", f"--json={report}", cwd=work, timeout=GPU_TIMEOUT)
    return done, json.loads(report.read_text())["models"][0]


def test_cli_names_the_saturating_conv_and_the_fallback_reaches_the_threshold(work):
    checksum, x = saturating_model(work)
    want = ort.InferenceSession(str(work / "sat.onnx")).run(None, {"x": x})[0]
    deployment(work, checksum)
    assert cli("convert", "--config=sat.yml", cwd=work, timeout=GPU_TIMEOUT).returncode == 0
    done, result = run_validate(work)
    text = flat(done.stdout)
    assert "first op it cannot hold is 'big_conv'" in text, text
    assert "saturates" in text and 'gpu_fp32_ops: ["big_conv"]' in text and "fp32_fp32" in text
    assert result["validation"][0]["cosine"] < 0.995 and done.returncode != 0   # ties from the clamp

    deployment(work, checksum, gpu_fp32_ops="auto")
    conv = cli("convert", "--config=sat.yml", cwd=work, timeout=GPU_TIMEOUT)
    assert conv.returncode == 0, conv.stderr
    assert "GPU op big_conv (Conv2D) keeps float storage: saturates in fp16" in flat(conv.stdout)
    done, result = run_validate(work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "keeps float storage" in flat(done.stdout) and "cannot hold" not in flat(done.stdout)
    ours = np.asarray(result["validation"][0]["cosine"])
    assert ours >= 0.995
    # the same numbers as onnxruntime's, checked directly too
    out = work / "out"
    assert cli("run", "--config=sat.yml", f"--output_dir={out}", cwd=work, timeout=GPU_TIMEOUT).returncode == 0
    got = np.load(out / "y.npy").astype(np.float64)
    cos = float((got * want).sum() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cos >= 0.995


def test_named_fp32_ops_and_a_wrong_name(work):
    checksum, _ = saturating_model(work)
    deployment(work, checksum, gpu_fp32_ops=["big_conv"])
    conv = cli("convert", "--config=sat.yml", cwd=work, timeout=GPU_TIMEOUT)
    assert "big_conv (Conv2D) keeps float storage: named in gpu_fp32_ops" in flat(conv.stdout)
    done, result = run_validate(work)
    assert done.returncode == 0 and result["validation"][0]["cosine"] >= 0.995
    deployment(work, checksum, gpu_fp32_ops=["no_such_op"])
    bad = cli("convert", "--config=sat.yml", cwd=work, timeout=GPU_TIMEOUT)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "gpu_fp32_ops: no op named 'no_such_op'" in flat(bad.stderr)


def test_range_check_debug_and_report_name_the_conv(work):
    checksum, _ = saturating_model(work)
    deployment(work, checksum)
    assert cli("convert", "--config=sat.yml", cwd=work, timeout=GPU_TIMEOUT).returncode == 0
    checked = cli("run", "--config=sat.yml", "--gpu_out_of_range_check", "--report", cwd=work,
                  timeout=GPU_TIMEOUT)
    text = flat(checked.stdout)
    assert checked.returncode != 0 and "Traceback" not in checked.stderr
    assert "out of range: sat: node 1 big_conv (Conv2D), tensor logits: saturates" in text, text
    assert "fp16 storage range check: fp16 storage (fp16_fp32): first op it cannot hold is 'big_conv'" in text
    assert "range check failed" in flat(checked.stderr)
    debug = cli("debug", "--config=sat.yml", cwd=work, timeout=GPU_TIMEOUT)
    text = flat(debug.stdout)
    assert "sat: gpu vs framework: fp16 storage (fp16_fp32): first op it cannot hold is 'big_conv'" in text, text
    assert 'gpu_fp32_ops: ["big_conv"]' in text


# ---- values that enter half images from the CPU (issue 37, item 3) --------------------------------

def test_a_cpu_op_handing_over_values_beyond_half_is_counted():
    # x * 30000 (GPU) -> Reduce SUM of 8 (CPU: no GPU kernel) = 240000 -> * 1e-3 (GPU): the upload clamps
    x = np.full((1, 1, 1, 8), 1.0, np.float32)
    steps = [("Eltwise", ["x", "big"], ["a"], {"type": "PROD"}),
             ("Reduce", ["a"], ["s"], {"reduce_type": "SUM", "axis": [3], "keepdims": 1}),
             ("Eltwise", ["s", "small"], ["y"], {"type": "PROD"})]
    g = chain_graph(steps, {"x": x}, {"big": np.float32([30000]), "small": np.float32([1e-3])})
    out, counts = counts_of(g, {"x": x})
    assert abs(float(out["y"].ravel()[0]) - 65.504) < 0.05                  # what the copy did
    assert counts["op1"].uploaded and (counts["op1"].clamped, counts["op1"].values) == (1, 1)
    assert counts["x"].uploaded and counts["x"].clamped == 0 and counts["x"].values == 8
    lines = range_notes(list(counts.values()), "fp16_fp32")
    assert "first op it cannot hold is 'op1' (Reduce on the CPU, node 1)" in lines[0], lines
    assert "when copied into the GPU's half images" in lines[0] and 'gpu_fp32_ops: ["op1"]' in lines[1]
    # the hint, followed: the GPU reader of the Reduce's output keeps float images, nothing is counted
    out, counts = counts_of(g, {"x": x}, gpu_fp32_ops=["op1"])
    assert abs(float(out["y"].ravel()[0]) - 240.0) < 0.01
    assert counts["op2"].fp32 and "op1" not in counts and range_notes(list(counts.values()), "fp16_fp32") == []


def reduce_model(work):
    """x -> Conv (GPU, positive) -> ReduceL1 over H, W (CPU: the GPU has no L1 reduce; 4.7e3 .. 1.3e5,
    past half) -> * 1e-3 (GPU) -> y."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, (1, 4, 8, 8)).astype(np.float32)
    w = (rng.uniform(0, 200, (8, 4, 3, 3)) * np.linspace(0.05, 1.6, 8)[:, None, None, None]).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("ReduceL1", ["c"], ["s"], axes=[2, 3], keepdims=1, name="reduce"),
             helper.make_node("Mul", ["s", "k"], ["y"], name="scale")]
    checksum = save_onnx(work / "sat.onnx", nodes, [("x", [1, 4, 8, 8])], [("y", [1, 8, 1, 1])],
                         [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32([1e-3]), "k")])
    np.save(work / "x.npy", x)
    return checksum


def reduce_deployment(work, checksum, **keys):
    return deployment(work, checksum, output_shape="1,8,1,1", **keys)


def test_auto_keeps_the_readers_of_a_saturating_cpu_op_in_float(work):
    checksum = reduce_model(work)
    reduce_deployment(work, checksum)
    assert cli("convert", "--config=sat.yml", cwd=work, timeout=GPU_TIMEOUT).returncode == 0
    done, result = run_validate(work)
    text = flat(done.stdout)
    assert done.returncode != 0 and result["validation"][0]["cosine"] < 0.995   # 0.970: the copy clamps
    assert "first op it cannot hold is 'reduce' (Reduce on the CPU" in text, text
    assert 'gpu_fp32_ops: ["reduce"]' in text

    for fix in (["reduce"], "auto"):   # the hint as printed, and auto
        reduce_deployment(work, checksum, gpu_fp32_ops=fix)
        conv = cli("convert", "--config=sat.yml", cwd=work, timeout=GPU_TIMEOUT)
        assert conv.returncode == 0, conv.stdout + conv.stderr
        assert "GPU op scale (Eltwise) keeps float storage: reads 's'" in flat(conv.stdout), flat(conv.stdout)
        assert "no op needs float storage" not in flat(conv.stdout)
        done, result = run_validate(work)
        assert done.returncode == 0 and result["validation"][0]["cosine"] >= 0.9999, done.stdout + done.stderr
        assert "cannot hold" not in flat(done.stdout) and "hint" not in flat(done.stdout)
        # every counter of the run is zero: the range check passes
        checked = cli("run", "--config=sat.yml", "--gpu_out_of_range_check", cwd=work, timeout=GPU_TIMEOUT)
        assert checked.returncode == 0 and "out of range" not in flat(checked.stdout), checked.stdout + checked.stderr
