"""Range files in MACE's format: one `<tensor>@@<min>,<max>` line per tensor.

`run --quantize_stat` writes per-sample logs of the same shape
(`Tensor range @@<tensor>@@<min>,<max>`); tools/quantize_stat.py reduces them to a
range file; `quantize_range_file` in the .yml reads one back at convert.
"""
from __future__ import annotations

import math
from pathlib import Path

from mace.errors import ConfigError

SEP = "@@"


def read_range_file(path: Path) -> dict:
    """tensor -> (min, max); errors name the file and line."""
    ranges = {}
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read quantize range file ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: quantize range file is not a text file ({e.reason} at byte "
                          f"{e.start})") from None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            name, lo, hi = parse_range(line)
        except ValueError:
            raise ConfigError(f"{path}:{number}: expected '<tensor>@@<min>,<max>' with min <= max, "
                              f"got {line!r}") from None
        ranges[name] = (lo, hi)
    return ranges


def parse_range(text: str) -> tuple:
    """(tensor, min, max) of one `<tensor>@@<min>,<max>`; ValueError unless finite min <= max."""
    name, sep, values = text.strip().rpartition(SEP)
    lo, hi = (float(v) for v in values.split(","))
    if not sep or not name or not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(text)
    return name, lo, hi


def format_ranges(ranges: dict) -> str:
    return "".join(f"{name}{SEP}{lo!r},{hi!r}\n" for name, (lo, hi) in ranges.items())
