"""Device hints are the command that fixes the problem: each is run exactly as printed
(tests/cli_helpers.run_hint), then the user's `run` works on the board (a real sshd on
127.0.0.1). The case of issue 37: a deployment file for [arm64-v8a] (a phone's ABI) and a board
that offers another ABI (the loopback board: this machine's CPU, `host`)."""
from __future__ import annotations

import onnx

from tests.cli_helpers import cli, digits_model, hint_commands, run_hint, sha256, write_deployment
from tests.devices.helpers import board_work, build, fails, no_adb_env, ok, ssh_entry, write_devices


def run(work, *args):
    return cli("run", "--config=deploy.yml", "--build_dir=out", *args, cwd=work, env=no_adb_env())


def board(work, sshd, python):
    write_devices(work / "devices.yml", board=ssh_entry(sshd, work / "remote", python, target_abis=["host"]))


def test_a_board_of_another_abi_gets_the_build_for_its_abi(tmp_path, sshd, numpy_only_python):
    work = board_work(tmp_path, abis=("arm64-v8a",))
    build(work)
    board(work, sshd, numpy_only_python)
    # without a flag: no device fits, and the message says how to use the board anyway
    first = fails(run(work), "no device offers target_abis [arm64-v8a]", "add host to target_abis",
                  "then this command again with --target_abis=host --device=board").stderr
    # with the flags: the build has no runner for the host; the build it names is for the host
    err = fails(run(work, "--target_abis=host", "--device=board"), "has no runner for ABI host").stderr
    assert hint_commands(err) == hint_commands(first) and "--target_abis=host" in hint_commands(err)[0]
    ok(run_hint(err, cwd=work))
    r = ok(run(work, "--target_abis=host", "--device=board", "--validate"))
    assert "Run model digits_cnn on board" in r.stdout


def test_no_build_for_the_board_the_hint_builds(tmp_path, sshd, numpy_only_python):
    work = board_work(tmp_path)
    ok(cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work))
    board(work, sshd, numpy_only_python)
    err = fails(run(work, "--device=board"), "build.json is missing").stderr
    ok(run_hint(err, cwd=work))
    ok(run(work, "--device=board"))


def test_a_model_changed_since_the_build_the_note_rebuilds(tmp_path, sshd, numpy_only_python):
    work = board_work(tmp_path)
    build(work)
    board(work, sshd, numpy_only_python)
    model = onnx.load(str(work / "digits" / "digits_cnn.onnx"))
    model.doc_string = "the same graph, other bytes"
    onnx.save(model, str(work / "digits" / "digits_cnn.onnx"))
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model(
        model_sha256_checksum=sha256(work / "digits" / "digits_cnn.onnx"))}, target_abis=["host"])
    r = ok(run(work, "--device=board"))
    assert "changed since it was converted" in r.stdout
    ok(run_hint(r.stdout, cwd=work))
    assert "changed since it was converted" not in ok(run(work, "--device=board")).stdout
