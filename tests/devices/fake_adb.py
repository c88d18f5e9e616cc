#!/usr/bin/env python3
"""A stand-in for Android's `adb`, used by the tests (there is no phone or emulator here).

Put first on PATH as `adb`. It serves the phones described in $FAKE_ADB_HOME/devices.json,
{serial: {"state": "device", "props": {"ro.product.model": ...}}}, each with its file system
in the folder $FAKE_ADB_HOME/<serial>/. It implements what mace/devices/adb.py uses:

    adb devices                      the serials and their states
    adb -s SERIAL shell getprop      the props as `[key]: [value]` lines (or one value)
    adb -s SERIAL shell COMMAND      COMMAND run by this machine's sh, exit status returned
    adb -s SERIAL push FILE... DIR   copy into the phone's folder
    adb -s SERIAL pull FILE... DIR   copy out of it

Paths under /data/ and /sdcard/ in commands are the phone's: they are mapped into its folder.
Failure knobs: FAKE_ADB_CUT=TEXT pushes files whose name holds TEXT half-way and says nothing
(a transfer cut short); FAKE_ADB_HANG=TEXT makes shell commands holding TEXT hang.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

HOME = os.environ.get("FAKE_ADB_HOME", "")
PHONE_PATH = re.compile(r"(?<![\w.\-/])/(data|sdcard)/")


def phones() -> dict:
    with open(os.path.join(HOME, "devices.json")) as f:
        return json.load(f)


def local(serial: str, path: str) -> str:
    return os.path.join(HOME, serial, path.lstrip("/"))


def shell(serial: str, phone: dict, args: list) -> int:
    command = " ".join(args)
    if not command:
        print("interactive shells are not supported by the stand-in adb", file=sys.stderr)
        return 1
    if command.split()[0] == "getprop":
        props = phone.get("props", {})
        keys = command.split()[1:]
        print(props.get(keys[0], "") if keys else "\n".join(f"[{k}]: [{v}]" for k, v in props.items()))
        return 0
    hang = os.environ.get("FAKE_ADB_HANG")
    if hang and hang in command:
        time.sleep(3600)
    mapped = PHONE_PATH.sub(lambda m: local(serial, m.group(0)), command)  # /data/x -> HOME/SERIAL/data/x
    return subprocess.run(["sh", "-c", mapped]).returncode


def push(serial: str, args: list) -> int:
    *sources, dest = args
    target = local(serial, dest)
    os.makedirs(target, exist_ok=True)
    cut = os.environ.get("FAKE_ADB_CUT")
    for src in sources:
        out = os.path.join(target, os.path.basename(src))
        if cut and cut in os.path.basename(src):
            with open(src, "rb") as f, open(out, "wb") as g:
                g.write(f.read()[: os.path.getsize(src) // 2])
        else:
            shutil.copyfile(src, out)
    print(f"{len(sources)} files pushed.")
    return 0


def pull(serial: str, args: list) -> int:
    *sources, dest = args
    for src in sources:
        path = local(serial, src)
        if not os.path.isfile(path):
            print(f"adb: error: failed to stat remote object '{src}': No such file or directory",
                  file=sys.stderr)
            return 1
        shutil.copyfile(path, os.path.join(dest, os.path.basename(src)))
    print(f"{len(sources)} files pulled.")
    return 0


def main(argv: list) -> int:
    if argv[:1] == ["devices"]:
        print("List of devices attached")
        for serial, phone in phones().items():
            print(f"{serial}\t{phone.get('state', 'device')}")
        print()
        return 0
    if len(argv) < 3 or argv[0] != "-s":
        print(f"stand-in adb: unsupported arguments {argv}", file=sys.stderr)
        return 1
    serial, command, rest = argv[1], argv[2], argv[3:]
    phone = phones().get(serial)
    if phone is None:
        print(f"error: device '{serial}' not found", file=sys.stderr)
        return 1
    if phone.get("state", "device") != "device":
        print(f"error: device {phone['state']}", file=sys.stderr)
        return 1
    handlers = {"shell": lambda: shell(serial, phone, rest), "push": lambda: push(serial, rest),
                "pull": lambda: pull(serial, rest)}
    if command not in handlers:
        print(f"stand-in adb: unsupported command {command}", file=sys.stderr)
        return 1
    return handlers[command]()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
