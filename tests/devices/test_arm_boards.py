"""`build` and `run --validate` on real ARM userlands: the loopback sshd's board runs Debian's
aarch64 or armhf python3 with numpy under qemu-user (arm_board.py, docs/test_board.md).

What an x86 board cannot show: the runner and the runtime on an ARM numpy (its own OpenBLAS
builds; on armhf 32-bit pointers and Debian's numpy 1.x), the build's ABI matching the board's
`uname -m`, and outputs equal to the host engine's; on the aarch64 board with numba, the fast
kernels' loops compiled there (the corpus models: test_arm_boards_zoo.py). Emulated: a run
takes seconds of qemu time (numpy's import most of it); the timings are not a board's speed.
"""
from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import numpy as np
import pytest

from mace.runtime.engine import create_engine
from tests.cli_helpers import cli, digits_model, workdir, write_deployment
from tests.devices.helpers import build, fails, ok, ssh_entry, write_devices

BOARDS = {  # ABI of the build -> (fixture of the board's python, what its uname -m says)
    "arm64": ("aarch64_python", "aarch64"),
    "armhf": ("armhf_python", "armv7l"),
}


def _host_output(work, model: str) -> np.ndarray:
    image = np.load(work / "digits" / "inputs" / "image_0.npy").astype(np.float32).reshape(1, 8, 8, 1)
    return create_engine(work / "out" / "digits" / "model" / f"{model}.pb").run({"image": image})["prob"]


@pytest.mark.parametrize("abi", list(BOARDS))
def test_digits_float_and_quantized_validate_on_an_arm_board(abi, request, tmp_path, sshd):
    fixture, machine = BOARDS[abi]
    python = request.getfixturevalue(fixture)
    board_numpy = json.loads((python.parent.parent / "manifest.json").read_text())["numpy"]
    work = workdir(tmp_path)
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(), "digits_q": digits_model(
        quantize=1, quantize_calibration_data="digits/inputs")}, target_abis=[abi])
    build(work)
    write_devices(work / "devices.yml",
                  board=ssh_entry(sshd, work / "remote", python, target_abis=[abi], models=f"qemu {machine}"))
    for model, threshold in (("digits_cnn", 0.999), ("digits_q", 0.98)):
        started = time.monotonic()
        r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", f"--model_name={model}", "--validate",
                   "--round=2", f"--output_dir=res_{model}", f"--json={model}.json", "--device_timeout=600",
                   cwd=work, timeout=900))
        seconds = time.monotonic() - started
        assert f"Run model {model} on board (cpu)" in r.stdout and "Similarity test passed" in r.stdout
        header = next(ln for ln in r.stdout.splitlines() if ln.startswith("Device board ("))
        assert f"ABI {abi}): Python 3." in header and machine in header, header
        report = json.loads((work / f"{model}.json").read_text())["models"][0]
        # the one note says which kernels ran there (numba is not on these boards: numpy paths)
        info_ops = sum(report["device_info"]["kernels"].values())
        assert report["passed"] and report["device"] == "board", report
        assert len(report["notes"]) == 1 and report["notes"][0].startswith("device board ran "), report["notes"]
        assert "numpy paths (no numba there)" in report["notes"][0] or "cpu:fast" not in report["notes"][0]
        info = report["device_info"]
        assert info["machine"] == machine and info["abi"] == abi and info["numpy"] == board_numpy, info
        assert info["numba"] == "" and info["cores"] >= 1 and info_ops > 0 and "cpu" in info, info
        assert ", no numba, " in header, header
        # what the runner itself said there (the loopback board's files are on this machine)
        env = json.loads((work / "remote" / "digits" / f"{model}.outputs" / "mace_run.json").read_text())
        env = env["environment"]
        assert env["machine"] == machine and env["numpy"] == board_numpy and env["protobuf"] == "python", env
        # the numbers: the board's output against the host engine's, within the validation
        # threshold of the model (CPU 0.999, quantized 0.98), and in fact close
        expected, got = _host_output(work, model), np.load(work / f"res_{model}" / "prob.npy")
        assert got.shape == expected.shape and got.dtype == expected.dtype
        cosine = float(np.dot(got.ravel(), expected.ravel()) / (np.linalg.norm(got) * np.linalg.norm(expected)))
        assert cosine >= threshold, cosine
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        print(f"\n{model} on the {abi} board ({machine}, numpy {board_numpy}): `run --validate` {seconds:.1f} s, "
              f"init {report['timing']['init_ms']:.0f} ms, round {report['timing']['avg_ms']:.1f} ms under qemu "
              "(not a board's speed)")
    if abi == "arm64":  # MACE's benchmark tables measured on the board (one emulated run only)
        started = time.monotonic()
        r = ok(cli("benchmark", "--config=deploy.yml", "--build_dir=out", "--model_name=digits_cnn", "--round=2",
                   "--json=b.json", "--device_timeout=600", cwd=work, timeout=900))
        assert "Benchmark model digits_cnn (cpu) on device board (" in r.stdout and "aarch64" in r.stdout
        assert "Sort by Run Order" in r.stdout and "Stat by Op Type" in r.stdout
        data = json.loads((work / "b.json").read_text())["models"][0]
        assert data["device_info"]["machine"] == "aarch64" and data["run_with_statistics"]["avg"] > 0
        print(f"benchmark on the arm64 board: {time.monotonic() - started:.1f} s under qemu")


@pytest.mark.parametrize("abi", list(BOARDS))
def test_a_bert_style_encoder_validates_on_an_arm_board(abi, request, tmp_path, sshd):
    # int64 token ids, Gather, attention with the mask, LayerNormalization, Erf: on armhf numpy's
    # default int and intp are 32 bits
    import onnx

    from tests.cli_helpers import sha256
    from tests.ops.onnx_encoder import bert_encoder, token_batch

    fixture, machine = BOARDS[abi]
    python = request.getfixturevalue(fixture)
    model, outputs = bert_encoder(opset=17, newer=True, layers=1)
    onnx.save(model, str(tmp_path / "encoder.onnx"))
    ids, mask = token_batch(batch=2, seq=8)
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "mask.npy", mask)
    entry = {"platform": "onnx", "model_file_path": "encoder.onnx",
             "model_sha256_checksum": sha256(tmp_path / "encoder.onnx"), "runtime": "cpu",
             "subgraphs": [{"input_tensors": ["input_ids", "attention_mask"], "input_shapes": ["2,8", "2,8"],
                            "input_data_types": "int64", "input_data_formats": "NONE", "output_tensors": outputs,
                            "output_shapes": ["2,8,32", "2,32", "2,32"], "output_data_formats": "NONE",
                            "validation_inputs_data": ["ids.npy", "mask.npy"]}]}
    write_deployment(tmp_path / "deploy.yml", {"encoder": entry}, library="encoder", target_abis=[abi])
    build(tmp_path)
    write_devices(tmp_path / "devices.yml", board=ssh_entry(sshd, tmp_path / "remote", python, target_abis=[abi]))
    started = time.monotonic()
    r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--validate", "--output_dir=res", "--json=r.json",
               "--device_timeout=600", cwd=tmp_path, timeout=900))
    seconds = time.monotonic() - started
    report = json.loads((tmp_path / "r.json").read_text())["models"][0]
    assert report["passed"] and report["device_info"]["machine"] == machine
    assert len(report["notes"]) == 1 and report["notes"][0].startswith("device board ran "), report["notes"]
    assert [v["name"] for v in report["validation"]] == outputs
    expected = create_engine(tmp_path / "out" / "encoder" / "model" / "encoder.pb").run(
        {"input_ids": ids, "attention_mask": mask})
    for name in outputs:
        got = np.load(tmp_path / "res" / f"{name}.npy")
        assert got.dtype == expected[name].dtype and got.shape == expected[name].shape, name
        np.testing.assert_allclose(got, expected[name], rtol=1e-4, atol=1e-5, err_msg=name)
    print(f"\nencoder on the {abi} board: `run --validate` {seconds:.1f} s under qemu")


def test_an_x86_board_listed_as_arm64_is_refused_and_runs_the_host_build(tmp_path, sshd, numpy_only_python):
    # the loopback board with this machine's Python, listed as arm64: its CPU does not run that build
    work = workdir(tmp_path)
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model()}, target_abis=["arm64"])
    build(work)
    write_devices(work / "devices.yml", board=ssh_entry(sshd, work / "remote", numpy_only_python,
                                                        target_abis=["arm64"]))
    r = fails(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=work),
              f"error: device board: connect: its {numpy_only_python} reports a {platform.machine()} CPU "
              f"(platform.machine()), which does not run a build for ABI arm64: list host (this machine's CPU) "
              f"in its target_abis (devices.yml) and in the deployment file's target_abis, then build and run again")
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (work / "remote" / "digits" / "mace_run.pyz").exists()   # refused before the push
    # the fix it names: the board runs the host build, picked by its name
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model()}, target_abis=["host"])
    build(work)
    write_devices(work / "devices.yml", board=ssh_entry(sshd, work / "remote", numpy_only_python,
                                                        target_abis=["host"]))
    r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--device=board", "--validate", cwd=work))
    assert "ABI host): Python 3." in r.stdout and "Similarity test passed" in r.stdout, r.stdout


def test_an_arm_board_that_cannot_be_made_says_why(monkeypatch, tmp_path):
    from tests.devices import arm_board

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(arm_board.shutil, "which", lambda name: None)
    assert arm_board.arm_python("arm64") == (
        None, "apt-get is not available (the aarch64 test board is made from Debian packages)")
    monkeypatch.setattr(arm_board.shutil, "which", lambda name: f"/usr/bin/{name}" if "apt" in name or "dpkg" in name
                        else None)
    monkeypatch.setattr(arm_board.os.path, "isfile", lambda path: False)
    monkeypatch.setattr(arm_board.os, "geteuid", lambda: 1000)
    assert arm_board.arm_python("armhf") == (
        None, "qemu-arm-static is missing and apt-get as root is not available to install qemu-user-static")
    assert not list(tmp_path.iterdir())  # nothing half made


def test_the_fast_kernels_compile_with_numba_on_the_aarch64_board(tmp_path, sshd, aarch64_numba_python):
    # the aarch64 board with PyPI's aarch64 numba: the runner unpacks its loops onto the board's
    # disk (~/.cache/mace_run/loops-aarch64-...), numba compiles them there for the board's CPU
    # (LLVM's portable code: an x86 instruction would not run under qemu-aarch64), and the float
    # and the int8 fast kernels run compiled; the outputs equal the host engine's
    board_numba = json.loads((aarch64_numba_python.parent.parent / "manifest.json").read_text())["numba"]
    work = workdir(tmp_path)
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(), "digits_q": digits_model(
        quantize=1, quantize_calibration_data="digits/inputs")}, target_abis=["arm64"])
    build(work)
    write_devices(work / "devices.yml", board=ssh_entry(sshd, work / "remote", aarch64_numba_python,
                                                        target_abis=["arm64"], models="qemu aarch64 numba"))
    for model, fast in (("digits_cnn", "cpu:fast"), ("digits_q", "int8:fast")):
        started = time.monotonic()
        r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", f"--model_name={model}", "--validate",
                   f"--output_dir=res_{model}", f"--json={model}.json", "--device_timeout=900",
                   cwd=work, timeout=1200))
        seconds = time.monotonic() - started
        assert "Similarity test passed" in r.stdout and f", numba {board_numba}, aarch64" in r.stdout, r.stdout
        report = json.loads((work / f"{model}.json").read_text())["models"][0]
        info = report["device_info"]
        assert report["passed"] and info["machine"] == "aarch64" and info["numba"] == board_numba, info
        assert info["compiled"] and info["kernels"].get(fast, 0) > 0, info
        target = info["jit_target"]
        assert target and not any(x86 in target for x86 in ("x86", "skylake", "haswell", "znver")), target
        note = report["notes"][0]
        assert note.startswith("device board ran ") and f"compiled with numba {board_numba} for {target}" in note
        assert "numpy paths" not in note, note
        env = json.loads((work / "remote" / "digits" / f"{model}.outputs" / "mace_run.json").read_text())
        folder = env["engine"]["loops"]["folder"]
        assert "/mace_run/loops-aarch64-py3." in folder and Path(folder, "mace/ops/fast/_loops.py").is_file()
        expected, got = _host_output(work, model), np.load(work / f"res_{model}" / "prob.npy")
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
        print(f"\n{model} on the aarch64 board with numba {board_numba} ({target}): `run --validate` "
              f"{seconds:.1f} s (compiling on the first run; cached in {folder}), under qemu (not a board's speed)")
