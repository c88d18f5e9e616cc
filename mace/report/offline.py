"""Offline report: what is known about a converted model without running it (Plumerai's layout).

Model ID (MD5 of the source model file), tool version, input/output shapes,
the tensor arena from the memory planner next to its lower bound (the largest
set of simultaneously live tensors), a per-layer table (#ops, #params, param
size, activations; see mace/ir/opstats.py for the counting rules), totals
and the estimated size of the model data. `convert` writes it to
builds/<library>/model/<model>_report.txt.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mace import __version__
from mace.config.files import fetch_model_files
from mace.errors import MaceError
from mace.ir.opstats import graph_stats
from mace.proto import pb
from mace.ir.shape_ranges import shape_pins, shape_ranges
from mace.report.memory import memory_timeline
from mace.runtime.engine import kernel_fallbacks
from mace.runtime.resize import converted_shapes, reshaped_graph
from mace.transform.placement.groups import report_lines as placement_lines
from mace.util.text import banner, kib, si, table


@dataclass
class TensorShape:
    name: str
    shape: list
    data_format: str
    dtype: str


@dataclass
class OfflineReport:
    model: str
    model_id: str                  # MD5 of the source model file
    source: str
    tool_version: str
    inputs: list                   # TensorShape
    outputs: list
    arena_bytes: int               # the memory planner's arena
    lower_bound_bytes: int         # no plan can be smaller
    layers: list                   # OpStatic per op
    total_ops: int
    total_params: int              # every constant once, however many ops read it
    total_param_bytes: int
    graph_bytes: int = 0           # the .pb file
    data_bytes: int = 0            # the .data file
    fused_framework_ops: int = 0   # framework ops merged into another op (fusions)
    live_bytes: list = field(default_factory=list)   # per op: bytes of live tensors (memory timeline)
    placement: list = field(default_factory=list)    # lines: groups and transfers of a mixed placement
    # lines: ops whose preferred kernels decline them on this machine's engine, and why
    kernel_fallbacks: list = field(default_factory=list)
    # variable input dimensions (input_shapes: -1..8,...): (shapes, arena, lower bound) at each end
    shape_arenas: list = field(default_factory=list)

    @property
    def model_data_bytes(self) -> int:
        return self.graph_bytes + self.data_bytes


def md5_of(path) -> str:
    """MD5 of a file, or of every file under a directory (a SavedModel) in name order."""
    path = Path(path)
    h = hashlib.md5()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _io(infos, specs) -> list:
    shapes = []
    for i in infos:
        shape, dtype = specs.get(i.name, (tuple(i.dims), None))
        shapes.append(TensorShape(i.name, list(shape), pb.DataFormat.Name(i.data_format),
                                  np.dtype(dtype).name if dtype is not None else ""))
    return shapes


def offline_report(graph, source_path, pb_path=None, data_path=None, model: str = "") -> OfflineReport:
    layers = graph_stats(graph)
    timeline = memory_timeline(graph)
    used = used_consts(graph)
    fused = sum(max(len(op.framework_op) - 1, 0) for op in graph.net.op)
    return OfflineReport(
        model=model or graph.net.name,
        model_id=md5_of(source_path) if source_path else "unknown (source model not available)",
        source=str(source_path) if source_path else "not available",
        tool_version=__version__,
        inputs=_io(graph.net.input_info, graph.specs), outputs=_io(graph.net.output_info, graph.specs),
        arena_bytes=timeline.plan.arena_size, lower_bound_bytes=timeline.plan.lower_bound,
        layers=layers, total_ops=sum(s.ops for s in layers),
        total_params=sum(int(graph.consts[t].size) for t in used),
        total_param_bytes=sum(int(graph.consts[t].nbytes) for t in used),
        graph_bytes=Path(pb_path).stat().st_size if pb_path and Path(pb_path).exists() else 0,
        data_bytes=Path(data_path).stat().st_size if data_path and Path(data_path).exists() else 0,
        fused_framework_ops=fused, live_bytes=timeline.live_bytes,
        placement=placement_lines(graph, layers), shape_arenas=shape_arenas(graph),
        kernel_fallbacks=predicted_fallbacks(graph))


def predicted_fallbacks(graph) -> list:
    """The kernel fallbacks an engine here would have (mace/runtime/engine.py kernel_fallbacks):
    the GPU engine's CPU-placed ops for a model with GPU ops, else the CPU engine's."""
    on_gpu = any(op.device_type == pb.GPU for op in graph.net.op)
    return kernel_fallbacks(graph, "gpu" if on_gpu else "cpu")


def shape_arenas(graph) -> list:
    """(input shapes, arena bytes, lower bound) at both ends of each variable input dimension
    the model follows (mace/ir/shape_ranges.py): the engine plans each shape as at load."""
    converted, pins = converted_shapes(graph), shape_pins(graph.net)
    groups = {}   # dimensions declared with the same range move together, as convert probed them
    for name, dims in shape_ranges(graph.net).items():
        for dim, (low, high) in sorted(dims.items()):
            if dim not in pins.get(name, {}):
                groups.setdefault((converted[name][dim], low, high), []).append((name, dim))
    rows = []
    for (nominal, low, high), members in groups.items():
        for value in (low, high):
            if value is None or value == nominal:
                continue
            shapes = {name: tuple(value if (name, i) in members else d for i, d in enumerate(shape))
                      for name, shape in converted.items()}
            plan = memory_timeline(reshaped_graph(graph, shapes)).plan
            rows.append((shapes, plan.arena_size, plan.lower_bound))
    return rows


def used_consts(graph) -> set:
    """The constants some op reads (each counted once in the totals)."""
    return {t for op in graph.net.op for t in op.input if t in graph.consts}


def layer_rows(layers: list, extra=None) -> list:
    """Per-layer cells of OpStatic rows; `extra(layer)` appends cells (the online report's latency)."""
    rows = []
    for s in layers:
        cells = [s.index, s.type, si(s.ops), si(s.params), kib(s.param_bytes), kib(s.activation_bytes)]
        if extra:
            cells.extend(extra(s))
        rows.append(cells + [f"{s.name} <- {', '.join(s.framework_ops)}" if s.framework_ops else s.name])
    return rows


LAYER_HEADERS = ["", "Layer name", "#ops", "#params", "param size", "activations"]


def _shape_lines(label: str, tensors: list) -> list:
    return [f"{label} shape: ({', '.join(map(str, t.shape))})  {t.name} {t.data_format} {t.dtype}"
            for t in tensors]


def totals_lines(ops: int, params: int, param_bytes: int) -> list:
    return [f"Total ops: {si(ops)} ({ops})",
            f"Total parameters: {si(params)} ({params})",
            f"Total parameter size: {kib(param_bytes)} ({param_bytes})"]


def render_text(report: OfflineReport) -> str:
    over = (report.arena_bytes / report.lower_bound_bytes - 1) * 100 if report.lower_bound_bytes else 0.0
    lines = banner(f"Offline report for '{report.model}'") + [
        "",
        f"Model ID: {report.model_id}",
        f"Tool version: '{report.tool_version}'",
        f"Source model: {report.source}",
        "",
        *_shape_lines("Input", report.inputs),
        *_shape_lines("Output", report.outputs),
        "",
        f"Required tensor arena size: {report.arena_bytes}",
        f"Lower bound (largest set of simultaneously live tensors): {report.lower_bound_bytes} "
        f"(the plan is {over:.1f}% above it)",
        "",
        *table(LAYER_HEADERS + ["IR op <- framework ops"], layer_rows(report.layers), right={0, 2, 3, 4, 5}),
        "",
        *totals_lines(report.total_ops, report.total_params, report.total_param_bytes),
        "",
        f"Framework ops fused into others: {report.fused_framework_ops}",
        f"Estimated size of model data: {report.model_data_bytes} bytes "
        f"(graph {report.graph_bytes} + weights {report.data_bytes})",
        *([""] + report.placement if report.placement else []),
        *_fallback_lines(report.kernel_fallbacks),
        *_shape_arena_lines(report.shape_arenas),
    ]
    return "\n".join(lines) + "\n"


def _fallback_lines(lines: list) -> list:
    if not lines:
        return []
    return (["", f"Kernel fallbacks: {len(lines)} op(s) declined by their preferred kernel on this machine "
                 "(op (type) runs tag: declined tag: reason):"] + [f"  {line}" for line in lines])


def _shape_arena_lines(rows: list) -> list:
    lines = ["", "Tensor arena at other input shapes (variable dimensions, planned when first run):"] if rows else []
    for shapes, arena, bound in rows:
        over = (arena / bound - 1) * 100 if bound else 0.0
        at = ", ".join(f"{n} ({', '.join(map(str, s))})" for n, s in shapes.items())
        lines.append(f"  {at}: {arena} (lower bound {bound}; {over:.1f}% above it)")
    return lines


def source_model(config, model, build_dir=None):
    """The source model file for the model ID, or None when it cannot be had any more (the
    report of an existing conversion is still useful without it)."""

    try:
        return fetch_model_files(config, model, build_dir)[0]
    except MaceError:
        return None


def write_report(graph, source_path, pb_path: Path, data_path: Path, model: str) -> OfflineReport:
    """Build the report of a just-saved model and write it next to it as <model>_report.txt."""
    report = offline_report(graph, source_path, pb_path, data_path, model)
    report_path(pb_path, model).write_text(render_text(report))
    return report


def report_path(pb_path: Path, model: str) -> Path:
    return Path(pb_path).with_name(f"{model}_report.txt")
