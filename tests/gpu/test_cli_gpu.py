"""Whole models through the CLI on `runtime: gpu` / `cpu+gpu`, the OpenCL cache and tuning files.

Models: the digits example, two ONNX light architectures with random weights (SqueezeNet all
on the GPU in fp16_fp32; ShuffleNet in fp32_fp32, whose random weights drive activations past
half's range, with its grouped convs and rank-5 channel shuffle placed on the CPU), and the
Caffe/TensorFlow examples when present. All pass the GPU threshold (cosine 0.995).
"""
import json
import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml

from mace.runtime.gpu.cache_files import KERNELS, TUNING, cache_path, read_cache, write_cache
from mace.runtime.gpu.context import gpu_context
from mace.testing.onnx_models import data_input, randomized
from tests.cli_helpers import ROOT, cli, digits_model, save_onnx, sha256, workdir, write_deployment

GPU_TIMEOUT = 600


@pytest.fixture
def work(tmp_path):
    w = workdir(tmp_path)
    write_deployment(w / "gpu.yml", {"digits_cnn": digits_model(runtime="gpu")})
    return w


def opencl_file(work, kind, library="digits"):
    return cache_path(work / "builds" / library / "opencl" / "host", library, kind, gpu_context().name)


def run_json(work, *args, config="gpu.yml", env=None):
    report = work / "report.json"
    done = cli("run", f"--config={config}", f"--json={report}", *args, cwd=work, env=env,
               timeout=GPU_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(report.read_text())["models"][0]


def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


def no_pocl_cache_env():
    # PoCL keeps its own compiler cache; without it a second init shows our cache's effect alone
    return {**os.environ, "POCL_KERNEL_CACHE": "0"}


def test_digits_on_gpu_validates_and_shows_placement(work):
    conv = cli("convert", "--config=gpu.yml", cwd=work, timeout=GPU_TIMEOUT)
    assert conv.returncode == 0, conv.stderr
    dump = (work / "builds/digits/model/digits_cnn.pb_txt").read_text()
    # 5: the flatten Transpose folds into the FC weight (fold_flatten_transpose)
    assert dump.count("device_type: GPU") == dump.count("op {") == 5
    done, result = run_json(work, "--validate")
    assert "placement: 5 of 5 ops on GPU" in flat(done.stdout)
    metric = result["validation"][0]
    assert metric["threshold"] == 0.995 and metric["passed"] and metric["cosine"] >= 0.995
    assert result["runtime"] == "gpu"


def relu_model(work) -> Path:
    """x -> Relu -> y on runtime gpu: a model whose init is mostly compiling (two programs)."""
    from onnx import helper
    checksum = save_onnx(work / "relu.onnx", [helper.make_node("Relu", ["x"], ["y"])],
                         [("x", [1, 5, 6, 7])], [("y", [1, 5, 6, 7])])
    model = {"platform": "onnx", "model_file_path": "relu.onnx", "model_sha256_checksum": checksum,
             "runtime": "gpu", "subgraphs": [{"input_tensors": "x", "input_shapes": "1,5,6,7",
                                              "input_data_formats": "NONE", "output_tensors": "y",
                                              "output_data_formats": "NONE"}]}
    return write_deployment(work / "relu.yml", {"relu": model}, library="relu")


def test_kernel_cache_is_written_reused_and_makes_init_faster(work):
    relu_model(work)
    assert cli("convert", "--config=relu.yml", cwd=work).returncode == 0
    env = no_pocl_cache_env()
    first, r1 = run_json(work, config="relu.yml", env=env)
    binary = opencl_file(work, KERNELS, library="relu")
    assert binary.exists() and "programs built 2, loaded from cache 0" in flat(first.stdout)
    second, r2 = run_json(work, config="relu.yml", env=env)
    assert "programs built 0, loaded from cache 2" in flat(second.stdout)
    assert r2["timing"]["init_ms"] < 0.5 * r1["timing"]["init_ms"], (r1["timing"], r2["timing"])


def damage_files(work, damage: str) -> None:
    fingerprint = gpu_context().fingerprint()
    for kind in (KERNELS, TUNING):
        path = opencl_file(work, kind)
        data = path.read_bytes()
        if damage == "garbage":
            path.write_bytes(b"\x00not a cache file" * 10)
        elif damage == "truncated":
            path.write_bytes(data[: len(data) // 2])
        else:
            write_cache(path, kind, dict(fingerprint, device="Adreno (TM) 640", driver="512.415"),
                        read_cache(path, kind, fingerprint))


def test_corrupt_or_foreign_cache_files_are_ignored_with_a_warning(work):
    assert cli("convert", "--config=gpu.yml", cwd=work).returncode == 0
    run_json(work, "--tuning")
    fingerprint = gpu_context().fingerprint()
    good = {kind: opencl_file(work, kind).read_bytes() for kind in (KERNELS, TUNING)}
    for damage, why in (("garbage", "bad magic"), ("truncated", "truncated"), ("foreign", "another device")):
        for kind, data in good.items():
            opencl_file(work, kind).write_bytes(data)
        damage_files(work, damage)
        done, result = run_json(work, "--validate")
        assert flat(done.stderr).count("warning: ignoring OpenCL cache file") == 2, done.stderr
        assert why in flat(done.stderr) and result["passed"]
        # the kernel binaries are rebuilt and rewritten at once; the tuned file waits for --tuning
        assert read_cache(opencl_file(work, KERNELS), KERNELS, fingerprint)
    again = cli("run", "--config=gpu.yml", "--tuning", cwd=work, timeout=GPU_TIMEOUT)
    assert flat(again.stderr).count("warning: ignoring OpenCL cache file") == 1 and "tuned" in again.stderr
    assert "programs built 0" in flat(again.stdout)
    last = cli("run", "--config=gpu.yml", cwd=work, timeout=GPU_TIMEOUT)
    assert "warning" not in last.stderr, last.stderr


def test_tuning_saves_parameters_that_later_runs_load(work):
    assert cli("convert", "--config=gpu.yml", cwd=work).returncode == 0
    tuned = opencl_file(work, TUNING)
    plain, _ = run_json(work)
    assert not tuned.exists() and "tuned now" not in plain.stdout
    tuning, _ = run_json(work, "--tuning")
    assert tuned.exists() and "tuned now" in tuning.stdout
    entries = read_cache(tuned, TUNING, gpu_context().fingerprint())
    assert any(k.startswith("conv2d") for k in entries)
    later, result = run_json(work, "--validate")
    assert f"tuned parameters loaded {len(entries)}" in flat(later.stdout) and "tuned now" not in later.stdout
    assert result["passed"]


def test_target_socs_turns_tuning_on(work):
    write_deployment(work / "socs.yml", {"digits_cnn": digits_model(runtime="gpu")}, target_socs=["sdm845"])
    assert cli("convert", "--config=socs.yml", cwd=work).returncode == 0
    done, _ = run_json(work, config="socs.yml")
    assert "tuned now" in done.stdout and opencl_file(work, TUNING).exists()


def test_hints_and_kernel_time_limit_are_accepted(work):
    write_deployment(work / "limit.yml", {"digits_cnn": digits_model(runtime="gpu", limit_opencl_kernel_time=1,
                                                                     data_type="fp32_fp32")})
    assert cli("convert", "--config=limit.yml", cwd=work).returncode == 0
    done, result = run_json(work, "--validate", "--gpu_perf_hint=3", "--gpu_priority_hint=1",
                            config="limit.yml")
    assert result["passed"]
    device = gpu_context()
    for ext, word in (("cl_khr_throttle_hints", "perf"), ("cl_khr_priority_hints", "priority")):
        if not device.has_extension(ext):
            assert f"gpu {word} hint" in flat(done.stdout) and "ignored" in done.stdout


def lrn_model(path: Path) -> str:
    """Conv -> LRN (no GPU kernel) -> Conv -> Relu: the LRN runs on the CPU between GPU ops."""
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(5)
    w1 = numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.3, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((5, 6, 1, 1)).astype(np.float32) * 0.3, "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("LRN", ["c1"], ["n1"], size=3),
             helper.make_node("Conv", ["n1", "w2"], ["c2"]),
             helper.make_node("Relu", ["c2"], ["y"])]
    return save_onnx(path, nodes, [("x", [1, 3, 9, 7])], [("y", [1, 5, 9, 7])], [w1, w2])


def test_cpu_gpu_runs_ops_without_a_gpu_kernel_on_the_cpu(work):
    checksum = lrn_model(work / "lrn.onnx")
    model = {"platform": "onnx", "model_file_path": "lrn.onnx", "model_sha256_checksum": checksum,
             "runtime": "cpu+gpu", "subgraphs": [{"input_tensors": "x", "input_shapes": "1,3,9,7",
                                                  "input_data_formats": "NCHW", "output_tensors": "y",
                                                  "output_data_formats": "NCHW"}]}
    write_deployment(work / "lrn.yml", {"lrn": model}, library="lrn")
    assert cli("convert", "--config=lrn.yml", cwd=work).returncode == 0
    net = (work / "builds/lrn/model/lrn.pb_txt").read_text()
    ops = net.split("op {")[1:]
    lrn = next(o for o in ops if '"LocalResponseNorm"' in o)
    assert "device_type: GPU" not in lrn and all("device_type: GPU" in o for o in ops if o is not lrn)
    done, result = run_json(work, "--validate", config="lrn.yml")
    assert "on CPU: LocalResponseNorm (no GPU kernel)" in flat(done.stdout)
    assert result["passed"] and result["validation"][0]["cosine"] >= 0.995


LIGHT = [("squeezenet", "fp16_fp32"), ("shufflenet", "fp32_fp32")]


@pytest.mark.parametrize("name,data_type", LIGHT)
def test_light_model_on_gpu_passes_the_gpu_threshold(tmp_path, name, data_type):
    model = randomized(name, seed=3)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    input_name, shape = data_input(model)
    entry = {"platform": "onnx", "model_file_path": str(path), "model_sha256_checksum": sha256(path),
             "runtime": "gpu", "data_type": data_type,
             "subgraphs": [{"input_tensors": input_name, "input_shapes": ",".join(map(str, shape)),
                            "input_data_formats": "NCHW", "output_tensors": model.graph.output[0].name,
                            "output_data_formats": "NONE"}]}
    (tmp_path / "deploy.yml").write_text(yaml.safe_dump({"library_name": name, "target_abis": ["host"],
                                                         "models": {name: entry}}))
    assert cli("convert", "--config=deploy.yml", cwd=tmp_path, timeout=GPU_TIMEOUT).returncode == 0
    done, result = run_json(tmp_path, "--validate", config="deploy.yml")
    metric = result["validation"][0]
    assert metric["passed"] and metric["cosine"] >= 0.995 and metric["threshold"] == 0.995
    if name == "shufflenet":
        assert "on CPU: Conv2D (grouped convolution)" in flat(done.stdout)


EXAMPLES = [ROOT / "examples/caffe/digits_caffe.yml", ROOT / "examples/tensorflow/mobilenet_v2.yml"]


@pytest.mark.parametrize("config", EXAMPLES, ids=lambda p: p.parent.name)
def test_framework_example_on_gpu(tmp_path, config):
    if not config.exists():
        pytest.skip(f"{config.relative_to(ROOT)} is not in this checkout")
    data = yaml.safe_load(config.read_text())
    model = next(iter(data["models"].values()))
    files = [model["model_file_path"]] + ([model["weight_file_path"]] if "weight_file_path" in model else [])
    for f in files + model["subgraphs"][0].get("validation_inputs_data", []):
        if not (ROOT / f).exists():
            pytest.skip(f"{f} is not present (examples/*/make_model.py writes it)")
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, tmp_path / f)
    if model["platform"] == "tensorflow":
        pytest.importorskip("tensorflow", reason="the TensorFlow example needs the [tf] extra")
    model["runtime"] = "gpu"
    (tmp_path / "gpu.yml").write_text(yaml.safe_dump(data))
    conv = cli("convert", "--config=gpu.yml", cwd=tmp_path, timeout=GPU_TIMEOUT)
    assert conv.returncode == 0, conv.stderr
    done, result = run_json(tmp_path, "--validate")
    assert result["passed"], done.stdout
    assert all(m["threshold"] == 0.995 for m in result["validation"])
