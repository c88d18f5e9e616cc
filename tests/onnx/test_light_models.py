"""The nine real architectures onnx ships, end to end through the CLI.

1. Shipped weights: convert + run with the reference input, compare with the
   shipped `*_output_0.pb`. SqueezeNet's and Inception v1's shipped weights
   drive their logits to ~1e10..1e21 where float32 rounding alone reorders the
   softmax, so for those two the logits are compared with onnxruntime instead.
2. Random weights: `run --validate` against onnxruntime at the CPU threshold.
"""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import yaml

from mace.testing.onnx_models import (LIGHT_MODELS, data_input, light_path, randomized, reference_input,
                                      reference_output)

ROOT = Path(__file__).resolve().parents[2]
DEGENERATE = {"squeezenet", "inception_v1"}


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cli(*args, cwd):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "converter.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=900)


def softmax_input(model) -> str:
    return next(n for n in reversed(model.graph.node) if n.op_type == "Softmax").input[0]


def model_entry(path, input_name, shape, output, npy=None):
    sg = {"input_tensors": input_name, "input_shapes": ",".join(map(str, shape)),
          "input_data_formats": "NCHW", "output_tensors": output, "output_data_formats": "NONE"}
    if npy:
        sg["validation_inputs_data"] = [str(npy)]
    return {"platform": "onnx", "model_file_path": str(path), "model_sha256_checksum": sha256(path),
            "subgraphs": [sg], "runtime": "cpu"}


@pytest.fixture(scope="module")
def shipped_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("light")
    models, expected = {}, {}
    for name in LIGHT_MODELS:
        model = onnx.load(str(light_path(name)))
        input_name, shape = data_input(model)
        npy = tmp / f"{name}_input.npy"
        np.save(npy, reference_input(shape))
        output = softmax_input(model) if name in DEGENERATE else model.graph.output[0].name
        models[name] = model_entry(light_path(name), input_name, shape, output, npy)
        expected[name] = output
    cfg = tmp / "light.yml"
    cfg.write_text(yaml.safe_dump({"library_name": "light", "target_abis": ["host"], "models": models}))
    conv = cli("convert", f"--config={cfg}", cwd=tmp)
    assert conv.returncode == 0, conv.stderr
    outputs = {}
    for name in LIGHT_MODELS:
        out_dir = tmp / "out" / name
        run = cli("run", f"--config={cfg}", f"--model_name={name}", f"--output_dir={out_dir}", cwd=tmp)
        assert run.returncode == 0, run.stderr
        outputs[name] = np.load(out_dir / f"{expected[name].replace('/', '_').replace(':', '_')}.npy")
    return outputs, expected


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_matches_shipped_output(shipped_run, name):
    outputs, expected = shipped_run
    got = outputs[name]
    if name in DEGENERATE:
        model = onnx.load(str(light_path(name)))
        input_name, shape = data_input(model)
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(expected[name]))
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = sess.run([expected[name]], {input_name: reference_input(shape)})[0]
        np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-5)
    else:
        ref = reference_output(name)
        np.testing.assert_allclose(got.reshape(ref.shape), ref, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["resnet50", "squeezenet", "inception_v1", "inception_v2", "shufflenet",
                                  "densenet121", "bvlc_alexnet"])
def test_light_model_random_weights_validate(tmp_path, name):
    model = randomized(name, seed=3)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    input_name, shape = data_input(model)
    cfg = tmp_path / "deploy.yml"
    cfg.write_text(yaml.safe_dump({
        "library_name": name, "target_abis": ["host"],
        "models": {name: model_entry(path, input_name, shape, model.graph.output[0].name)}}))
    assert cli("convert", f"--config={cfg}", cwd=tmp_path).returncode == 0
    report = tmp_path / "report.json"
    run = cli("run", f"--config={cfg}", "--validate", f"--json={report}", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS" in run.stdout
    result = json.loads(report.read_text())["models"][0]["validation"][0]
    assert result["cosine"] >= 0.999 and result["passed"] is True
    assert result["pixel_accuracy"] == 1.0
