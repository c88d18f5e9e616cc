"""`build` and `run` on a board over ssh: a real sshd on 127.0.0.1 plays the board.

The board's Python is a venv holding numpy and nothing else, which is what the runner claims
to need. Each failure ends with one message naming the device and the step, exit status 1,
and the device's lock free again.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from filelock import FileLock

from mace.devices.locks import is_locked, lock_path
from mace.devices.ssh import SshDevice
from mace.runtime.engine import create_engine
from tests.cli_helpers import ROOT, cli
from tests.devices.helpers import board_work, build, fails, ok, ssh_entry, write_devices
from tests.devices.ssh_server import free_port, keygen


@pytest.fixture(scope="module")
def built(tmp_path_factory, sshd):
    """A work folder with the digits model built for the host into out/ (the board is this machine's CPU)."""
    work = board_work(tmp_path_factory.mktemp("ssh"))
    build(work)
    return work


def run(work, *args, timeout=120):
    """`run` on the board (--device=board unless args name the devices: the build is the host's)."""
    pick = [] if any(a.startswith("--device=") for a in args) else ["--device=board"]
    return cli("run", "--config=deploy.yml", "--build_dir=out", *pick, *args, cwd=work, timeout=timeout)


def board(server, address="127.0.0.1") -> SshDevice:
    """The device as the library sees it (for its lock)."""
    return SshDevice(name="board", kind="ssh", address=address, username=server.user, port=server.port)


def devices_file(work: Path, name: str, server, python, **overrides) -> str:
    write_devices(work / name, board=ssh_entry(server, work / f"{name}.remote", python, **overrides))
    return f"--device_yml={name}"


def test_build_then_validate_on_a_board_with_only_numpy(built, sshd, numpy_only_python):
    # ./devices.yml is found without a flag, as in MACE
    write_devices(built / "devices.yml", board=ssh_entry(sshd, built / "remote", numpy_only_python))
    r = ok(run(built, "--validate", "--round=3", "--output_dir=res", "--json=r.json"))
    assert "Run model digits_cnn on board (cpu)" in r.stdout
    assert f"Device board (ssh {sshd.user}@127.0.0.1:{sshd.port}, ABI host): Python" in r.stdout
    assert "Similarity test passed" in r.stdout
    report = json.loads((built / "r.json").read_text())["models"][0]
    assert report["device"] == "board" and report["passed"] and report["timing"]["rounds"] == 3
    assert report["device_info"]["numpy"] == np.__version__ and report["device_info"]["abi"] == "host"
    # per-board facts: the CPU (this machine's, the board being loopback), cores, numba, kernels that ran
    from mace.devices.runner import cpu_model
    info = report["device_info"]
    assert info["cpu"] == cpu_model() != "" and info["cores"] >= 1 and "numba" in info, info
    # the runner bundle carries no numba loops: its fast kernels take their numpy paths
    assert info["kernels"] == {"cpu:fast": 4, "cpu": 1}, info["kernels"]
    assert ("device board ran 4 ops on fast kernels, numpy paths (no numba there) (cpu:fast), 1 op on numpy "
            "reference kernels (cpu)") in report["notes"], report["notes"]
    assert f", {cpu_model()} x{info['cores']}, SoC rk3399" in r.stdout, r.stdout
    # the board got the runner, the model and the input; its outputs came back
    on_board = {p.name for p in (built / "remote" / "digits").iterdir()}
    assert {"mace_run.pyz", "digits_cnn.pb", "digits_cnn.data", "digits_cnn.input0.npy"} <= on_board
    image = np.load(built / "digits" / "inputs" / "image_0.npy").astype(np.float32).reshape(1, 8, 8, 1)
    expected = create_engine(built / "out" / "digits" / "model" / "digits_cnn.pb").run({"image": image})["prob"]
    np.testing.assert_allclose(np.load(built / "res" / "prob.npy"), expected, rtol=1e-5, atol=1e-6)
    assert (built / "out" / "known_hosts").read_text().strip()  # trusted here, not in ~/.ssh
    assert not is_locked(board(sshd))


def test_restart_round_and_raw_outputs_on_the_board(built, sshd, numpy_only_python):
    flag = devices_file(built, "restart.yml", sshd, numpy_only_python)
    r = ok(run(built, flag, "--restart_round=3", "--round=1", "--cpu_wait_policy=short",
               "--output_dir=raw_out", "--output_format=raw"))
    note = next(ln for ln in r.stdout.splitlines() if "restart_round 3" in ln)
    assert "engine created 3 times on device board" in note and note.count(",") >= 2
    # MACE's raw output files come back from a board as from a host run
    raw = np.fromfile(built / "raw_out" / "model_out_prob", np.float32)
    assert raw.size == 10 and abs(float(raw.sum()) - 1.0) < 1e-4


def test_unreachable_port(built, sshd, numpy_only_python):
    port = free_port()
    flag = devices_file(built, "closed.yml", sshd, numpy_only_python, port=port)
    fails(run(built, flag), "device board: connect:", "connection refused")
    lock_path(replace(board(sshd), port=port)).unlink()  # released: the file alone is left


def test_wrong_key_is_refused(built, sshd, numpy_only_python):
    flag = devices_file(built, "wrong_key.yml", sshd, numpy_only_python, identity_file=str(sshd.wrong_key))
    fails(run(built, flag), "device board: connect:", "the login was refused", "authorized_keys")
    assert not is_locked(board(sshd))


def test_python_without_numpy(built, sshd, bare_python):
    flag = devices_file(built, "no_numpy.yml", sshd, bare_python)
    fails(run(built, flag), "device board: connect:", "numpy is missing", str(bare_python))
    assert not is_locked(board(sshd))


def test_missing_python(built, sshd):
    flag = devices_file(built, "no_python.yml", sshd, "/nonexistent/python3")
    fails(run(built, flag), "device board: connect:", "'/nonexistent/python3' is not found on the device")


def test_a_corrupt_model_crashes_the_runner(built, sshd, numpy_only_python):
    shutil.copytree(built / "out", built / "corrupt")
    (built / "corrupt" / "digits" / "model" / "digits_cnn.pb").write_bytes(b"\x0bnot a graph")
    flag = devices_file(built, "crash.yml", sshd, numpy_only_python)
    r = cli("run", "--config=deploy.yml", "--build_dir=corrupt", "--device=board", flag, cwd=built)
    fails(r, "device board: run digits_cnn: the runner failed (exit 1):", "not a valid model graph file")
    assert not is_locked(board(sshd))


def _runner_processes(marker: str) -> list:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and "mace_run.pyz" in cmdline:
            found.append(pid)
    return found


def test_a_run_past_the_timeout_stops_on_the_board(built, sshd, numpy_only_python):
    flag = devices_file(built, "slow.yml", sshd, numpy_only_python)
    start = time.monotonic()
    r = run(built, flag, "--device_timeout=3", "--round=100000000")
    fails(r, "device board: run digits_cnn: timed out", "timed out after 3 s")
    assert time.monotonic() - start < 30
    time.sleep(0.5)
    assert _runner_processes(str(built / "slow.yml.remote")) == []  # nothing left running there
    assert not is_locked(board(sshd))


def test_a_host_that_never_answers_times_out(built, sshd, numpy_only_python):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)  # accepts connections (the kernel does), never says a word
    try:
        flag = devices_file(built, "silent.yml", sshd, numpy_only_python, port=silent.getsockname()[1])
        start = time.monotonic()
        r = fails(run(built, flag, "--device_timeout=2"), "device board: connect: ")
        # whichever gives up first: our time limit, or ssh's ConnectTimeout (set from it)
        assert "timed out after 2 s" in r.stderr or "no ssh server answered in time" in r.stderr, r.stderr
        assert time.monotonic() - start < 15
        silent_board = replace(board(sshd), port=silent.getsockname()[1])
        assert not is_locked(silent_board)
        lock_path(silent_board).unlink()
    finally:
        silent.close()


def test_a_second_run_waits_for_the_board(built, sshd, numpy_only_python):
    flag = devices_file(built, "wait.yml", sshd, numpy_only_python)
    held = FileLock(str(lock_path(board(sshd))))
    held.acquire()
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "converter.py"), "run", "--config=deploy.yml",
                             "--build_dir=out", "--device=board", flag], cwd=built, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = _read_line_with(proc.stderr, "waiting for device board", timeout=30)
        assert "another run is using it" in line
        assert proc.poll() is None  # still waiting
    finally:
        held.release()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Run model digits_cnn on board" in out


def _read_line_with(stream, text: str, timeout: float) -> str:
    found = []

    def read():
        for line in stream:
            if text in line:
                found.append(line)
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    assert found, f"no line with {text!r} within {timeout} s"
    return found[0]


def test_two_boards_run_in_parallel_and_do_not_wait_for_each_other(built, sshd, numpy_only_python):
    write_devices(built / "two.yml",
                  board=ssh_entry(sshd, built / "two.board", numpy_only_python),
                  board2=ssh_entry(sshd, built / "two.board2", numpy_only_python, address="localhost"))
    held = FileLock(str(lock_path(board(sshd))))
    with held:  # board is busy: board2 does not wait for it
        r = ok(run(built, "--device_yml=two.yml", "--device=board2", "--device_timeout=60"))
        assert "waiting" not in r.stderr and "Run model digits_cnn on board2" in r.stdout
    r = ok(run(built, "--device_yml=two.yml", "--device=board,board2", "--validate", "--output_dir=both"))
    for name in ("board", "board2"):
        assert f"Run model digits_cnn on {name} (cpu)" in r.stdout
        assert (built / "both" / name / "prob.npy").is_file()


def test_ctrl_c_stops_the_run_on_the_board_too(built, sshd, numpy_only_python):
    flag = devices_file(built, "interrupt.yml", sshd, numpy_only_python)
    marker = str(built / "interrupt.yml.remote")
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "converter.py"), "run", "--config=deploy.yml",
                             "--build_dir=out", "--device=board", flag, "--round=100000000"], cwd=built,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not _runner_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _runner_processes(marker), "the runner never started on the board"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 10  # the runner notices that its ssh session is gone
    while _runner_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _runner_processes(marker) == []
    assert not is_locked(board(sshd))


def test_a_changed_host_key_is_refused(built, sshd, numpy_only_python, tmp_path):
    flag = devices_file(built, "host_key.yml", sshd, numpy_only_python)
    known_hosts = built / "out" / "known_hosts"
    before = known_hosts.read_text() if known_hosts.exists() else None
    other = keygen(tmp_path / "other_host_key").with_suffix(".pub").read_text().split()[:2]
    known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {' '.join(other)}\n")
    try:
        fails(run(built, flag), "device board: connect:", "host key changed", str(known_hosts))
    finally:
        if before is None:
            known_hosts.unlink()
        else:
            known_hosts.write_text(before)


def test_hyphenated_library_and_model_names_run_on_the_board(tmp_path, sshd, numpy_only_python):
    # MACE's own names (mobilenet-v1, kws-tc_resnet8): folders here and on the board, as given
    from tests.cli_helpers import digits_model, workdir, write_deployment

    work = workdir(tmp_path)
    write_deployment(work / "deploy.yml", {"digits-cnn.v1": digits_model()}, library="digits-v1.0",
                     target_abis=["host"])
    build(work)
    write_devices(work / "devices.yml", board=ssh_entry(sshd, work / "remote", numpy_only_python))
    r = ok(run(work, "--validate"))
    assert "Run model digits-cnn.v1 on board (cpu)" in r.stdout and "Similarity test passed" in r.stdout
    assert {"digits-cnn.v1.pb", "digits-cnn.v1.data"} <= {p.name for p in (work / "remote" / "digits-v1.0").iterdir()}
