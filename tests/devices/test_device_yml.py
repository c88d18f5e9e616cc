"""The devices .yml (MACE's schema, errors naming file and key) and which devices a run uses."""
from __future__ import annotations

import pytest
import yaml

from mace.config import load_deployment
from mace.devices.adb import AdbDevice
from mace.devices.device_yml import load_device_yml
from mace.devices.discovery import find_targets
from mace.devices.ssh import SshDevice
from mace.errors import ConfigError
from tests.cli_helpers import cli, digits_model, workdir, write_deployment
from tests.devices.helpers import fails, no_adb_env, ok, write_devices

NANOPI = {"target_abis": ["arm64", "armhf"], "target_socs": "RK3399", "models": "FriendlyElec Nanopi M4",
          "address": "10.0.0.0", "username": "user"}


@pytest.fixture(autouse=True)
def no_adb(monkeypatch):
    monkeypatch.setenv("PATH", no_adb_env()["PATH"])


def test_maces_demo_file_loads(tmp_path):
    raspberry = {"target_abis": ["armv7l"], "target_socs": "BCM2837",
                 "models": "Raspberry Pi 3 Model B Plus Rev 1.3", "address": "10.0.0.1", "username": "user"}
    devices, warnings = load_device_yml(write_devices(tmp_path / "devices.yml", nanopi=NANOPI,
                                                      raspberry=raspberry))
    nanopi, pi = devices
    assert isinstance(nanopi, SshDevice) and warnings == []
    assert (nanopi.name, nanopi.port, nanopi.work_dir, nanopi.python) == \
        ("nanopi", 22, "/tmp/data/mace_run", "python3")
    assert nanopi.target_socs == ["rk3399"] and nanopi.model == "FriendlyElec Nanopi M4"
    assert pi.target_abis == ["armv7l"] and pi.supports("armhf")  # uname's and Debian's spellings


def test_optional_keys_and_an_adb_entry(tmp_path):
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id").write_text("key")
    devices, _ = load_device_yml(write_devices(
        tmp_path / "devices.yml",
        nanopi=dict(NANOPI, port=2222, identity_file="keys/id", python="/opt/py/bin/python3",
                    work_dir="/home/user/mace/"),
        phone={"serial": "0123ABC", "target_abis": "arm64-v8a"}))
    nanopi, phone = devices
    assert nanopi.port == 2222 and nanopi.identity_file == str(tmp_path / "keys" / "id")
    assert nanopi.work_dir == "/home/user/mace" and nanopi.python == "/opt/py/bin/python3"
    assert isinstance(phone, AdbDevice) and phone.serial == "0123ABC"
    assert phone.work_dir == "/data/local/tmp/mace_run"


@pytest.mark.parametrize("entry, key, message", [
    (dict(NANOPI, port="ssh"), "devices.nanopi.port", "expected an integer"),
    (dict(NANOPI, port=70000), "devices.nanopi.port", "expected a port number"),
    (dict(NANOPI, target_abis=["mips"]), "devices.nanopi.target_abis", "expected one of"),
    ({k: v for k, v in NANOPI.items() if k != "target_abis"}, "devices.nanopi.target_abis",
     "required key is missing"),
    (dict({k: v for k, v in NANOPI.items() if k != "address"}, adress="10.0.0.1"), "devices.nanopi.address",
     "found 'adress': a misspelling?"),
    (dict(NANOPI, address="-oProxyCommand=x"), "devices.nanopi.address", "leading '-'"),
    (dict(NANOPI, username="a user"), "devices.nanopi.username", "without blanks"),
    (dict(NANOPI, identity_file="missing_key"), "devices.nanopi.identity_file", "file not found"),
    (dict(NANOPI, work_dir="relative/dir"), "devices.nanopi.work_dir", "absolute path"),
    ("just text", "devices.nanopi", "expected a mapping"),
])
def test_mistakes_name_the_file_and_the_key(tmp_path, entry, key, message):
    path = write_devices(tmp_path / "devices.yml", nanopi=entry)
    with pytest.raises(ConfigError) as e:
        load_device_yml(path)
    assert str(e.value).startswith(f"{path}: {key}: ") and message in str(e.value)


def test_file_level_mistakes(tmp_path):
    for text, message in [("devices: []\n", "devices: expected a mapping of device name"),
                          ("other: 1\n", "devices: expected a mapping"),
                          ("devices:\n  a b:\n    target_abis: arm64\n", "devices.a b: a device name may hold")]:
        (tmp_path / "d.yml").write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_device_yml(tmp_path / "d.yml")
    with pytest.raises(ConfigError, match="file not found"):
        load_device_yml(tmp_path / "missing.yml")


def test_unknown_keys_and_password_are_warned_about(tmp_path):
    _, warnings = load_device_yml(write_devices(tmp_path / "d.yml", nanopi=dict(NANOPI, prot=22, password="x")))
    assert any("devices.nanopi.prot: unknown key, ignored (did you mean 'port'?)" in w for w in warnings)
    assert any("devices.nanopi.password: ignored" in w for w in warnings)


# ---- choosing devices -------------------------------------------------------------------
def config_for(tmp_path, abis, **top):
    path = write_deployment(tmp_path / "deploy.yml", {"digits_cnn": digits_model()}, target_abis=abis, **top)
    return load_deployment(path)


def names(found):
    return [(t.device.name, t.abi) for t in found.targets]


def test_host_only_deployments_never_look_for_devices(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "devices.yml").write_text("devices: [broken\n")  # not even read
    assert names(find_targets(config_for(tmp_path, ["host"]))) == [("host", "host")]
    with pytest.raises(ConfigError, match="invalid YAML"):  # named on the command line: checked
        find_targets(config_for(tmp_path, ["host"]), device_yml=tmp_path / "devices.yml")


def test_devices_are_chosen_by_target_abis_and_socs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_devices(tmp_path / "devices.yml", nanopi=NANOPI,
                  pi={**NANOPI, "target_abis": "armv7l", "target_socs": "BCM2837", "address": "10.0.0.1"})
    assert names(find_targets(config_for(tmp_path, ["arm64"]))) == [("nanopi", "arm64")]
    assert names(find_targets(config_for(tmp_path, ["host", "armhf"]))) == \
        [("host", "host"), ("nanopi", "armhf"), ("pi", "armhf")]
    assert names(find_targets(config_for(tmp_path, ["armhf"]), socs=["bcm2837"])) == [("pi", "armhf")]
    assert names(find_targets(config_for(tmp_path, ["armhf"], target_socs=["rk3399"]))) == [("nanopi", "armhf")]
    assert len(find_targets(config_for(tmp_path, ["armhf"]), socs=["random"]).targets) == 1
    assert names(find_targets(config_for(tmp_path, ["host", "armhf"]), names=["pi,host"])) == \
        [("pi", "armhf"), ("host", "host")]
    with pytest.raises(ConfigError, match=r"no device offers target_abis \[arm64\] and target_socs \[sdm845\]"):
        find_targets(config_for(tmp_path, ["arm64"]), socs=["sdm845"])
    with pytest.raises(ConfigError, match=r"--device mate: no such device; found: host \(this machine: host\), "
                                          r"nanopi \(ssh user@10.0.0.0:22: arm64, armhf, rk3399\)"):
        find_targets(config_for(tmp_path, ["arm64"]), names=["mate"])
    with pytest.raises(ConfigError, match=r"target_abis: \[host\], but device pi runs \[armv7l\]"):
        find_targets(config_for(tmp_path, ["host"]), names=["pi"])


def test_plain_run_ignores_a_devices_yml_when_only_the_host_is_targeted(tmp_path):
    work = workdir(tmp_path)
    ok(cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work))
    (work / "devices.yml").write_text(yaml.safe_dump({"devices": {"nanopi": NANOPI}}))
    r = ok(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=work, env=no_adb_env()))
    assert "Run model digits_cnn on host (cpu)" in r.stdout
    r = cli("run", "--config=deploy.yml", "--build_dir=out", "--device=nanopi", cwd=work, env=no_adb_env())
    fails(r, "target_abis: [host], but device nanopi runs [arm64, armhf] (devices.yml)")


def test_a_board_of_this_machines_cpu_offers_host(tmp_path, monkeypatch):
    # an x86 board (or an x86_64 emulator's abilist) is `host` on an x86_64 machine, picked by name;
    # [host] alone is still the plain host run
    from mace.devices import base

    monkeypatch.setattr(base, "HOST_CPU", "x86_64")
    monkeypatch.chdir(tmp_path)
    write_devices(tmp_path / "devices.yml", nanopi=NANOPI,
                  pc={**NANOPI, "target_abis": "host", "address": "10.0.0.2"},
                  emu={"serial": "emulator-5554", "target_abis": "x86_64,x86"})
    pc, emu = load_device_yml(tmp_path / "devices.yml")[0][1:]
    assert pc.supports("host") and emu.supports("host") and not emu.supports("arm64-v8a")
    assert names(find_targets(config_for(tmp_path, ["host"]), names=["pc"])) == [("pc", "host")]
    assert names(find_targets(config_for(tmp_path, ["host"]))) == [("host", "host")]
    monkeypatch.setattr(base, "HOST_CPU", "arm64")   # on an aarch64 machine an x86 emulator is not `host`
    assert not emu.supports("host") and pc.supports("host")


@pytest.mark.parametrize("machine, runs, refuses", [
    ("aarch64", ["arm64", "arm64-v8a", "aarch64", "armhf", "armeabi-v7a", "armv7l"], ["host"]),  # nanopi: both
    ("armv7l", ["armhf", "armeabi-v7a", "armv7l"], ["arm64", "arm64-v8a", "aarch64", "host"]),
    ("armv8l", ["armhf", "armeabi-v7a"], ["arm64"]),          # a 32-bit userland on a 64-bit kernel
    ("x86_64", ["host"], ["arm64", "arm64-v8a", "armhf", "armeabi-v7a"]),
])
def test_which_builds_a_machine_runs(monkeypatch, machine, runs, refuses):
    from mace.devices import base

    monkeypatch.setattr(base, "HOST_CPU", "x86_64")
    assert [a for a in runs + refuses if base.machine_runs(machine, a)] == runs
