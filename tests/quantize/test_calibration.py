"""Post-training quantization tooling: stat logs, their reduction, the CLI flows, the calibration
report and trace dumps (docs/quantization.md)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

from mace.errors import ConfigError
from mace.ir.model_io import load_model
from mace.ir.quant_params import activation_params
from mace.quantize.ranges import read_range_file
from mace.quantize.stat import parse_log, reduce_stats, reduce_tensor, stat_line, tail_length
from mace.report.dump import capture_outputs
from mace.runtime.engine import Engine, is_quantized
from mace.validate.metrics import cosine
from tests.cli_helpers import ROOT, cli, digits_model, workdir, write_deployment

MODEL = "builds/digits/model/digits_cnn"
LOG = "builds/digits/quantize_stat/digits_cnn_tensor_range.log"


# ---- parsing and reducing logs ------------------------------------------------------------
def _log(tmp_path, lines, name="range.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_parse_log_keeps_range_lines_only_and_groups_samples(tmp_path):
    path = _log(tmp_path, ["Run model m: inputs from files", "| table | row |",
                           stat_line("x", -1.0, 2.5), stat_line("scope/y:0", 0.0, 3.0),
                           "I mace.cc:12] " + stat_line("x", -0.5, 1.25), stat_line("scope/y:0", 0.0, 6.0)])
    assert parse_log(path) == {"x": [(-1.0, 2.5), (-0.5, 1.25)], "scope/y:0": [(0.0, 3.0), (0.0, 6.0)]}


def test_stat_line_round_trips_exactly(tmp_path):
    lo, hi = -0.1 / 3, float(np.float32(7.123456))
    assert parse_log(_log(tmp_path, [stat_line("t", lo, hi)])) == {"t": [(lo, hi)]}


def _spread(mins, maxs):
    return list(zip(mins, maxs))


def test_percentile_drops_k_samples_at_each_end():
    samples = _spread([-float(i) for i in range(1, 11)], [float(i) for i in range(1, 11)])
    r = reduce_tensor("t", samples)
    assert (r.min, r.max) == (-10.0, 10.0)
    r = reduce_tensor("t", samples, percentile=10)            # k = floor(10 * 10 / 100) = 1
    assert (r.min, r.max, r.observed_min, r.observed_max) == (-9.0, 9.0, -10.0, 10.0)
    r = reduce_tensor("t", samples, percentile=29)            # k = floor(2.9) = 2
    assert (r.min, r.max) == (-8.0, 8.0)


def test_enhance_trims_a_long_tail_and_keeps_a_normal_range():
    # maxima 1.0 1.1 1.2 1.3 9.0: mean step below 9.0 is 0.1, its jump 7.7 > 10 * 0.1 -> dropped;
    # then 1.3's step 0.1 is ordinary -> kept. Minima mirrored.
    tail = _spread([-1.0, -1.1, -1.2, -1.3, -9.0], [1.0, 1.1, 1.2, 1.3, 9.0])
    r = reduce_tensor("tail", tail, enhance=True)
    assert (r.min, r.max, r.trimmed_low, r.trimmed_high) == (-1.3, 1.3, 1, 1)
    normal = _spread([-1.0, -1.1, -1.2, -1.3, -1.4], [1.0, 1.1, 1.2, 1.3, 1.4])
    r = reduce_tensor("normal", normal, enhance=True)
    assert (r.min, r.max, r.trimmed) == (-1.4, 1.4, False)
    # a looser ratio keeps the tail: 7.7 < 100 * 0.1
    assert reduce_tensor("tail", tail, enhance=True, enhance_ratio=100).max == 9.0
    assert reduce_tensor("tail", tail).max == 9.0             # no enhance: the overall range


def test_enhance_keeps_at_least_half_the_samples():
    # m = 6 maxima, at least 3 kept: 125 (step 100 > 10 * 24/4), 25 (20 > 10 * 4/3) and
    # 5 (4 > 10 * 0: the rest are equal) go; then only half is left: stop at 1.
    assert tail_length([1.0, 1.0, 1.0, 5.0, 25.0, 125.0], 10) == 3
    assert tail_length([1.0, 9.0], 10) == 0                   # two samples: nothing to compare
    r = reduce_tensor("t", _spread([0.0] * 6, [1.0, 1.0, 1.0, 5.0, 25.0, 125.0]), enhance=True)
    assert (r.min, r.max, r.trimmed_high) == (0.0, 1.0, 3)


def test_reduce_keeps_log_order_and_checks_options(tmp_path):
    stats = {"b": [(0.0, 1.0)], "a": [(-1.0, 0.0)]}
    assert [r.tensor for r in reduce_stats(stats)] == ["b", "a"]
    with pytest.raises(ConfigError, match="--percentile"):
        reduce_stats(stats, percentile=50)
    with pytest.raises(ConfigError, match="--enhance_ratio"):
        reduce_stats(stats, enhance=True, enhance_ratio=0)


def test_bad_logs_name_the_file_and_line(tmp_path):
    with pytest.raises(ConfigError, match="missing.log: log file not found"):
        parse_log(tmp_path / "missing.log")
    bad = _log(tmp_path, [stat_line("x", 0.0, 1.0), "Tensor range @@y@@1.0"])
    with pytest.raises(ConfigError, match=r"range.log:2: malformed range line"):
        parse_log(bad)
    inverted = _log(tmp_path, ["Tensor range @@y@@2.0,1.0"], "inverted.log")
    with pytest.raises(ConfigError, match="inverted.log:1"):
        parse_log(inverted)
    with pytest.raises(ConfigError, match="no 'Tensor range @@"):
        parse_log(_log(tmp_path, ["nothing here"], "empty.log"))


# ---- the CLI flows on examples/digits ------------------------------------------------------
def _ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr
    return r


def _fails(r, *words):
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr and r.stderr.count("error:") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def _tool(*args, cwd):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "quantize_stat.py"), *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=60)


def _onnx_prob(work, image):
    sess = ort.InferenceSession(str(work / "digits" / "digits_cnn.onnx"), providers=["CPUExecutionProvider"])
    return sess.run(["prob"], {"image": image.transpose(0, 3, 1, 2)})[0]


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    """MACE's flow once: convert --quantize_stat, run --quantize_stat, reduce, convert quantized."""
    work = workdir(tmp_path_factory.mktemp("flow"))
    write_deployment(work / "q.yml", {"digits_cnn": digits_model(quantize=1)})  # says quantize: 1
    out = {"work": work}
    out["convert_float"] = _ok(cli("convert", "--config=q.yml", "--quantize_stat", cwd=work))
    out["float_graph"] = load_model(work / f"{MODEL}.pb", work / f"{MODEL}.data")
    out["stat"] = _ok(cli("run", "--config=q.yml", "--quantize_stat", "--input_dir=digits/inputs", cwd=work))
    out["tool"] = _ok(_tool("--log_file", LOG, "--output", "ranges.txt", cwd=work))
    out["subcommand"] = _ok(cli("quantize_stat", "--config=q.yml", cwd=work))
    write_deployment(work / "q2.yml", {"digits_cnn": digits_model(quantize=1, quantize_range_file="ranges.txt")})
    out["convert_q"] = _ok(cli("convert", "--config=q2.yml", cwd=work))
    out["validate"] = _ok(cli("run", "--config=q2.yml", "--validate", "--round=0", "--trace_dir=trace",
                              cwd=work))
    return out


def test_convert_quantize_stat_converts_float(flow):
    assert "converting float for quantize statistics" in flow["convert_float"].stdout
    assert not is_quantized(flow["float_graph"])
    assert {np.dtype(d) for _, d in flow["float_graph"].specs.values()} == {np.dtype(np.float32)}


def test_run_quantize_stat_logs_every_tensor_per_sample(flow):
    work = flow["work"]
    stats = parse_log(work / LOG)
    assert parse_log(_log(work, flow["stat"].stdout.splitlines(), "stdout.log")) == stats  # same lines
    images = [np.load(work / "digits" / "inputs" / f"image_{i}.npy") for i in range(5)]
    assert all(len(samples) == 5 for samples in stats.values())
    assert stats["image"] == [(float(x.min()), float(x.max())) for x in images]
    # the model's output against onnxruntime, sample by sample (files in name order)
    for (lo, hi), x in zip(stats["prob"], images):
        ref = _onnx_prob(work, x)
        assert np.allclose([lo, hi], [ref.min(), ref.max()], rtol=1e-4, atol=1e-6)
    assert set(stats) == {"image"} | {o for op in flow["float_graph"].net.op for o in op.output}
    assert "next: run `" in flow["stat"].stdout and "tools/converter.py quantize_stat" in flow["stat"].stdout


def test_reduced_range_file_is_the_overall_range(flow):
    work = flow["work"]
    stats = parse_log(work / LOG)
    ranges = read_range_file(work / "ranges.txt")
    assert ranges == {t: (min(lo for lo, _ in s), max(hi for _, hi in s)) for t, s in stats.items()}
    assert "tensors over 5 sample(s)" in flow["tool"].stderr
    default = work / "builds/digits/quantize_stat/digits_cnn_overall_range.txt"
    assert default.read_text() == (work / "ranges.txt").read_text()     # the subcommand agrees
    assert "quantize_range_file: builds/digits/quantize_stat" in flow["subcommand"].stdout
    printed = _ok(_tool("--log_file", LOG, "--percentile", "20", cwd=work)).stdout
    lo, hi = sorted(s[0] for s in stats["relu1"]), sorted(s[1] for s in stats["relu1"])
    assert f"relu1@@{lo[1]!r},{hi[3]!r}" in printed.splitlines()      # k = 1 of 5 dropped each end


def test_quantized_convert_uses_the_range_file_and_validates(flow):
    work = flow["work"]
    graph = load_model(work / f"{MODEL}.pb", work / f"{MODEL}.data")
    assert is_quantized(graph)
    assert "PASS" in flow["validate"].stdout and "Similarity test passed" in flow["validate"].stdout
    ranges = read_range_file(work / "ranges.txt")
    report = json.loads((work / f"{MODEL}_quantize_report.json").read_text())
    rows = {r["tensor"]: r for r in report["activations"]}
    assert all(r["source"] == "range file" or r["source"].startswith(("fixed by", "inherited from"))
               for r in rows.values()), rows
    assert sum(r["source"] == "range file" for r in rows.values()) >= 2      # image and more
    for r in rows.values():
        if r["source"] == "range file":
            expected = activation_params(*ranges[r["tensor"]])
            assert (r["observed_min"], r["observed_max"]) == ranges[r["tensor"]]
        elif r["source"].startswith("fixed by Softmax"):
            expected = activation_params(0.0, 1.0)
        else:
            continue
        assert (r["scale"], r["zero_point"], r["min"], r["max"]) == (
            expected.scale, expected.zero_point, expected.minval, expected.maxval)
        used = graph.quant_params(r["stored_as"])                       # what the model really uses
        assert (used.scale, used.zero_point) == pytest.approx((r["scale"], r["zero_point"]), rel=1e-6)
    text = (work / f"{MODEL}_quantize_report.txt").read_text()
    assert "Quantization report: digits_cnn" in text and "range file" in text
    # conv weights and biases are reported too, if the model quantized a conv
    if any(op.type == "Conv2D" for op in graph.net.op if op.quantize_info):
        kinds = {c["kind"] for c in report["constants"]}
        assert "int8 per-channel (axis 0)" in kinds and any(k.startswith("int32 bias") for k in kinds)


def test_trace_dumps_quantized_tensors_and_compares_with_float(flow):
    work, out = flow["work"], flow["validate"].stdout
    folder = work / "trace" / "digits_cnn"
    rows = list(csv.DictReader(open(folder / "trace.csv")))
    quantized = [r for r in rows if r["dtype"] == "uint8"]
    assert quantized and "against the float model, layer by layer" in out
    float_engine = Engine(flow["float_graph"])
    image = np.load(work / "digits" / "inputs" / "image_0.npy")     # validation_inputs_data
    _, ref = capture_outputs(float_engine, {"image": image})
    ref["image"] = image
    compared = 0
    for r in quantized:
        q = np.load(folder / r["file"])
        deq = np.load(folder / r["dequant_file"])
        scale, zp = float(r["scale"]), int(r["zero_point"])
        assert q.dtype == np.uint8
        assert np.allclose(deq, (q.astype(np.float64) - zp) * scale, atol=1e-6)
        if r["float_tensor"] in ref:
            compared += 1
            expected = cosine(ref[r["float_tensor"]].astype(np.float64), deq.astype(np.float64))
            assert float(r["cosine"]) == pytest.approx(expected, abs=1e-5)
            assert r["sqnr_db"] and r["max_error_steps"] and r["clipped"]
        if r["type"] == "Quantize" and r["float_tensor"] == "image":     # an exact input: half a step
            assert float(r["max_error_steps"]) <= 0.5 + 1e-4
    assert compared == len(quantized)
    assert "largest SQNR drop" in out


def test_one_step_convert_calibrates_from_a_folder(flow):
    work = flow["work"]
    write_deployment(work / "one.yml", {"digits_cnn": digits_model(
        quantize=1, quantize_calibration_data="digits/inputs")}, library="onestep")
    _ok(cli("convert", "--config=one.yml", cwd=work))
    _ok(cli("run", "--config=one.yml", "--validate", "--round=0", cwd=work))
    report = json.loads((work / "builds/onestep/model/digits_cnn_quantize_report.json").read_text())
    stats = parse_log(work / LOG)          # the same float model over the same five samples
    calibrated = [r for r in report["activations"] if r["source"] == "calibration"]
    assert calibrated
    for r in calibrated:
        s = stats[r["tensor"]]
        assert (r["observed_min"], r["observed_max"]) == pytest.approx(
            (min(lo for lo, _ in s), max(hi for _, hi in s)), rel=1e-6, abs=1e-7)
    # no folder and no range file: the one validation input is the sample
    write_deployment(work / "val.yml", {"digits_cnn": digits_model(quantize=1)}, library="fromval")
    _ok(cli("convert", "--config=val.yml", cwd=work))
    report = json.loads((work / "builds/fromval/model/digits_cnn_quantize_report.json").read_text())
    image = next(r for r in report["activations"] if r["tensor"] == "image")
    assert image["source"] == "calibration" and (image["observed_min"], image["observed_max"]) == stats["image"][0]


# ---- bad inputs: one clear error, no traceback -----------------------------------------------
def test_bad_inputs_give_one_clear_error(flow):
    work = flow["work"]
    _fails(_tool("--log_file", "nope.log", cwd=work), "nope.log: log file not found")
    (work / "bad.log").write_text(stat_line("x", 0.0, 1.0) + "\nTensor range @@y@@oops\n")
    _fails(_tool("--log_file", "bad.log", cwd=work), "bad.log:2: malformed range line")
    _fails(cli("quantize_stat", "--config=q.yml", "--log_file=bad.log", cwd=work), "bad.log:2")
    (work / "empty").mkdir()
    # q2.yml's model is quantized now: refused, with the command that converts it float
    _fails(cli("run", "--config=q2.yml", "--quantize_stat", "--input_dir=digits/inputs", cwd=work),
           "is quantized", "--quantize_stat")
    float_yml = write_deployment(work / "f.yml", {"digits_cnn": digits_model()}, library="floatlib")
    _ok(cli("convert", "--config=f.yml", cwd=work))
    _fails(cli("run", "--config=f.yml", "--quantize_stat", "--input_dir=empty", cwd=work),
           "no calibration samples in empty")
    _fails(cli("run", "--config=f.yml", "--quantize_stat", cwd=work), "needs --input_dir")
    _fails(cli("run", "--config=f.yml", "--trace_dir=t", "--round=0", cwd=work), "is not quantized")
    assert float_yml.exists()


def test_yml_quantize_stat_key_converts_float(tmp_path):
    from mace.config import load_deployment
    from mace.quantize.stat import stat_config

    work = workdir(tmp_path)
    write_deployment(work / "s.yml", {"digits_cnn": digits_model(quantize=1, quantize_stat=1, obfuscate=1),
                                      "other": digits_model(quantize=1)})
    config = load_deployment(work / "s.yml")
    changed = stat_config(config)
    assert changed and all(sg.quantize == 0 and sg.obfuscate == 0 and sg.runtime == "cpu" for sg in changed)
    assert config.models["digits_cnn"].graph.quantize == 0
    assert config.models["other"].graph.quantize == 1          # only the model that asked
    stat_config(config, force=True)
    assert config.models["other"].graph.quantize == 0
