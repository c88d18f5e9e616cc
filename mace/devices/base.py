"""What every device is: a name, the ABIs and SoC it offers, and (for boards) three operations,
`shell` (run a command there), `push` and `pull` (copy files), each with a time limit.

A failure on a device is a DeviceError naming the device and the step (connect, push, run …),
so the user reads one line and knows where to look.
"""
from __future__ import annotations

import platform
import re
from dataclasses import dataclass, field

from mace.errors import MaceError

# Spellings of one ABI family: Debian calls arm64 "arm64", uname calls it "aarch64".
ABI_ALIASES = {"aarch64": "arm64", "armv7l": "armhf"}

# The CPU each ABI's code is for (MACE's, Debian's, uname's and Android's spellings), and the CPU
# a machine is (what its Python's platform.machine() says). `host` is this machine's CPU.
ABI_CPUS = {"arm64-v8a": "arm64", "arm64": "arm64", "aarch64": "arm64", "armeabi-v7a": "arm",
            "armeabi": "arm", "armhf": "arm", "armv7l": "arm", "x86_64": "x86_64", "x86": "x86"}
MACHINE_CPUS = {"aarch64": "arm64", "arm64": "arm64", "armv8l": "arm", "armv7l": "arm", "armv6l": "arm",
                "x86_64": "x86_64", "amd64": "x86_64", "i686": "x86", "i386": "x86"}
# A 64-bit CPU runs its 32-bit ABI's code too: MACE's own nanopi (aarch64) lists [arm64, armhf].
RUNS_ALSO = {"arm64": {"arm"}, "x86_64": {"x86"}}
# ABIs a deployment file cannot name (MACE's schema has no x86): a device offering one of this
# machine's CPU offers `host` (an x86_64 emulator or board is `host` on an x86_64 machine).
UNNAMED_ABIS = ("x86", "x86_64")


def same_abi(a: str, b: str) -> bool:
    return ABI_ALIASES.get(a, a) == ABI_ALIASES.get(b, b)


def machine_cpu(machine: str) -> str:
    return MACHINE_CPUS.get(machine.lower(), machine.lower())


HOST_CPU = machine_cpu(platform.machine())


def abi_cpu(abi: str) -> str:
    return HOST_CPU if abi == "host" else ABI_CPUS.get(abi, abi)


def machine_runs(machine: str, abi: str) -> bool:
    """Whether a machine (platform.machine()) runs a build for `abi`."""
    cpu = machine_cpu(machine)
    return abi_cpu(abi) in {cpu} | RUNS_ALSO.get(cpu, set())


def abi_of_machine(machine: str, android: bool) -> str | None:
    """The deployment ABI a build for this machine names: host for this machine's CPU."""
    cpu = machine_cpu(machine)
    if cpu == HOST_CPU:
        return "host"
    return {"arm64": "arm64-v8a" if android else "arm64", "arm": "armeabi-v7a" if android else "armhf"}.get(cpu)


class DeviceError(MaceError):
    """A step on a device failed; str() is `device NAME: STEP: what happened`."""

    def __init__(self, device: str, step: str, message: str):
        super().__init__(f"device {device}: {step}: {message}")
        self.device, self.step, self.message = device, step, message


@dataclass
class Device:
    name: str
    kind: str = "host"                  # host | ssh | adb
    target_abis: list = field(default_factory=list)
    target_socs: list = field(default_factory=list)
    model: str = ""                     # the board's full name (MACE's `models` key)
    python: str = "python3"             # the interpreter on the device
    work_dir: str = "/tmp/data/mace_run"
    source: str = ""                    # where it was found: a devices .yml, `adb devices`

    def supports(self, abi: str) -> bool:
        if abi == "host" and any(a in UNNAMED_ABIS and abi_cpu(a) == HOST_CPU for a in self.target_abis):
            return True
        return any(same_abi(abi, a) for a in self.target_abis)

    def lock_id(self) -> str:
        """Names the physical device: two names for one board must share a lock."""
        return f"{self.kind}-{self.name}"

    def describe(self) -> str:
        """How to reach it, for messages: ssh root@10.0.0.1:22, adb serial 1234."""
        return "this machine" if self.kind == "host" else self.kind

    def opencl_name(self) -> str:
        """The device part of its OpenCL cache file names, as MACE names them: the model without
        spaces, a dot, the SoC (`<lib>_compiled_opencl_kernel.FriendlyElecNanopiM4.RK3399.bin`).
        Other characters a file name should not hold become '_' (the name comes from a .yml)."""
        model = re.sub(r"[^A-Za-z0-9_.+-]", "_", (self.model or self.name).replace(" ", ""))
        soc = re.sub(r"[^A-Za-z0-9_.+-]", "_", self.target_socs[0]) if self.target_socs else ""
        return f"{model}.{soc}" if soc else model

    # ---- boards only -------------------------------------------------------------------
    def shell(self, argv: list, timeout: float, step: str):
        """Run argv on the device; returns process.Completed with the command's exit status.
        Raises DeviceError when the device cannot be reached at all."""
        raise NotImplementedError

    def push(self, files: list, remote_dir: str, timeout: float, step: str) -> None:
        raise NotImplementedError

    def pull(self, remote_files: list, local_dir, timeout: float, step: str) -> None:
        raise NotImplementedError
