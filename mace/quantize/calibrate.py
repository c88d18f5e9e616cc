"""Calibration: run the float model over sample inputs and record every tensor's range.

    ranges = collect_ranges(graph, samples)      # {tensor: (min, max)} over all samples
    stats  = collect_stats(graph, samples)       # [{tensor: (min, max)}] one dict per sample

`run --quantize_stat` logs the per-sample statistics in MACE's format and
`convert` calls collect_ranges directly when a model names calibration samples
(the one-step path). Ranges are those of the converted float graph's tensors:
the same names the quantize pass looks up.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mace.config.fetch import local_path
from mace.util.regular_file import open_regular
from mace.config import images
from mace.config.files import file_names, image_file, load_input, load_npy, make_inputs
from mace.errors import ConfigError
from mace.runtime.engine import Engine


def _observer(stats: dict):
    def observe(event, node, engine):
        if event != "after":
            return
        for name, out in zip(node.op.output, node.outputs):
            if out is None or out.size == 0 or out.dtype.kind != "f":
                continue
            stats[name] = (float(out.min()), float(out.max()))
    return observe


def collect_stats(graph, samples, engine=None) -> list:
    """One {tensor: (min, max)} per sample (a dict input name -> array); inputs included."""
    engine = engine or Engine(graph, device="cpu")
    per_sample = []
    for inputs in samples:
        stats = {name: (float(np.min(v)), float(np.max(v))) for name, v in inputs.items()}
        engine.observers.append(_observer(stats))
        try:
            engine.run(inputs)
        finally:
            engine.observers.pop()
        per_sample.append(stats)
    return per_sample


def merge_stats(per_sample: list) -> dict:
    """Overall (min of mins, max of maxes) per tensor."""
    ranges = {}
    for stats in per_sample:
        for name, (lo, hi) in stats.items():
            old = ranges.get(name)
            ranges[name] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
    return ranges


def collect_ranges(graph, samples) -> dict:
    return merge_stats(collect_stats(graph, samples))


def load_samples(directory, specs, where: str, image_table: dict | None = None) -> list:
    """Calibration samples in `directory` as [{input name: array}], in file-name order.

    Accepted layouts (arrays in the deployment file's input layout and shape):
      * one sub-folder per sample, holding `<input>.npy` for every input (as `run --input_dir`;
        `<input>.jpg|.png` for an input with image_preprocess);
      * `*.npz` files, one per sample, keyed by input name;
      * `<input>.npy` for every input directly in the folder: one sample;
      * for a one-input model, any `*.npy` files: one sample each; with image_preprocess, any
        JPEG/PNG files (a batch of N takes N images per sample, in file-name order).
    `directory` may also be a list of such files (a one-input model).
    """

    image_table = image_table or {}
    if isinstance(directory, (list, tuple)):
        return _listed_samples([Path(p) for p in directory], specs, where, image_table)
    d = Path(directory)
    if not d.is_dir():
        raise ConfigError(f"{where}: calibration folder {d} not found")
    files = file_names([s.name for s in specs], "input")
    subdirs = sorted(p for p in d.iterdir() if p.is_dir())
    samples = []
    if subdirs:
        samples = [{s.name: _sample_file(sub, files[s.name], s, where, image_table) for s in specs}
                   for sub in subdirs]
    elif len(specs) == 1 and images.for_input(image_table, specs[0].name) and _pictures(d):
        samples = _listed_samples(_pictures(d), specs, where, image_table)
    elif sorted(d.glob("*.npz")):
        for path in sorted(d.glob("*.npz")):
            with open_regular(path) as f, np.load(f, allow_pickle=False) as z:  # a FIFO would block
                missing = [s.name for s in specs if s.name not in z.files]
                if missing:
                    raise ConfigError(f"{where}: {path} lacks input(s) {missing} (has {z.files})")
                samples.append({s.name: _fit(z[s.name], s, path, where) for s in specs})
    elif all((d / files[s.name]).exists() for s in specs):
        samples = [{s.name: load_npy(d / files[s.name], s, where) for s in specs}]
    elif len(specs) == 1:
        samples = [{specs[0].name: load_npy(p, specs[0], where)} for p in sorted(d.glob("*.npy"))]
    if not samples:
        raise ConfigError(f"{where}: no calibration samples in {d} (sub-folders with <input>.npy, "
                          f"*.npz files, or *.npy files for a one-input model)")
    return samples


def _pictures(d: Path) -> list:
    return sorted(p for p in d.iterdir() if p.is_file() and images.is_image(p))


def _sample_file(folder: Path, npy_name: str, spec, where: str, image_table: dict):
    """<input>.npy in a sample's folder, or <input>.jpg|.png for an input with image_preprocess."""
    prep = images.for_input(image_table, spec.name)
    picture = image_file(folder, npy_name) if prep else None
    if picture and not (folder / npy_name).exists():
        return images.image_input(picture, spec, prep, where)
    return load_npy(folder / npy_name, spec, where)


def _listed_samples(paths: list, specs, where: str, image_table: dict) -> list:
    """A one-input model's samples from a list of files: .npy each, images N per batch of N."""
    if len(specs) != 1:
        raise ConfigError(f"{where}: a list of files gives samples of a one-input model; this model has "
                          f"{len(specs)} inputs (use one sub-folder per sample)")
    spec = specs[0]
    prep = images.for_input(image_table, spec.name)
    if not prep or not all(images.is_image(p) for p in paths):
        return [{spec.name: load_input(p, spec, where, prep)} for p in paths]
    _, batch, _, _, _ = images.geometry(spec, prep, where)
    if len(paths) < batch:
        raise ConfigError(f"{where}: {len(paths)} image(s), input '{spec.name}' takes {batch} per sample")
    # a batch of N takes N images per sample; a last partial batch is left out
    return [{spec.name: images.image_batch(paths[i:i + batch], spec, prep, where).reshape(spec.shape)}
            for i in range(0, len(paths) - batch + 1, batch)]


def _fit(value, spec, path, where):
    if value.size != int(np.prod(spec.shape)):
        raise ConfigError(f"{where}: {path}: input '{spec.name}' has shape {list(value.shape)}, "
                          f"expected {list(spec.shape)}")
    return value.reshape(spec.shape).astype(spec.dtype)


def calibration_samples(config, sg):
    """A callable returning the calibration samples, or None when there are none.

    Samples come from the subgraph's `quantize_calibration_data` folder (or list of files), else from its
    validation_inputs_data (one sample) when no quantize_range_file is given.
    """

    if sg.quantize_calibration_data:
        where = f"{config.path}: {sg.key_path}.quantize_calibration_data"
        data = sg.quantize_calibration_data
        folder = ([local_path(p, config.path.parent) for p in data] if isinstance(data, list)
                  else local_path(data, config.path.parent))
        return lambda: load_samples(folder, sg.inputs, where, sg.image_preprocess)
    if sg.validation_inputs_data and not sg.quantize_range_file:
        return lambda: [make_inputs(config, sg, None)[0]]
    return None


def calibration_source(config, sg):
    """A `graph -> ranges` callable for the quantize pass, or None when there are no samples."""
    samples = calibration_samples(config, sg)
    return (lambda graph: collect_ranges(graph, samples())) if samples else None
