"""The CLI with model_graph_format: code: convert writes the package, run loads it, validate passes."""
from __future__ import annotations

import json

from tests.cli_helpers import cli, digits_model, workdir, write_deployment


def test_convert_and_run_code_format_obfuscated(tmp_path):
    work = workdir(tmp_path)
    write_deployment(work / "code.yml", {"digits_cnn": digits_model(obfuscate=1)},
                     model_graph_format="code", model_data_format="code")
    r = cli("convert", "--config=code.yml", "--build_dir=out", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    pkg = work / "out" / "digits" / "code" / "digits_models"
    assert (pkg / "__init__.py").exists() and (pkg / "digits_cnn.py").exists()
    assert (work / "out" / "digits" / "model" / "digits_cnn_obfuscation_map.json").exists()
    # run must load the generated package: without it, it fails rather than use the .pb
    (pkg / "digits_cnn.py").rename(pkg / "moved.py")
    r = cli("run", "--config=code.yml", "--build_dir=out", cwd=work)
    assert r.returncode == 1 and "digits_cnn.py: missing (listed in the build manifest)" in r.stderr
    assert "internal error" not in r.stderr + r.stdout
    (pkg / "moved.py").rename(pkg / "digits_cnn.py")
    r = cli("run", "--config=code.yml", "--build_dir=out", "--validate", "--json=r.json", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((work / "r.json").read_text())["models"][0]["validation"][0]["passed"] is True
