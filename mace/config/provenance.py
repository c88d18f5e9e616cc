"""What a build was made from, and whether it still matches the deployment file.

`convert` records `made_from(...)` in each model's build manifest
(mace/ir/manifest.py): the model and weight files' sha256 and every resolved
deployment key that changes what convert writes. `check_build` (called by
`open_engine`, so by run, run --validate, benchmark and the reports) refuses a
torn build and a stale one, naming each key or file that changed. It does not
re-convert by itself: convert may need frameworks the host running the model
lacks, and a silent minutes-long convert inside `run` would surprise more than
the one-line instruction does (docs/reliability.md).
"""
from __future__ import annotations

import json
from pathlib import Path

from mace.config.deployment import DeploymentConfig, ModelConfig
from mace.config.fetch import is_url, local_path, sha256_of
from mace.config.files import model_dir
from mace.config.hints import command_hint
from mace.errors import ModelError
from mace.ir.manifest import StatCache, manifest_path, read_manifest, verify_files
from mace.ir.runtimes import QUANTIZED_ONLY

# Resolved subgraph keys that change the converted files; the rest (validation data,
# thresholds, OpenCL queue settings...) only change how a build is run or checked.
BUILD_KEYS = ("input_tensors", "input_shapes", "input_data_formats", "input_data_types", "input_ranges",
              "input_aliases", "output_tensors", "output_shapes", "output_data_formats",
              "output_data_types", "output_aliases", "runtime", "data_type", "winograd", "obfuscate",
              "quantize", "quantize_large_weights", "quantize_range_file", "quantize_calibration_data",
              "quantize_schema", "change_concat_ranges", "graph_optimize_options", "placement",
              "placement_preference", "quantize_target_cosine", "image_preprocess")
LIBRARY_KEYS = ("model_graph_format", "model_data_format")


def rerun_hint(config: DeploymentConfig, build_dir=None) -> str:
    return f"re-run `{command_hint('convert', config, build_dir)}`"


def _plain(value):
    """As JSON would give it back (tuples become lists), so recorded and current compare equal."""
    return json.loads(json.dumps(value, default=str))


def build_values(sg) -> dict:
    """The subgraph's BUILD_KEYS as recorded; image_preprocess only changes a quantized build
    (its calibration images), so a float build records none and stays valid when it changes."""
    values = {k: sg.values.get(k) for k in BUILD_KEYS}
    ranges = {n: {str(d): list(r) for d, r in getattr(shape, "ranges", {}).items()}
              for n, shape in zip(sg.input_tensors, sg.input_shapes) if getattr(shape, "ranges", None)}
    if ranges:   # input_shapes' variable dimensions (recorded only where there are some: older builds stay valid)
        values["input_shape_ranges"] = ranges
    if not (sg.quantize or sg.runtime in QUANTIZED_ONLY):
        values["image_preprocess"] = None
    return _plain(values)


def _file_record(value: str | None, path: Path | None) -> dict | None:
    if not value:
        return None
    return {"path": value, "sha256": sha256_of(path) if path else None}


def made_from(config: DeploymentConfig, model: ModelConfig, model_path: Path, weight_path) -> dict:
    """The record convert writes: source files (as converted) and the build-relevant keys."""
    return {"platform": model.platform,
            "model_file": _file_record(model.model_file_path, Path(model_path)),
            "weight_file": _file_record(model.weight_file_path, Path(weight_path) if weight_path else None),
            "library": {k: config.values.get(k) for k in LIBRARY_KEYS},
            "subgraphs": {sg.key_path: build_values(sg) for sg in model.subgraphs}}


def _current_sha(config, value: str | None, checksum: str | None, recorded: dict, cache: StatCache):
    """The sha256 the named file has now (None: cannot tell without a download)."""
    if is_url(value):
        return checksum   # no network at run time: the deployment file's checksum names it
    path = local_path(value, config.base_dir)
    if not path.exists():
        return recorded.get("sha256")   # source gone: the build still runs
    if path.is_dir():                   # a SavedModel: hashed file by file
        return sha256_of(path)
    try:
        return cache.sha256(path, f"source:{path.resolve()}")
    except OSError:                     # a FIFO or device there now: unreadable, as if gone
        return recorded.get("sha256")


def changes(config: DeploymentConfig, model: ModelConfig, recorded: dict, cache: StatCache) -> list:
    """What differs between the recorded build and the deployment file and model files now."""
    out = []
    if recorded.get("platform") != model.platform:
        out.append(f"{model.key_path}.platform: built from {recorded.get('platform')}, now {model.platform}")
    for key, value, checksum in (("model_file", model.model_file_path, model.model_sha256_checksum),
                                 ("weight_file", model.weight_file_path, model.weight_sha256_checksum)):
        was = recorded.get(key) or {}
        if not value and not was.get("path"):
            continue
        if not value or not was.get("path"):
            out.append(f"{model.key_path}.{key}_path: built from {was.get('path')!r}, now {value!r}")
            continue
        now = _current_sha(config, value, checksum, was, cache)
        where = value if value == was["path"] else f"{value} (built from {was['path']})"
        if now and was.get("sha256"):
            if now != was["sha256"]:   # the content counts, not the path: a moved file is the same
                out.append(f"{model.key_path}.{key}_path: {where} changed since convert "
                           f"(sha256 {was['sha256'][:12]}... -> {now[:12]}...)")
        elif value != was["path"]:
            out.append(f"{model.key_path}.{key}_path: built from {was['path']!r}, now {value!r}")
    for key in LIBRARY_KEYS:
        was, now = (recorded.get("library") or {}).get(key), config.values.get(key)
        if was != now:
            out.append(f"{key}: built with {was!r}, now {now!r}")
    built = recorded.get("subgraphs") or {}
    current = {sg.key_path: build_values(sg) for sg in model.subgraphs}
    for key_path in sorted(set(built) | set(current)):
        if key_path not in built or key_path not in current:
            out.append(f"{key_path}: {'added' if key_path in current else 'removed'} since convert")
            continue
        for k in BUILD_KEYS:
            if built[key_path].get(k) != current[key_path].get(k):
                out.append(f"{key_path}.{k}: built with {built[key_path].get(k)!r}, "
                           f"now {current[key_path].get(k)!r}")
    return out


def check_build(config: DeploymentConfig, model: ModelConfig, build_dir=None) -> None:
    """Refuse (ModelError) a torn build, a build made by an older version, or a stale build."""
    rerun = rerun_hint(config, build_dir)
    path = manifest_path(model_dir(config, build_dir), model.name)
    doc = read_manifest(path, rerun)
    cache = StatCache(path.parent, model.name)
    verify_files(path, doc, rerun, cache)
    changed = changes(config, model, doc.get("made_from") or {}, cache)
    cache.save()
    if changed:
        listing = "; ".join(changed[:8]) + (f"; and {len(changed) - 8} more" if len(changed) > 8 else "")
        raise ModelError(f"model '{model.name}': the build in {path.parent} is stale: {listing}; {rerun}")
