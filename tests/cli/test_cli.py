"""The CLI end to end, as a user runs it: convert, run (validate, timing, files), config."""
from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from mace.runtime.engine import create_engine
from mace.transform.pipeline import PASSES
from tests.cli_helpers import (DIGITS, cli, conv_model, digits_model, files_of, http_server, no_proxy_env,
                               run_hint, sha256, small_model_entry, unsupported_entry, unsupported_model,
                               workdir, write_deployment)


@pytest.fixture
def work(tmp_path):
    return workdir(tmp_path)


@pytest.fixture
def built(work):
    """The work dir after a successful convert into work/out (the --build_dir)."""
    r = cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work)
    assert r.returncode == 0, r.stderr
    return work


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr
    return r


# ---- convert ------------------------------------------------------------------------
def test_convert_writes_graph_data_and_text(work):
    r = ok(cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work))
    model_dir = work / "out" / "digits" / "model"
    assert sorted(p.name for p in model_dir.iterdir()) == \
        ["digits_cnn.data", "digits_cnn.manifest.json", "digits_cnn.pb", "digits_cnn.pb_txt",
         "digits_cnn.stat_cache.json", "digits_cnn_index.html", "digits_cnn_report.txt"]
    assert (model_dir / "digits_cnn.pb").stat().st_size > 0
    assert (model_dir / "digits_cnn.data").stat().st_size > 10_000  # conv + FC weights, float32
    text = (model_dir / "digits_cnn.pb_txt").read_text()
    assert 'type: "Conv2D"' in text and 'type: "Softmax"' in text
    assert "Model digits_cnn converted" in r.stdout
    assert "digits_cnn.pb" in r.stdout
    assert not (work / "builds").exists()  # --build_dir is honoured
    # no scratch folder left behind
    assert sorted(p.name for p in (work / "out" / "digits").iterdir()) == ["model"]


def test_convert_is_repeatable(built):
    """Byte for byte, the manifest included; only the stat cache (inode, times) differs."""
    def build(out):
        return {k: v for k, v in files_of(out).items() if not k.endswith(".stat_cache.json")}
    before = build(built / "out")
    ok(cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=built))
    assert build(built / "out") == before


def test_convert_default_build_dir_is_builds_in_cwd(work):
    ok(cli("convert", "--config=deploy.yml", cwd=work))
    assert (work / "builds" / "digits" / "model" / "digits_cnn.pb").is_file()
    ok(cli("run", "--config=deploy.yml", cwd=work))


def test_convert_dump_passes_writes_one_file_per_pass(work):
    ok(cli("convert", "--config=deploy.yml", "--build_dir=out", "--dump_passes=dump", cwd=work))
    dumped = sorted(p.name for p in (work / "dump" / "digits_cnn").iterdir())
    assert dumped[0] == "00_frontend.pbtxt"
    # passes guarded by `when` (GPU placement, Winograd marking) do not run for this cpu model
    enabled = [p.name for p in PASSES if p.when({"runtime": "cpu", "winograd": 0})]
    assert [n.split("_", 1)[1][:-len(".pbtxt")] for n in dumped[1:]] == enabled
    assert all(n.endswith(".pbtxt") for n in dumped)
    assert all((work / "dump" / "digits_cnn" / n).read_text().strip() for n in dumped)
    # the frontend's graph is NCHW with explicit BatchNorm; the last pass has it folded away
    assert "BatchNorm" in (work / "dump" / "digits_cnn" / dumped[0]).read_text()
    assert "BatchNorm" not in (work / "dump" / "digits_cnn" / dumped[-1]).read_text()


def test_failed_convert_leaves_previous_build_untouched(work):
    ok(cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work))
    before = files_of(work / "out")
    checksum = unsupported_model(work / "odd.onnx")
    write_deployment(work / "two.yml", {
        "digits_cnn": digits_model(),
        "odd_model": unsupported_entry(work / "odd.onnx", checksum)})
    r = cli("convert", "--config=two.yml", "--build_dir=out", cwd=work)
    assert r.returncode != 0
    assert "Unique" in r.stderr and "Traceback" not in r.stderr
    assert files_of(work / "out") == before  # byte-identical, nothing added
    assert sorted(p.name for p in (work / "out" / "digits").iterdir()) == ["model"]


def test_failed_first_convert_leaves_no_build_folders(work):
    checksum = unsupported_model(work / "odd.onnx")
    write_deployment(work / "odd.yml", {
        "odd_model": unsupported_entry(work / "odd.onnx", checksum)})
    r = cli("convert", "--config=odd.yml", "--build_dir=out", cwd=work)
    assert r.returncode != 0
    assert not (work / "out").exists()


def test_convert_one_model_by_name(work):
    checksum = conv_model(work / "conv.onnx")
    write_deployment(work / "two.yml", {
        "digits_cnn": digits_model(),
        "conv": small_model_entry(work / "conv.onnx", checksum, "input:0", "1,3,6,6", "scope/out",
                                  fmt="NCHW")})
    ok(cli("convert", "--config=two.yml", "--build_dir=out", "--model_name=conv", cwd=work))
    assert sorted(p.name for p in (work / "out" / "digits" / "model").iterdir()) == \
        ["conv.data", "conv.manifest.json", "conv.pb", "conv.pb_txt", "conv.stat_cache.json",
         "conv_index.html", "conv_report.txt"]


# ---- run ------------------------------------------------------------------------------
def test_run_validate_prints_metrics_and_passes(built):
    r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--validate", cwd=built))
    out = r.stdout
    for word in ("cosine", "SQNR", "pixel_accuracy", "threshold", "PASS", "Similarity test passed"):
        assert word in out, out
    assert "FAIL" not in out
    assert "0.999" in out                              # the CPU default threshold
    assert "inputs from validation_inputs_data" in out


def test_run_json_has_metrics_and_timing(built):
    ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--validate", "--round=3",
           "--json=report.json", cwd=built))
    report = json.loads((built / "report.json").read_text())
    assert report["library"] == "digits"
    (model,) = report["models"]
    assert model["model"] == "digits_cnn" and model["runtime"] == "cpu"
    assert model["passed"] is True
    (metric,) = model["validation"]
    assert metric["name"] == "prob"
    assert metric["cosine"] >= 0.999
    assert metric["sqnr"] is None or metric["sqnr"] > 60  # None: identical outputs (infinite SQNR)
    assert metric["pixel_accuracy"] == 1.0
    assert metric["threshold"] == 0.999
    assert metric["passed"] is True
    timing = model["timing"]
    for key in ("init_ms", "warmup_ms", "rounds", "avg_ms", "median_ms", "min_ms", "max_ms", "std_ms"):
        assert key in timing
    assert timing["rounds"] == 3
    assert 0 < timing["min_ms"] <= timing["median_ms"] <= timing["max_ms"]
    assert timing["min_ms"] <= timing["avg_ms"] <= timing["max_ms"]


def test_run_rounds_timing(built):
    r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--round=20", "--json=t.json", cwd=built))
    assert "run_avg(ms)" in r.stdout and "median(ms)" in r.stdout
    assert " 20 " in r.stdout
    timing = json.loads((built / "t.json").read_text())["models"][0]["timing"]
    assert timing["rounds"] == 20 and timing["std_ms"] >= 0
    report = json.loads((built / "t.json").read_text())["models"][0]
    assert report["validation"] is None and report["passed"] is None


def test_run_output_dir_matches_the_engine(built):
    ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--output_dir=outputs", cwd=built))
    assert sorted(p.name for p in (built / "outputs").iterdir()) == ["prob.npy"]
    written = np.load(built / "outputs" / "prob.npy")
    model_dir = built / "out" / "digits" / "model"
    engine = create_engine(model_dir / "digits_cnn.pb", model_dir / "digits_cnn.data")
    image = np.load(built / "digits" / "inputs" / "image_0.npy").astype(np.float32).reshape(1, 8, 8, 1)
    expected = engine.run({"image": image})["prob"]
    assert written.shape == (1, 10) and written.dtype == np.float32
    np.testing.assert_array_equal(written, expected)
    assert abs(float(written.sum()) - 1.0) < 1e-5  # softmax


def test_run_example_prints_top5(built):
    r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--example", cwd=built))
    assert "prob: shape [1, 10], top-5" in r.stdout


def test_run_random_inputs_are_seeded(built):
    write_deployment(built / "rand.yml", {"digits_cnn": digits_model(validation_inputs_data=None)})
    outs = []
    for seed, name in ((0, "a"), (0, "b"), (1, "c")):
        r = ok(cli("run", "--config=rand.yml", "--build_dir=out", f"--seed={seed}", f"--output_dir={name}",
                   cwd=built))
        assert f"random in input_ranges (seed {seed})" in r.stdout
        outs.append(np.load(built / name / "prob.npy"))
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], outs[2])


def test_input_dir_and_output_dir_with_slash_and_colon_names(work):
    checksum = conv_model(work / "conv.onnx")
    write_deployment(work / "conv.yml", {"conv": small_model_entry(
        work / "conv.onnx", checksum, "input:0", "1,3,6,6", "scope/out", fmt="NCHW",
        output_shapes="1,4,6,6")}, library="convlib")
    ok(cli("convert", "--config=conv.yml", "--build_dir=out", cwd=work))
    x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 6, 6)).astype(np.float32)
    (work / "in").mkdir()
    np.save(work / "in" / "input_0.npy", x)
    r = ok(cli("run", "--config=conv.yml", "--build_dir=out", "--input_dir=in", "--output_dir=res",
               "--validate", "--json=r.json", cwd=work))
    assert "files in in" in r.stdout and "PASS" in r.stdout
    assert sorted(p.name for p in (work / "res").iterdir()) == ["scope_out.npy"]
    got = np.load(work / "res" / "scope_out.npy")
    sess = ort.InferenceSession(str(work / "conv.onnx"), providers=["CPUExecutionProvider"])
    (expected,) = sess.run(["scope/out"], {"input:0": x})
    assert got.shape == (1, 4, 6, 6)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    report = json.loads((work / "r.json").read_text())
    assert report["models"][0]["validation"][0]["name"] == "scope/out"


def test_input_dir_nhwc_caller_layout(work):
    """NHWC inputs/outputs around an NCHW ONNX model: the CLI transposes both ways."""
    checksum = conv_model(work / "conv.onnx", input_name="x", output_name="y")
    write_deployment(work / "conv.yml", {"conv": small_model_entry(
        work / "conv.onnx", checksum, "x", "1,6,6,3", "y", fmt="NHWC", output_shapes="1,6,6,4")})
    ok(cli("convert", "--config=conv.yml", "--build_dir=out", cwd=work))
    x = np.random.default_rng(4).uniform(-1, 1, (1, 6, 6, 3)).astype(np.float32)
    (work / "in").mkdir()
    np.save(work / "in" / "x.npy", x)
    ok(cli("run", "--config=conv.yml", "--build_dir=out", "--input_dir=in", "--output_dir=res",
           "--validate", cwd=work))
    sess = ort.InferenceSession(str(work / "conv.onnx"), providers=["CPUExecutionProvider"])
    (expected,) = sess.run(["y"], {"x": x.transpose(0, 3, 1, 2)})
    np.testing.assert_allclose(np.load(work / "res" / "y.npy"), expected.transpose(0, 2, 3, 1),
                               rtol=1e-5, atol=1e-5)


def test_input_dir_accepts_the_same_data_without_unit_dims(built):
    (built / "in").mkdir()
    image = np.load(built / "digits" / "inputs" / "image_0.npy").astype(np.float32)
    np.save(built / "in" / "image.npy", image.reshape(8, 8))
    ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--input_dir=in", "--output_dir=a", cwd=built))
    ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--output_dir=b", cwd=built))
    np.testing.assert_array_equal(np.load(built / "a" / "prob.npy"), np.load(built / "b" / "prob.npy"))


# ---- models named by URL ------------------------------------------------------------------
def test_url_model_downloaded_once_into_the_build_dir(work):
    with http_server(DIGITS) as (base, requests):
        url = f"{base}/digits_cnn.onnx"
        write_deployment(work / "url.yml", {"digits_cnn": digits_model(model_file_path=url)})
        env = no_proxy_env()
        ok(cli("convert", "--config=url.yml", "--build_dir=out", cwd=work, env=env))
        assert requests == ["/digits_cnn.onnx"]
        downloads = work / "out" / "downloads"
        assert [p.suffix for p in downloads.iterdir()] == [".onnx"]
        ok(cli("convert", "--config=url.yml", "--build_dir=out", cwd=work, env=env))
        r = ok(cli("run", "--config=url.yml", "--build_dir=out", "--validate", cwd=work, env=env))
        assert "PASS" in r.stdout
        assert requests == ["/digits_cnn.onnx"]      # reused from out/downloads every time
        assert not (work / "builds").exists()         # validation looks in --build_dir too
        # running (without validating) needs only the converted model, never the download
        for p in downloads.iterdir():
            p.unlink()
        ok(cli("run", "--config=url.yml", "--build_dir=out", cwd=work, env=env))
        assert requests == ["/digits_cnn.onnx"]


# ---- expected outputs from files -------------------------------------------------------------
def test_validation_outputs_data_is_the_reference(built):
    image = np.load(built / "digits" / "inputs" / "image_0.npy").astype(np.float32).reshape(1, 8, 8, 1)
    sess = ort.InferenceSession(str(built / "digits" / "digits_cnn.onnx"), providers=["CPUExecutionProvider"])
    (prob,) = sess.run(["prob"], {"image": image.transpose(0, 3, 1, 2)})
    np.save(built / "expected.npy", prob)
    write_deployment(built / "files.yml", {"digits_cnn": digits_model(validation_outputs_data=["expected.npy"])})
    r = ok(cli("run", "--config=files.yml", "--build_dir=out", "--validate", cwd=built))
    assert "PASS" in r.stdout
    np.save(built / "expected.npy", prob[:, ::-1].copy())  # another answer: the check must fail
    r = cli("run", "--config=files.yml", "--build_dir=out", "--validate", cwd=built)
    assert r.returncode == 1 and "FAIL" in r.stdout and "Traceback" not in r.stderr


# ---- validation that fails ---------------------------------------------------------------
def test_too_strict_threshold_fails_on_rounding_differences(built):
    """Random inputs: our float32 results differ from onnxruntime's in the last bits."""
    write_deployment(built / "strict.yml", {"digits_cnn": digits_model(
        validation_inputs_data=None, validation_threshold={"CPU": 1.0})})
    r = cli("run", "--config=strict.yml", "--build_dir=out", "--validate", "--json=s.json", cwd=built)
    metric = json.loads((built / "s.json").read_text())["models"][0]["validation"][0]
    assert 0 < metric["max_abs_error"] < 1e-4   # a real, tiny difference ...
    assert 0.9999 < metric["cosine"] < 1.0      # ... that a threshold of 1.0 does not forgive
    assert metric["threshold"] == 1.0 and metric["passed"] is False
    assert r.returncode == 1
    assert "FAIL" in r.stdout
    assert "similarity below threshold for output(s): prob" in r.stderr
    assert "Traceback" not in r.stderr
    # the same run passes at the default CPU threshold
    write_deployment(built / "default.yml", {"digits_cnn": digits_model(validation_inputs_data=None)})
    ok(cli("run", "--config=default.yml", "--build_dir=out", "--validate", cwd=built))


def test_run_refuses_a_build_of_a_different_model(built):
    """Same I/O signature, other weights: the build is stale, and run says what changed."""
    model = onnx.load(str(built / "digits" / "digits_cnn.onnx"))
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.ndim == 2:  # the Gemm weights
            init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(arr[::-1]), init.name))
    onnx.save(model, str(built / "other.onnx"))
    write_deployment(built / "other.yml", {"digits_cnn": digits_model(
        model_file_path="other.onnx", model_sha256_checksum=sha256(built / "other.onnx"))})
    r = cli("run", "--config=other.yml", "--build_dir=out", "--validate", cwd=built)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "model_file_path: other.onnx (built from digits/digits_cnn.onnx) changed since convert" in r.stderr
    assert "tools/converter.py convert --config=other.yml --build_dir=out`" in r.stderr
    # converted again as the error says, the run validates against the new model
    ok(run_hint(r.stderr, cwd=built))
    ok(cli("run", "--config=other.yml", "--build_dir=out", "--validate", cwd=built))


# ---- config -----------------------------------------------------------------------------
def test_config_prints_resolved_values_with_origins(work):
    write_deployment(work / "typo.yml", {"digits_cnn": digits_model(runtme="cpu")}, target_soc=["x"])
    r = ok(cli("config", "--config=typo.yml", "--json=resolved.json", cwd=work))
    lines = r.stdout.splitlines()

    def row(key):
        return next(line for line in lines if f" {key} " in line)

    assert "library_name" in row("library_name") and '"digits"' in row("library_name")
    assert "file" in row("library_name")
    assert '"fp32_fp32"' in row("models.digits_cnn.data_type")
    assert "default for cpu" in row("models.digits_cnn.data_type")
    assert "default" in row("models.digits_cnn.quantize") and "carried" not in row("models.digits_cnn.quantize")
    assert "carried" in row("models.digits_cnn.quantize_large_weights")
    assert "model" in row("models.digits_cnn.subgraphs[0].runtime")
    assert "[1, 8, 8, 1]" in row("models.digits_cnn.subgraphs[0].input_shapes")
    assert "warning:" in r.stdout
    assert "runtme: unknown key, ignored (did you mean 'runtime'?)" in r.stdout
    assert "target_soc: unknown key, ignored (did you mean 'target_socs'?)" in r.stdout
    resolved = json.loads((work / "resolved.json").read_text())
    sg = resolved["models"]["digits_cnn"]["subgraphs"]["default_graph"]
    assert sg["input_shapes"] == [[1, 8, 8, 1]] and sg["data_type"] == "fp32_fp32"


def test_config_shows_environment_variables(work):
    text = (work / "deploy.yml").read_text().replace("digits/digits_cnn.onnx", "${DIGITS_DIR}/digits_cnn.onnx")
    (work / "env.yml").write_text(text)
    r = ok(cli("config", "--config=env.yml", cwd=work, env={**os.environ, "DIGITS_DIR": "digits"}))
    assert "environment: ${DIGITS_DIR} = digits" in r.stdout
    assert '"digits/digits_cnn.onnx"' in r.stdout


def test_convert_and_run_warn_about_unknown_keys_on_stderr(work):
    write_deployment(work / "typo.yml", {"digits_cnn": digits_model(winogard=2)})
    r = ok(cli("convert", "--config=typo.yml", "--build_dir=out", cwd=work))
    assert "winogard: unknown key, ignored (did you mean 'winograd'?)" in r.stderr
    r = ok(cli("run", "--config=typo.yml", "--build_dir=out", cwd=work))
    assert "did you mean 'winograd'" in r.stderr


def test_square_brackets_in_names_are_printed_verbatim(work):
    """Paths and names are user text, not console markup ('[/x]' once crashed the printer)."""
    odd = work / "models[" / "v2]"
    odd.mkdir(parents=True)
    (work / "digits" / "digits_cnn.onnx").rename(odd / "m[b].onnx")
    write_deployment(work / "odd.yml", {"digits_cnn": digits_model(model_file_path="models[/v2]/m[b].onnx")})
    r = ok(cli("config", "--config=odd.yml", cwd=work))
    assert '"models[/v2]/m[b].onnx"' in r.stdout
    ok(cli("convert", "--config=odd.yml", "--build_dir=out[/x]", cwd=work))
    r = ok(cli("run", "--config=odd.yml", "--build_dir=out[/x]", "--output_dir=res[/a]", "--validate", cwd=work))
    assert "outputs written to res[/a]/" in r.stdout
    assert (work / "res[" / "a]" / "prob.npy").is_file()


def test_version_and_help(work):
    r = ok(cli("--help", cwd=work))
    assert "convert" in r.stdout and "run" in r.stdout and "config" in r.stdout
    r = ok(cli("--version", cwd=work))
    assert "converter.py" in r.stdout
