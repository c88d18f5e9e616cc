"""Whole models quantized after training (PTQ) through the CLI, against the float framework.

`convert` with `quantize: 1` and a quantize_calibration_data folder, then
`run --validate` at the QUANTIZE threshold (cosine >= 0.98): the bundled digits
example (calibrated on real test images; its accuracy on the test set must stay
within one point of the float model's), a MobileNet v2 in ONNX against
onnxruntime and a MobileNet v1-style Keras network against TensorFlow (random
weights, calibrated on random inputs drawn like the validation inputs).

Random networks share a large input-independent part in their outputs, which alone
can make a cosine look good; the MobileNets are therefore also compared on several
inputs with that common part (the float outputs' mean) taken out (for MobileNet v2, next to
what onnxruntime's own static quantization keeps of that part).
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import yaml

from mace.ir.args import get_arg
from mace.ir.model_io import load_net
from mace.runtime.engine import create_engine
from mace.testing.quant_models import qdq_model, uniform_samples
from tests.cli_helpers import cli, digits_model, workdir, write_deployment

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
SIZE = 32          # MobileNet input side
CALIBRATION = 8    # random calibration samples for the MobileNets


def convert_and_validate(work, config: str) -> dict:
    r = cli("convert", f"--config={config}", "--build_dir=out", cwd=work, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli("run", f"--config={config}", "--build_dir=out", "--validate", "--json=r.json", cwd=work,
            timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return {m["model"]: m for m in json.loads((work / "r.json").read_text())["models"]}


def assert_validated(model_report):
    assert model_report["validation"], model_report
    for m in model_report["validation"]:
        assert m["threshold"] == 0.98 and m["passed"] and m["cosine"] >= 0.98, m


def assert_quantized(pb, layer_types=("Conv2D", "DepthwiseConv2d", "FullyConnected")):
    """Every conv/FC layer of the converted model is quantized (uint8 output params)."""
    net = load_net(pb)
    assert get_arg(net, "quantize") == 1
    layers = [op for op in net.op if op.type in layer_types]
    assert layers and all(len(op.quantize_info) == 1 and op.quantize_info[0].scale > 0 for op in layers)


def centered_cosine(ours: list, ref: list) -> float:
    """Cosine of the input-dependent parts: both minus the reference's mean over the inputs."""
    mean = np.mean(ref, axis=0)
    a = np.concatenate([np.ravel(o - mean) for o in ours])
    b = np.concatenate([np.ravel(r - mean) for r in ref])
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def write_samples(folder, samples):
    folder.mkdir()
    for i, s in enumerate(samples):
        np.save(folder / f"sample_{i:02d}.npy", s)


def mobilenet_entry(platform, path, data, outputs) -> dict:
    sg = {"input_tensors": "input", "input_shapes": f"1,{SIZE},{SIZE},3", "input_data_formats": "NHWC",
          "input_ranges": "-1,1", "output_tensors": outputs, "output_shapes": ["1,10"] * len(outputs),
          "output_data_formats": "NONE"}
    return {"platform": platform, "model_file_path": path,
            "model_sha256_checksum": hashlib.sha256(data).hexdigest(), "subgraphs": [sg],
            "runtime": "cpu", "quantize": 1, "quantize_calibration_data": "calibration"}


def check_inputs():
    """Inputs unlike the calibration samples (another seed), from the same distribution."""
    return uniform_samples((1, SIZE, SIZE, 3), 6, seed=100)


# ---- the bundled example ------------------------------------------------------------------
def digits_accuracy(engine, images, labels) -> float:
    pred = [np.argmax(engine(img.transpose(1, 2, 0)[None].astype(np.float32))) for img in images]
    return float(np.mean(np.array(pred) == labels))


def test_digits_quantized_keeps_its_accuracy(tmp_path):
    import onnxruntime as ort

    work = workdir(tmp_path)
    with np.load(work / "digits" / "test_set.npz") as z:
        images, labels = z["images"], z["labels"]
    # calibrate on 40 real images (NHWC, as the deployment file feeds them)
    write_samples(work / "calibration", [img.transpose(1, 2, 0)[None] for img in images[-40:]])
    write_deployment(work / "q.yml", {"digits_cnn": digits_model(
        quantize=1, quantize_calibration_data="calibration")})
    report = convert_and_validate(work, "q.yml")
    assert_validated(report["digits_cnn"])

    model = work / "out" / "digits" / "model" / "digits_cnn.pb"
    assert_quantized(model)
    quantized = create_engine(str(model), str(model.with_suffix(".data")))
    acc = digits_accuracy(lambda x: quantized.run({"image": x})["prob"], images, labels)
    session = ort.InferenceSession(str(work / "digits" / "digits_cnn.onnx"), providers=["CPUExecutionProvider"])
    ref = digits_accuracy(lambda x: session.run(["prob"], {"image": x.transpose(0, 3, 1, 2)})[0],
                          images, labels)
    assert ref > 0.9                       # the example is a trained model
    assert abs(acc - ref) <= 0.01, (acc, ref)


# ---- MobileNets with random weights ------------------------------------------------------
def test_onnx_mobilenet_v2_quantized_matches_onnxruntime(tmp_path):
    import onnx
    import onnxruntime as ort

    from mace.testing.mobilenet_v2 import mobilenet_v2

    model = mobilenet_v2(seed=0, resolution=SIZE, classes=10)
    onnx.save(model, str(tmp_path / "mobilenet_v2.onnx"))
    out = model.graph.output[0].name
    write_samples(tmp_path / "calibration", uniform_samples((1, SIZE, SIZE, 3), CALIBRATION, seed=1))
    data = (tmp_path / "mobilenet_v2.onnx").read_bytes()
    (tmp_path / "q.yml").write_text(yaml.safe_dump(
        {"library_name": "ptq", "target_abis": ["host"],
         "models": {"mobilenet_v2": mobilenet_entry("onnx", "mobilenet_v2.onnx", data, [out])}}))
    assert_validated(convert_and_validate(tmp_path, "q.yml")["mobilenet_v2"])

    pb = tmp_path / "out" / "ptq" / "model" / "mobilenet_v2.pb"
    assert_quantized(pb)
    engine = create_engine(str(pb), str(pb.with_suffix(".data")))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    xs = check_inputs()
    ours = [engine.run({"input": x})[out] for x in xs]
    ref = [session.run([out], {"input": x.transpose(0, 3, 1, 2)})[0] for x in xs]
    # 52 random layers leave little of the input in the logits: measure against what
    # onnxruntime's own static quantization keeps of it, calibrated on the same samples
    samples = [s.transpose(0, 3, 1, 2).copy() for s in uniform_samples((1, SIZE, SIZE, 3), CALIBRATION, seed=1)]
    qdq = qdq_model(tmp_path / "mobilenet_v2.onnx", tmp_path / "qdq.onnx", "input", samples)
    ort_q = ort.InferenceSession(str(qdq), providers=["CPUExecutionProvider"])
    theirs = [ort_q.run([out], {"input": x.transpose(0, 3, 1, 2)})[0] for x in xs]
    assert centered_cosine(ours, ref) >= min(0.9, centered_cosine(theirs, ref) - 0.02)


def test_tensorflow_mobilenet_quantized_matches_tensorflow(tmp_path):
    from mace.testing.quant_models import tf_mobilenet
    from mace.validate.reference import run_tensorflow

    graph_def, outputs = tf_mobilenet(size=SIZE)
    data = graph_def.SerializeToString(deterministic=True)
    (tmp_path / "mobilenet.pb").write_bytes(data)
    write_samples(tmp_path / "calibration", uniform_samples((1, SIZE, SIZE, 3), CALIBRATION, seed=1))
    (tmp_path / "q.yml").write_text(yaml.safe_dump(
        {"library_name": "ptq", "target_abis": ["host"],
         "models": {"mobilenet": mobilenet_entry("tensorflow", "mobilenet.pb", data, outputs)}}))
    assert_validated(convert_and_validate(tmp_path, "q.yml")["mobilenet"])

    pb = tmp_path / "out" / "ptq" / "model" / "mobilenet.pb"
    assert_quantized(pb)
    engine = create_engine(str(pb), str(pb.with_suffix(".data")))
    logits = outputs[1]
    xs = check_inputs()
    ours = [engine.run({"input": x})[logits] for x in xs]
    ref = [run_tensorflow(tmp_path / "mobilenet.pb", {"input": x}, [logits])[logits] for x in xs]
    assert centered_cosine(ours, ref) >= 0.9
