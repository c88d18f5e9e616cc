"""Devices: build what a board needs, and run converted models on it over ssh or adb.

    build.py        builds/<library>/: models, OpenCL files, the runner mace_run.pyz, build.json
    runner_zip.py   packs runner.py, our runtime and pure-Python protobuf into mace_run.pyz
    runner.py       the program that runs on the device (stdlib + numpy + mace.runtime only)
    base.py         the Device interface and DeviceError; process.py runs ssh/scp/adb with a time limit
    host.py, ssh.py, adb.py   one module per kind of device
    device_yml.py   the devices .yml (MACE's schema); discovery.py lists and chooses devices
    locks.py        one lock per device, so two runs on one board take turns
    target_run.py   lock, check, push, run, pull, verify, validate: `run` on a device

Nothing is imported here: runner.py travels inside mace_run.pyz with this file, and must not
pull in the host-side modules (yaml, filelock, onnx).
"""
