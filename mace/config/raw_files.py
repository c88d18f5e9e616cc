"""MACE's raw tensor files for `run --input_dir` / `--output_dir`.

MACE writes and reads each tensor as its bare bytes (`ndarray.tofile`: little-endian, no
header; shape and dtype come from the deployment file), named `<prefix>_<tensor name with every
character that is not a letter or digit replaced by _>` (tools/common.py `formatted_file_name`),
with the prefixes `model_input` and `model_out`. `.npy` files are ours; a name says which.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from mace.util.regular_file import NotRegularFile, open_regular
from mace.errors import ConfigError, RuntimeInputError

INPUT_PREFIX = "model_input"
OUTPUT_PREFIX = "model_out"


def raw_name(prefix: str, tensor: str) -> str:
    """model_input_<tensor>, each non-alphanumeric character of the name as '_' (as MACE)."""
    return prefix + "_" + "".join(c if c.isascii() and c.isalnum() else "_" for c in tensor)


def raw_names(prefix: str, tensors, what: str) -> dict:
    """tensor -> raw file name; two tensors sharing one name are an error, not an overwrite."""
    names = {}
    for t in tensors:
        f = raw_name(prefix, t)
        clash = next((other for other, g in names.items() if g == f), None)
        if clash is not None:
            raise ConfigError(f"{what} tensors '{clash}' and '{t}' would both be written/read as {f}")
        names[t] = f
    return names


def read_raw(path: Path, spec, where: str) -> np.ndarray:
    """One raw input: the spec's dtype, little-endian, exactly the spec's element count. The size
    is checked before reading (a wrong or endless file is never read whole; a FIFO is refused)."""
    dtype = np.dtype(spec.dtype).newbyteorder("<")
    count = int(np.prod(spec.shape))
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size != count * dtype.itemsize:
                raise RuntimeInputError(f"{where}: {path} holds {size} bytes = {size / dtype.itemsize:g} "
                                        f"{spec.dtype} values; input '{spec.name}' {list(spec.shape)} needs "
                                        f"{count} ({count * dtype.itemsize} bytes)")
            value = np.frombuffer(f.read(), dtype=dtype)
    except NotRegularFile as e:
        raise RuntimeInputError(f"{where}: input file {path} is {e.strerror}") from None
    except OSError as e:
        raise RuntimeInputError(f"{where}: cannot read {path} ({e})") from None
    return value.reshape(spec.shape).astype(spec.dtype)


def write_raw(path: Path, value) -> None:
    """MACE's `ndarray.tofile`, little-endian whatever this machine is."""
    a = np.ascontiguousarray(value)
    a.astype(a.dtype.newbyteorder("<"), copy=False).tofile(path)
