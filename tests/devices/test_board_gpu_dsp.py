"""runtime gpu / cpu+gpu / dsp on a board, through `converter.py run` and the loopback ssh board.

The GPU board's Python is this test's interpreter (/work/main/.venv: numpy, pyopencl and PoCL);
a board without OpenCL is the same Python started with OCL_ICD_VENDORS naming a folder that does
not exist (the ICD loader then finds no platform; an empty folder is not enough here, because
the pip PoCL is found apart from the vendors folder). The DSP board is the numpy-only venv, with
the test plugin's folder on its PYTHONPATH where a test needs the plugin there.
"""
from __future__ import annotations

import hashlib
import json
import sys
import uuid
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from mace.runtime.engine import create_engine
from mace.runtime.gpu import unavailable_reason
from tests.cli_helpers import cli, digits_model, workdir, write_deployment
from tests.devices.helpers import build, fails, ok, ssh_entry, write_devices

GPU_REASON = unavailable_reason()
needs_gpu = pytest.mark.skipif(GPU_REASON is not None, reason=f"no usable OpenCL device here: {GPU_REASON}")
PLUGIN_DIR = Path(__file__).resolve().parent.parent / "quantize" / "dsp_plugin"
CACHE_NAME = "TestBoard.rk3399"   # ssh_entry's models "Test Board" without spaces, SoC RK3399 (read lower-case)
KERNELS = f"digits_compiled_opencl_kernel.{CACHE_NAME}.bin"
TUNED = f"digits_tuned_opencl_parameter.{CACHE_NAME}.bin"


def wrapper(folder: Path, name: str, python, **env) -> Path:
    """A `python:` for the devices .yml: `python` started with `env` set (the board's own setup)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    sets = "".join(f"export {k}='{v}'\n" for k, v in env.items())   # test-made paths, no quotes in them
    path.write_text(f"#!/bin/sh\n{sets}exec '{python}' \"$@\"\n")
    path.chmod(0o755)
    return path


def run(work, *args, timeout=600):
    return cli("run", "--config=deploy.yml", "--build_dir=out", *args, cwd=work, timeout=timeout)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def board_notes(report: dict) -> list:
    return [m for m in report["models"] if m["device"] == "board"][0]["notes"]


def nhwc_image(work: Path) -> np.ndarray:
    return np.load(work / "digits" / "inputs" / "image_0.npy").astype(np.float32).reshape(1, 8, 8, 1)


def onnxruntime_prob(work: Path) -> np.ndarray:
    """The framework's answer: the .onnx takes NCHW."""
    sess = ort.InferenceSession(str(work / "digits" / "digits_cnn.onnx"), providers=["CPUExecutionProvider"])
    return sess.run(["prob"], {"image": nhwc_image(work).transpose(0, 3, 1, 2)})[0]


@pytest.fixture(scope="module")
def gpu_work(tmp_path_factory, sshd):
    """digits with runtime gpu, built for the host: the board (this machine's CPU, with pyopencl and
    PoCL) runs the host build, picked with --device."""
    if GPU_REASON:
        pytest.skip(f"no usable OpenCL device here: {GPU_REASON}")
    work = workdir(tmp_path_factory.mktemp("board-gpu"))
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(runtime="gpu")}, target_abis=["host"])
    build(work)
    write_devices(work / "devices.yml", board=ssh_entry(sshd, work / "remote", sys.executable))
    return work


@needs_gpu
def test_gpu_engine_on_the_board_matches_the_host_and_onnxruntime_then_starts_warm(gpu_work):
    opencl = gpu_work / "out" / "digits" / "opencl" / "host"
    r = ok(run(gpu_work, "--device=host,board", "--validate", "--tuning", "--round=2", "--output_dir=res",
               "--json=first.json"))
    assert r.stdout.count("Similarity test passed") == 1 and "Run model digits_cnn on board (gpu)" in r.stdout
    notes = board_notes(json.loads((gpu_work / "first.json").read_text()))
    opencl_line = [n for n in notes if "programs built" in n]
    assert opencl_line and "device board: OpenCL" in opencl_line[0] and "tuned now" in opencl_line[0], notes
    assert int(opencl_line[0].split("programs built ")[1].split(",")[0]) > 0   # a cold board compiles
    assert any("OpenCL cache files brought back" in n and KERNELS in n and TUNED in n for n in notes), notes
    # the board's GPU run: the host's GPU run and onnxruntime within the fp16 threshold
    board, host = np.load(gpu_work / "res" / "board" / "prob.npy"), np.load(gpu_work / "res" / "host" / "prob.npy")
    reference = onnxruntime_prob(gpu_work).reshape(board.shape)
    np.testing.assert_allclose(board, host, atol=2e-3)
    np.testing.assert_allclose(board, reference, atol=1e-2)
    assert int(board.argmax()) == int(reference.argmax())
    cpu = create_engine(gpu_work / "out" / "digits" / "model" / "digits_cnn.pb").run(
        {"image": nhwc_image(gpu_work)})["prob"]
    assert not np.array_equal(board, cpu)   # fp16 images on the GPU, not the float32 CPU engine
    # MACE's per-device names, in MACE's folder, the same bytes the board wrote
    kernels, tuned = opencl / KERNELS, opencl / TUNED
    remote = gpu_work / "remote" / "digits"
    assert sha(kernels) == sha(remote / KERNELS) and sha(tuned) == sha(remote / TUNED)
    before = {p: (sha(p), p.stat().st_mtime_ns) for p in (kernels, tuned)}

    # second run: the files go back to the board, nothing is compiled or tuned, nothing comes back
    (remote / KERNELS).unlink()   # so the board can only have it from this run's push
    (remote / TUNED).unlink()
    ok(run(gpu_work, "--device=board", "--validate", "--json=second.json"))
    notes = board_notes(json.loads((gpu_work / "second.json").read_text()))
    line = [n for n in notes if "programs built" in n][0]
    assert "programs built 0, loaded from cache" in line and "tuned now" not in line, line
    assert int(line.split("loaded from cache ")[1].split(";")[0]) > 0
    assert int(line.split("tuned parameters loaded ")[1].split(",")[0]) > 0
    assert not any("brought back" in n for n in notes), notes
    assert {p: (sha(p), p.stat().st_mtime_ns) for p in (kernels, tuned)} == before
    assert sha(remote / KERNELS) == before[kernels][0]


@needs_gpu
def test_board_without_opencl_runs_on_its_cpu_and_says_why(gpu_work, sshd, tmp_path):
    python = wrapper(tmp_path, "python-no-opencl", sys.executable, OCL_ICD_VENDORS=tmp_path / "no-vendors")
    write_devices(gpu_work / "no_cl.yml", board=ssh_entry(sshd, tmp_path / "remote", python))
    r = ok(run(gpu_work, "--device_yml=no_cl.yml", "--device=board", "--validate", "--output_dir=res_no_cl"))
    assert "Similarity test passed" in r.stdout
    text = " ".join(r.stdout.split())   # rich wraps long notes
    assert "device board has no usable OpenCL device (no OpenCL platform found" in text, r.stdout
    assert "runtime gpu ran every op on the board's CPU" in text
    # the CPU ran it: float32 results, as the float32 CPU engine's
    cpu = create_engine(gpu_work / "out" / "digits" / "model" / "digits_cnn.pb").run(
        {"image": nhwc_image(gpu_work)})["prob"]
    np.testing.assert_allclose(np.load(gpu_work / "res_no_cl" / "prob.npy"), cpu, rtol=1e-5, atol=1e-6)
    assert "brought back" not in text and "programs built" not in text


@needs_gpu
def test_fp16_range_counts_on_the_board_are_the_hosts(tmp_path, sshd):
    # issue 32: the board's GPU options come from the host's builder, range check included (it was
    # dropped on the way: fp16 saturation was counted on the host and never on a board)
    from tests.gpu.test_fp16_range import saturating_model

    work = workdir(tmp_path)
    checksum, _ = saturating_model(work)
    model = {"platform": "onnx", "model_file_path": "sat.onnx", "model_sha256_checksum": checksum,
             "runtime": "gpu", "data_type": "fp16_fp32",
             "subgraphs": [{"input_tensors": "x", "input_shapes": "1,4,8,8", "input_data_formats": "NCHW",
                            "output_tensors": "y", "output_shapes": "1,8,8,8", "output_data_formats": "NCHW",
                            "validation_inputs_data": ["x.npy"]}]}
    write_deployment(work / "deploy.yml", {"sat": model}, library="sat", target_abis=["host"])
    build(work)
    write_devices(work / "devices.yml", board=ssh_entry(sshd, work / "remote", sys.executable))
    r = run(work, "--device=host,board", "--json=r.json")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = {m["device"]: [n for n in m["notes"] if "first op it cannot hold" in n]
             for m in json.loads((work / "r.json").read_text())["models"]}
    assert lines["host"] and lines["board"], lines
    host, board = lines["host"][0], lines["board"][0]
    assert "'big_conv'" in host and "values clamped at +-65504" in host
    assert board == f"device board: {host}"   # the same op, the same counts


@pytest.fixture(scope="module")
def dsp_work(tmp_path_factory, sshd):
    """digits with runtime dsp for the host (the board's ABI), once with the simulator and once with
    the test plugin named in the deployment file (installed on the board only)."""
    work = workdir(tmp_path_factory.mktemp("board-dsp"))
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(runtime="dsp")}, target_abis=["host"])
    write_deployment(work / "plugin.yml", {"digits_cnn": digits_model(runtime="dsp", dsp_backend="test_recorder")},
                     target_abis=["host"])
    write_deployment(work / "host.yml", {"digits_cnn": digits_model(runtime="dsp")})
    build(work)
    return work


def test_dsp_on_the_board_goes_through_the_backend_of_the_deployment_file(dsp_work, sshd, numpy_only_python,
                                                                         tmp_path):
    # the simulator (the default backend), on the numpy-only board
    write_devices(dsp_work / "devices.yml", board=ssh_entry(sshd, tmp_path / "sim", numpy_only_python))
    r = ok(run(dsp_work, "--device=board", "--validate", "--output_dir=res_sim"))
    text = " ".join(r.stdout.split())
    assert "Run model digits_cnn on board (dsp)" in r.stdout and "Similarity test passed" in r.stdout
    assert "device board: runtime dsp: backend hexagon_sim (Hexagon simulator" in text, r.stdout
    # the same bytes as the host's simulator run (integer kernels, bit-exact)
    ok(cli("run", "--config=host.yml", "--build_dir=out", "--output_dir=res_host", cwd=dsp_work, timeout=300))
    assert (dsp_work / "res_sim" / "prob.npy").read_bytes() == (dsp_work / "res_host" / "prob.npy").read_bytes()

    # the plugin named by the .yml key, found through its entry point on the board's Python only
    python = wrapper(tmp_path, "python-plugin", numpy_only_python, PYTHONPATH=PLUGIN_DIR)
    write_devices(dsp_work / "plugin_devices.yml", board=ssh_entry(sshd, tmp_path / "plugin", python))
    r = ok(cli("run", "--config=plugin.yml", "--build_dir=out", "--device_yml=plugin_devices.yml",
               "--device=board", "--output_dir=res_plugin", cwd=dsp_work, timeout=300))
    assert "device board: runtime dsp: backend test_recorder (test plugin: records its calls)" in \
        " ".join(r.stdout.split()), r.stdout
    assert (dsp_work / "res_plugin" / "prob.npy").read_bytes() == (dsp_work / "res_host" / "prob.npy").read_bytes()

    # a board without the plugin: one error naming the device, the step and the .yml key
    r = cli("run", "--config=plugin.yml", "--build_dir=out", "--device=board", cwd=dsp_work, timeout=300)
    fails(r, "device board: run digits_cnn:", "plugin.yml: models.digits_cnn",
          "unknown DSP backend 'test_recorder'; available: hexagon_sim")


PAYLOAD = "Evil $(touch pwned_{tag}_a) `touch pwned_{tag}_b`;touch pwned_{tag}_c"


@needs_gpu
def test_board_names_with_shell_characters_make_safe_cache_files(gpu_work, sshd_no_sftp, tmp_path):
    """`models` and the SoC name the cache files; on a board without sftp every path meets its shell."""
    tag = uuid.uuid4().hex[:10]
    write_devices(gpu_work / "evil.yml", board=ssh_entry(sshd_no_sftp, tmp_path / "remote", sys.executable,
                                                         models=PAYLOAD.format(tag=tag), target_socs="x;y"))
    r = ok(run(gpu_work, "--device_yml=evil.yml", "--device=board", "--json=evil.json"))
    name = f"Evil__touchpwned_{tag}_a__touchpwned_{tag}_b__touchpwned_{tag}_c.x_y"
    kernels = gpu_work / "out" / "digits" / "opencl" / "host" / f"digits_compiled_opencl_kernel.{name}.bin"
    assert kernels.is_file(), r.stdout
    assert sha(kernels) == sha(tmp_path / "remote" / "digits" / kernels.name)
    planted = [str(p) for f in (Path.home(), gpu_work, tmp_path, Path("/tmp")) for p in f.glob(f"pwned_{tag}_*")]
    assert planted == []


def test_dsp_backend_with_shell_characters_is_only_a_name(dsp_work, sshd, numpy_only_python, tmp_path):
    tag = uuid.uuid4().hex[:10]
    backend = f"x$(touch /tmp/pwned_{tag});touch /tmp/pwned_{tag}"
    write_deployment(dsp_work / "evil.yml", {"digits_cnn": digits_model(runtime="dsp", dsp_backend=backend)},
                     target_abis=["host"])
    write_devices(dsp_work / "evil_devices.yml", board=ssh_entry(sshd, tmp_path / "remote", numpy_only_python))
    fails(cli("run", "--config=evil.yml", "--build_dir=out", "--device_yml=evil_devices.yml", "--device=board",
              cwd=dsp_work,
              timeout=300), "device board: run digits_cnn:", f"unknown DSP backend '{backend}'")
    assert not (Path("/tmp") / f"pwned_{tag}").exists()


@needs_gpu
def test_benchmark_on_the_board_runs_the_gpu_engine(gpu_work):
    r = ok(cli("benchmark", "--config=deploy.yml", "--build_dir=out", "--device=board", "--round=2",
               "--json=bench.json", cwd=gpu_work, timeout=600))
    assert "Benchmark model digits_cnn (gpu) on device board" in r.stdout, r.stdout
    report = json.loads((gpu_work / "bench.json").read_text())["models"][0]
    assert report["device"] == "board"
    assert any(n.startswith("device board: OpenCL") and "programs built" in n for n in report["notes"]), report


def test_board_tuning_follows_the_host_rules(tmp_path):
    """--tuning always; target_socs without a tuned file of this board; never with --disable_tuning."""
    from mace.config.deployment import load_deployment
    from mace.devices.target_run import RunOptions, _Job, _OpenCl, _runtime_args

    work = workdir(tmp_path)
    write_deployment(work / "socs.yml", {"digits_cnn": digits_model(runtime="gpu")}, target_socs="rk3399")
    write_deployment(work / "plain.yml", {"digits_cnn": digits_model(runtime="gpu")})
    opencl = _OpenCl(tmp_path / "opencl" / "host", "digits", CACHE_NAME)

    def tunes(yml: str, **opts) -> bool:
        config = load_deployment(work / yml)
        job = _Job(config.models["digits_cnn"], None, None, {}, "", [], [])
        argv = _runtime_args(config, job, "/w/digits", RunOptions(models=["digits_cnn"], **opts), opencl)
        assert f"--opencl_cache_name={CACHE_NAME}" in argv and "--runtime=gpu" in argv
        return "--opencl_tuning" in argv

    assert tunes("socs.yml") and not tunes("plain.yml") and tunes("plain.yml", tuning=True)
    assert not tunes("socs.yml", auto_tuning=False)
    opencl.local_dir.mkdir(parents=True)
    opencl.path("tuned_opencl_parameter").write_bytes(b"x")   # brought back by an earlier run
    assert not tunes("socs.yml") and tunes("socs.yml", tuning=True)
