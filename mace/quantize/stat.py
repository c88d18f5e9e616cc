"""Reduce `run --quantize_stat` logs to one range per tensor (MACE's quantize_stat step).

    stats = parse_log(path)                    # {tensor: [(min, max) per sample]}
    ranges = reduce_stats(stats, percentile=0, enhance=False, enhance_ratio=10)
    text = format_ranges({r.tensor: (r.min, r.max) for r in ranges})   # ranges.py

The log is any text: only lines holding `Tensor range @@<tensor>@@<min>,<max>`
count (one per tensor per sample), so a captured stdout of `run` works as well.

Per tensor, over its n samples (per-sample minima lo_i, maxima hi_i):

1. percentile P (0 <= P < 50): k = floor(n * P / 100) samples are dropped at each
   end: the k lowest minima and the k highest maxima. min is then the lowest
   minimum left, max the highest maximum left; P = 0 keeps the overall range.
2. enhance (optional): trims a long tail the percentile left. Sort the maxima that
   are left, a_0 <= ... <= a_(m-1); consecutive samples are 1/m apart in quantile,
   so the steps a_i - a_(i-1) are the slope d(max)/d(quantile) up to that factor.
   The top a_i is dropped while its step is more than `enhance_ratio` times the
   mean step of the samples below it, (a_(i-1) - a_0) / (i - 1): one sample (or a
   few) pushing the range far beyond where the others cluster. It stops at the
   first step that is not an outlier, and keeps at least half of the samples and
   at least two. The minima are trimmed the same way, mirrored. A range whose
   extremes rise evenly (no jump) is kept whole.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from mace.config.files import MAP_SUFFIX, converted_paths
from mace.config.hints import command_hint
from mace.errors import ConfigError
from mace.quantize.ranges import SEP, parse_range
from mace.runtime.engine import create_engine

MARKER = "Tensor range @@"
DEFAULT_ENHANCE_RATIO = 10.0


def stat_line(tensor: str, lo: float, hi: float) -> str:
    """One log line in MACE's format (repr: the values read back exactly)."""
    return f"{MARKER}{tensor}{SEP}{float(lo)!r},{float(hi)!r}"


@dataclass
class TensorRange:
    tensor: str
    samples: int
    min: float                 # the reduced range (what the range file gets)
    max: float
    observed_min: float        # over every sample
    observed_max: float
    trimmed_low: int = 0       # samples whose minimum enhance dropped
    trimmed_high: int = 0      # ... whose maximum

    @property
    def trimmed(self) -> bool:
        return bool(self.trimmed_low or self.trimmed_high)


def parse_log(path) -> dict:
    """tensor -> [(min, max)] in log order; errors name the file and line."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        raise ConfigError(f"{path}: log file not found (write it with `run --quantize_stat`)") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read log file ({e.strerror})") from None
    stats: dict = {}
    for number, line in enumerate(text.splitlines(), 1):
        start = line.find(MARKER)
        if start < 0:
            continue
        name, lo, hi = _parse_line(line[start + len(MARKER):], path, number)
        stats.setdefault(name, []).append((lo, hi))
    if not stats:
        raise ConfigError(f"{path}: no '{MARKER}<tensor>{SEP}<min>,<max>' lines: is it the log of "
                          f"`run --quantize_stat`?")
    return stats


def _parse_line(rest: str, path, number: int) -> tuple:
    try:
        return parse_range(rest)
    except ValueError:
        raise ConfigError(f"{path}:{number}: malformed range line {(MARKER + rest).strip()!r}: "
                          f"expected '{MARKER}<tensor>{SEP}<min>,<max>' with finite min <= max") from None


def check_options(percentile: float, enhance_ratio: float) -> None:
    if not 0 <= percentile < 50:
        raise ConfigError(f"--percentile: {percentile} is outside [0, 50): it is the percentage of "
                          f"samples dropped at each end")
    if not enhance_ratio > 0:
        raise ConfigError(f"--enhance_ratio: {enhance_ratio} must be positive")


def reduce_stats(stats: dict, percentile: float = 0.0, enhance: bool = False,
                 enhance_ratio: float = DEFAULT_ENHANCE_RATIO) -> list:
    """One TensorRange per tensor, in the log's order (see the module doc)."""
    check_options(percentile, enhance_ratio)
    return [reduce_tensor(name, samples, percentile, enhance, enhance_ratio)
            for name, samples in stats.items()]


def reduce_tensor(name: str, samples: list, percentile: float = 0.0, enhance: bool = False,
                  enhance_ratio: float = DEFAULT_ENHANCE_RATIO) -> TensorRange:
    n = len(samples)
    k = math.floor(n * percentile / 100)
    lows = sorted(lo for lo, _ in samples)[k:]                   # the k lowest minima dropped
    highs = sorted(hi for _, hi in samples)[:n - k]              # the k highest maxima dropped
    cut_low = cut_high = 0
    if enhance:
        cut_low = tail_length([-v for v in reversed(lows)], enhance_ratio)   # mirrored
        cut_high = tail_length(highs, enhance_ratio)
    return TensorRange(name, n, lows[cut_low], highs[len(highs) - 1 - cut_high],
                       min(lo for lo, _ in samples), max(hi for _, hi in samples), cut_low, cut_high)


def tail_length(values: list, ratio: float) -> int:
    """How many of the top of `values` (sorted ascending) form a long tail (module doc, step 2)."""
    m = len(values)
    keep_at_least = max(2, math.ceil(m / 2))
    top = m - 1
    while top >= keep_at_least:
        step = values[top] - values[top - 1]
        body_step = (values[top - 1] - values[0]) / (top - 1)
        if step <= 0 or step <= ratio * body_step:
            break
        top -= 1
    return m - 1 - top


# ---- the `run --quantize_stat` side -----------------------------------------------------
def log_lines(per_sample: list) -> list:
    """MACE's log lines for calibrate.collect_stats' result (one block per sample)."""
    return [stat_line(t, lo, hi) for stats in per_sample for t, (lo, hi) in stats.items()]


def stat_config(config, force: bool = False):
    """Make `config` convert float models for statistics: quantize off, CPU fp32, names kept.

    Applies to every model when `force` (`convert --quantize_stat`), else to the models
    with a subgraph whose .yml says `quantize_stat: 1` (MACE's key): a model converts as
    one graph. Returns the subgraph configs changed."""
    changed = []
    for model in config.models.values():
        if not (force or any(sg.values.get("quantize_stat") for sg in model.subgraphs)):
            continue
        whole = model.graph   # the model as one graph: its subgraph, or the named ones joined
        for sg in model.subgraphs + ([whole] if whole not in model.subgraphs else []):
            sg.values.update(quantize=0, obfuscate=0, runtime="cpu", data_type="fp32_fp32")
            if sg.values.get("placement"):
                sg.values["placement"] = None     # every op on the CPU
            changed.append(sg)
    return changed


def stat_engine(config, model, build_dir=None):
    """The converted float model of `model` on the CPU, or a clear error saying how to get it."""
    pb_path, data_path = converted_paths(config, model, build_dir)
    how = f"run `{command_hint('convert', config, build_dir, '--quantize_stat')}`"
    if pb_path.with_name(f"{model.name}{MAP_SUFFIX}").exists():
        raise ConfigError(f"model '{model.name}' was converted with obfuscate: 1, so its tensor names "
                          f"would not match a range file; for statistics, {how}")
    engine = create_engine(pb_path, data_path, device="cpu")
    if engine.quantized:
        raise ConfigError(f"model '{model.name}' ({pb_path}) is quantized; --quantize_stat needs the "
                          f"float model: {how} (float even when the .yml says quantize: 1)")
    return engine
