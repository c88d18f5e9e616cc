"""Where a deployment's files are, and how tensors become files.

Everything a command needs to find a built model or read a user's input files:
the library folder, each model's .pb/.data, the generated code package, the
model files the deployment names (fetched and checksummed), the deployment's
models by name, and the `--input_dir` / `--output_dir` naming and `.npy`
loading rules (docs/cli.md). Shared by convert, run, the reports, calibration,
the tracer and the device runner, so they all agree.
"""
from __future__ import annotations

import glob
import math
import os
import re
import zlib
from pathlib import Path
from tokenize import TokenError

import numpy as np

from mace.config.deployment import DeploymentConfig, ModelConfig, SubgraphConfig
from mace.config import images, names
from mace.config.hints import command_hint
from mace.config.fetch import fetch, is_url, local_path
from mace.config.raw_files import INPUT_PREFIX, OUTPUT_PREFIX, raw_names, read_raw, write_raw
from mace.util.regular_file import NotRegularFile, open_regular
from mace.errors import ConfigError, RuntimeInputError

MAX_NPY_HEADER = 10_000         # numpy's own default limit, stated: a huge header is refused
NUMERIC_KINDS = "biuf"          # bool, ints, floats: what casts to an input's dtype meaningfully
MAP_SUFFIX = "_obfuscation_map.json"   # <model>_obfuscation_map.json beside an obfuscated model


def library_dir(config: DeploymentConfig, build_dir: Path | None = None) -> Path:
    return Path(build_dir or "builds") / config.library_name


def model_dir(config: DeploymentConfig, build_dir=None) -> Path:
    return library_dir(config, build_dir) / "model"


def model_paths(config: DeploymentConfig, model: str, build_dir: Path | None = None) -> tuple:
    d = model_dir(config, build_dir)
    return d / f"{model}.pb", d / f"{model}.data"


def package_name(library: str) -> str:
    """The library's generated package: '<identifier of library>_models' (mace/config/names.py)."""
    return names.identifier(library) + "_models"


def module_name(model: str) -> str:
    """A model's module in the generated package: the identifier of its name."""
    return names.identifier(model)


def code_names(config: DeploymentConfig) -> str:
    """How generated code names the library and its models, where that differs from their names
    (or always for model_graph_format: code), for config, convert and build to print; else ''."""
    renamed = [f"model '{m}' is its module {module_name(m)}" for m in config.models if module_name(m) != m]
    if names.identifier(config.library_name) == config.library_name and not renamed \
            and config.model_graph_format != "code":
        return ""
    return "; ".join([f"generated code (model_graph_format: code) imports as {package_name(config.library_name)}"
                      f" from builds/{config.library_name}/code/"] + renamed)


def code_dir(library_dir: Path, library: str) -> Path:
    """builds/<library>/code/<library>_models: the package `model_graph_format: code` writes."""
    return Path(library_dir) / "code" / package_name(library)


def converted_paths(config: DeploymentConfig, model: ModelConfig, build_dir=None,
                    command: str = "convert") -> tuple:
    """(.pb, .data) of a converted model, or a ConfigError saying which command makes them."""
    pb_path, data_path = model_paths(config, model.name, build_dir)
    if not pb_path.exists():
        raise ConfigError(f"model '{model.name}' has not been converted ({pb_path} is missing): "
                          f"run `{command_hint(command, config, build_dir)}` first")
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
                 allow_dir=model.platform in ("tensorflow", "keras"))  # a SavedModel is a directory
    weights = None
    if model.weight_file_path:
        weights = fetch(model.weight_file_path, model.weight_sha256_checksum,
                        f"{model.key_path}.weight_file_path", config.path, downloads)
    return path, weights


def data_file(config: DeploymentConfig, sg: SubgraphConfig, key: str, index: int,
              build_dir: Path | None = None) -> Path:
    """Entry `index` of validation_inputs_data / validation_outputs_data as a local path: a URL is
    downloaded once into builds/downloads and checked against <key>_sha256_checksum (required, as
    for model files); a local file is checked when a checksum is given, else used as it is."""
    value = sg.values[key][index]
    sums = sg.values[f"{key}_sha256_checksum"]
    if not (is_url(value) or sums):
        return local_path(value, config.base_dir)
    return fetch(value, sums[index] if sums else None, f"{sg.key_path}.{key}[{index}]", config.path,
                 Path(build_dir or "builds") / "downloads",
                 checksum_key=f"{sg.key_path}.{key}_sha256_checksum[{index}]")


def load_input(path: Path, spec, where: str, image=None) -> np.ndarray:
    """An input from a .npy file, or from a JPEG/PNG file through the input's image_preprocess."""
    if images.is_image(path):
        if image is None:
            raise RuntimeInputError(f"{where}: {path} is an image, but input '{spec.name}' declares no "
                                    f"image_preprocess (docs/deployment_file.md, Images as inputs)")
        return images.image_input(path, spec, image, where)
    return load_npy(path, spec, where)


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


def read_npy(path: Path) -> np.ndarray:
    """np.load of a regular file only (a FIFO would block forever); OSError says what it is.
    The header's shape is checked against the bytes that follow it first: numpy allocates what
    the header claims (6.4e13 elements: 256 TB) before reading a byte of it."""
    with open_regular(path) as f:
        _check_npy_size(f)
        f.seek(0)
        return np.load(f, allow_pickle=False, max_header_size=MAX_NPY_HEADER)


def _check_npy_size(f) -> None:
    """ValueError when an .npy header claims more data than the file holds (other files: np.load's)."""
    if f.read(6) != b"\x93NUMPY":
        return
    f.seek(0)
    version = np.lib.format.read_magic(f)
    read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}.get(version)
    if read_header is None:
        return   # version 3 and later: np.load reads (or refuses) them
    shape, _, dtype = read_header(f, max_header_size=MAX_NPY_HEADER)
    if dtype.hasobject:
        return   # refused by np.load (allow_pickle=False)
    needed = math.prod(int(d) for d in shape) * dtype.itemsize
    left = os.fstat(f.fileno()).st_size - f.tell()
    if needed > left:
        raise ValueError(f"its header says shape {list(shape)} {dtype} ({needed} bytes), "
                         f"but {left} bytes follow it")




def _kind_name(dtype: np.dtype) -> str:
    if dtype.fields:
        return "structured (record)"
    return {"U": "string", "S": "bytes", "M": "datetime", "m": "timedelta", "c": "complex",
            "O": "object", "V": "raw (void)"}.get(dtype.kind, str(dtype))


def load_npy(path: Path, spec, where: str) -> np.ndarray:
    """An input file for `spec`, reshaped only where that keeps the element order."""
    try:
        value = read_npy(path)
    except FileNotFoundError:
        raise RuntimeInputError(f"{where}: input file {path} not found") from None
    except NotRegularFile as e:
        raise RuntimeInputError(f"{where}: input file {path} is {e.strerror}") from None
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


def image_file(directory: Path, npy_name: str):
    """DIR/<name>.jpg|.jpeg|.png (any case of the suffix), or None."""
    stem = npy_name[:-len(".npy")]
    found = sorted(p for p in Path(directory).glob(f"{glob.escape(stem)}.*")
                   if p.stem == stem and images.is_image(p))
    return found[0] if found else None


def _input_file(directory: Path, spec, npy_name: str, raw_name: str, image=None) -> np.ndarray:
    """DIR/<name>.npy (ours), DIR/model_input_<name> (MACE's raw bytes) or, for an input with
    image_preprocess, DIR/<name>.jpg|.png: the name says which."""
    # exists(), not is_file(): a FIFO or folder of that name gets load_npy's own clear refusal
    picture = image_file(directory, npy_name) if image is not None else None
    if (directory / npy_name).exists() or not ((directory / raw_name).exists() or picture):
        if not (directory / npy_name).exists():
            also = " or an image <name>.jpg/.png" if image is not None else ""
            raise RuntimeInputError(f"--input_dir: input file {directory / npy_name} not found (nor MACE's "
                                    f"raw {directory / raw_name}{also}) for input '{spec.name}'")
        return load_npy(directory / npy_name, spec, "--input_dir")
    if (directory / raw_name).exists():
        return read_raw(directory / raw_name, spec, "--input_dir")
    return images.image_input(picture, spec, image, "--input_dir")


def write_outputs(output_dir, outputs: dict, output_format: str = "npy") -> None:
    """DIR/<name>.npy, or MACE's raw DIR/model_out_<name> (`--output_format raw`)."""
    out = Path(output_dir)
    raw = output_format == "raw"
    files = raw_names(OUTPUT_PREFIX, outputs, "output") if raw else file_names(outputs, "output")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, value in outputs.items():
            if raw:
                write_raw(out / files[name], value)
            else:
                np.save(out / files[name], value)
    except OSError as e:
        raise ConfigError(f"--output_dir {out}: cannot write {e.filename or out} ({e.strerror})") from None


def make_inputs(config: DeploymentConfig, sg: SubgraphConfig, input_dir: Path | None, seed: int = 0,
                build_dir: Path | None = None):
    """(inputs in the caller's layout, a word saying where they came from).

    From `--input_dir` (DIR/<name>.npy, MACE's raw DIR/model_input_<name>, or DIR/<name>.jpg|.png
    for an input with image_preprocess), else the subgraph's validation_inputs_data (files or URLs,
    .npy or images), else seeded uniform random values in input_ranges."""
    specs = sg.inputs
    steps = sequence_steps(input_dir) if input_dir else None
    if steps:   # a sequence of runs: the first step is this run's inputs (input_sequence: all)
        return _inputs_in(sg, steps[0]), f"files in {steps[0]} (the first of {len(steps)} steps)"
    if input_dir:
        files = file_names([s.name for s in specs], "input")
        raw = raw_names(INPUT_PREFIX, [s.name for s in specs], "input")
        return {s.name: _input_file(Path(input_dir), s, files[s.name], raw[s.name],
                                    images.for_input(sg.image_preprocess, s.name))
                for s in specs}, f"files in {input_dir}"
    if sg.validation_inputs_data:
        where = f"{config.path}: {sg.key_path}.validation_inputs_data"
        return {s.name: load_input(data_file(config, sg, "validation_inputs_data", i, build_dir), s, where,
                                   images.for_input(sg.image_preprocess, s.name))
                for i, s in enumerate(specs)}, "validation_inputs_data"
    inputs = {}
    for s in specs:
        rng = np.random.default_rng(seed + zlib.crc32(s.name.encode()))
        lo, hi = s.value_range
        if s.dtype.startswith(("int", "uint")):
            inputs[s.name] = rng.integers(int(lo), int(hi) + 1, s.shape).astype(s.dtype)
        else:
            inputs[s.name] = rng.uniform(lo, hi, s.shape).astype(s.dtype)
    return inputs, f"random in input_ranges (seed {seed})"


def sequence_steps(input_dir) -> list | None:
    """The sub-folders of `--input_dir`, in name order, when it holds a sequence of runs (a
    streaming model's stream: DIR/000/<name>.npy, DIR/001/<name>.npy, ...) and no files of its
    own; None when the inputs are files in DIR itself."""
    directory = Path(input_dir)
    if not directory.is_dir():
        return None
    entries = [p for p in directory.iterdir() if not p.name.startswith(".")]
    folders = sorted(p for p in entries if p.is_dir())
    return folders if folders and len(folders) == len(entries) else None


def input_sequence(sg: SubgraphConfig, input_dir) -> list | None:
    """[inputs of each step] of a `--input_dir` that holds a sequence (sequence_steps), else None."""
    steps = sequence_steps(input_dir) if input_dir else None
    return [_inputs_in(sg, step) for step in steps] if steps else None


def _inputs_in(sg: SubgraphConfig, directory: Path) -> dict:
    files = file_names([s.name for s in sg.inputs], "input")
    raw = raw_names(INPUT_PREFIX, [s.name for s in sg.inputs], "input")
    return {s.name: _input_file(Path(directory), s, files[s.name], raw[s.name],
                                images.for_input(sg.image_preprocess, s.name))
            for s in sg.inputs}
