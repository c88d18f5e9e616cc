"""Issue 22 through the real CLI: a BERT-style encoder as torch.onnx exports it (int64
input_ids + attention_mask, shape sub-graphs, Erf GELU, decomposed LayerNorm) and a
Paddle2ONNX-style Clip with [1]-shaped min/max: convert, run --validate against
onnxruntime (cosine >= 0.999 on every output), outputs checked against onnxruntime too.

The encoder is written with onnx.helper (tests/ops/onnx_encoder.py) rather than exported
by torch: torch's PyPI wheel pulls about 3 GB of CUDA libraries, too heavy for CI.
"""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.cli_helpers import cli, sha256, write_deployment
from tests.ops.onnx_encoder import bert_encoder, token_batch


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr
    return r


def _validate(work, name, model_path, entry, inputs: dict):
    """convert + run --validate of one model; returns (validation records, our outputs)."""
    (work / "in").mkdir(exist_ok=True)
    files = []
    for key, value in inputs.items():
        path = work / "in" / f"{name}_{key}.npy"
        np.save(path, value)
        files.append(str(path.relative_to(work)))
    entry = {"platform": "onnx", "model_file_path": model_path.name,
             "model_sha256_checksum": sha256(model_path), "runtime": "cpu",
             "subgraphs": [{**entry, "validation_inputs_data": files}]}
    write_deployment(work / f"{name}.yml", {name: entry}, library=name)
    ok(cli("convert", f"--config={name}.yml", "--build_dir=out", cwd=work, timeout=300))
    r = ok(cli("run", f"--config={name}.yml", "--build_dir=out", "--validate", f"--json={name}.json",
               "--output_dir=res", cwd=work, timeout=300))
    assert "PASS" in r.stdout
    report = json.loads((work / f"{name}.json").read_text())
    return report["models"][0]["validation"], r


@pytest.mark.parametrize("opset,newer", [(14, False), (17, True)])
def test_bert_style_encoder_through_the_cli(tmp_path, opset, newer):
    work = tmp_path
    model, outputs = bert_encoder(opset=opset, newer=newer, layers=2)
    path = work / "encoder.onnx"
    onnx.save(model, str(path))
    ids, mask = token_batch(batch=2, seq=8)
    assert mask.min() == 0  # one row is padded: the mask path matters
    entry = {"input_tensors": ["input_ids", "attention_mask"], "input_shapes": ["2,8", "2,8"],
             "input_data_types": "int64", "input_data_formats": "NONE",
             "output_tensors": outputs, "output_shapes": ["2,8,32", "2,32", "2,32"],
             "output_data_formats": "NONE"}
    records, _ = _validate(work, "encoder", path, entry, {"ids": ids, "mask": mask})
    assert [v["name"] for v in records] == outputs
    for v in records:
        assert v["passed"] and v["cosine"] >= 0.999, v
    # what the CLI wrote is onnxruntime's answer too
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = sess.run(outputs, {"input_ids": ids, "attention_mask": mask})
    for name, want in zip(outputs, expected):
        got = np.load(work / "res" / f"{name}.npy")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)


def test_paddle2onnx_style_clip_through_the_cli(tmp_path):
    """conv -> Clip(min=[0], max=[6]) as Paddle2ONNX exports ReLU6: 1-element min/max."""
    work = tmp_path
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.5).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="p2o.Conv.0", pads=[1, 1, 1, 1]),
         helper.make_node("Clip", ["c", "min", "max"], ["y"], name="p2o.Clip.0")],
        "p2o", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        initializer=[numpy_helper.from_array(w, "w"),
                     numpy_helper.from_array(np.array([0.0], np.float32), "min"),
                     numpy_helper.from_array(np.array([6.0], np.float32), "max")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    path = work / "p2o.onnx"
    onnx.save(model, str(path))
    x = rng.uniform(-3, 3, (1, 3, 8, 8)).astype(np.float32)
    entry = {"input_tensors": "x", "input_shapes": "1,3,8,8", "input_data_formats": "NCHW",
             "output_tensors": "y", "output_shapes": "1,4,8,8", "output_data_formats": "NCHW"}
    records, _ = _validate(work, "p2o", path, entry, {"x": x})
    assert records[0]["cosine"] >= 0.999
    got = np.load(work / "res" / "y.npy")
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})
    assert want.max() == 6.0 and want.min() == 0.0  # the clip bites on both sides
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_token_ids_left_at_the_float32_default_are_an_error(tmp_path):
    """Forgetting input_data_types: int64 stops convert with the fix, not a later crash."""
    work = tmp_path
    model, outputs = bert_encoder(opset=14, layers=1)
    path = work / "encoder.onnx"
    onnx.save(model, str(path))
    entry = {"platform": "onnx", "model_file_path": path.name, "model_sha256_checksum": sha256(path),
             "subgraphs": [{"input_tensors": ["input_ids", "attention_mask"], "input_shapes": ["1,8", "1,8"],
                            "input_data_formats": "NONE", "output_tensors": outputs[:1],
                            "output_data_formats": "NONE"}]}
    write_deployment(work / "enc.yml", {"enc": entry}, library="enc")
    r = cli("convert", "--config=enc.yml", "--build_dir=out", cwd=work)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "input tensor 'input_ids' is int64 in the model, but input_data_types gives float32" in r.stderr
    assert "set input_data_types: int64" in r.stderr
    assert not (work / "out" / "enc" / "model").exists()  # nothing half-written
