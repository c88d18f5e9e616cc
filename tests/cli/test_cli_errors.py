"""Bad input through the CLI: a non-zero exit, one clear message naming the culprit, no traceback."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from tests.cli_helpers import (cli, digits_model, sha256, small_model_entry, unsupported_entry,
                               unsupported_model, workdir, write_deployment)


@pytest.fixture
def work(tmp_path):
    return workdir(tmp_path)


def fails(r, *fragments, code=None):
    """The run failed with exactly one `error:` message on stderr containing every fragment."""
    assert r.returncode != 0, f"expected a failure\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    if code is not None:
        assert r.returncode == code, r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr
    assert "internal error" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.stderr
    for fragment in fragments:
        assert fragment in r.stderr, f"{fragment!r} not in:\n{r.stderr}"
    return r.stderr


def convert(work, models: dict, name="bad.yml", *extra):
    write_deployment(work / name, models)
    return cli("convert", f"--config={name}", "--build_dir=out", *extra, cwd=work)


# ---- the deployment file -------------------------------------------------------------------
def test_missing_config_file(work):
    fails(cli("convert", "--config=nope.yml", cwd=work), "nope.yml", "file not found", code=1)


def test_config_is_a_directory(work):
    fails(cli("run", "--config=digits", cwd=work), "digits", "cannot read")


def test_malformed_yaml(work):
    (work / "bad.yml").write_text("library_name: digits\nmodels:\n  digits_cnn: {platform: onnx\n")
    err = fails(cli("convert", "--config=bad.yml", cwd=work), "invalid YAML")
    assert re.search(r"bad\.yml:\d+:\d+: invalid YAML", err), err


def test_top_level_not_a_mapping(work):
    (work / "bad.yml").write_text("- library_name: digits\n")
    fails(cli("config", "--config=bad.yml", cwd=work), "bad.yml", "expected a mapping of keys at the top level")


def test_missing_required_key(work):
    fails(convert(work, {"digits_cnn": digits_model(platform=None)}),
          "bad.yml", "models.digits_cnn.platform: required key is missing")


def test_bad_value_names_file_and_key_path(work):
    fails(convert(work, {"digits_cnn": digits_model(input_shapes="1,8,x,1")}),
          "bad.yml: models.digits_cnn.subgraphs[0].input_shapes: expected comma-separated integers, "
          'got "1,8,x,1"')


def test_bad_value_fails_config_too(work):
    write_deployment(work / "bad.yml", {"digits_cnn": digits_model(runtime="tpu")})
    fails(cli("config", "--config=bad.yml", cwd=work), "bad.yml: models.digits_cnn.runtime:", "tpu")


def test_unset_environment_variable(work):
    text = (work / "deploy.yml").read_text().replace("digits/digits_cnn.onnx", "${MACE_NO_SUCH_VAR}/m.onnx")
    (work / "env.yml").write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "MACE_NO_SUCH_VAR" in s)
    env = {k: v for k, v in os.environ.items() if k != "MACE_NO_SUCH_VAR"}
    fails(cli("convert", "--config=env.yml", cwd=work, env=env),
          f"env.yml:{line}: environment variable ${{MACE_NO_SUCH_VAR}} is not set")


def test_invalid_model_name(work):
    # MACE's names (mobilenet-v1, class) are fine; a name that is no safe file name is not
    fails(convert(work, {"digits cnn": digits_model()}), "models.digits cnn", "not a safe file name")


def test_unknown_model_name_flag(work):
    fails(cli("convert", "--config=deploy.yml", "--model_name=nope", "--build_dir=out", cwd=work),
          "no model named 'nope'", "digits_cnn")
    assert not (work / "out").exists()


def test_bad_flag_is_a_usage_error(work):
    r = cli("convert", "--config=deploy.yml", "--no_such_flag", cwd=work)
    assert r.returncode == 2 and "usage:" in r.stderr and "Traceback" not in r.stderr


def test_unknown_pass_in_graph_optimize_options(work):
    fails(convert(work, {"digits_cnn": digits_model(graph_optimize_options=["fold_everything"])}),
          "graph_optimize_options", "fold_everything", "fold_batchnorm")


# ---- the model file ------------------------------------------------------------------------
def test_missing_model_file(work):
    fails(convert(work, {"digits_cnn": digits_model(model_file_path="digits/missing.onnx")}),
          "bad.yml", "models.digits_cnn.model_file_path", "file not found: digits/missing.onnx")
    assert not (work / "out").exists()


def test_malformed_onnx_file(work):
    junk = work / "junk.onnx"
    junk.write_bytes(np.random.default_rng(0).bytes(2048))
    err = fails(convert(work, {"digits_cnn": digits_model(model_file_path="junk.onnx",
                                                          model_sha256_checksum=sha256(junk))}),
                "junk.onnx", "not a valid ONNX model")
    assert len(err) < 2000
    assert not (work / "out").exists()


def test_checksum_mismatch_prints_both_sums_and_writes_nothing(work):
    wrong = "0123456789abcdef" * 4
    actual = sha256(work / "digits" / "digits_cnn.onnx")
    write_deployment(work / "bad.yml", {"digits_cnn": digits_model(model_sha256_checksum=wrong)})
    fails(cli("convert", "--config=bad.yml", cwd=work),
          "bad.yml", "models.digits_cnn.model_sha256_checksum", f"expected: {wrong}", f"actual:   {actual}")
    assert not (work / "builds").exists()


def test_wrong_input_tensor_name(work):
    fails(convert(work, {"digits_cnn": digits_model(input_tensors="img")}),
          "digits_cnn.onnx", "input tensor 'img' is not an input of the model", "['image']")


def test_wrong_input_shape_with_layout_hint(work):
    fails(convert(work, {"digits_cnn": digits_model(input_shapes="1,1,8,8")}),
          "input tensor 'image'", "[1, 1, 8, 8]", "model declares [1, 1, 8, 8]", "[1, 8, 1, 8]",
          "set input_data_formats: NCHW")


def test_wrong_input_shape_nchw(work):
    err = fails(convert(work, {"digits_cnn": digits_model(input_shapes="1,1,9,9", input_data_formats="NCHW")}),
                "input tensor 'image'", "[1, 1, 9, 9]", "[1, 1, 8, 8]")
    assert "set input_data_formats: NCHW" not in err


def test_wrong_output_tensor_name(work):
    fails(convert(work, {"digits_cnn": digits_model(output_tensors="probs")}),
          "output tensor 'probs' is not produced by the model", "['prob']")


def test_output_shapes_mismatch(work):
    fails(convert(work, {"digits_cnn": digits_model(output_shapes="1,11")}),
          "bad.yml", "models.digits_cnn.subgraphs[0].output_shapes", "'prob'", "[1, 10]", "[1, 11]")
    assert not (work / "out").exists()


def test_unsupported_op(work):
    checksum = unsupported_model(work / "nms.onnx")
    fails(convert(work, {"nms_model": unsupported_entry(work / "nms.onnx", checksum)}),
          "nms.onnx", "unsupported ONNX op(s): Unique", "node unique_node", "Supported:", "Conv",
          "Relu")


def test_op_of_a_custom_domain(work):
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.example", 1)])
    model.ir_version = 8
    onnx.save(model, str(work / "fancy.onnx"))
    fails(convert(work, {"fancy": small_model_entry(work / "fancy.onnx", sha256(work / "fancy.onnx"),
                                                    "x", "1,4", "y")}),
          "FancyOp", "node fancy")


@pytest.mark.parametrize("runtime", ["hta", "apu"])  # gpu: tests/gpu/
def test_runtime_not_in_this_release(work, runtime):
    fails(convert(work, {"digits_cnn": digits_model(runtime=runtime)}),
          "bad.yml", "models.digits_cnn.subgraphs[0].runtime", f"'{runtime}' is not available in this release",
          "cpu")
    assert not (work / "out").exists()


# ---- run -----------------------------------------------------------------------------------
def test_run_before_convert_names_the_convert_command(work):
    fails(cli("run", "--config=deploy.yml", cwd=work),
          "has not been converted", "tools/converter.py convert --config=deploy.yml`")
    err = fails(cli("run", "--config=deploy.yml", "--build_dir=elsewhere", cwd=work), "has not been converted")
    assert "--build_dir=elsewhere" in err


@pytest.fixture
def built(work):
    r = cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work)
    assert r.returncode == 0, r.stderr
    return work


def run(work, *extra):
    return cli("run", "--config=deploy.yml", "--build_dir=out", *extra, cwd=work)


def test_input_dir_missing_file(built):
    (built / "in").mkdir()
    fails(run(built, "--input_dir=in"), "--input_dir", "in/image.npy", "not found")


def test_input_dir_missing_directory(built):
    fails(run(built, "--input_dir=nowhere"), "--input_dir", "nowhere/image.npy")


@pytest.mark.parametrize("shape", [(1, 8, 8, 2), (1, 64, 1, 1), (64,)])
def test_input_dir_wrong_shape(built, shape):
    (built / "in").mkdir()
    np.save(built / "in" / "image.npy", np.zeros(shape, np.float32))
    fails(run(built, "--input_dir=in"), "image.npy", f"has shape {list(shape)}", "input 'image'",
          "expects [1, 8, 8, 1]")


def test_input_dir_not_an_npy_file(built):
    (built / "in").mkdir()
    (built / "in" / "image.npy").write_text("hello")
    fails(run(built, "--input_dir=in"), "in/image.npy", "not a readable .npy file")


def test_missing_validation_inputs_data(built):
    write_deployment(built / "deploy.yml", {"digits_cnn": digits_model(
        validation_inputs_data=["digits/inputs/nope.npy"])})
    fails(run(built), "validation_inputs_data", "nope.npy", "not found")


def test_missing_validation_outputs_data(built):
    write_deployment(built / "deploy.yml", {"digits_cnn": digits_model(
        validation_outputs_data=["digits/nope_out.npy"])})
    fails(run(built, "--validate"), "deploy.yml", "validation_outputs_data", "nope_out.npy", "not found")


def test_validation_outputs_data_of_the_wrong_size(built):
    np.save(built / "out3.npy", np.zeros((1, 3), np.float32))
    write_deployment(built / "deploy.yml", {"digits_cnn": digits_model(validation_outputs_data=["out3.npy"])})
    fails(run(built, "--validate"), "models.digits_cnn", "'prob'", "[1, 10]", "[1, 3]")


def test_validation_needs_the_model_file(built):
    (built / "digits" / "digits_cnn.onnx").rename(built / "moved.onnx")
    # running needs only the converted model ...
    r = run(built)
    assert r.returncode == 0, r.stderr
    # ... validating needs the original
    fails(run(built, "--validate"), "models.digits_cnn.model_file_path", "file not found")


def test_verbose_shows_the_traceback(work):
    r = cli("convert", "--config=nope.yml", "--verbose", cwd=work)
    assert r.returncode != 0
    assert "Traceback" in r.stderr and "ConfigError" in r.stderr and "nope.yml" in r.stderr
