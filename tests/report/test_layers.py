"""Layer-by-layer validation, tensor dumps and the divergence search find a broken kernel."""
from __future__ import annotations

import csv

import numpy as np
import pytest
import yaml

from mace.cli.main import main as cli_main
from mace.config import load_deployment
from mace.ops.registry import spec
from mace.report.dump import capture_outputs, dump_tensors
from mace.report.session import open_model
from mace.validate.divergence import locate_divergence
from mace.validate.layers import validate_layers
from tests.cli_helpers import cli
from tests.report.helpers import converted_digits, digits_session


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return converted_digits(tmp_path_factory.mktemp("layers"))


def wrong_on_conv2(cls):
    """`cls` (a Conv2D kernel), except that it gets the op named conv2 wrong."""

    class WrongConv2(cls):
        def bind(self, inputs, outputs, scratch=None):
            run = super().bind(inputs, outputs, scratch)
            if self.ctx.op.name != "conv2":
                return run

            def wrong():
                run()
                outputs[0] *= 0.5
                outputs[0][..., :3] += 1.0
            return wrong

    return WrongConv2


@pytest.fixture
def broken_conv(monkeypatch):
    """Inject the wrong kernel through the registry, under every tag the engine may pick."""
    kernels = spec("Conv2D").kernels
    for tag, cls in list(kernels.items()):
        monkeypatch.setitem(kernels, tag, wrong_on_conv2(cls))


def test_every_mapped_layer_matches_the_framework(digits, tmp_path):
    work, config = digits
    session = digits_session(work, config)
    v = validate_layers(session, csv_path=tmp_path / "layers.csv")
    assert v.passed and v.against == "framework"
    # relu1 is 1x8x8x8 in both layouts: only the recorded permutation makes it match
    # "flat" is gone: the FC reads the NHWC tensor directly (fold_flatten_transpose)
    assert [c.tensor for c in v.checks] == ["relu1", "relu2", "logits", "prob"]
    assert all(c.cosine > 0.99999 for c in v.checks)
    assert v.checks[0].framework_ops == ["conv1", "bn1", "relu1"]
    assert set(v.fused_away) == {"conv1", "bn1", "conv2", "flat"}  # merged into convs / the FC
    rows = list(csv.DictReader(open(tmp_path / "layers.csv")))
    assert [r["status"] for r in rows][:4] == ["PASS"] * 4
    assert {"cosine", "sqnr_db", "max_abs_error"} <= set(rows[0])


def test_a_broken_kernel_is_named_with_its_layer(digits, broken_conv):
    session = digits_session(*digits)
    v = validate_layers(session)
    first = v.first_failure
    assert first is not None and first.op == "conv2" and first.index == 1 and first.tensor == "relu2"
    assert first.framework_ops == ["conv2", "relu2"]
    assert first.op_is_wrong is True  # alone on the framework's inputs it is still wrong
    later = {c.tensor: c for c in v.checks}
    assert later["relu1"].passed
    assert not later["logits"].passed and later["logits"].op_is_wrong is False  # inherited the error


def test_run_validate_all_layers_writes_the_csv_and_highlights_the_first_failure(digits, broken_conv,
                                                                                 monkeypatch, capsys):
    work, _ = digits
    monkeypatch.chdir(work)
    code = cli_main(["run", "--config=deploy.yml", "--build_dir=out", "--validate_all_layers"])
    out = capsys.readouterr()
    assert code == 1
    assert "First failing layer:" in out.out and "node #1 'conv2' (Conv2D)" in out.out
    assert "this op is wrong" in out.out
    assert "layer-by-layer check failed" in out.err
    rows = list(csv.DictReader(open(work / "out" / "digits" / "model" / "digits_cnn_layers.csv")))
    assert [r["status"] for r in rows][:3] == ["PASS", "FIRST_FAIL", "FAIL"]
    assert rows[1]["op"] == "conv2"


def test_debug_names_the_first_diverging_node(digits, broken_conv, monkeypatch, capsys):
    work, config = digits
    report = locate_divergence(digits_session(work, config))
    assert report.runtimes == ["cpu"] and report.diverged
    assert report.findings[0].first.op == "conv2"
    monkeypatch.chdir(work)
    code = cli_main(["debug", "--config=deploy.yml", "--build_dir=out"])
    out = capsys.readouterr()
    assert code == 1
    assert "digits_cnn: cpu vs framework: first divergence at node #1 'conv2'" in out.out
    assert "cosine" in out.out and "SQNR" in out.out and "max abs error" in out.out


def test_debug_on_a_gpu_subgraph_says_why_gpu_is_skipped(digits, tmp_path):
    work, _ = digits
    data = yaml.safe_load((work / "deploy.yml").read_text())
    data["models"]["digits_cnn"]["runtime"] = "cpu+gpu"
    (work / "gpu.yml").write_text(yaml.safe_dump(data))
    # built for its own runtime: a cpu build run as cpu+gpu is stale (mace/config/provenance.py)
    r = cli("convert", "--config=gpu.yml", "--build_dir=out_gpu", cwd=work)
    assert r.returncode == 0, r.stderr
    config = load_deployment(work / "gpu.yml")
    session = open_model(config, config.models["digits_cnn"], work / "out_gpu")
    report = locate_divergence(session)
    assert report.runtimes == ["cpu", "gpu"] and not report.diverged
    gpu = [f for f in report.findings if f.runtime == "gpu"]
    assert gpu and ("no gpu kernels" in gpu[0].skipped or gpu[0].validation is not None)


def test_check_tensors_in_the_deployment_file(digits):
    work, _ = digits
    data = yaml.safe_load((work / "deploy.yml").read_text())
    sg = data["models"]["digits_cnn"]["subgraphs"][0]
    sg["check_tensors"] = ["relu1", "bn1"]
    sg["check_shapes"] = ["1,8,8,8", "1,8,8,8"]
    (work / "check.yml").write_text(yaml.safe_dump(data))
    r = cli("run", "--config=check.yml", "--build_dir=out", "--validate", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "relu1" in r.stdout and "skipped bn1" in r.stdout and "Similarity test passed" in r.stdout
    v = validate_layers(digits_session(work, load_deployment(work / "check.yml")), all_layers=False)
    assert [c.tensor for c in v.checks] == ["relu1"] and v.skipped[0][0] == "bn1"


def test_check_tensors_that_compare_nothing_fail(digits):
    """Every check_tensors entry fused away (bn1, conv1): nothing is compared, and a check of
    nothing has not passed (it used to print "All 0 mapped tensors within the threshold" and
    "Similarity test passed", exit 0)."""
    work, _ = digits
    data = yaml.safe_load((work / "deploy.yml").read_text())
    data["models"]["digits_cnn"]["subgraphs"][0]["check_tensors"] = ["bn1", "conv1"]
    (work / "nothing.yml").write_text(yaml.safe_dump(data))
    r = cli("run", "--config=nothing.yml", "--build_dir=out", "--validate", cwd=work)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "skipped bn1" in r.stdout and "skipped conv1" in r.stdout
    assert "No tensor compared: none of check_tensors (bn1, conv1) is a tensor of the converted model" in r.stdout
    assert "All 0" not in r.stdout and "Similarity test passed" not in r.stdout
    assert "error: layer-by-layer check failed: no tensor of digits_cnn compared" in r.stderr, r.stderr
    v = validate_layers(digits_session(work, load_deployment(work / "nothing.yml")), all_layers=False)
    assert v.checks == [] and not v.passed and "check_tensors" in v.why_nothing()


def test_a_layer_range_that_selects_nothing_fails(digits):
    """MACE's --layers past the last mapped layer: nothing compared, exit 1."""
    work, _ = digits
    r = cli("run", "--config=deploy.yml", "--build_dir=out", "--layers=40:50", cwd=work)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "No tensor compared: the layer range 40:50 selects none of the 4 mapped tensors (0 to 3)" in r.stdout
    assert "within the threshold" not in r.stdout


def test_debug_counts_a_comparison_of_nothing_as_a_failure():
    """`debug` said "no divergence (0 tensors compared)" and exited 0 for a runtime it compared on
    no tensor; it is a failure, with the reason."""
    from io import StringIO

    from mace.cli._console import console
    from mace.cli.debug_cmd import report_findings
    from mace.validate.divergence import DebugReport, Finding
    from mace.validate.layers import LayerValidation

    empty = LayerValidation("m", "cpu", "framework", 0.999, nothing_compared="no tensor selected")
    out = StringIO()
    failures = report_findings(console(out), DebugReport("m", ["cpu"], [Finding("cpu", "framework", empty)]))
    assert failures == ["m on cpu vs framework: no tensor compared (no tensor selected)"]
    assert "no tensor compared - no tensor selected" in out.getvalue() and "no divergence" not in out.getvalue()


def test_dump_tensors_writes_every_node_output(digits, tmp_path):
    session = digits_session(*digits)
    dumped = dump_tensors(session.engine, session.inputs, tmp_path / "dump")
    engine = session.engine
    assert [d.index for d in dumped] == list(range(len(engine.nodes)))
    _, values = capture_outputs(engine, session.inputs)
    for d in dumped:
        np.testing.assert_array_equal(np.load(tmp_path / "dump" / d.file), values[d.tensor])
    rows = list(csv.DictReader(open(tmp_path / "dump" / "tensors.csv")))
    assert rows[0]["tensor"] == "relu1" and rows[0]["perm"] == "0,2,3,1"
    work, _ = digits
    r = cli("run", "--config=deploy.yml", "--build_dir=out", f"--dump_tensors={tmp_path / 'cli'}", cwd=work)
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "cli" / "digits_cnn").glob("*.npy"))) == len(engine.nodes)
