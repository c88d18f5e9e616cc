"""`benchmark` on a board over ssh (the real sshd of conftest.py) and on a phone (the stand-in adb).

The runner measures MACE's tables on the device with mace.report.benchmark, the code a host
benchmark runs, and sends them back as JSON; the host prints them with the host's renderer,
headed by the device. Failures end like those of `run`: one message naming the device and the
step, exit status 1, the lock free again.
"""
from __future__ import annotations

import json
import shutil
import time

import pytest

from mace.devices.adb import AdbDevice
from mace.devices.locks import is_locked, lock_path
from mace.devices.ssh import SshDevice
from mace.ir.model_io import load_net
from mace.report.benchmark import BenchmarkResult
from mace.runtime.affinity import policy_cores
from tests.cli_helpers import cli
from tests.devices.helpers import board_work, build, fails, ok, ssh_entry, write_devices
from tests.devices.ssh_server import free_port

SECTIONS = ["Warm Up", "Run without statistics", "Run with statistics", "Sort by Run Order",
            "Sort by Computation Time", "Stat by Op Type", "Stat by MACs(Multiply-Accumulation)",
            "Summary of Ops' Stat"]


@pytest.fixture(scope="module")
def built(tmp_path_factory, sshd):
    """The digits model built for the host into out/ (the board is this machine's CPU)."""
    work = board_work(tmp_path_factory.mktemp("bench"))
    build(work)
    return work


def benchmark(work, *args, env=None, build_dir="out"):
    """`benchmark` on the board (--device=board unless args name the devices: the build is the host's)."""
    pick = [] if any(a.startswith("--device=") for a in args) else ["--device=board"]
    return cli("benchmark", "--config=deploy.yml", f"--build_dir={build_dir}", *pick, *args, cwd=work, env=env)


def board(server, port=None) -> SshDevice:
    return SshDevice(name="board", kind="ssh", address="127.0.0.1", username=server.user,
                     port=port or server.port)


def devices_file(work, name: str, server, python, **overrides) -> str:
    write_devices(work / name, board=ssh_entry(server, work / f"{name}.remote", python, **overrides))
    return f"--device_yml={name}"


def section(text: str, title: str) -> list:
    """The rows (lists of cells) of the MACE-style table titled `title`."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == title)
    rows = []
    for ln in lines[start + 4:]:
        if ln.startswith("-"):
            return rows
        rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return rows


def op_names(work, build_dir="out") -> list:
    return [op.name for op in load_net(work / build_dir / "digits" / "model" / "digits_cnn.pb").op]


def test_benchmark_on_a_board_prints_the_tables_measured_there(built, sshd, numpy_only_python):
    flag = devices_file(built, "bench.yml", sshd, numpy_only_python)
    r = ok(benchmark(built, flag, "--round=3", "--warmup=2", "--num_threads=1", "--cpu_affinity_policy=1",
                     "--json=b.json"))
    address = f"ssh {sshd.user}@127.0.0.1:{sshd.port}"
    assert f"Device board ({address}, ABI host): Python" in r.stdout and "SoC rk3399" in r.stdout
    assert f"Benchmark model digits_cnn (cpu) on device board ({address}, ABI host, SoC rk3399, " in r.stdout
    positions = [r.stdout.index(title) for title in SECTIONS]
    assert positions == sorted(positions)
    names = op_names(built)
    rows = section(r.stdout, "Sort by Run Order")
    assert [row[-1] for row in rows] == names  # every op of the model, in run order
    assert sum(float(row[3]) for row in rows) > 0
    assert sum(int(t[1]) for t in section(r.stdout, "Stat by Op Type")) == len(names)
    assert section(r.stdout, "Stat by MACs(Multiply-Accumulation)")[0][:2] == ["25,600", "3"]
    assert section(r.stdout, "Warm Up")[0][0] == "2" and section(r.stdout, "Run with statistics")[0][0] == "3"
    # the affinity policy was applied there (the board is this machine: the same cores)
    cores = policy_cores(1, 1)
    assert f"cpu_affinity_policy 1 (big_only): threads pinned to cores {cores} of device board" in r.stdout

    data = json.loads((built / "b.json").read_text())["models"][0]
    assert data["device"] == "board" and data["device_info"]["soc"] == "rk3399"
    assert data["device_info"]["abi"] == "host" and data["init_ms"] > 0
    assert data["run_with_statistics"]["avg"] > 0 and data["macs"]["total"] == 25600
    result = BenchmarkResult.from_dict(data)  # what came over the wire reads back whole
    assert result.to_dict() == {k: v for k, v in data.items()
                                if k not in ("device", "device_info", "notes", "init_ms")}
    assert result.ops_summary.avg == pytest.approx(sum(o.avg for o in result.run_order), rel=1e-6)
    # the runner ran on the board, and a benchmark pulls no outputs
    on_board = {p.name for p in (built / "bench.yml.remote" / "digits").iterdir()}
    assert "mace_run.pyz" in on_board and "digits_cnn.outputs" not in on_board
    assert not is_locked(board(sshd))


def test_benchmark_on_a_phone(tmp_path, fake_adb):
    env, home, add_phone = fake_adb
    work = board_work(tmp_path)
    build(work, env=env)
    add_phone("emulator-5554", model="Pixel 6", soc="gs101")
    r = ok(benchmark(work, "--round=2", "--device=Pixel6", "--target_socs=gs101", env=env))
    assert "Benchmark model digits_cnn (cpu) on device Pixel6 (adb serial emulator-5554, ABI host, " \
           "SoC gs101" in r.stdout
    rows = section(r.stdout, "Sort by Run Order")
    assert [row[-1] for row in rows] == op_names(work)
    assert float(section(r.stdout, "Run with statistics")[0][5]) > 0
    assert (home / "emulator-5554" / "data/local/tmp/mace_run/digits/mace_run.pyz").is_file()
    assert not is_locked(AdbDevice(name="Pixel6", kind="adb", serial="emulator-5554"))


def test_an_unreachable_board(built, sshd, numpy_only_python):
    port = free_port()
    flag = devices_file(built, "closed.yml", sshd, numpy_only_python, port=port)
    start = time.monotonic()
    fails(benchmark(built, flag, "--device_timeout=10"), "device board: connect:", "connection refused")
    assert time.monotonic() - start < 30
    assert not is_locked(board(sshd, port))
    lock_path(board(sshd, port)).unlink()


def test_a_board_without_numpy(built, sshd, bare_python):
    flag = devices_file(built, "no_numpy.yml", sshd, bare_python)
    fails(benchmark(built, flag), "device board: connect:", "numpy is missing", str(bare_python))
    assert not is_locked(board(sshd))


def test_a_runner_crash_on_the_board(built, sshd, numpy_only_python):
    shutil.copytree(built / "out", built / "corrupt")
    (built / "corrupt" / "digits" / "model" / "digits_cnn.pb").write_bytes(b"\x0bnot a graph")
    flag = devices_file(built, "crash.yml", sshd, numpy_only_python)
    r = benchmark(built, flag, build_dir="corrupt")
    fails(r, "device board: benchmark digits_cnn: the runner failed (exit 1):", "not a valid model graph file")
    assert "Benchmark model" not in r.stdout
    assert not is_locked(board(sshd))


def test_a_benchmark_past_the_timeout_stops(built, sshd, numpy_only_python):
    flag = devices_file(built, "slow.yml", sshd, numpy_only_python)
    start = time.monotonic()
    fails(benchmark(built, flag, "--device_timeout=3", "--round=100000000"),
          "device board: benchmark digits_cnn: timed out", "timed out after 3 s")
    assert time.monotonic() - start < 30
    assert not is_locked(board(sshd))


def test_a_refused_key(built, sshd, numpy_only_python):
    flag = devices_file(built, "wrong_key.yml", sshd, numpy_only_python, identity_file=str(sshd.wrong_key))
    fails(benchmark(built, flag), "device board: connect:", "the login was refused")
    assert not is_locked(board(sshd))


def test_a_transfer_cut_short_on_a_phone(tmp_path, fake_adb):
    env, _, add_phone = fake_adb
    work = board_work(tmp_path)
    build(work, env=env)
    add_phone("emulator-5554")
    fails(benchmark(work, "--device=emulator-5554", env=dict(env, FAKE_ADB_CUT="digits_cnn.data")),
          "device Pixel6: verify: the transfer was cut or damaged:", "digits_cnn.data has 7680 of 15360 bytes")
    assert not is_locked(AdbDevice(name="Pixel6", kind="adb", serial="emulator-5554"))


def test_the_host_and_a_board_in_one_benchmark(tmp_path, sshd, numpy_only_python):
    work = board_work(tmp_path)
    build(work)
    flag = devices_file(work, "both.yml", sshd, numpy_only_python)
    r = ok(benchmark(work, flag, "--device=host,board", "--round=2", "--json=b.json"))
    assert "Benchmark model digits_cnn (cpu)\n" in r.stdout  # this machine: no device in the header
    assert "Benchmark model digits_cnn (cpu) on device board (" in r.stdout
    models = json.loads((work / "b.json").read_text())["models"]
    assert [m["device"] for m in models] == ["host", "board"]
    for m in models:
        assert [o["name"] for o in m["run_order"]] == op_names(work)
        assert m["run_without_statistics"]["round"] == 2 and m["run_with_statistics"]["avg"] > 0
    assert models[0]["device_info"] is None and models[1]["device_info"]["abi"] == "host"
