"""`run` on Android phones over adb, against the stand-in adb of fake_adb.py (no phone here).

Phones are found with `adb devices` and described with getprop; files go to
/data/local/tmp/mace_run/<library>/ on the phone (a folder under the stand-in's home).
"""
from __future__ import annotations

import platform
import time

import pytest

from mace.devices.adb import AdbDevice
from mace.devices.locks import is_locked
from tests.cli_helpers import cli, digits_model, write_deployment
from tests.devices.helpers import board_work, build, fails, ok, write_devices


@pytest.fixture
def phone_work(tmp_path, fake_adb):
    """(work folder built for the host, env with the stand-in adb, add_phone): the stand-in's phones
    are emulators of this machine's CPU, which run the host build, picked by name (--device)."""
    env, _, add_phone = fake_adb
    work = board_work(tmp_path)
    build(work, env=env)
    return work, env, add_phone


def run(work, env, *args):
    return cli("run", "--config=deploy.yml", "--build_dir=out", *args, cwd=work, env=env)


def test_a_phone_found_by_adb_runs_and_validates(phone_work):
    work, env, add_phone = phone_work
    phone = add_phone("emulator-5554", model="Pixel 6", soc="gs101")
    r = ok(run(work, env, "--device=Pixel6", "--validate", "--round=2", "--output_dir=res"))
    assert "Device Pixel6 (adb serial emulator-5554, ABI host)" in r.stdout  # named like MACE
    assert "Run model digits_cnn on Pixel6 (cpu)" in r.stdout and "Similarity test passed" in r.stdout
    on_phone = phone / "data" / "local" / "tmp" / "mace_run" / "digits"
    assert (on_phone / "mace_run.pyz").is_file() and (on_phone / "digits_cnn.outputs" / "output0.npy").is_file()
    assert (work / "res" / "prob.npy").is_file()
    ok(run(work, env, "--device=emulator-5554", "--target_socs=gs101"))  # the SoC comes from ro.board.platform


def test_a_transfer_cut_short_is_caught(phone_work):
    work, env, add_phone = phone_work
    add_phone("emulator-5554")
    r = run(work, dict(env, FAKE_ADB_CUT="digits_cnn.data"), "--device=Pixel6")
    fails(r, "device Pixel6: verify: the transfer was cut or damaged:",
          "digits_cnn.data has 7680 of 15360 bytes")
    assert not is_locked(AdbDevice(name="Pixel6", kind="adb", serial="emulator-5554"))


def test_a_phone_that_hangs_times_out(phone_work):
    work, env, add_phone = phone_work
    add_phone("emulator-5554")
    start = time.monotonic()
    fails(run(work, dict(env, FAKE_ADB_HANG="platform.python_version"), "--device=Pixel6", "--device_timeout=1"),
          "device Pixel6: connect: timed out after 1 s")
    assert time.monotonic() - start < 15
    assert not is_locked(AdbDevice(name="Pixel6", kind="adb", serial="emulator-5554"))


def test_an_unauthorized_phone_is_reported_not_used(phone_work):
    work, env, add_phone = phone_work
    add_phone("0123ABC", state="unauthorized")
    r = fails(run(work, env, "--target_abis=arm64-v8a"), "no device offers target_abis [arm64-v8a]", "found: host")
    assert "adb device 0123ABC (unauthorized) is not ready" in r.stderr


def test_two_phones_of_one_model_are_told_apart(phone_work):
    work, env, add_phone = phone_work
    add_phone("AAA")
    add_phone("BBB")
    r = ok(run(work, env, "--device=BBB"))
    assert "Run model digits_cnn on Pixel6-BBB" in r.stdout and "Pixel6-AAA" not in r.stdout


def test_a_devices_yml_entry_with_a_serial_sets_the_phones_python(phone_work, bare_python):
    work, env, add_phone = phone_work
    add_phone("emulator-5554")
    write_devices(work / "devices.yml", phone={"serial": "emulator-5554", "target_abis": "x86_64",
                                               "python": str(bare_python)})
    fails(run(work, env, "--device=phone"), "device phone: connect: numpy is missing", str(bare_python))


def test_a_phone_without_the_abi_is_refused_by_name(phone_work):
    work, env, add_phone = phone_work
    add_phone("armphone", model="Phone", abis="arm64-v8a,armeabi-v7a")
    fails(run(work, env, "--device=armphone"), "target_abis: [host], but device Phone runs "
                                               "[arm64-v8a, armeabi-v7a]", "add one of its ABIs to target_abis")


def test_a_phone_whose_python_is_another_cpu_than_its_abi_is_refused(tmp_path, fake_adb):
    # getprop says arm64-v8a, but the phone's python3 is this machine's: the arm64-v8a build is refused
    env, _, add_phone = fake_adb
    work = board_work(tmp_path, abis=("arm64-v8a",))
    build(work, env=env)
    add_phone("emulator-5554", abis="arm64-v8a")
    r = fails(run(work, env),
              f"error: device Pixel6: connect: its python3 reports a {platform.machine()} CPU (platform.machine()), "
              f"which does not run a build for ABI arm64-v8a: list host (this machine's CPU) in its target_abis "
              f"(a devices .yml entry with serial: emulator-5554) and in the deployment file's target_abis, "
              f"then build and run again")
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    # that fix: the entry says what the phone is, and the host build runs there
    write_devices(work / "devices.yml", phone={"serial": "emulator-5554", "target_abis": "host"})
    write_deployment(work / "deploy.yml", {"digits_cnn": digits_model()}, target_abis=["host"])
    build(work, env=env)
    assert "Run model digits_cnn on phone (cpu)" in ok(run(work, env, "--device=phone")).stdout
