"""The machine running the converter: models run in this process (mace.run.run_model), as a
plain `converter.py run` always did; nothing is pushed or locked. It is the device of the
`host` ABI, and is always present (MACE lists it beside its adb and ssh devices).
"""
from __future__ import annotations

import platform

from mace.devices.base import Device

HOST = Device(name="host", kind="host", target_abis=["host"], model=platform.node(), source="this machine")
