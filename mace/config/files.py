"""Where a deployment's files are, and how tensors become files.

Everything a command needs to find a built model or read a user's input files:
the library folder, each model's .pb/.data, the generated code package, the
model files the deployment names (fetched and checksummed), the deployment's
models by name, and the `--input_dir` / `--output_dir` naming and `.npy`
loading rules (docs/cli.md). Shared by convert, run, the reports, calibration,
the tracer and the device runner, so they all agree.
"""
from __future__ import annotations

import re
import zlib
from tokenize import TokenError
from pathlib import Path

import numpy as np

from mace.config.deployment import DeploymentConfig, ModelConfig, SubgraphConfig
from mace.config.fetch import fetch, local_path
from mace.errors import ConfigError, RuntimeInputError

MAP_SUFFIX = "_obfuscation_map.json"   # <model>_obfuscation_map.json beside an obfuscated model


def library_dir(config: DeploymentConfig, build_dir: Path | None = None) -> Path:
    return Path(build_dir or "builds") / config.library_name


def model_dir(config: DeploymentConfig, build_dir=None) -> Path:
    return library_dir(config, build_dir) / "model"


def model_paths(config: DeploymentConfig, model: str, build_dir: Path | None = None) -> tuple:
    d = model_dir(config, build_dir)
    return d / f"{model}.pb", d / f"{model}.data"


def package_name(library: str) -> str:
    """A Python identifier for the library's generated package: '<library>_models'."""
    name = re.sub(r"\W", "_", library) + "_models"
    return name if not name[0].isdigit() else "_" + name


def code_dir(library_dir: Path, library: str) -> Path:
    """builds/<library>/code/<library>_models: the package `model_graph_format: code` writes."""
    return Path(library_dir) / "code" / package_name(library)


def converted_paths(config: DeploymentConfig, model: ModelConfig, build_dir=None,
                    command: str = "convert") -> tuple:
    """(.pb, .data) of a converted model, or a ConfigError saying which command makes them."""
    pb_path, data_path = model_paths(config, model.name, build_dir)
    if not pb_path.exists():
        flag = f" --build_dir={build_dir}" if build_dir and Path(build_dir) != Path("builds") else ""
        raise ConfigError(f"model '{model.name}' has not been converted ({pb_path} is missing): "
                          f"run `python tools/converter.py {command} --config={config.path}{flag}` first")
    return pb_path, data_path


def models_of(config: DeploymentConfig, names=None) -> list:
    """The ModelConfigs named (default: all), or a ConfigError naming the unknown one."""
    names = list(names or config.models)
    for n in names:
        if n not in config.models:
            raise ConfigError(f"{config.path}: no model named '{n}'; models: {', '.join(config.models)}")
    return [config.models[n] for n in names]


def fetch_model_files(config: DeploymentConfig, model: ModelConfig, build_dir: Path | None = None):
    """(model file, weight file or None), downloaded into builds/downloads when URLs, checksummed."""
    downloads = Path(build_dir or "builds") / "downloads"
    path = fetch(model.model_file_path, model.model_sha256_checksum,
                 f"{model.key_path}.model_file_path", config.path, downloads,
                 allow_dir=model.platform == "tensorflow")  # a SavedModel is a directory
    weights = None
    if model.weight_file_path:
        weights = fetch(model.weight_file_path, model.weight_sha256_checksum,
                        f"{model.key_path}.weight_file_path", config.path, downloads)
    return path, weights


def safe_name(tensor: str) -> str:
    """File-safe form of a tensor name: '/', ':' and '\\' become '_'."""
    return re.sub(r"[/:\\]", "_", tensor)


def file_names(tensors, what: str) -> dict:
    """tensor -> file name; two tensors that would share a file are an error, not an overwrite."""
    names = {}
    for t in tensors:
        f = f"{safe_name(t)}.npy"
        clash = next((other for other, g in names.items() if g == f), None)
        if clash is not None:
            raise ConfigError(f"{what} tensors '{clash}' and '{t}' would both be written/read as {f}")
        names[t] = f
    return names


MAX_NPY_HEADER = 10_000         # numpy's own default limit, stated: a huge header is refused
NUMERIC_KINDS = "biuf"          # bool, ints, floats: what casts to an input's dtype meaningfully


def _kind_name(dtype: np.dtype) -> str:
    if dtype.fields:
        return "structured (record)"
    return {"U": "string", "S": "bytes", "M": "datetime", "m": "timedelta", "c": "complex",
            "O": "object", "V": "raw (void)"}.get(dtype.kind, str(dtype))


def load_npy(path: Path, spec, where: str) -> np.ndarray:
    """An input file for `spec`, reshaped only where that keeps the element order."""
    try:
        value = np.load(path, allow_pickle=False, max_header_size=MAX_NPY_HEADER)
    except FileNotFoundError:
        raise RuntimeInputError(f"{where}: input file {path} not found") from None
    except (ValueError, OSError, EOFError, SyntaxError, TokenError) as e:  # header parse errors too
        raise RuntimeInputError(f"{where}: {path} is not a readable .npy file "
                                f"({type(e).__name__}: {e})") from None
    if not isinstance(value, np.ndarray):   # np.load opens a .npz (zip) whatever its name
        value.close()
        raise RuntimeInputError(f"{where}: {path} is an .npz archive, not an .npy array file")
    if value.dtype.kind not in NUMERIC_KINDS:
        raise RuntimeInputError(f"{where}: {path} holds {_kind_name(value.dtype)} values; input "
                                f"'{spec.name}' takes numbers ({spec.dtype})")
    if tuple(value.shape) != tuple(spec.shape):
        # Only a reshape that keeps the element order (dims of 1 added or dropped) is taken as
        # meant; same size in another order (NCHW data for an NHWC input) would be silently wrong.
        squeeze = [d for d in value.shape if d != 1] == [d for d in spec.shape if d != 1]
        if value.size == int(np.prod(spec.shape)) and squeeze:
            value = value.reshape(spec.shape)
        else:
            raise RuntimeInputError(f"{where}: {path} has shape {list(value.shape)}, input '{spec.name}' "
                                    f"expects {list(spec.shape)} ({spec.data_format})")
    return value.astype(spec.dtype)


def make_inputs(config: DeploymentConfig, sg: SubgraphConfig, input_dir: Path | None, seed: int = 0):
    """(inputs in the caller's layout, a word saying where they came from).

    From `--input_dir DIR/<name>.npy`, else the subgraph's validation_inputs_data,
    else seeded uniform random values in input_ranges."""
    specs = sg.inputs
    if input_dir:
        files = file_names([s.name for s in specs], "input")
        return {s.name: load_npy(Path(input_dir) / files[s.name], s, "--input_dir")
                for s in specs}, f"files in {input_dir}"
    if sg.validation_inputs_data:
        return {s.name: load_npy(local_path(f, config.base_dir), s, f"{sg.key_path}.validation_inputs_data")
                for s, f in zip(specs, sg.validation_inputs_data)}, "validation_inputs_data"
    inputs = {}
    for s in specs:
        rng = np.random.default_rng(seed + zlib.crc32(s.name.encode()))
        lo, hi = s.value_range
        if s.dtype.startswith(("int", "uint")):
            inputs[s.name] = rng.integers(int(lo), int(hi) + 1, s.shape).astype(s.dtype)
        else:
            inputs[s.name] = rng.uniform(lo, hi, s.shape).astype(s.dtype)
    return inputs, f"random in input_ranges (seed {seed})"
