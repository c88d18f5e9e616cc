"""An Android device reached with the system's adb: found with `adb devices`, described with
`adb shell getprop` (ro.product.model, ro.board.platform, ro.product.cpu.abilist), as MACE does.

`adb shell` hands its command line to the device's shell, so arguments are quoted with
shlex there. Exit statuses come back from Android 7 on (adb's shell protocol v2).
The tests use a stand-in adb (tests/devices/fake_adb.py), see docs/devices.md.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass

from mace.devices import process
from mace.devices.base import Device, DeviceError

ANDROID_WORK_DIR = "/data/local/tmp/mace_run"
# adb's own failures, recognised in its messages (the command's own exit status is separate)
TRANSPORT_ERRORS = ("error: device", "error: no devices", "error: closed", "device offline",
                    "error: protocol fault", "unauthorized")


@dataclass
class AdbDevice(Device):
    serial: str = ""

    def lock_id(self) -> str:
        return f"adb-{self.serial}"

    def describe(self) -> str:
        return f"adb serial {self.serial}"

    def _adb(self, args: list, timeout: float, step: str):
        return process.run(["adb", "-s", self.serial, *args], timeout, self.name, step)

    def shell(self, argv: list, timeout: float, step: str):
        done = self._adb(["shell", shlex.join(argv)], timeout, step)
        if done.returncode != 0 and any(e in done.stderr for e in TRANSPORT_ERRORS):
            raise DeviceError(self.name, step, f"{self.describe()}: {done.last_line()}")
        return done

    def push(self, files: list, remote_dir: str, timeout: float, step: str) -> None:
        done = self._adb(["push", *map(str, files), remote_dir.rstrip("/") + "/"], timeout, step)
        if done.returncode != 0:
            raise DeviceError(self.name, step, f"{self.describe()}: adb push failed: {done.last_line()}")

    def pull(self, remote_files: list, local_dir, timeout: float, step: str) -> None:
        done = self._adb(["pull", *remote_files, str(local_dir)], timeout, step)
        if done.returncode != 0:
            raise DeviceError(self.name, step, f"{self.describe()}: adb pull failed: {done.last_line()}")


def parse_getprop(text: str) -> dict:
    """`[ro.product.model]: [Pixel 6]` lines -> {key: value}."""
    props = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("]: [")
        if sep and key.startswith("[") and value.endswith("]"):
            props[key[1:]] = value[:-1]
    return props


def list_serials(timeout: float) -> tuple:
    """(serials ready to use, 'SERIAL (state)' for the others) from `adb devices`."""
    done = process.run(["adb", "devices"], timeout, "adb", "adb devices")
    if done.returncode != 0:
        raise DeviceError("adb", "adb devices", done.last_line())
    ready, other = [], []
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) < 2 or line.startswith(("List of devices", "*")):
            continue
        serial, state = parts[0], parts[1]
        if state == "device":
            ready.append(serial)
        else:
            other.append(f"{serial} ({state})")
    return ready, other


def describe_serial(serial: str, timeout: float) -> AdbDevice:
    """An AdbDevice from the device's properties (name: the model without spaces, as MACE)."""
    probe = AdbDevice(name=serial, kind="adb", serial=serial)
    done = probe.shell(["getprop"], timeout, "getprop")
    if done.returncode != 0:
        raise DeviceError(serial, "getprop", done.last_line())
    props = parse_getprop(done.stdout)
    abis = props.get("ro.product.cpu.abilist") or props.get("ro.product.cpu.abi", "")
    model = props.get("ro.product.model", "")
    return AdbDevice(name=model.replace(" ", "") or serial, kind="adb",
                     target_abis=[a for a in abis.split(",") if a],
                     target_socs=[s.lower() for s in [props.get("ro.board.platform", "")] if s],
                     model=model, work_dir=ANDROID_WORK_DIR, source="adb devices", serial=serial)
