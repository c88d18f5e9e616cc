"""examples/caffe: reproducible model files, the CLI on its deployment file, and the same
predictions as the ONNX digits model it was written from."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from mace.runtime import create_engine

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "caffe"


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_make_model_reproduces_the_checked_in_files(tmp_path):
    r = run(EXAMPLE / "make_model.py", f"--out={tmp_path}")
    assert r.returncode == 0, r.stderr
    for name in ("digits_caffe.prototxt", "digits_caffe.caffemodel"):
        assert (tmp_path / name).read_bytes() == (EXAMPLE / name).read_bytes(), name


def test_example_converts_validates_and_matches_onnx(tmp_path):
    cfg = "examples/caffe/digits_caffe.yml"
    r = run("tools/converter.py", "convert", f"--config={cfg}", f"--build_dir={tmp_path}")
    assert r.returncode == 0, r.stdout + r.stderr
    report = tmp_path / "r.json"
    r = run("tools/converter.py", "run", f"--config={cfg}", f"--build_dir={tmp_path}", "--validate",
            f"--json={report}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert all(v["passed"] for v in json.loads(report.read_text())["models"][0]["validation"])

    import onnxruntime as ort
    engine = create_engine(tmp_path / "digits_caffe" / "model" / "digits_caffe.pb")
    test = np.load(ROOT / "examples" / "digits" / "test_set.npz")
    images = test["images"][:100]
    sess = ort.InferenceSession(str(ROOT / "examples" / "digits" / "digits_cnn.onnx"),
                                providers=["CPUExecutionProvider"])
    ours = np.concatenate([engine.run({"data": x[None].transpose(0, 2, 3, 1)})["prob"] for x in images])
    ref = np.concatenate([sess.run(None, {"image": x[None]})[0] for x in images])  # batch 1
    np.testing.assert_allclose(ours, ref, atol=1e-5)
    assert (ours.argmax(1) == ref.argmax(1)).all()
