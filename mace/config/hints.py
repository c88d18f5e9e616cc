"""The converter commands that errors and notes tell the user to run.

A hint is the command that fixes the problem, runnable exactly as printed: the CLI as the user
runs it (mace.util.invocation), the deployment file and build folder they gave, and every
deployment-file key they set by a flag on this command (`run --target_abis=arm64` needs
`build --target_abis=arm64`, not the .yml's ABIs). Every word is shell-quoted.
"""
from __future__ import annotations

import shlex
from pathlib import Path

from mace.util.invocation import converter_command

# The keys each command takes as flags (mace/cli/_overrides.py), carried into its hint when the
# user set them by flag. `build` has no --model_graph_format / --model_data_format: the pair
# travels as MACE 0.8's --build_type when it is one of its two forms.
CARRIED = {"convert": ("target_abis", "target_socs", "model_graph_format", "model_data_format"),
           "build": ("target_abis", "target_socs"),
           "run": ("target_abis", "model_graph_format", "model_data_format"),
           "benchmark": ("target_abis", "model_graph_format", "model_data_format")}
BUILD_TYPES = {("file", "file"): "proto", ("code", "code"): "code"}


def _flag_value(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _set_by_flag(config, key: str) -> bool:
    return str(config.origin.get(key, "")).startswith("--")


def carried_flags(config, command: str, keys: dict | None = None) -> list:
    """--key=value for each deployment-file key the user set by flag that `command` takes;
    `keys` gives keys the fix sets (--target_abis=arm64), replacing what the user gave."""
    keys = keys or {}
    flags = [f"--{key}={_flag_value(config.values[key])}" for key in CARRIED.get(command, ())
             if _set_by_flag(config, key) and key not in keys]
    flags += [f"--{key}={_flag_value(value)}" for key, value in keys.items()]
    if command == "build" and any(_set_by_flag(config, k) for k in ("model_graph_format", "model_data_format")):
        build_type = BUILD_TYPES.get((config.values.get("model_graph_format"),
                                      config.values.get("model_data_format")))
        if build_type:
            flags.append(f"--build_type={build_type}")
    return flags


def command_hint(command: str, config, build_dir=None, *extra: str, keys: dict | None = None) -> str:
    """`<converter> COMMAND --config=FILE [--build_dir=DIR] [carried flags] [extra]`, quoted.
    `keys`: deployment-file keys the fix sets by flag (they must be among CARRIED[command])."""
    words = [command, f"--config={config.path}"]
    if build_dir and Path(build_dir) != Path("builds"):
        words.append(f"--build_dir={build_dir}")
    words += carried_flags(config, command, keys)
    words += extra
    return f"{converter_command()} {shlex.join(words)}"
