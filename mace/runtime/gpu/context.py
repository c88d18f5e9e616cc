"""The OpenCL device the GPU runtime runs on: discovery, one context and queue per process.

`gpu_context()` returns the shared GpuContext, or raises GpuUnavailable saying why
(pyopencl missing, no platform, or no device that can build a kernel: PoCL
builds whose LLVM does not know the host CPU fail at the first build, so each
candidate is probed with a tiny program). MACE_OPENCL_DEVICE=<substring> picks a
device by name. Queue hints (cl_khr_priority_hints / cl_khr_throttle_hints) are
passed when the device has the extension, and noted as ignored otherwise.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from mace.errors import MaceError
from mace.util.invocation import install_hint


class GpuUnavailable(MaceError):
    """No usable OpenCL device (the message says why)."""


# MACE's hint values: 0 default, 1 low, 2 normal, 3 high.
HINT_NAMES = {0: "default", 1: "low", 2: "normal", 3: "high"}
_PRIORITY_KHR, _THROTTLE_KHR = 0x1096, 0x1097
_HINT_BITS = {1: 1 << 2, 2: 1 << 1, 3: 1 << 0}  # low / medium / high bits of both extensions
_PROBE = "__kernel void probe(__global float *a) { a[get_global_id(0)] += 1.0f; }"


@dataclass
class GpuContext:
    cl: object           # the pyopencl module
    context: object
    device: object
    queue: object
    notes: list = field(default_factory=list)
    programs: dict = field(default_factory=dict)  # (file, options) -> built program (this process)
    _queues: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The device's file-name form: `<library>_compiled_opencl_kernel.<name>.bin`."""
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.device.name.strip()) or "opencl"

    def fingerprint(self) -> dict:
        """What a cached binary or tuned parameter is only valid for."""
        d, p = self.device, self.device.platform
        return {"platform": p.name, "platform_version": p.version, "device": d.name,
                "driver": d.driver_version, "device_version": d.version}

    def has_extension(self, ext: str) -> bool:
        return ext in self.device.extensions.split()

    def queue_for(self, perf_hint: int = 0, priority_hint: int = 0):
        """A queue with the hints applied where the device supports them."""
        key = (perf_hint, priority_hint)
        if key not in self._queues:
            self._queues[key] = self._make_queue(perf_hint, priority_hint)
        return self._queues[key]

    def _make_queue(self, perf_hint: int, priority_hint: int):
        props = []
        for hint, ext, prop, what in ((priority_hint, "cl_khr_priority_hints", _PRIORITY_KHR, "priority"),
                                      (perf_hint, "cl_khr_throttle_hints", _THROTTLE_KHR, "perf")):
            if not hint:
                continue
            if self.has_extension(ext):
                props.append((prop, _HINT_BITS[hint]))
            else:
                self.notes.append(f"gpu {what} hint {HINT_NAMES[hint]} ignored: {self.device.name} "
                                  f"lacks {ext}")
        if not props:
            return self.queue
        try:
            return self.cl.CommandQueue(self.context, self.device, properties=props)
        except Exception as e:  # an ICD that lists the extension but refuses the property
            self.notes.append(f"gpu hints not applied: {e}")
            return self.queue


_shared: GpuContext | None = None
_failure: str | None = None


def gpu_context() -> GpuContext:
    """The process-wide GpuContext (created on first use)."""
    global _shared, _failure
    if _shared is None:
        if _failure is not None:
            raise GpuUnavailable(_failure)
        try:
            _shared = _discover()
        except GpuUnavailable as e:
            _failure = str(e)
            raise
    return _shared


def unavailable_reason() -> str | None:
    """None when a GPU device works here, else the reason (for test skips and messages)."""
    try:
        gpu_context()
        return None
    except GpuUnavailable as e:
        return str(e)


def _discover() -> GpuContext:
    try:
        import pyopencl as cl
    except ImportError as e:
        raise GpuUnavailable(f"the GPU runtime needs pyopencl ({e}); install the [gpu] extra: "
                             f"{install_hint('gpu')}") from None
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # pyopencl raises LogicError when no ICD is installed
        raise GpuUnavailable(f"no OpenCL platform found ({e})") from None
    wanted = os.environ.get("MACE_OPENCL_DEVICE", "").lower()
    problems = []
    for platform in platforms:
        for device in _devices(platform):
            label = f"{device.name} ({platform.version})"
            if wanted and wanted not in device.name.lower():
                continue
            reason = _unusable(cl, device)
            if reason:
                problems.append(f"{label}: {reason}")
                continue
            context = cl.Context([device])
            return GpuContext(cl, context, device, cl.CommandQueue(context, device))
    if not problems:
        what = f"matching MACE_OPENCL_DEVICE={wanted!r}" if wanted else "on any platform"
        raise GpuUnavailable(f"no OpenCL device {what}")
    raise GpuUnavailable("no usable OpenCL device: " + "; ".join(dict.fromkeys(problems)))


def _devices(platform) -> list:
    try:
        return platform.get_devices()
    except Exception:
        return []


def _unusable(cl, device) -> str | None:
    if not device.image_support:
        return "no image support (the GPU runtime stores tensors in 2-D images)"
    try:
        context = cl.Context([device])
        cl.Program(context, _PROBE).build()
    except Exception as e:
        detail = " ".join(str(e).split())
        found = re.search(r"error: .*?(?= Device | \(options|$)", detail)   # the compiler's own line
        detail = found.group(0) if found else detail[-200:]
        hint = ""
        if "unknown target CPU" in detail:
            hint = (" (this PoCL's LLVM does not know the host CPU; a newer PoCL, e.g. Debian's "
                    "pocl-opencl-icd, works)")
        return f"cannot build kernels: {detail}{hint}"
    return None
