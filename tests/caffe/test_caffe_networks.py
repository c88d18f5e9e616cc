"""Whole Caffe networks (prototxt as written in tests/caffe/caffe_zoo.py, seeded weights)
through the CLI as a user runs them: `convert`, then `run --validate` against the numpy
Caffe reference at the CPU threshold. Logits are validated next to the softmax, whose
near-uniform values would hide errors."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.caffe import caffe_zoo
from tests.caffe.caffe_net import net_from_prototxt, sha256

ROOT = Path(__file__).resolve().parents[2]

# name: (prototxt, input shape (NCHW), input format, outputs: {name: (shape, format)}, logits)
NETWORKS = {
    "squeezenet_v11": (caffe_zoo.squeezenet_v11(), [1, 3, 227, 227], "NHWC",
                       {"pool10": ([1, 1, 1, 1000], "NHWC"), "prob": ([1, 1, 1, 1000], "NHWC")},
                       "pool10"),
    "mobilenet_v1": (caffe_zoo.mobilenet_v1(), [1, 3, 64, 64], "NHWC",
                     {"fc7": ([1, 1, 1, 1000], "NHWC"), "prob": ([1, 1000, 1, 1], "NCHW"),
                      "conv6/sep": ([1, 2, 2, 256], "NHWC")}, "fc7"),
    "vgg_lrn": (caffe_zoo.vgg_lrn(), [1, 3, 64, 64], "NCHW",
                {"fc8": ([1, 100], "NONE"), "prob": ([1, 100], "NONE"), "norm1": ([1, 32, 29, 29], "NCHW")},
                "fc8"),
    "ssd_head": (caffe_zoo.ssd_head(), [1, 3, 64, 64], "NHWC",
                 # 16x16x4 + 9x9x6 priors (ceil pooling makes conv3 9x9, not 8x8)
                 {"mbox_loc": ([1, 6040], "NONE"), "mbox_conf_flatten": ([1, 7550], "NONE"),
                  "mbox_conf": ([1, 7550], "NONE")}, "mbox_conf"),
}


def cli(*args, cwd):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "converter.py"), *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def deployment(tmp_path, name) -> Path:
    text, shape, fmt, outputs, _ = NETWORKS[name]
    net = net_from_prototxt(text, {"data": shape}, seed=5)
    prototxt, caffemodel = net.save(tmp_path / "model", name)
    user_shape = [shape[0], shape[2], shape[3], shape[1]] if fmt == "NHWC" else shape
    model = {
        "platform": "caffe",
        "model_file_path": str(prototxt.relative_to(tmp_path)),
        "model_sha256_checksum": sha256(prototxt),
        "weight_file_path": str(caffemodel.relative_to(tmp_path)),
        "weight_sha256_checksum": sha256(caffemodel),
        "subgraphs": [{
            "input_tensors": "data", "input_shapes": ",".join(map(str, user_shape)),
            "input_data_formats": fmt,
            "output_tensors": list(outputs),
            "output_shapes": [",".join(map(str, s)) for s, _ in outputs.values()],
            "output_data_formats": [f for _, f in outputs.values()],
        }],
        "runtime": "cpu",
    }
    cfg = tmp_path / "deploy.yml"
    cfg.write_text(yaml.safe_dump({"library_name": name, "target_abis": ["host"],
                                   "models": {name: model}}, sort_keys=False))
    return cfg


@pytest.mark.parametrize("name", NETWORKS)
def test_network_validates_through_the_cli(tmp_path, name):
    cfg = deployment(tmp_path, name)
    conv = cli("convert", f"--config={cfg}", cwd=tmp_path)
    assert conv.returncode == 0, conv.stdout + conv.stderr
    report = tmp_path / "report.json"
    run = cli("run", f"--config={cfg}", "--validate", f"--json={report}", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    results = {r["name"]: r for r in json.loads(report.read_text())["models"][0]["validation"]}
    assert set(results) == set(NETWORKS[name][3])
    for output, result in results.items():
        assert result["passed"] and result["cosine"] >= 0.999, (output, result)
    assert results[NETWORKS[name][4]]["pixel_accuracy"] == 1.0
