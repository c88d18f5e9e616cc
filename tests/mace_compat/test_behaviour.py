"""MACE's flags doing what they mean here, through the real CLI on the digits example."""
from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from mace.cli import _overrides
from mace.cli.main import build_parser
from mace.config import load_deployment
from mace.config.raw_files import raw_name
from tests.cli_helpers import cli, workdir

IMAGE = "digits/inputs/image_0.npy"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    w = workdir(tmp_path_factory.mktemp("mace_compat"))
    r = cli("convert", "--config=deploy.yml", cwd=w)
    assert r.returncode == 0, r.stderr
    return w


def ok(r):
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr
    return r


def test_raw_name_is_mace_formatted_file_name():
    assert raw_name("model_input", "input/x:0") == "model_input_input_x_0"
    assert raw_name("model_out", "MobilenetV2/Predictions/Reshape_1") == \
        "model_out_MobilenetV2_Predictions_Reshape_1"


def test_raw_inputs_and_outputs_match_npy(work):
    image = np.load(work / IMAGE)
    (work / "raw_in").mkdir()
    image.astype("<f4").tofile(work / "raw_in" / "model_input_image")     # as MACE writes it
    ok(cli("run", "--config=deploy.yml", "--input_dir=raw_in", "--output_dir=raw_out", "--output_format=raw",
           cwd=work))
    ok(cli("run", "--config=deploy.yml", "--output_dir=npy_out", cwd=work))   # validation_inputs_data: same image
    raw = np.fromfile(work / "raw_out" / "model_out_prob", dtype="<f4")
    npy = np.load(work / "npy_out" / "prob.npy")
    assert raw.size == 10 and np.array_equal(raw, npy.reshape(-1))


def test_raw_input_of_wrong_size_names_the_file(work):
    (work / "short").mkdir()
    np.zeros(10, "<f4").tofile(work / "short" / "model_input_image")
    r = cli("run", "--config=deploy.yml", "--input_dir=short", cwd=work)
    assert r.returncode == 1 and "model_input_image" in r.stderr and "needs 64" in r.stderr


def test_gpu_out_of_range_check(work):
    r = ok(cli("run", "--config=deploy.yml", "--gpu_out_of_range_check", cwd=work))
    assert "Range check of digits_cnn: 5 float tensors, no NaN/Inf problem" in r.stdout


def test_range_check_finds_values_beyond_half(work):
    """With fp16 storage, activations above 65504 are what the check exists for."""
    from mace.runtime.engine import create_engine
    from mace.validate.range_check import check_ranges

    model = work / "builds/digits/model/digits_cnn"
    engine = create_engine(f"{model}.pb", f"{model}.data")
    image = np.load(work / IMAGE)
    assert check_ranges(engine, {"image": image}, "digits_cnn", "fp16_fp32").findings == []
    big = check_ranges(engine, {"image": image * 1e5}, "digits_cnn", "fp16_fp32")
    assert big.findings and all("beyond fp16" in f.problem for f in big.findings)
    assert {f.tensor for f in big.findings} >= {"relu1"}
    assert check_ranges(engine, {"image": image * 1e5}, "digits_cnn", "fp32_fp32").findings == []


def test_layers_slice_validates_those_layers(work):
    r = ok(cli("run", "--config=deploy.yml", "--validate", "--layers=1:3", cwd=work))
    rows = list(csv.DictReader(open(work / "builds/digits/model/digits_cnn_layers.csv")))
    checked = [row["tensor"] for row in rows if row["index"]]   # other rows: fused-away tensors
    assert checked == ["relu2", "logits"], rows   # mapped layers relu1, relu2, logits: [1:3]
    assert "Similarity test passed" in r.stdout


def test_report_dir_gets_mace_report_csv(work):
    ok(cli("run", "--config=deploy.yml", "--report", "--report_dir=rep", "--round=2", cwd=work))
    rows = list(csv.reader(open(work / "rep" / "report.csv")))
    assert rows[0] == ["model_name", "device_name", "soc", "abi", "runtime", "init(ms)", "warmup(ms)",
                       "run_avg(ms)", "tuned"]
    assert rows[1][0] == "digits_cnn" and rows[1][4] == "CPU" and float(rows[1][7]) > 0


def test_report_csv_appends_and_only_for_timed_runs(work):
    ok(cli("run", "--config=deploy.yml", "--report", "--report_dir=rep2", "--round=1", cwd=work))
    ok(cli("run", "--config=deploy.yml", "--report", "--report_dir=rep2", "--round=1", cwd=work))
    rows = list(csv.reader(open(work / "rep2" / "report.csv")))
    assert len(rows) == 3 and rows[0][0] == "model_name" and rows[1][0] == rows[2][0] == "digits_cnn"
    r = ok(cli("run", "--config=deploy.yml", "--report", "--report_dir=rep0", "--round=0", cwd=work))
    assert not (work / "rep0").exists() and "--round 0 has no timed runs" in r.stdout
    r = ok(cli("run", "--config=deploy.yml", "--report_dir=rep3", cwd=work))
    assert not (work / "rep3").exists() and "without --report nothing is written" in r.stdout
    ok(cli("run", "--config=deploy.yml", "--report", cwd=work))   # default: builds/<library>/report.csv
    assert list(csv.reader(open(work / "builds" / "digits" / "report.csv")))[1][0] == "digits_cnn"


def test_convert_writes_mace_index_html_beside_the_pb(work):
    from html.parser import HTMLParser

    page = work / "builds" / "digits" / "model" / "digits_cnn_index.html"
    text = page.read_text()

    class Scripts(HTMLParser):
        data, current = {}, None

        def handle_starttag(self, tag, attrs):
            self.current = dict(attrs).get("id") if tag == "script" else None

        def handle_endtag(self, tag):
            self.current = None

        def handle_data(self, data):
            if self.current:
                self.data[self.current] = self.data.get(self.current, "") + data

    parser = Scripts()
    parser.feed(text)
    model = json.loads(parser.data["model-data"])
    names = json.dumps(model)
    for op_type in ("Conv2D", "FullyConnected", "Softmax"):   # the converted digits model's ops
        assert op_type in names, op_type
    assert "Model digits_cnn" in text


def test_restart_round_recreates_the_engine(work):
    r = ok(cli("run", "--config=deploy.yml", "--restart_round=3", "--round=1", cwd=work))
    m = re.search(r"restart_round 3: engine created 3 times, init\(ms\) ([\d.]+), ([\d.]+), ([\d.]+)", r.stdout)
    assert m, r.stdout


def test_benchmark_max_num_runs_and_max_seconds(work):
    ok(cli("benchmark", "--config=deploy.yml", "--max_num_runs=3", "--json=b.json", cwd=work))
    doc = json.loads((work / "b.json").read_text())["models"][0]
    assert doc["run_without_statistics"]["round"] == 3
    ok(cli("benchmark", "--config=deploy.yml", "--max_num_runs=100000", "--max_seconds=0.000001",
           "--json=c.json", cwd=work))
    doc = json.loads((work / "c.json").read_text())["models"][0]
    assert doc["run_without_statistics"]["round"] == 1


def test_note_flags_print_their_note_and_run(work):
    r = ok(cli("run", "--config=deploy.yml", "--mace_lib_type=dynamic", "--caffe_env=local", cwd=work))
    assert "note: --mace_lib_type has no effect here" in r.stderr
    assert "note: --caffe_env has no effect here" in r.stderr


def test_key_overriding_flags(work):
    args = build_parser().parse_args(["run", "--config=deploy.yml", "--target_abis=host,arm64",
                                      "--build_type=code"])
    config = load_deployment(work / "deploy.yml")
    _overrides.apply(config, args)
    assert config.target_abis == ["host", "arm64"] and config.origin["target_abis"] == "--target_abis"
    assert (config.model_graph_format, config.model_data_format) == ("code", "code")
    args = build_parser().parse_args(["convert", "--config=deploy.yml", "--model_data_format=code"])
    config = load_deployment(work / "deploy.yml")
    with pytest.raises(Exception, match="needs model_graph_format code"):
        _overrides.apply(config, args)


def test_disable_tuning_keeps_target_socs_from_tuning(work):
    from mace.runtime.gpu.context import unavailable_reason
    from mace.runtime.gpu.deploy import engine_setup

    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no OpenCL device: {reason}")
    config = load_deployment(work / "deploy.yml")
    config.values["target_socs"] = ["rk3399"]
    sg = config.models["digits_cnn"].graph
    sg.values["runtime"] = "gpu"
    _, options, _ = engine_setup(config, sg, work / "builds")
    assert options["opencl_tuning"] is True           # MACE: target_socs and no tuned file yet
    _, options, _ = engine_setup(config, sg, work / "builds", auto_tuning=False)
    assert options["opencl_tuning"] is False


def test_disable_tuning_contradicts_tuning(work):
    r = cli("run", "--config=deploy.yml", "--tuning", "--disable_tuning", cwd=work)
    assert r.returncode == 1 and "contradict" in r.stderr
