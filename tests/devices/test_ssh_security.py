"""Nothing a deployment file, a devices .yml or a model names runs on the board (issue 18, items 2-3).

Against the real sshd of the device tests, with sftp and without it (there scp must speak its
legacy protocol, where the remote shell sees every path): tensor names holding `$(...)`, backticks
and `;` are transferred as names, and library_name / work_dir payloads are refused before any
connection. A board without an sftp server is found by a probe, once, and remembered.
"""
from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from mace.devices import process
from mace.devices.ssh import SshDevice
from tests.cli_helpers import cli, save_onnx, workdir, write_deployment
from tests.devices.helpers import board_work, build, fails, ok, ssh_entry, write_devices


@pytest.fixture(params=["sftp", "legacy"])
def server(request):
    """The test sshd (scp over sftp), or the one without sftp (scp -O: the remote shell sees paths)."""
    return request.getfixturevalue("sshd" if request.param == "sftp" else "sshd_no_sftp")


def _hostile_outputs(tag: str) -> tuple:
    """Output names, and a glob for the files their payloads would create (relative names: the remote
    shell starts in $HOME)."""
    outputs = [f"p$(touch$IFS'pwned_{tag}_a')", f"q`touch pwned_{tag}_b`;touch pwned_{tag}_c",
               f"r*' \"; touch pwned_{tag}_d; '"]
    return outputs, f"pwned_{tag}_*"


def test_hostile_output_names_are_only_names_on_the_board(tmp_path, server, numpy_only_python):
    _hostile_run(tmp_path, server, numpy_only_python)


def test_hostile_output_names_with_an_scp_that_speaks_legacy_by_default(tmp_path, sshd, numpy_only_python):
    # OpenSSH before 9.0 (Debian 11, Ubuntu 20.04): plain `scp` is the legacy protocol, so the board's
    # shell sees the remote paths that were escaped for sftp only. No model name may be in them.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scp = bin_dir / "scp"
    scp.write_text(f"#!/bin/sh\nexec {shutil.which('scp')} -O \"$@\"\n")
    scp.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    _hostile_run(tmp_path, sshd, numpy_only_python, env)


def _hostile_run(tmp_path, server, numpy_only_python, env=None):
    tag = uuid.uuid4().hex[:10]
    outputs, planted = _hostile_outputs(tag)
    work = tmp_path / "work"
    work.mkdir()
    nodes = [helper.make_node(op, ["x"], [out], name=f"n{i}")
             for i, (op, out) in enumerate(zip(("Relu", "Sigmoid", "Tanh"), outputs))]
    checksum = save_onnx(work / "m.onnx", nodes, [("x", [1, 4])], [(o, [1, 4]) for o in outputs])
    sg = {"input_tensors": ["x"], "input_shapes": "1,4", "input_data_formats": "NONE",
          "output_tensors": outputs, "output_data_formats": "NONE"}
    write_deployment(work / "deploy.yml", {"m": {"platform": "onnx", "model_file_path": "m.onnx",
                                                 "model_sha256_checksum": checksum, "subgraphs": [sg]}},
                     library="hostile", target_abis=["host"])
    build(work)
    remote = work / "remote"
    write_devices(work / "devices.yml", board=ssh_entry(server, remote, numpy_only_python))
    r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", "--device=board", "--validate", "--output_dir=res",
               cwd=work, env=env))
    assert "Similarity test passed" in r.stdout
    folders = [Path.home(), work, remote, remote / "hostile", Path("/tmp")]
    assert [str(p) for f in folders for p in f.glob(planted)] == []
    # on the board the files are output<i>.npy: the names stay in the runner's JSON
    assert sorted(p.name for p in (remote / "hostile" / "m.outputs").iterdir()) == \
        ["mace_run.json", "output0.npy", "output1.npy", "output2.npy"]
    # the pulled outputs are the model's: compare with onnxruntime on the input the board got
    x = np.load(remote / "hostile" / "m.input0.npy")
    ref = ort.InferenceSession(str(work / "m.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    pulled = sorted((work / "res").glob("*.npy"))
    assert len(pulled) == 3
    for out, expected in zip(outputs, ref):
        got = [np.load(p) for p in pulled if p.name.startswith(out[:2])]
        assert len(got) == 1
        np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("work_dir", ["/tmp/w$(touch /tmp/{m})", "/tmp/w`touch /tmp/{m}`", "/tmp/w;touch /tmp/{m}",
                                      "/tmp/w dir", "/tmp/w*"])
def test_work_dir_with_shell_characters_is_refused(tmp_path, sshd, numpy_only_python, work_dir):
    marker = f"pwned_{uuid.uuid4().hex[:10]}"
    work = board_work(tmp_path)
    write_devices(work / "bad.yml", board=ssh_entry(sshd, work_dir.format(m=marker), numpy_only_python))
    r = fails(cli("run", "--config=deploy.yml", "--build_dir=out", "--device_yml=bad.yml", "--device=board",
                  cwd=work),
              "bad.yml: devices.board.work_dir:", "characters a shell would interpret")
    assert "digits_cnn" not in r.stdout and not (Path("/tmp") / marker).exists()


def test_library_name_payload_never_reaches_the_board(tmp_path, sshd, numpy_only_python):
    marker = f"pwned_{uuid.uuid4().hex[:10]}"
    work = workdir(tmp_path)
    write_deployment(work / "bad.yml", {}, library=f"L$(touch$IFS'{marker}')", target_abis=["host"])
    write_devices(work / "devices.yml", board=ssh_entry(sshd, work / "remote", numpy_only_python))
    for command in ("build", "run"):
        pick = ["--device=board"] if command == "run" else []
        fails(cli(command, "--config=bad.yml", "--build_dir=out", *pick, cwd=work), "bad.yml: library_name:",
              "not a safe file name")
    assert not (Path.home() / marker).exists() and not (work / "remote").exists()


# ---- boards without an sftp server (item 3) --------------------------------------------------
def _counting(monkeypatch) -> list:
    calls = []
    real = process.run

    def run(argv, *args, **kwargs):
        calls.append(argv)
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(process, "run", run)
    return calls


def _device(server, tmp_path) -> SshDevice:
    return SshDevice(name="board", kind="ssh", address="127.0.0.1", username=server.user, port=server.port,
                     identity_file=str(server.key), known_hosts=tmp_path / "known_hosts")


def _round_trip(device, tmp_path, tag: str) -> None:
    src = tmp_path / f"{tag}.bin"
    src.write_bytes(tag.encode() * 100)
    remote, back = tmp_path / f"remote_{tag}", tmp_path / f"back_{tag}"
    remote.mkdir()
    back.mkdir()
    device.push([src], str(remote), 30, "push")
    device.pull([str(remote / src.name)], back, 30, "pull")
    assert (back / src.name).read_bytes() == src.read_bytes()


def test_a_board_without_sftp_is_probed_once_and_remembered(tmp_path, sshd_no_sftp, monkeypatch):
    calls = _counting(monkeypatch)
    device = _device(sshd_no_sftp, tmp_path)
    _round_trip(device, tmp_path, "first")
    assert device.legacy_scp is True
    probes = [c for c in calls if c[0] == "ssh" and "-s" in c]
    assert len(probes) == 1 and probes[0][-1] == "sftp"
    # scp over sftp failed once ("scp: Connection closed"), then every transfer went legacy at once
    plain = [c for c in calls if c[0] == "scp" and "-O" not in c]
    assert len(plain) == 1
    calls.clear()
    _round_trip(device, tmp_path, "second")
    assert [c[0] for c in calls] == ["scp", "scp"] and all("-O" in c for c in calls)


def test_a_board_with_sftp_is_never_probed(tmp_path, sshd, monkeypatch):
    calls = _counting(monkeypatch)
    device = _device(sshd, tmp_path)
    _round_trip(device, tmp_path, "only")
    assert device.legacy_scp is False and [c[0] for c in calls] == ["scp", "scp"]
    assert not any("-O" in c for c in calls)


def test_a_missing_file_is_not_taken_for_a_missing_sftp_server(tmp_path, sshd, sshd_no_sftp):
    for server in (sshd, sshd_no_sftp):
        device = _device(server, tmp_path)
        with pytest.raises(Exception) as info:
            device.pull([str(tmp_path / "no_such_file.npy")], tmp_path, 30, "pull out")
        assert "device board: pull out:" in str(info.value) and "No such file" in str(info.value)


def test_local_paths_with_a_colon_stay_local(tmp_path, sshd, monkeypatch):
    # scp reads `a:b/c` as host `a`; the local side must reach scp as an absolute path
    monkeypatch.chdir(tmp_path)
    odd = Path("odd:dir")
    odd.mkdir()
    device = _device(sshd, tmp_path)
    (odd / "x.bin").write_bytes(b"payload")
    remote = tmp_path / "remote_colon"
    remote.mkdir()
    device.push([odd / "x.bin"], str(remote), 30, "push")
    back = Path("back:dir")
    back.mkdir()
    device.pull([str(remote / "x.bin")], back, 30, "pull")
    assert (back / "x.bin").read_bytes() == b"payload"


def test_a_quote_in_the_known_hosts_path_is_refused_before_ssh_runs(tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    device = SshDevice(name="board", kind="ssh", address="127.0.0.1", username="u", port=22,
                       known_hosts=tmp_path / 'b"ad' / "known_hosts")
    with pytest.raises(Exception) as info:
        device.shell(["true"], 5, "probe")
    assert "device board" in str(info.value) and "UserKnownHostsFile" in str(info.value)
    assert calls == []
