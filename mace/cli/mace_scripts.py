"""The scripts MACE's documentation tells users to run, at MACE's paths, and what they are here.

A MACE user types `python tools/python/quantize/quantize_stat.py --log_file ...` or
`bash tools/cmake/cmake-build-armeabi-v7a.sh` from the root of the checkout. Each such path
exists here too (a few lines that call this module): a *shim* does the same work through our
CLI, translating MACE's flags; an *error* says what replaces it here and exits 1. Paths under
MACE's top-level folders we do not have (MACE Micro's `micro/`) and the example files MACE
users copy rather than run are listed only. docs/mace_compat.md ("MACE's scripts") is
generated from SCRIPTS; tests/mace_compat/test_mace_scripts.py runs every shim.

Standard library only at module level: the shell shims run it on any python3.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

CONVERTER = "python tools/converter.py"
BUILD_TOOLCHAIN = (f"there is no native library to build: the runtime is Python, and `{CONVERTER} build "
                   "--config=deploy.yml` packs what a board needs (docs/devices.md)")
CXX_TESTS = ("MACE's C++ unit tests and benchmarks: here the test suite is `bash setup/test.sh` and the "
             "speed of each op `python benchmarks/bench_ops.py`")


@dataclass(frozen=True)
class MaceScript:
    path: str         # from the checkout's root, as MACE's docs run it
    versions: str     # the MACE releases whose docs name it
    kind: str         # shim (does the work) | error (names ours) | listed (no file here)
    here: str         # what does it here


SCRIPTS = (
    MaceScript("tools/python/convert.py", "0.12-1.1", "shim",
               f"`{CONVERTER} convert` (`--output DIR` becomes `--build_dir DIR`)"),
    MaceScript("tools/python/run_model.py", "0.12-1.1", "shim",
               f"`{CONVERTER} run` (`--output` -> `--build_dir`, `--target_abi` -> `--target_abis`, "
               "`--device_conf` -> `--device_yml`, `--devices_to_run` -> `--device`, `--tune` -> `--tuning`, "
               "`--gencode_model` / `--gencode_param` -> `--model_graph_format` / `--model_data_format code`, "
               f"`--build`: `{CONVERTER} build` first; `--runtime`, `--validate_threshold`, `--backend` are "
               "deployment-file keys here: an error names the key)"),
    MaceScript("tools/python/converter.py", "0.12-0.13", "shim", f"`{CONVERTER}` (a typo in MACE's benchmark docs)"),
    MaceScript("tools/python/quantize/quantize_stat.py", "0.12-1.1", "shim",
               "`python tools/quantize_stat.py` (same flags: `--log_file`, `--percentile`, `--enhance`, "
               "`--enhance_ratio`)"),
    MaceScript("mace/python/tools/quantization/quantize_stat.py", "0.10-0.11", "shim",
               "`python tools/quantize_stat.py` (same flags)"),
    MaceScript("tools/python/encrypt.py", "0.12-1.1", "error",
               "`obfuscate: 1` and `model_graph_format: code` / `model_data_format: code` in the deployment "
               f"file, then `{CONVERTER} convert` (docs/codegen.md)"),
    MaceScript("tools/python/gen_opencl.py", "0.12-1.1", "error",
               f"`{CONVERTER} run` on a board builds the OpenCL cache files and brings them back to "
               "builds/<library>/opencl/<abi>/; `build` packs them (docs/devices.md, GPU and DSP on a board)"),
    MaceScript("tools/onnx_optimizer.py", "0.10-1.1", "error",
               "nothing to run first: `convert` folds and optimises the ONNX file itself; name the original "
               "file in model_file_path (`convert --dump_passes` shows each pass)"),
    MaceScript("tools/image/image_to_tensor.py", "0.11-1.1", "error",
               "JPEG/PNG files are inputs as they are: `image_preprocess` in the deployment file, the images "
               "in --input_dir (docs/deployment_file.md, Images as inputs)"),
    MaceScript("tools/python/run_target.py", "0.12-1.1", "error", CXX_TESTS),
    MaceScript("tools/bazel_adb_run.py", "0.9-1.1", "error", CXX_TESTS),
    MaceScript("tools/mace_tools.py", "0.7", "error",
               f"`{CONVERTER} build --config=deploy.yml`, then `{CONVERTER} run --config=deploy.yml`"),
    MaceScript("tools/python/run_micro.py", "0.13", "error",
               "MACE Micro (microcontrollers) is not part of this release"),
    MaceScript("tools/bazel_build_standalone_lib.sh", "1.0-1.1", "error", BUILD_TOOLCHAIN),
    MaceScript("tools/bazel-build-standalone-lib.sh", "0.12-0.13", "error", BUILD_TOOLCHAIN),
    MaceScript("tools/build-standalone-lib.sh", "0.9-0.11", "error", BUILD_TOOLCHAIN),
    *(MaceScript(f"tools/cmake/cmake-build-{abi}.sh", "0.12-1.1", "error", BUILD_TOOLCHAIN)
      for abi in ("armeabi-v7a", "arm64-v8a", "aarch64-linux-gnu", "arm-linux-gnueabihf", "host")),
    MaceScript("tools/clear_workspace.sh", "0.12-1.1", "error",
               "everything convert, build and run write is under builds/ (or --build_dir): remove that folder"),
    MaceScript("tools/accuracy_validator.py", "0.11-1.1", "listed",
               "an example to copy, not to run: ours is examples/digits/accuracy_validator.py "
               "(examples/digits/digits_accuracy.yml names it)"),
    MaceScript("micro/tools/cmake/cmake-build-host.sh", "1.0-1.1", "listed",
               "MACE Micro is not part of this release"),
    MaceScript("micro/tools/cmake/cmake-build-gcc-arm-none-eabi.sh", "1.0-1.1", "listed",
               "MACE Micro is not part of this release"),
)
BY_PATH = {s.path: s for s in SCRIPTS}

# tools/python/run_model.py's flags -> ours (None: dropped, with a note); the rest pass as they are
RUN_MODEL_FLAGS = {"--output": "--build_dir", "--target_abi": "--target_abis", "--device_conf": "--device_yml",
                   "--devices_to_run": "--device", "--build_dir": None, "--envs": None}
RUN_MODEL_SWITCHES = {"--gencode_model": "--model_graph_format=code", "--gencode_param": "--model_data_format=code",
                      "--tune": "--tuning"}
RUN_MODEL_KEYS = {"--runtime": "runtime", "--validate_threshold": "validation_threshold", "--backend": "backend"}


def script_table() -> list:
    """docs/mace_compat.md's section: every path in SCRIPTS and what it does here."""
    kinds = {"shim": "runs ours", "error": "names ours, exit 1", "listed": "no file here"}
    lines = ["## MACE's scripts", "",
             "The scripts MACE's documentation runs, at MACE's paths from the checkout's root, for MACE users "
             "who type them. A shim does the work through our CLI (MACE's flags translated); the others "
             "print one line naming what replaces them and exit 1 (`mace/cli/mace_scripts.py`; "
             "tests/mace_compat/test_mace_scripts.py runs each). The `mace/python/...` shim lives in a "
             "checkout only (not in the wheel).", "",
             "| MACE's path | MACE's docs | at that path | here |", "|---|---|---|---|"]
    for s in SCRIPTS:
        here = s.here.replace("|", "\\|")
        lines.append(f"| `{s.path}` | {s.versions} | {kinds[s.kind]} | {here} |")
    return lines + [""]


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def refuse(path: str) -> int:
    """What an error shim does: one line naming what replaces MACE's script here; exit 1."""
    _say(f"error: {path} is MACE's; here: {BY_PATH[path].here} (docs/mace_compat.md, MACE's scripts)")
    return 1


def _split(arg: str) -> tuple:
    name, eq, value = arg.partition("=")
    return name, (value if eq else None)


def convert_argv(argv: list) -> list:
    """tools/python/convert.py's flags -> [`convert` argv]."""
    out, rest = ["convert"], list(argv)
    while rest:
        name, value = _split(rest.pop(0))
        if name == "--output":
            out.append(f"--build_dir={value if value is not None else rest.pop(0)}")
        else:
            out.append(f"{name}={value}" if value is not None else name)
    return [out]


def run_model_argv(argv: list) -> list:
    """tools/python/run_model.py's flags -> [argv, ...] for our CLI (`build` first with --build);
    SystemExit(1) with one line for a flag that is a deployment-file key here."""
    run, build_first, rest = ["run"], False, list(argv)
    while rest:
        name, value = _split(rest.pop(0))
        if name in RUN_MODEL_KEYS:
            _say(f"error: tools/python/run_model.py {name}: here that is `{RUN_MODEL_KEYS[name]}:` in the "
                 f"deployment file (docs/deployment_file.md)")
            raise SystemExit(1)
        if name == "--build":
            build_first = True
        elif name in RUN_MODEL_SWITCHES:
            run.append(RUN_MODEL_SWITCHES[name])
        elif name in RUN_MODEL_FLAGS:
            value = value if value is not None else rest.pop(0)
            if RUN_MODEL_FLAGS[name] is None:
                _say(f"note: tools/python/run_model.py {name} has no effect here")
            else:
                run.append(f"{RUN_MODEL_FLAGS[name]}={value}")
        else:
            run.append(f"{name}={value}" if value is not None else name)
    if not build_first:
        return [run]
    return [_build_argv(run[1:]), run]


def _build_argv(run: list) -> list:
    """`build` with the flags of `run` that build takes too (each with its value)."""
    keep, build, i = ("--config", "--build_dir", "--model_name", "--target_abis"), ["build"], 0
    while i < len(run):
        name = run[i].split("=")[0]
        if name in keep:
            build.append(run[i])
            if "=" not in run[i] and i + 1 < len(run):
                i += 1
                build.append(run[i])
        i += 1
    return build


def run_each(main, argvs: list) -> int:
    """Run our CLI's `main` on each argv in turn; the first non-zero exit status stops it."""
    for argv in argvs:
        status = main(argv)
        if status:
            return status
    return 0
