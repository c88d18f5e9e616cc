"""model_graph_format: code never runs what a deployment file or a model names (issue 18, item 1).

The payloads are the issue's: a library name that closes the generated docstring, and tensor and op
names in an ONNX model that would close a string literal, a comment or a docstring. Through the
real CLI, convert and run must create no file and, for the model, give the reference's outputs.
"""
from __future__ import annotations

from pathlib import Path

import jinja2
import numpy as np
import onnxruntime as ort
import pytest
import yaml
from onnx import helper, numpy_helper

from mace.codegen import generate
from mace.runtime.from_code import create_engine_from_package
from tests.cli_helpers import cli, save_onnx, workdir, write_deployment

LIBRARY_PAYLOAD = 'x"""+str(open("pwned","w"))+"""'
# each would run open(...) if pasted into a docstring, a '...' / "..." literal or a comment
HOSTILE = {
    "input": 'in"""+str(open("pwned_in","w"))+"""',
    "hidden": "h'+str(open('pwned_hidden','w'))+'",
    "weight": 'w"+str(open("pwned_weight","w"))+"',
    "output": 'out\n__import__("builtins").open("pwned_out","w")#',
    "op1": '"""\nopen("pwned_op1","w")\n"""',
    "op2": "\\'+open('pwned_op2','w')+'",
}


def _pwned(folder) -> list:
    return sorted(str(p) for p in folder.rglob("pwned*"))


def test_library_name_payload_is_refused_before_anything_is_generated(tmp_path):
    work = workdir(tmp_path)
    yml = write_deployment(work / "code.yml", yaml.safe_load((work / "deploy.yml").read_text())["models"],
                           library=LIBRARY_PAYLOAD, model_graph_format="code", model_data_format="code")
    for command in ("convert", "run"):
        r = cli(command, f"--config={yml.name}", "--build_dir=out", cwd=work)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "code.yml: library_name: " in r.stderr and "not a safe file name" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    assert _pwned(work) == [] and not (work / "out").exists()


def _hostile_model(path) -> str:
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (6, 4)).astype(np.float32), HOSTILE["weight"])
    nodes = [helper.make_node("Relu", [HOSTILE["input"]], [HOSTILE["hidden"]], name=HOSTILE["op1"]),
             helper.make_node("MatMul", [HOSTILE["hidden"], HOSTILE["weight"]], [HOSTILE["output"]],
                              name=HOSTILE["op2"])]
    return save_onnx(path, nodes, [(HOSTILE["input"], [2, 6])], [(HOSTILE["output"], [2, 4])], [w])


@pytest.mark.parametrize("data_format", ["code", "file"])
def test_hostile_tensor_and_op_names_stay_data(tmp_path, data_format):
    work = tmp_path / "work"
    work.mkdir()
    checksum = _hostile_model(work / "hostile.onnx")
    sg = {"input_tensors": [HOSTILE["input"]], "input_shapes": "2,6", "input_data_formats": "NONE",
          "output_tensors": [HOSTILE["output"]], "output_data_formats": "NONE"}
    model = {"platform": "onnx", "model_file_path": "hostile.onnx", "model_sha256_checksum": checksum,
             "subgraphs": [sg], "runtime": "cpu"}
    write_deployment(work / "code.yml", {"hostile": model}, library="hostile",
                     model_graph_format="code", model_data_format=data_format)
    r = cli("convert", "--config=code.yml", "--build_dir=out", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    pkg = work / "out" / "hostile" / "code" / "hostile_models"
    text = (pkg / "hostile.py").read_text()
    for key in ("input", "hidden", "output", "op1", "op2"):   # (the weight is renamed by a pass)
        assert repr(HOSTILE[key]) in text          # present, as a quoted literal only
    # run imports the package; --validate runs onnxruntime on the same random inputs
    r = cli("run", "--config=code.yml", "--build_dir=out", "--validate", "--output_dir=res", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _pwned(work) == [] and _pwned(tmp_path) == []
    assert "Similarity test passed" in r.stdout, r.stdout
    assert len(list((work / "res").glob("*.npy"))) == 1
    # and in this process: the generated package against onnxruntime on an input of our own
    x = np.random.default_rng(5).uniform(-1, 1, (2, 6)).astype(np.float32)
    ours = create_engine_from_package(pkg, "hostile").run({HOSTILE["input"]: x})[HOSTILE["output"]]
    session = ort.InferenceSession(str(work / "hostile.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ours, session.run(None, {HOSTILE["input"]: x})[0], rtol=1e-5, atol=1e-6)
    assert _pwned(work) == [] and _pwned(tmp_path) == []


def test_templates_refuse_text_that_is_not_quoted():
    env = generate._env()
    with pytest.raises(TypeError, match="refusing to paste"):
        env.from_string("NAME = {{ name }}").render(name='x"+open("p","w")+"')
    assert env.from_string("NAME = {{ name | py }}").render(name='x"') == "NAME = 'x\"'"
    assert env.from_string("N = {{ n }}").render(n=3) == "N = 3"
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing | py }}").render()


def _plant_pyc(source: Path, payload: str) -> Path:
    """A .pyc in __pycache__ that Python's own loader takes for `source`'s (same size and mtime)."""
    import importlib.util
    import marshal

    stat = source.stat()
    code = compile(payload, str(source), "exec")
    cache = Path(importlib.util.cache_from_source(str(source)))
    cache.parent.mkdir(exist_ok=True)
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") + \
        (int(stat.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    cache.write_bytes(header + marshal.dumps(code))
    return cache


@pytest.mark.parametrize("module", ["__init__.py", "digits_cnn.py", "_weights/digits_cnn.py"])
def test_a_planted_pyc_never_runs(tmp_path, module):
    # issue 38, security item 2: the manifest covers the package's .py files, not __pycache__
    work = workdir(tmp_path)
    write_deployment(work / "code.yml", yaml.safe_load((work / "deploy.yml").read_text())["models"],
                     model_graph_format="code", model_data_format="code")
    assert cli("convert", "--config=code.yml", "--build_dir=out", cwd=work).returncode == 0
    pkg = work / "out" / "digits" / "code" / "digits_models"
    marker = work / "pwned_pyc"
    _plant_pyc(pkg / module, f"open({str(marker)!r}, 'w').close()\nraise SystemExit(0)\n")
    r = cli("run", "--config=code.yml", "--build_dir=out", "--validate", cwd=work)
    assert r.returncode == 0 and "Similarity test passed" in r.stdout, r.stdout + r.stderr
    assert not marker.exists()
    assert not [p for p in pkg.rglob("*.pyc") if "pwned" not in p.read_bytes().decode("latin-1")]   # none written
