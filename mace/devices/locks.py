"""One lock per device, so two runs on one board take turns and runs on two boards do not wait.

The lock is a filelock (flock) on <temp dir>/mace-device-<id>.lock, shared by every build
folder and process of this machine (MACE: /tmp/device-lock-<id>). The kernel drops a flock
when its process dies, so a crashed or killed run never leaves a device locked.
"""
from __future__ import annotations

import re
import tempfile
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from mace.devices.base import Device, DeviceError


def lock_path(device: Device) -> Path:
    return Path(tempfile.gettempdir()) / f"mace-device-{re.sub(r'[^A-Za-z0-9_.@-]', '_', device.lock_id())}.lock"


@contextmanager
def device_lock(device: Device, timeout: float, notify=print):
    """Hold the device's lock; says "waiting for device X" (through `notify`) when it is busy."""
    path = lock_path(device)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        notify(f"waiting for device {device.name} ({device.describe()}): another run is using it "
               f"(lock {path})")
        try:
            lock.acquire(timeout=timeout)
        except Timeout:
            raise DeviceError(device.name, "lock", f"still in use by another run after {timeout:g} s "
                                                   f"(--device_lock_timeout)") from None
    try:
        yield path
    finally:
        lock.release()


def is_locked(device: Device) -> bool:
    """Whether another run holds the device now (for --target_socs=random)."""
    if not lock_path(device).exists():
        return False  # never used here: nothing to create just to ask
    lock = FileLock(str(lock_path(device)))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    lock.release()
    return False
