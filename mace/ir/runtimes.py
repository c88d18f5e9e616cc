"""What defines a runtime, in one record per runtime (issue 32): the deployment file's name for it,
the data types it takes, the threshold it is validated against, MACE's label for it in reports,
the engine that runs it, the kernel tags that engine tries, and whether boards have it.

Every table that used to spell this out again (the schema's runtimes and data types, the
validation thresholds, the report CSV's labels, the divergence search, op placement, the
engine's kernel tags, the backends, the board runner's choices) reads RUNTIMES. Adding a runtime
is one `Runtime(...)` here plus its engine factory in mace/runtime/backends.py
(docs/architecture.md, "Where to add").
"""
from __future__ import annotations

from dataclasses import dataclass

from mace.proto import pb

FAST_TAG = "cpu:fast"          # the compiled float kernels (mace/ops/fast), before the reference
INT8_FAST_TAG = "int8:fast"    # the compiled quantized kernels, before the exact reference "int8"
CPU_TAGS = (FAST_TAG, "cpu")
INT8_TAGS = (INT8_FAST_TAG, "int8")


@dataclass(frozen=True)
class Runtime:
    name: str                    # the deployment file's `runtime:`
    data_types: tuple            # the `data_type`s it takes
    default_data_type: str       # ... and the one it gets when the file names none
    threshold_key: str           # its key in validation_threshold (MACE's)
    label: str                   # MACE's device type in reports (report.csv) and the IR's DeviceType
    engine: str = ""             # backend that runs it (mace/runtime/backends.py); "" = none here
    kernel_tags: tuple = CPU_TAGS    # kernel variants the engine tries, in order
    gpu: bool = False            # has ops in OpenCL images (mace/runtime/gpu)
    on_boards: bool = True       # mace_run.pyz can run it on a board
    compared: tuple = ("cpu",)   # the runtimes `debug` compares it with, itself last
    nearest: str = ""            # for a runtime with no engine here: what comes nearest
    fixed_shapes: bool = False   # runs the converted shapes only (no variable input dimensions)

    @property
    def device(self) -> int:
        """The IR's DeviceType of an op placed on this runtime (mace/proto/mace_ir.proto)."""
        return pb.DeviceType.Value(self.label)

    @property
    def available(self) -> bool:
        return bool(self.engine)

    @property
    def quantized_only(self) -> bool:
        """It runs quantized models only (uint8): convert quantizes every model placed on it."""
        return self.data_types == ("uint8",)

    @property
    def dsp_backend(self) -> bool:
        """Its engine is a DSP backend (mace/runtime/dsp), chosen by dsp_backend, not a kernel engine."""
        return self.engine == "dsp"


_FLOAT = ("fp32_fp32", "fp16_fp32", "bf16_fp32", "fp16_fp16")
_GPU = ("fp16_fp32", "fp32_fp32", "fp16_fp16")
_DSP_NEAR = "dsp (quantized uint8 through a DSP backend"
RUNTIMES = {r.name: r for r in (
    Runtime("cpu", _FLOAT, "fp32_fp32", "CPU", "CPU", engine="engine"),
    Runtime("gpu", _GPU, "fp16_fp32", "GPU", "GPU", engine="engine", gpu=True, compared=("cpu", "gpu")),
    Runtime("dsp", ("uint8",), "uint8", "HEXAGON", "HEXAGON", engine="dsp", kernel_tags=INT8_TAGS,
            compared=("cpu", "dsp"), fixed_shapes=True),
    Runtime("hta", ("uint8",), "uint8", "HTA", "HTA", compared=("cpu", "hta"), on_boards=False, fixed_shapes=True,
            nearest=f"{_DSP_NEAR}, as HTA runs quantized models)"),
    Runtime("apu", ("fp16_fp32", "fp32_fp32", "uint8"), "uint8", "APU", "APU", compared=("cpu", "apu"),
            on_boards=False, fixed_shapes=True, nearest="dsp for uint8 models (a DSP backend), cpu or gpu for fp16/fp32 ones"),
    Runtime("htp", ("uint8",), "uint8", "HTP", "HTP", compared=("cpu", "htp"), on_boards=False, fixed_shapes=True,
            nearest=f"{_DSP_NEAR}; HTP's 16-bit schemas are not available)"),
    Runtime("cpu+gpu", ("fp16_fp32", "fp32_fp32", "bf16_fp32", "fp16_fp16"), "fp16_fp32", "GPU", "GPU",
            engine="engine", gpu=True, compared=("cpu", "gpu")),
)}
ALIASES = {"cpu_gpu": "cpu+gpu", "hexagon": "dsp"}   # MACE's other spellings
GPU_RUNTIMES = tuple(n for n, r in RUNTIMES.items() if r.gpu)
QUANTIZED_ONLY = tuple(n for n, r in RUNTIMES.items() if r.quantized_only)   # dsp (hta, htp: no engine)
DSP_BACKEND_RUNTIMES = tuple(n for n, r in RUNTIMES.items() if r.dsp_backend)
# `quantize: 1` runs on the CPU's int8 kernels and on the quantized-only runtimes that have an engine
QUANTIZED_RUNTIMES = ("cpu", *(n for n in QUANTIZED_ONLY if RUNTIMES[n].available))
BOARD_RUNTIMES = tuple(n for n, r in RUNTIMES.items() if r.on_boards)


def runtime(name: str) -> Runtime:
    """The record of `name` (an alias too); KeyError naming the runtimes for anything else."""
    name = ALIASES.get(name, name)
    if name not in RUNTIMES:
        raise KeyError(f"no runtime {name!r} (runtimes: {', '.join(RUNTIMES)})")
    return RUNTIMES[name]
