"""The devices .yml, in MACE's schema (docs/user_guide/devices/demo_device_nanopi.yml):

    devices:
      nanopi:                          # the device's name (what --device takes)
        target_abis: [arm64, armhf]
        target_socs: RK3399
        models: FriendlyElec Nanopi M4
        address: 10.0.0.0
        username: user
        port: 22                       # optional; and identity_file, python, work_dir

An entry with `serial:` instead of address/username describes an adb device (its python,
work_dir, and ABIs/SoC if getprop's are not wanted). Read with mace.config's YAML loader and
key tables, so errors name the file and key: `devices.yml: devices.nanopi.port: ...`.
"""
from __future__ import annotations

import difflib
import posixpath
import re
from pathlib import Path

from mace.config import schema
from mace.config.deployment import _Reader  # the deployment file's key checker, reused as is
from mace.config.yaml_io import load_yaml
from mace.devices.adb import ANDROID_WORK_DIR, AdbDevice
from mace.devices.ssh import SshDevice

# `host`: a board of this machine's CPU, which runs the host build (docs/devices.md)
DEVICE_ABIS = schema.ABIS + ("armeabi", "x86", "x86_64")
LINUX_WORK_DIR = "/tmp/data/mace_run"   # MACE's work folder on ARM Linux boards


def _plain(what: str):
    """A value that goes on ssh's command line: no blanks, and no leading '-' (an option)."""
    def parse(v):
        s = schema.as_str(v)
        if not s or re.search(r"\s", s) or s.startswith("-"):
            raise ValueError(f"expected a {what} without blanks or a leading '-', got {v!r}")
        return s
    return parse


def _port(v) -> int:
    n = schema.as_int(v)
    if not 1 <= n <= 65535:
        raise ValueError(f"expected a port number 1-65535, got {v!r}")
    return n


# The work folder reaches the device's shell (ssh and adb hand their command lines to it) and
# scp's legacy protocol: only characters no shell or glob gives a meaning to are let through.
WORK_DIR_CHARS = re.compile(r"[A-Za-z0-9_./+@%,=-]+")


def _abs_dir(v) -> str:
    s = schema.as_str(v)
    if not posixpath.isabs(s):
        raise ValueError(f"expected an absolute path on the device, got {v!r}")
    if not WORK_DIR_CHARS.fullmatch(s):
        bad = "".join(sorted(set(re.sub(r"[A-Za-z0-9_./+@%,=-]", "", s))))
        raise ValueError(f"{s!r} holds characters a shell would interpret ({bad!r}); a work_dir may "
                         f"hold letters, digits and _ . / + @ % , = -")
    return posixpath.normpath(s)


def _ignored(v):
    return v


DEVICE_KEYS = [
    schema.Key("target_abis", schema.list_of(schema.one_of(DEVICE_ABIS)), required=True,
               doc="ABIs the device runs"),
    schema.Key("target_socs", schema.list_of(lambda v: schema.as_str(v).lower()), [], doc="its SoC"),
    schema.Key("models", schema.as_str, "", doc="the device's full model name"),
    schema.Key("address", _plain("host name or address"), None, doc="ssh: address"),
    schema.Key("username", _plain("user name"), None, doc="ssh: login"),
    schema.Key("port", _port, 22, doc="ssh: port"),
    schema.Key("identity_file", schema.as_str, None, doc="ssh: private key"),
    schema.Key("serial", _plain("serial"), None, doc="adb: serial (instead of address)"),
    schema.Key("python", schema.as_str, "python3", doc="python3 with numpy on the device (and pyopencl + an OpenCL "
               "driver for runtime gpu there)"),
    schema.Key("work_dir", _abs_dir, None, doc="where files go on the device"),
    schema.Key("password", _ignored, None, doc="ignored: password-less login is required"),
    # MACE's DeviceManager fills these itself (system: android | arm_linux; device_name: the
    # `models` value without spaces); files that carry them are read without a warning.
    schema.Key("system", _ignored, None, doc="MACE's: android or arm_linux (ours follows from serial/address)"),
    schema.Key("device_name", schema.as_str, None, doc="MACE's device name; --devices_to_run matches it too"),
]


def load_device_yml(path, known_hosts: Path | None = None) -> tuple:
    """(devices, warnings) from a devices .yml; ConfigError naming file and key on a mistake."""
    path = Path(path)
    data, _ = load_yaml(path)
    reader = _Reader(path)
    entries = data.get("devices")
    if not isinstance(entries, dict) or not entries:
        reader.fail("devices", "expected a mapping of device name -> device (address, username, "
                               "target_abis, ...)")
    for key in data:
        if key != "devices":
            reader.warnings.append(f"{key}: unknown key, ignored (the file holds `devices:`)")
    devices = [_device(reader, str(name), raw, known_hosts) for name, raw in entries.items()]
    return devices, reader.warnings


def _device(reader, name: str, raw, known_hosts):
    prefix = f"devices.{name}."
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        reader.fail(f"devices.{name}", "a device name may hold letters, digits, '_', '.' and '-' "
                                       "(it names folders and locks)")
    if not isinstance(raw, dict):
        reader.fail(f"devices.{name}", "expected a mapping (target_abis, address, username, ...)")
    values, origin = reader.resolve(raw, DEVICE_KEYS, prefix)
    if origin.get("password") == "file":
        reader.warnings.append(f"{prefix}password: ignored; log in with a key (see docs/devices.md)")
    common = dict(name=name, target_abis=values["target_abis"], target_socs=values["target_socs"],
                  model=values["models"] or values["device_name"] or "", python=values["python"],
                  source=str(reader.path))
    if values["serial"]:
        return AdbDevice(kind="adb", serial=values["serial"],
                         work_dir=values["work_dir"] or ANDROID_WORK_DIR, **common)
    for key in ("address", "username"):
        if not values[key]:
            close = difflib.get_close_matches(key, [str(k) for k in raw if k not in values], n=1)
            hint = f" (found '{close[0]}': a misspelling?)" if close else ""
            reader.fail(prefix + key, f"required key is missing{hint} (or give `serial:` for an adb device)")
    return SshDevice(kind="ssh", address=values["address"], username=values["username"],
                     port=values["port"], identity_file=_identity(reader, prefix, values["identity_file"]),
                     work_dir=values["work_dir"] or LINUX_WORK_DIR, known_hosts=known_hosts, **common)


def _identity(reader, prefix: str, value):
    if not value:
        return None
    p = Path(value).expanduser()
    if not p.is_absolute():
        p = reader.path.parent / p
    if not p.is_file():
        reader.fail(prefix + "identity_file", f"file not found: {p}")
    return str(p)
