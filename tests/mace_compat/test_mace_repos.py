"""Every deployment file MACE's own repositories ship is read by `config` unchanged (issue 39).

files/mace_repos/ holds them byte for byte (README.md there says from where); docs/mace_compat.md
lists them. Their models are URLs, never fetched here: `config` reads no model file. One of them,
MACE's SqueezeNet v1.1 file with its hyphenated library name, is converted, run, validated, built
and imported as code end to end, with only the model file swapped for the same architecture.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from mace.cli.main import main as converter_main
from mace.cli.mace_compat_doc import DOC, MACE_FILES, mace_files
from mace.config import load_deployment
from mace.config.names import identifier
from tests.cli_helpers import cli, sha256

FILES = sorted(MACE_FILES.rglob("*.y*ml"))


def test_the_doc_lists_every_file_we_hold():
    listed = re.findall(r"^\| `(mace(?:-models)?)` \| `([^`]+)` \|", DOC.read_text(), re.M)
    held = [(f.relative_to(MACE_FILES).parts[0], "/".join(f.relative_to(MACE_FILES).parts[1:])) for f in FILES]
    assert sorted(listed) == sorted(held) and len(held) == 85   # 30 from mace, 55 from mace-models
    assert mace_files() == FILES


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(MACE_FILES)))
def test_config_accepts_it_unchanged(path, capsys):
    assert converter_main(["config", f"--config={path}"]) == 0
    out = capsys.readouterr()
    assert "error" not in out.err.lower(), out.err
    config = load_deployment(path)
    for w in config.warnings:   # each warning names the key it is about
        assert re.match(r"(models\.[\w.-]+\.)?[\w\[\]]+", w), w
    assert all(identifier(n).isidentifier() for n in [config.library_name, *config.models])


def test_cmake_flow_files_take_their_library_name_from_the_model_or_file(capsys):
    one = load_deployment(MACE_FILES / "mace/tools/python/config/model/model-template.yaml")
    assert (one.library_name, one.origin["library_name"]) == ("mobilenet_v2", "the only model's name")
    two = load_deployment(MACE_FILES / "mace/docs/user_guide/models/demo_models_cmake.yml")
    assert (two.library_name, two.origin["library_name"]) == ("demo_models_cmake", "the file's name")
    assert converter_main(["config", f"--config={MACE_FILES / 'mace/docs/user_guide/models/demo_models_cmake.yml'}"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "demo_models_cmake" in out and "the file's name" in out


def test_config_shows_the_code_identifier_of_a_hyphenated_name(capsys):
    assert converter_main(["config", f"--config={MACE_FILES / 'mace-models/mobilenet-v1/mobilenet-v1.yml'}"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "imports as mobilenet_v1_models" in out, out


def _squeezenet_file(work: Path) -> Path:
    """MACE's onnx-squeezenet-1_1.yml with the model swapped for onnx's own SqueezeNet (random
    weights: same architecture, other tensor names, its output not flattened) and runtime cpu
    (cpu+gpu needs OpenCL); the model as code."""
    import onnx

    from mace.testing.onnx_models import data_input, randomized

    model = randomized("squeezenet", seed=3)
    onnx.save(model, str(work / "squeezenet.onnx"))
    text = (MACE_FILES / "mace-models/onnx-models/onnx-squeezenet-1_1.yml").read_text()
    raw = yaml.safe_load(text)
    m = raw["models"]["squeezenet_v1_1"]
    sg = m["subgraphs"][0]
    old = (m["model_file_path"], m["model_sha256_checksum"], f"input_tensors: {sg['input_tensors']}",
           f"output_tensors: {sg['output_tensors']}", "output_shapes: 1,1000", "runtime: cpu+gpu",
           "model_graph_format: file", "model_data_format: file")
    new = ("squeezenet.onnx", sha256(work / "squeezenet.onnx"), f"input_tensors: {data_input(model)[0]}",
           f"output_tensors: {model.graph.output[0].name}", "output_shapes: 1,1,1,1000", "runtime: cpu",
           "model_graph_format: code", "model_data_format: code")
    for a, b in zip(old, new):
        assert text.count(a) == 1, a
        text = text.replace(a, b)
    path = work / "onnx-squeezenet-1_1.yml"
    path.write_text(text)
    return path


def test_hyphenated_library_converts_runs_and_builds_as_code(tmp_path):
    work = tmp_path
    yml = _squeezenet_file(work)
    flags = ["--target_abis=host"]   # MACE's flag: the file says armeabi-v7a, arm64-v8a
    r = cli("convert", f"--config={yml.name}", *flags, cwd=work, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "imports as squeezenet_v1_1_models" in " ".join(r.stdout.split())
    package = work / "builds/squeezenet-v1_1/code/squeezenet_v1_1_models"
    assert (package / "squeezenet_v1_1.py").is_file()
    r = cli("run", f"--config={yml.name}", *flags, "--validate", cwd=work, timeout=600)
    assert r.returncode == 0 and "Similarity test passed" in r.stdout, r.stdout + r.stderr
    r = cli("build", f"--config={yml.name}", *flags, cwd=work, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "imports as squeezenet_v1_1_models" in " ".join(r.stdout.split())
    # a user's own program imports the package by the printed name
    sys.path.insert(0, str(package.parent))
    try:
        from squeezenet_v1_1_models import MODELS, create_engine_from_code
        engine = create_engine_from_code("squeezenet_v1_1")
        x = np.random.default_rng(0).uniform(-1, 1, (1, 224, 224, 3)).astype(np.float32)
        out = next(iter(engine.run({next(iter(engine.input_specs())): x}).values()))
        assert MODELS == ["squeezenet_v1_1"] and out.size == 1000 and np.isfinite(out).all()
    finally:
        sys.path.remove(str(package.parent))
        for key in [k for k in sys.modules if k.startswith("squeezenet_v1_1_models")]:
            del sys.modules[key]
