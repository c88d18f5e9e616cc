"""Trace dumps of a quantized model (TIDL-style): every node's output, and where accuracy goes.

    trace = trace_model(engine, inputs, directory, reference=float_values, threshold=0.98)

For each node output, in execution order, `directory` gets NNNN_<tensor>.npy (the
stored tensor: uint8 for quantized activations) and, for quantized ones,
NNNN_<tensor>.dequant.npy (scale * (q - zero_point), float32). trace.csv lists
them with scale and zero point and, when the float model's values are given
(`reference`: float tensor name -> value, e.g. from `float_reference`), a
per-layer comparison against it:

* cosine, SQNR (dB), max absolute error, and max error in quantization steps
  (max |dequantized - float| / scale: about 0.5 for a layer whose input was exact);
* clipped: the fraction of float values outside the range the integers cover
  (a range file or calibration too narrow for these inputs);
* SQNR drop: the worst SQNR among the node's traced inputs minus its own: how
  much accuracy this layer lost by itself.

The trace names the first layer below the cosine threshold and the layer with
the largest SQNR drop: the two places to look when a quantized model is wrong.
Quantized tensor names map to the float model's (`x_quantized` written by a
Quantize of x; `y_quantized` read by the Dequantize that writes y).
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mace.config.files import safe_name  # the CLI's documented tensor -> file name rule
from mace.ir.quant_params import QuantParams, dequantize
from mace.runtime.observer import Event, register, unregister
from mace.validate.metrics import cosine, sqnr_db


@dataclass
class TraceRow:
    index: int
    op: str
    type: str
    tensor: str                # as stored in the quantized model
    float_tensor: str          # the float model's name for it
    file: str
    dequant_file: str          # "" for float tensors
    shape: list
    dtype: str
    scale: float | None = None
    zero_point: int | None = None
    inputs: list = field(default_factory=list)   # stored names the node read
    cosine: float | None = None
    sqnr_db: float | None = None
    max_abs_error: float | None = None
    max_error_steps: float | None = None
    clipped: float | None = None
    sqnr_drop_db: float | None = None
    note: str = ""


@dataclass
class Trace:
    model: str
    directory: Path
    threshold: float
    rows: list = field(default_factory=list)
    compared: bool = False

    @property
    def first_below_threshold(self) -> TraceRow | None:
        return next((r for r in self.rows if r.cosine is not None and r.cosine < self.threshold), None)

    @property
    def largest_drop(self) -> TraceRow | None:
        drops = [r for r in self.rows if r.sqnr_drop_db is not None]
        return max(drops, key=lambda r: r.sqnr_drop_db, default=None)


def float_names(net) -> dict:
    """Quantized-domain tensor -> the float model's tensor name (see the module doc)."""
    names = {}
    for op in net.op:
        if op.type == "Quantize":
            names[op.output[0]] = op.input[0]
        elif op.type == "Dequantize":
            names[op.input[0]] = op.output[0]
    return names


def trace_model(engine, inputs: dict, directory, reference: dict | None = None,
                threshold: float = 0.0, model: str = "") -> Trace:

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    trace = Trace(model, directory, threshold)
    names = float_names(engine.graph.net)
    values = {}

    def save(flags, node):
        for t in node.outputs:
            data = np.array(t.data)
            stem = f"{node.index:04d}_{safe_name(t.name)}"
            row = TraceRow(node.index, node.name, node.type, t.name, names.get(t.name, t.name),
                           f"{stem}.npy", "", list(data.shape), data.dtype.name,
                           inputs=[i.name for i in node.inputs])
            np.save(directory / row.file, data)
            if t.scale is not None:
                row.scale, row.zero_point = float(t.scale), int(t.zero_point)
                row.dequant_file = f"{stem}.dequant.npy"
                data = dequantize(data, QuantParams(row.scale, row.zero_point))
                np.save(directory / row.dequant_file, data)
            values[t.name] = data
            trace.rows.append(row)

    handle = register(engine, save, Event.AFTER)
    try:
        engine.run(inputs)
    finally:
        unregister(engine, handle)
    if reference is not None:
        trace.compared = True
        _compare(trace, values, reference)
    write_csv(trace, directory / "trace.csv")
    return trace


def _compare(trace: Trace, values: dict, reference: dict) -> None:
    by_tensor = {}
    for row in trace.rows:
        ref = reference.get(row.float_tensor)
        if ref is None:
            row.note = "not in the float model"
        elif np.shape(ref) != values[row.tensor].shape:
            row.note = f"float model's shape {list(np.shape(ref))}"
        else:
            _metrics(row, np.asarray(ref, np.float64).reshape(-1),
                     np.asarray(values[row.tensor], np.float64).reshape(-1))
        by_tensor[row.tensor] = row
    for row in trace.rows:
        before = [by_tensor[i].sqnr_db for i in row.inputs if i in by_tensor]
        before = [s for s in before if s is not None]
        if before and row.sqnr_db is not None and math.isfinite(min(before)) and math.isfinite(row.sqnr_db):
            row.sqnr_drop_db = min(before) - row.sqnr_db


def _metrics(row: TraceRow, ref: np.ndarray, out: np.ndarray) -> None:
    row.cosine, row.sqnr_db = cosine(ref, out), sqnr_db(ref, out)
    row.max_abs_error = float(np.max(np.abs(ref - out), initial=0.0))
    if row.scale is not None:
        row.max_error_steps = row.max_abs_error / row.scale
        lo = -row.zero_point * row.scale - row.scale / 2       # what rounds into [0, 255]
        hi = (255 - row.zero_point) * row.scale + row.scale / 2
        row.clipped = float(np.mean((ref < lo) | (ref > hi))) if ref.size else 0.0


COLUMNS = ["index", "op", "type", "tensor", "float_tensor", "file", "dequant_file", "shape", "dtype", "scale",
           "zero_point", "cosine", "sqnr_db", "max_abs_error", "max_error_steps", "clipped", "sqnr_drop_db",
           "note"]


def write_csv(trace: Trace, path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in trace.rows:
            w.writerow(["x".join(map(str, r.shape)) if c == "shape" else _cell(getattr(r, c))
                        for c in COLUMNS])


def _cell(v) -> str:
    if v is None:
        return ""
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def to_obfuscated(reference: dict, map_path: Path) -> dict:
    """Key the float model's values by the opaque names of an `obfuscate: 1` build (its map)."""
    import json

    opaque = {orig: name for name, orig in json.loads(Path(map_path).read_text()).get("tensors", {}).items()}
    return {opaque.get(n, n): v for n, v in reference.items()}
