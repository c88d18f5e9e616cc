"""Run one local command (ssh, scp, adb) from an argument list, with a time limit.

Each command gets its own process group, so a timeout or Ctrl-C kills it together with what
it started (scp runs ssh): nothing keeps a connection open after we gave up on it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass

from mace.devices.base import DeviceError

_live: set = set()
_live_guard = threading.Lock()


@dataclass
class Completed:
    argv: list
    returncode: int
    stdout: str
    stderr: str

    def last_line(self) -> str:
        """The last non-empty line of stderr (where ssh, adb and the runner say what failed)."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit status {self.returncode}"


def run(argv: list, timeout: float, device: str, step: str) -> Completed:
    """Run argv; DeviceError if the program is missing or `timeout` seconds pass."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except FileNotFoundError:
        raise DeviceError(device, step, f"'{argv[0]}' is not installed on this machine "
                                        f"(it is needed to reach the device)") from None
    with _live_guard:
        _live.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise DeviceError(device, step, f"timed out after {timeout:g} s (--device_timeout)") from None
    except BaseException:
        _kill(proc)
        raise
    finally:
        with _live_guard:
            _live.discard(proc)
    return Completed(argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipes
        pass


def kill_all() -> None:
    """Kill every command still running (Ctrl-C while worker threads wait on devices)."""
    with _live_guard:
        procs = list(_live)
    for proc in procs:
        _kill(proc)
