"""The GPU flags of `run` (runtime gpu / cpu+gpu in the deployment file): MACE's names."""
from __future__ import annotations

from mace.errors import ConfigError
from mace.runtime.gpu.context import HINT_NAMES

HINTS = ", ".join(f"{k} {v}" for k, v in HINT_NAMES.items())


def add_arguments(p) -> None:
    g = p.add_argument_group("GPU runtime (runtime: gpu or cpu+gpu; see docs/gpu.md)")
    g.add_argument("--tuning", action="store_true",
                   help="search OpenCL work-group sizes per kernel and shape, and save them to "
                        "builds/<library>/opencl/host/<library>_tuned_opencl_parameter.<device>.bin "
                        "(also on by default when target_socs is set and no tuned file exists); on a "
                        "board, its file under opencl/<abi>/, pulled back after the run")
    g.add_argument("--disable_tuning", action="store_true",
                   help="MACE's flag: never tune, even where target_socs would start it (no tuned file yet)")
    g.add_argument("--gpu_perf_hint", type=int, default=0, choices=sorted(HINT_NAMES),
                   help=f"GPU performance hint ({HINTS}); passed where the device has "
                        f"cl_khr_throttle_hints, noted as ignored elsewhere")
    g.add_argument("--gpu_priority_hint", type=int, default=0, choices=sorted(HINT_NAMES),
                   help=f"GPU queue priority hint ({HINTS}); passed where the device has "
                        f"cl_khr_priority_hints, noted as ignored elsewhere")


def run_kwargs(args) -> dict:
    if args.tuning and args.disable_tuning:
        raise ConfigError("--tuning and --disable_tuning contradict each other; give one")
    return {"tuning": args.tuning, "gpu_perf_hint": args.gpu_perf_hint,
            "gpu_priority_hint": args.gpu_priority_hint, "auto_tuning": not args.disable_tuning}
