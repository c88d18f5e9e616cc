"""Which devices a `run` uses, the way MACE chooses them.

The candidates are the host, the boards of the devices .yml (--device_yml, else ./devices.yml
when present) and the phones `adb devices` lists (when adb is installed). For each ABI of the
deployment file's target_abis, every candidate offering it is used, once; `host` means this
machine. --device NAME keeps only the named ones; target_socs (the flag, else the deployment
file's) keeps only boards with one of those SoCs; --target_socs=random takes one board, an idle
one if there is. With target_abis [host] and no --device, nothing is looked up: a plain run
stays on the host exactly as before.
"""
from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from mace.config.hints import command_hint
from mace.devices import adb
from mace.devices.base import Device, DeviceError
from mace.devices.device_yml import load_device_yml
from mace.devices.host import HOST
from mace.devices.locks import is_locked
from mace.errors import ConfigError

DEFAULT_DEVICE_YML = "devices.yml"


@dataclass
class Target:
    device: Device
    abi: str


@dataclass
class Found:
    targets: list
    notes: list            # things worth telling (an unauthorized phone, a yml warning)


def split_names(values) -> list:
    """--device a,b --device c -> [a, b, c]."""
    return [n.strip() for v in values or () for n in str(v).split(",") if n.strip()]


def find_targets(config, device_yml=None, names=(), socs=None, known_hosts: Path | None = None,
                 timeout: float = 30.0, build_dir=None) -> Found:
    """The (device, ABI) pairs to run on; ConfigError saying what was found when none fits
    (and, for a board of another ABI, the build command for it: `build_dir` goes into it)."""
    names = split_names(names)
    notes = []
    if not names and all(a == "host" for a in config.target_abis):
        if device_yml:  # named by the user: check it, though the host runs
            notes += [f"{device_yml}: {w}" for w in load_device_yml(device_yml, known_hosts)[1]]
        return Found([Target(HOST, "host")], notes)
    devices = [HOST] + _listed_devices(device_yml, known_hosts, notes, timeout)
    chosen = _by_name(devices, names) if names else devices
    targets = [t for t in (_target(config, d, bool(names), build_dir) for d in chosen) if t]
    targets = _by_soc(config, targets, socs)
    if not targets:
        raise ConfigError(_nothing_found(config, devices, socs, build_dir)
                          + "".join(f"\n  note: {n}" for n in notes))
    return Found(targets, notes)


def _listed_devices(device_yml, known_hosts, notes, timeout) -> list:
    path = Path(device_yml) if device_yml else Path(DEFAULT_DEVICE_YML)
    listed = []
    if device_yml or path.is_file():
        listed, warnings = load_device_yml(path, known_hosts)
        notes += [f"{path}: {w}" for w in warnings]
    boards = [d for d in listed if d.kind == "ssh"]
    phones = _adb_devices({d.serial: d for d in listed if d.kind == "adb"}, notes, timeout)
    return _unique_names(boards + phones)


def _adb_devices(configured: dict, notes: list, timeout: float) -> list:
    """Connected adb devices; a devices .yml entry with their serial replaces getprop's view."""
    if not shutil.which("adb"):
        if configured:
            notes.append(f"adb is not installed: device(s) {', '.join(configured)} of the devices .yml "
                         f"are not used")
        return []
    try:
        ready, other = adb.list_serials(timeout)
    except DeviceError as e:  # a broken adb must not stop runs on the ssh boards
        notes.append(f"adb devices failed, no phone is used: {e}")
        return []
    notes += [f"adb device {s} is not ready (on an unauthorized phone, accept the USB debugging "
              f"prompt)" for s in other]
    notes += [f"adb device {s} of the devices .yml is not connected" for s in configured if s not in ready]
    phones = []
    for serial in ready:
        try:
            phones.append(configured.get(serial) or adb.describe_serial(serial, timeout))
        except DeviceError as e:
            notes.append(f"adb device {serial} is not used: {e}")
    return phones


def _unique_names(devices: list) -> list:
    """Two phones of one model get their serial appended, so every name picks one device."""
    names = [d.name for d in devices]
    return [replace(d, name=f"{d.name}-{d.serial}") if d.kind == "adb" and names.count(d.name) > 1 else d
            for d in devices]


def aliases(d: Device) -> set:
    """Every name --device / MACE's --devices_to_run picks `d` by: its name, an adb serial, an ssh
    address (MACE matched devices by address), and MACE's device name: `models` without spaces."""
    names = {d.name, getattr(d, "serial", None), getattr(d, "address", None)}
    if d.model:
        names.add(d.model.replace(" ", ""))
    return {n for n in names if n}


def _by_name(devices: list, names: list) -> list:
    chosen = []
    for name in names:
        match = [d for d in devices if name in aliases(d)]
        if not match:
            raise ConfigError(f"--device {name}: no such device; found: "
                              f"{', '.join(_label(d) for d in devices)}")
        chosen += [d for d in match if d not in chosen]
    return chosen


def _target(config, device: Device, named: bool, build_dir=None):
    """The device with the first of the deployment's target_abis it offers (once per device:
    the runner is the same for every ABI)."""
    abi = next((a for a in config.target_abis if device.supports(a)), None)
    if abi is None and named:
        raise ConfigError(f"{config.path}: target_abis: [{', '.join(config.target_abis)}], but device "
                          f"{device.name} runs [{', '.join(device.target_abis)}] ({device.source}): "
                          f"add one of its ABIs to target_abis, {_abi_fix(config, device, build_dir)}")
    return Target(device, abi) if abi else None


def _own_abi(device: Device) -> str:
    """The ABI to build for `device`: `host` for one of this machine's CPU (an x86_64 board)."""
    return "host" if device.supports("host") else device.target_abis[0]


def _abi_fix(config, device: Device, build_dir) -> str:
    """The commands that make `device` usable without editing the deployment file."""
    abi = _own_abi(device)
    build = command_hint("build", config, build_dir, keys={"target_abis": [abi]})
    pick = f" --device={device.name}" if abi == "host" else ""   # [host] alone is a run on this machine
    return f"or run `{build}`, then this command again with --target_abis={abi}{pick}"


def _by_soc(config, targets: list, socs) -> list:
    wanted = [s.lower() for s in (socs if socs is not None else config.target_socs) or ()]
    if wanted in ([], ["all"]):
        return targets
    if wanted == ["random"]:
        boards = [t for t in targets if t.device.kind != "host"]
        idle = [t for t in boards if not is_locked(t.device)]
        return [random.choice(idle or boards)] if boards else targets
    return [t for t in targets if t.device.kind == "host" or set(t.device.target_socs) & set(wanted)]


def _label(d: Device) -> str:
    abis = ", ".join(d.target_abis)
    socs = f", {', '.join(d.target_socs)}" if d.target_socs else ""
    return f"{d.name} ({d.describe()}: {abis}{socs})"


def _nothing_found(config, devices, socs, build_dir=None) -> str:
    found = "; ".join(_label(d) for d in devices)
    soc = f" and target_socs [{', '.join(socs or config.target_socs)}]" if (socs or config.target_socs) else ""
    adb_state = "" if shutil.which("adb") else "; adb is not installed"
    other_abi = [d for d in devices if d.kind != "host" and d.target_abis and
                 not any(d.supports(a) for a in config.target_abis)]
    fix = (f" To use {other_abi[0].name}: add {_own_abi(other_abi[0])} to target_abis, "
           f"{_abi_fix(config, other_abi[0], build_dir)}") if other_abi else ""
    return (f"{config.path}: no device offers target_abis [{', '.join(config.target_abis)}]{soc}; "
            f"found: {found}{adb_state}. List a board in devices.yml (--device_yml) or connect "
            f"a phone (adb devices).{fix}")

