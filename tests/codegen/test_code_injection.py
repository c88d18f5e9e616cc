"""model_graph_format: code never runs what a deployment file or a model names (issue 18, item 1).

The payloads are the issue's: a library name that closes the generated docstring, and tensor and op
names in an ONNX model that would close a string literal, a comment or a docstring. Through the
real CLI, convert and run must create no file and, for the model, give the reference's outputs.
"""
from __future__ import annotations

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
