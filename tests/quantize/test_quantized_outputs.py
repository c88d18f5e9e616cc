"""A quantized model through the other output features: obfuscation, model-as-code, stale files."""
from __future__ import annotations

from tests.cli_helpers import cli, digits_model, write_deployment, workdir


def test_obfuscated_quantized_model_runs_and_hides_internal_names(tmp_path):
    work = workdir(tmp_path)
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(quantize=1, obfuscate=1)})
    r = cli("convert", "--config=deploy.yml", cwd=work)
    assert r.returncode == 0, r.stderr
    r = cli("run", "--config=deploy.yml", "--validate", cwd=work)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "PASS" in r.stdout
    model_dir = work / "builds" / "digits" / "model"
    for f in ("digits_cnn.pb", "digits_cnn_quantize_report.txt", "digits_cnn_quantize_report.json"):
        data = (model_dir / f).read_bytes()
        for internal in (b"conv1", b"relu1", b"conv2.weight", b"logits"):
            assert internal not in data, (f, internal)


def test_float_convert_after_a_quantized_one_drops_the_quantize_report(tmp_path):
    work = workdir(tmp_path)
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(quantize=1)})
    assert cli("convert", "--config=deploy.yml", cwd=work).returncode == 0
    report = work / "builds" / "digits" / "model" / "digits_cnn_quantize_report.txt"
    assert report.exists()
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model()})
    assert cli("convert", "--config=deploy.yml", cwd=work).returncode == 0
    assert not report.exists()


def test_quantized_model_as_code_gives_the_file_model_bytes(tmp_path):
    work = workdir(tmp_path)
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(quantize=1)})
    assert cli("convert", "--config=deploy.yml", cwd=work).returncode == 0
    r = cli("run", "--config=deploy.yml", "--output_dir=out_file", cwd=work)
    assert r.returncode == 0, r.stderr
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(quantize=1)},
                     model_graph_format="code", model_data_format="code")
    assert cli("convert", "--config=deploy.yml", cwd=work).returncode == 0, r.stderr
    r = cli("run", "--config=deploy.yml", "--output_dir=out_code", cwd=work)
    assert r.returncode == 0, r.stderr
    assert (work / "out_file" / "prob.npy").read_bytes() == (work / "out_code" / "prob.npy").read_bytes()
