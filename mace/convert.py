"""`convert`: deployment file -> builds/<library>/model/<model>.pb + .data for every model.

All models are converted into a scratch folder first and moved into place only
when every one succeeded, so a failed convert leaves the previous build intact.
The moves are several renames, so a kill can still stop between two of them:
each model's build manifest (mace/ir/manifest.py: the sha256 and size of every
file, and what the build was made from) is written last, and loading refuses a
build that does not match its manifest (mace/config/provenance.py).
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mace import frontends
from mace.codegen.obfuscate import obfuscate_graph
from mace.codegen.outputs import finish_library, model_extras
from mace.config.deployment import DeploymentConfig, ModelConfig, placed_runtimes
from mace.config.fetch import local_path, sha256_of
from mace.config.files import code_dir, fetch_model_files, library_dir, make_inputs, models_of
from mace.config.provenance import made_from
from mace.config.specs import ModelSpec
from mace.errors import ConfigError, MaceError, ModelError
from mace.frontends.base import take_notes
from mace.ir.args import set_arg
from mace.ir.manifest import write_manifest
from mace.ir.shape_ranges import record_shape_ranges
from mace.ir.model_io import net_to_text, save_model
from mace.quantize.calibrate import calibration_samples, calibration_source
from mace.quantize.ranges import read_range_file
from mace.quantize.report import write_report as write_quantize_report
from mace.report.html import render_html
from mace.report.offline import report_path, write_report
from mace.runtime.gpu.deploy import GPU_RUNTIMES
from mace.runtime.gpu.programs import is_fp16
from mace.transform.pipeline import pass_names, transform
from mace.transform.variable_shapes import Probe, generalize, probe_values
from mace.transform.placement import plan as placement
from mace.validate.divergence import runtime_threshold
from mace.util.leftovers import remove_leftovers
from mace.validate.fp16_storage import mark_fp32_ops
from mace.ir.runtimes import QUANTIZED_ONLY, QUANTIZED_RUNTIMES

SUPPORTED_RUNTIMES = ("cpu", "gpu", "cpu+gpu", "dsp")


@dataclass
class ConvertResult:
    model: str
    pb_path: Path
    data_path: Path
    op_count: int
    data_bytes: int
    log: list = field(default_factory=list)
    report: object = None  # mace.report.offline.OfflineReport, also written as <model>_report.txt
    extra_files: list = field(default_factory=list)  # (file, place under builds/<library>/): code, maps
    made_from: dict = field(default_factory=dict)    # the build manifest's record of the sources
    notes: list = field(default_factory=list)        # what convert decided that the user should see
    mixed: object = None   # quantize_target_cosine's search (mace.quantize.report.MixedPrecision)


def _check_supported(config: DeploymentConfig, model: ModelConfig) -> None:
    for sg in model.subgraphs:   # several named ones: placed groups of one model (docs/placement.md)
        if sg.runtime not in SUPPORTED_RUNTIMES:
            raise ConfigError(f"{config.path}: {sg.key_path}.runtime: '{sg.runtime}' is not available "
                              f"in this release (available: {', '.join(SUPPORTED_RUNTIMES)})")
        if sg.quantize and sg.runtime not in QUANTIZED_RUNTIMES:
            raise ConfigError(f"{config.path}: {sg.key_path}.quantize: quantized models run on "
                              f"{' or '.join(QUANTIZED_RUNTIMES)}, not '{sg.runtime}'")
    runtimes = set().union(*(placed_runtimes(sg) for sg in model.subgraphs))
    if runtimes & set(GPU_RUNTIMES) and (runtimes & set(QUANTIZED_ONLY) or model.graph.quantize):
        raise ConfigError(f"{config.path}: {model.key_path}: placement on {', '.join(sorted(runtimes))}: "
                          f"quantized groups (dsp, quantize: 1) combine with cpu groups only")


def quantize_options(config: DeploymentConfig, sg) -> dict:
    """The quantize pass's options: ranges from the range file, input_ranges, calibration."""
    if not (sg.quantize or sg.runtime in QUANTIZED_ONLY):
        return {}
    options = {"quantize": True, "per_channel": True, "where": f"{config.path}: {sg.key_path}",
               "input_ranges": {t.name: tuple(t.value_range) for t in sg.inputs}}
    if sg.quantize_range_file:
        path = local_path(sg.quantize_range_file, config.path.parent)
        options["quantize_ranges"] = read_range_file(path)
    options["calibrate"] = calibration_source(config, sg)
    if sg.quantize_target_cosine:   # mixed precision: measured on the calibration samples
        options["target_cosine"] = sg.quantize_target_cosine
        options["samples"] = calibration_samples(config, sg)
    return options


def _check_output_shapes(config, graph, sg) -> None:
    for name, shape in zip(sg.output_tensors, sg.output_shapes):
        actual = list(graph.shape(name))
        if list(shape) != actual:
            raise ModelError(f"{config.path}: {sg.key_path}.output_shapes: output '{name}' has shape "
                             f"{actual} "
                             f"({sg.values['output_data_formats'][sg.output_tensors.index(name)]}) "
                             f"in the converted model, the deployment file says {list(shape)}")


def convert_model(config: DeploymentConfig, model: ModelConfig, out_dir: Path,
                  build_dir: Path | None = None, dump_dir: Path | None = None, progress=None) -> ConvertResult:
    """`progress(text)`, when given, hears about steps that take a while (gpu_fp32_ops: auto)."""
    _check_supported(config, model)
    sg = model.graph   # the model as one graph: named subgraphs joined
    plan = placement.plan_for(config, model)
    model_path, weight_path = fetch_model_files(config, model, build_dir)
    spec = ModelSpec(model_path, sg.inputs, sg.outputs + placement.boundary_specs(plan), weight_path,
                     model.name)
    graph = frontends.convert(model.platform, spec)
    read_notes = take_notes(graph)
    log = []
    options = {"runtime": sg.runtime, "data_type": sg.data_type, "winograd": sg.winograd}
    if plan:
        placement.assign_parts(plan, graph)
        options["placement"] = plan
    float_options = dict(options)   # what the variable-shape probes are converted with
    options.update(quantize_options(config, sg))
    if progress is not None and "target_cosine" in options:
        options["progress"] = progress   # convert_deployment names the model
    if sg.graph_optimize_options:
        unknown = set(sg.graph_optimize_options) - set(pass_names())
        if unknown:
            raise ConfigError(f"{sg.key_path}.graph_optimize_options: unknown pass(es) "
                              f"{sorted(unknown)}; passes: {', '.join(pass_names())}")
        options["only_passes"] = float_options["only_passes"] = list(sg.graph_optimize_options)
    decided = transform(graph, options, dump_dir=dump_dir and Path(dump_dir) / model.name,
                        log=log.append).decided
    _check_output_shapes(config, graph, sg)
    base = graph if "quantize" not in options else None   # before gpu_fp32_ops marks ops
    notes = read_notes + variable_shapes(model.platform, spec, plan, float_options, graph, base, progress,
                                         hide_names=bool(sg.obfuscate))
    notes += gpu_fp32_notes(config, sg, graph, log.append, progress)
    notes += _float_qat_note(graph, options)
    mapping = obfuscate_graph(graph) if sg.obfuscate else None  # before any writer sees a name
    for info in graph.net.output_info:
        del info.dims[:]
        info.dims.extend(graph.shape(info.name))
    for key, value in (("runtime", sg.runtime), ("data_type", sg.data_type),
                       ("source_sha256", sha256_of(model_path)), ("model_name", model.name)):
        set_arg(graph.net, key, value)
    pb_path, data_path = out_dir / f"{model.name}.pb", out_dir / f"{model.name}.data"
    save_model(graph, pb_path, data_path)
    (out_dir / f"{model.name}.pb_txt").write_text(net_to_text(graph.net))
    report = write_report(graph, model_path, pb_path, data_path, model.name)
    extras = model_extras(config, model.name, out_dir, pb_path, data_path, mapping)
    extras.append(_index_html(config, graph, report, out_dir, model.name))
    if "quantize" in decided:   # the calibration report: <model>_quantize_report.txt/.json
        extras += write_quantize_report(decided["quantize"], out_dir, model.name, mapping)
    mixed = decided["quantize"].mixed_precision if "quantize" in decided else None
    return ConvertResult(model.name, pb_path, data_path, len(graph.net.op), data_path.stat().st_size, log,
                         report, extras, made_from(config, model, model_path, weight_path), notes,
                         mixed)


def _float_qat_note(graph, options: dict) -> list:
    """A model quantized by its exporter (ONNX Q/DQ pairs, QOperator ops, TensorFlow FakeQuant)
    converted without `quantize`: it runs float, each pair a FakeQuantize rounding as the
    exporter's framework does (faithful, and slower than the float model it came from). Say
    that `quantize: 1` runs it on the int8 kernels with the model's own ranges."""
    if "quantize" in options or options.get("runtime") != "cpu":
        return []
    pairs = sum(op.type == "FakeQuantize" for op in graph.net.op)
    if not pairs:
        return []
    return [f"the model carries its own quantization ({pairs} FakeQuantize op(s) from Q/DQ pairs, "
            "QOperator ops or FakeQuant): it runs float, rounding as its framework does; `quantize: 1` "
            "in the deployment file runs it on int8 kernels with those ranges (docs/quantization.md)"]


def _convert_graph(platform: str, spec: ModelSpec, plan, options: dict):
    """The framework file through its frontend and the pass list (the probes' convert)."""
    graph = frontends.convert(platform, spec)
    if plan:
        placement.assign_parts(plan, graph)
    transform(graph, options)
    return graph


def variable_shapes(platform: str, spec: ModelSpec, plan, options: dict, graph, base=None,
                    progress=None, hide_names: bool = False) -> list:
    """The declared variable input dimensions (input_shapes: -1..8,...): convert again at other
    values of each, make `graph` follow them where it can and record the ranges and what pins
    the rest in the model (mace/transform/variable_shapes.py); returns notes for the user.
    `base`: the graph converted with `options` at the declared shapes (None: convert it).
    `hide_names` (obfuscate: 1): the model records that a dimension is pinned, not by which op."""
    ranged = [(t, dim, bounds) for t in spec.inputs for dim, bounds in t.dim_ranges.items()]
    if not ranged:
        return []
    if base is None:
        base = _convert_graph(platform, spec, plan, options)
    groups = {}   # the same range and converted value: one symbol (a shared sequence length)
    for t, dim, (low, high) in ranged:
        groups.setdefault((t.shape[dim], low, high), []).append((t.name, dim))
    probes = []
    for (nominal, low, high), dims in groups.items():
        for value in probe_values(nominal, low, high):
            if progress is not None:
                progress(f"converting again with {_dims_text(dims)} = {value} (variable shapes)")
            probes.append(_probe(platform, spec, plan, options, tuple(dims), value))
    pins = generalize(graph, base, probes, {(t.name, dim): t.shape[dim] for t, dim, _ in ranged})
    ranges, pinned = {}, {}
    for t, dim, bounds in ranged:
        ranges.setdefault(t.name, {})[dim] = bounds
        if (t.name, dim) in pins:
            pinned.setdefault(t.name, {})[dim] = ("an op of the model folds its converted value (op names "
                                                  "hidden: obfuscate: 1)" if hide_names else pins[t.name, dim])
    record_shape_ranges(graph.net, ranges, pinned)
    return [f"input '{t.name}' dimension {dim} varies {bounds[0]}.."
            f"{bounds[1] if bounds[1] is not None else ''} at run time" if (t.name, dim) not in pins
            else f"input '{t.name}' dimension {dim} stays {t.shape[dim]}: {pins[t.name, dim]}"
            for t, dim, bounds in ranged]


def _dims_text(dims) -> str:
    return " and ".join(f"'{name}' dimension {dim}" for name, dim in dims)


def _probe(platform, spec, plan, options, dims: tuple, value: int) -> Probe:
    """The model converted with every dimension of `dims` ((input, dim), ...) at `value`."""
    inputs = []
    for t in spec.inputs:
        moved = {dim for name, dim in dims if name == t.name}
        shape = tuple(value if i in moved else d for i, d in enumerate(t.shape))
        inputs.append(dataclasses.replace(t, shape=shape) if moved else t)
    outputs = [dataclasses.replace(o, shape=None) for o in spec.outputs]   # declared at the converted shape
    try:
        graph = _convert_graph(platform, dataclasses.replace(spec, inputs=inputs, outputs=outputs),
                               plan, options)
    except MaceError as e:
        return Probe(dims, value, None, f"converting fails there: {e}")
    return Probe(dims, value, graph)


def gpu_fp32_notes(config: DeploymentConfig, sg, graph, log=None, progress=None) -> list:
    """`gpu_fp32_ops` (names or auto): mark the GPU ops that keep float storage in an fp16 model."""
    asked = sg.values.get("gpu_fp32_ops")
    if not asked:
        return []
    if sg.runtime not in GPU_RUNTIMES or not is_fp16(sg.data_type):
        return [f"gpu_fp32_ops ignored: runtime {sg.runtime}, data_type {sg.data_type} stores no half"]
    samples = calibration_samples(config, sg) or (lambda: [make_inputs(config, sg, None)[0]])
    return mark_fp32_ops(graph, asked, samples, f"{config.path}: {sg.key_path}",
                         runtime_threshold(sg, "gpu"), log, progress)


def _index_html(config, graph, report, out_dir: Path, model: str) -> tuple:
    """MACE's <net>_index.html, written by convert beside the .pb (as MACE's convert does);
    `visualize` rewrites it with latencies once a benchmark exists."""
    path = out_dir / f"{model}_index.html"
    path.write_text(render_html(graph, report, None, config.library_name), encoding="utf-8")
    return path, Path("model") / path.name


def index_html(result: ConvertResult) -> Path | None:
    """Where convert put the model's <net>_index.html."""
    return next((result.pb_path.with_name(rel.name) for _, rel in result.extra_files
                 if rel.name.endswith("_index.html")), None)


def build_files(config: DeploymentConfig, library: Path, r: ConvertResult) -> dict:
    """{file: role} of one model's build; 'graph', 'data' and 'code' files are checked at load."""
    files = {r.pb_path: "graph", r.data_path: "data", r.pb_path.with_suffix(".pb_txt"): "text"}
    report = report_path(r.pb_path, r.model)
    if report.exists():
        files[report] = "text"
    for _, rel in r.extra_files:
        files[library / rel] = "code" if rel.parts[0] == "code" else "text"
    if config.model_graph_format == "code":
        package = code_dir(library, config.library_name)
        for init in (package / "__init__.py", package / "_weights" / "__init__.py"):
            if init.exists():
                files[init] = "code"
    return files


SCRATCH = ".convert."   # builds/<library>/.convert.<pid>.<random>/: one convert's files until they move


def convert_deployment(config: DeploymentConfig, build_dir: Path | None = None, models=None,
                       dump_dir: Path | None = None, progress=None) -> list:
    """Convert the named models (default: all); returns one ConvertResult per model.
    `progress(text)`: see convert_model."""
    names = [m.name for m in models_of(config, models)]
    final_dir = library_dir(config, build_dir) / "model"
    # folders this call creates are removed again if it fails: a failed first convert leaves nothing
    created = [d for d in (final_dir.parent, *final_dir.parent.parents) if not d.exists()]
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(final_dir.parent, SCRATCH)   # of converts that were killed (SIGKILL, power loss)
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH}{os.getpid()}.", dir=final_dir.parent))
    try:
        try:
            results = [convert_model(config, config.models[n], scratch, build_dir, dump_dir,
                                     progress and (lambda text, n=n: progress(f"{n}: {text}")))
                       for n in names]
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            for d in created:  # innermost first; stops at a folder something else wrote into
                try:
                    d.rmdir()
                except OSError:
                    break
            raise
        final_dir.mkdir(exist_ok=True)
        for r in results:
            for src in (r.pb_path, r.data_path, r.pb_path.with_suffix(".pb_txt"),
                        report_path(r.pb_path, r.model)):
                os.replace(src, final_dir / src.name)
            r.pb_path, r.data_path = final_dir / r.pb_path.name, final_dir / r.data_path.name
        finish_library(config, final_dir.parent, results)  # generated code, obfuscation maps
        for r in results:   # last: a build is complete once its manifest is there
            write_manifest(final_dir.parent, r.model, build_files(config, final_dir.parent, r), r.made_from)
        return results
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
