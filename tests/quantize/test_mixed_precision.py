"""Automatic mixed precision (`quantize_target_cosine`): a model whose plain int8 cosine is
below the target reaches it with the fewest layers kept float, and the calibration report
names them and why.

The model: a 3x3 conv (ordinary), then a 1x1 conv making two channels c0 = a and
c1 = a + 0.01 * b, then a 1x1 conv computing 100 * (c1 - c0) = b: a small difference of
large terms, which 8-bit activations (and an 8-bit 0.01 weight) cannot carry. onnxruntime
gives the float reference."""
import json

import numpy as np
import pytest
import yaml

from tests.cli_helpers import cli, save_onnx, sha256

pytest.importorskip("onnx", reason="the test model is written as ONNX")


def _model(path):
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(3)
    w0 = rng.uniform(-0.5, 0.5, (2, 2, 3, 3)).astype(np.float32)
    w1 = np.array([[1, 0], [1, 0.01]], np.float32).reshape(2, 2, 1, 1)
    w2 = np.array([[-100, 100]], np.float32).reshape(1, 2, 1, 1)
    inits = [numpy_helper.from_array(w, n) for w, n in ((w0, "w0"), (w1, "w1"), (w2, "w2"))]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], name="stage_conv", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("Conv", ["a", "w1"], ["terms"], name="terms_conv", kernel_shape=[1, 1]),
             helper.make_node("Conv", ["terms", "w2"], ["y"], name="difference_conv", kernel_shape=[1, 1])]
    return save_onnx(path, nodes, [("x", [1, 2, 8, 8])], [("y", [1, 1, 8, 8])], inits)


def _deployment(work, **extra):
    checksum = _model(work / "amp.onnx")
    rng = np.random.default_rng(0)
    (work / "calib").mkdir(exist_ok=True)
    for i in range(8):
        np.save(work / "calib" / f"s{i}.npy", rng.uniform(-1, 1, (1, 8, 8, 2)).astype(np.float32))
    np.save(work / "val.npy", rng.uniform(-1, 1, (1, 8, 8, 2)).astype(np.float32))
    model = {"platform": "onnx", "model_file_path": "amp.onnx", "model_sha256_checksum": checksum,
             "subgraphs": [{"input_tensors": "x", "input_shapes": "1,8,8,2", "output_tensors": "y",
                            "output_shapes": "1,8,8,1", "validation_inputs_data": ["val.npy"]}],
             "runtime": "cpu", "quantize": 1, "quantize_calibration_data": "calib", **extra}
    cfg = work / "amp.yml"
    cfg.write_text(yaml.safe_dump({"library_name": "amp", "target_abis": ["host"],
                                   "models": {"amp": model}}, sort_keys=False))
    return cfg


def _convert_and_validate(work, cfg):
    r = cli("convert", f"--config={cfg}", cwd=work, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if "quantize_target_cosine" in cfg.read_text():   # convert says what the search did
        assert "mixed precision (quantize_target_cosine 0.99): 1 op(s) kept float (difference_conv)" \
            in " ".join(r.stdout.split()), r.stdout
    report = work / "run.json"
    r = cli("run", f"--config={cfg}", "--validate", f"--json={report}",
            cwd=work, timeout=300)
    validation = json.loads(report.read_text())["models"][0]["validation"][0]
    quant = json.loads((work / "builds" / "amp" / "model" / "amp_quantize_report.json").read_text())
    text = (work / "builds" / "amp" / "model" / "amp_quantize_report.txt").read_text()
    return validation, quant, text


def test_plain_int8_misses_the_target_and_mixed_precision_reaches_it(tmp_path):
    plain, _, _ = _convert_and_validate(tmp_path, _deployment(tmp_path))
    assert plain["cosine"] < 0.99, plain   # the case is only a test if int8 alone fails

    amp_dir = tmp_path / "amp"
    amp_dir.mkdir()
    validation, quant, text = _convert_and_validate(amp_dir, _deployment(amp_dir, quantize_target_cosine=0.99))
    assert validation["cosine"] >= 0.99, validation          # on an input calibration never saw
    mixed = quant["mixed_precision"]
    assert mixed["reached"] and mixed["steps"][0] < 0.99 <= mixed["steps"][-1]
    chosen = [name for name, _, _ in mixed["float_ops"]]
    assert chosen == ["difference_conv"], chosen
    assert mixed["float_ops"][0][1] > 20                     # dB lost by the difference
    reasons = {name: why for name, _, why in quant["float_ops"]}
    assert set(reasons) == {"difference_conv", "terms_conv"}, reasons   # the stage conv stays int8
    assert "quantize_target_cosine" in reasons["difference_conv"]
    assert "feeds difference_conv" in reasons["terms_conv"]
    assert "Mixed precision" in text and "difference_conv" in text and "target met" in text


def test_target_without_samples_is_a_clear_error(tmp_path):
    cfg = _deployment(tmp_path, quantize_target_cosine=0.99)
    data = yaml.safe_load(cfg.read_text())
    del data["models"]["amp"]["quantize_calibration_data"]
    data["models"]["amp"]["subgraphs"][0]["validation_inputs_data"] = []
    data["models"]["amp"]["input_ranges"] = "-1,1"
    cfg.write_text(yaml.safe_dump(data))
    r = cli("convert", f"--config={cfg}", cwd=tmp_path, timeout=300)
    assert r.returncode != 0 and "quantize_target_cosine needs calibration samples" in r.stderr + r.stdout
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("value", [0, 1.5, "high"])
def test_target_must_be_in_0_1(tmp_path, value):
    cfg = _deployment(tmp_path, quantize_target_cosine=value)
    r = cli("convert", f"--config={cfg}", cwd=tmp_path, timeout=300)
    assert r.returncode != 0 and "quantize_target_cosine" in r.stderr + r.stdout


def test_dsp_runs_the_float_layers_in_a_cpu_group(tmp_path):
    """runtime dsp: the ops the target keeps float are placed on the CPU, the rest on the DSP
    (int8 kernels in the simulator), Quantize/Dequantize at the group edges; run --validate
    through the DSP backend passes against onnxruntime and the report says where each op went."""
    from mace.ir.model_io import load_model
    from mace.proto import pb

    cfg = _deployment(tmp_path, quantize_target_cosine=0.99, runtime="dsp")
    validation, quant, text = _convert_and_validate(tmp_path, cfg)
    assert validation["cosine"] >= 0.99, validation
    assert quant["mixed_precision"]["cpu_ops"] == ["terms_conv", "difference_conv"]
    assert "placed on the CPU" in text and "terms_conv, difference_conv" in text
    r = cli("convert", f"--config={cfg}", cwd=tmp_path, timeout=300)
    assert "runtime dsp: 2 float op(s) on the CPU (terms_conv, difference_conv), the rest on the DSP" \
        in " ".join(r.stdout.split()), r.stdout
    model = tmp_path / "builds" / "amp" / "model"
    graph = load_model(model / "amp.pb", model / "amp.data")
    where = {op.name: pb.DeviceType.Name(op.device_type) for op in graph.net.op}
    assert where["stage_conv"] == "HEXAGON" and where["terms_conv"] == where["difference_conv"] == "CPU"
    edges = [op.type for op in graph.net.op if op.device_type == pb.CPU]
    assert edges == ["Quantize", "Dequantize", "Conv2D", "Conv2D"], edges   # the group edges on the CPU
    r = cli("run", f"--config={cfg}", "--validate", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "runtime dsp" in r.stdout + r.stderr
    assert "placement groups (3): #0 cpu op 0, #1 dsp op 1, #2 cpu ops 2-4" in r.stdout + r.stderr


def test_dsp_float_ops_get_cpu_kernels_and_no_dsp_cycles(tmp_path):
    """The simulator's engine gives the CPU-placed ops float kernels and the DSP ones int8."""
    from mace.runtime.dsp.engine import create_dsp_engine

    cfg = _deployment(tmp_path, quantize_target_cosine=0.99, runtime="dsp")
    assert cli("convert", f"--config={cfg}", cwd=tmp_path, timeout=300).returncode == 0
    model = tmp_path / "builds" / "amp" / "model"
    engine = create_dsp_engine(model / "amp.pb", model / "amp.data")
    tags = {n.op.name: n.tag for n in engine.nodes}
    assert tags["stage_conv"].startswith("int8")
    assert not tags["terms_conv"].startswith("int8") and not tags["difference_conv"].startswith("int8")
    assert [c.name for c in engine.node_costs()] == ["stage_conv"]


def test_search_prints_each_step_and_measures_once_per_step(tmp_path):
    """The search's progress: one line per quantized run (the all-int8 one, then one with the
    damaging layer float), and the report lists the same steps with their cosines and times."""
    cfg = _deployment(tmp_path, quantize_target_cosine=0.99)
    r = cli("convert", f"--config={cfg}", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert "amp: mixed precision: step 1/24: 0 layer(s) kept float (0 float op(s) in all), cosine 0.6" in out, out
    assert "amp: mixed precision: step 2/24: 1 layer(s) kept float (2 float op(s) in all), cosine 1.0000" in out
    assert "amp: amp:" not in out
    assert "step 3/" not in out
    assert "(2 quantized run(s)," in out
    quant = json.loads((tmp_path / "builds" / "amp" / "model" / "amp_quantize_report.json").read_text())
    mixed = quant["mixed_precision"]
    assert [t[:2] for t in mixed["trials"]] == [[0, 0], [1, 2]], mixed["trials"]
    assert mixed["trials"][0][2] < 0.99 <= mixed["trials"][1][2]
    assert mixed["bounds"] == [24, 900.0] and mixed["stopped"] == "" and mixed["seconds"] > 0
    text = (tmp_path / "builds" / "amp" / "model" / "amp_quantize_report.txt").read_text()
    assert "step 2: 1 layer(s) kept float (2 float op(s) in all)" in text


@pytest.mark.parametrize("env", [{"MACE_MIXED_PRECISION_MAX_EVALUATIONS": "1"},
                                 {"MACE_MIXED_PRECISION_MAX_SECONDS": "0.001"}])
def test_search_stops_at_its_bound_and_says_so(tmp_path, env):
    """A bound on quantized runs or seconds ends the search: convert still writes the model,
    with what the search measured, and says which bound stopped it (and its variable)."""
    import os

    cfg = _deployment(tmp_path, quantize_target_cosine=0.99)
    r = cli("convert", f"--config={cfg}", cwd=tmp_path, env={**os.environ, **env}, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert "TARGET NOT MET (stopped by the bound of" in out and next(iter(env)) in out, out
    assert "step 2/" not in out
    quant = json.loads((tmp_path / "builds" / "amp" / "model" / "amp_quantize_report.json").read_text())
    mixed = quant["mixed_precision"]
    assert len(mixed["trials"]) == 1 and not mixed["reached"] and mixed["float_ops"] == []
    assert next(iter(env)) in mixed["stopped"]
