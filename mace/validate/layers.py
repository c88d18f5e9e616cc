"""Layer-by-layer validation: compare every intermediate tensor with the original framework.

A tensor of the converted model is *mapped* when the framework has a tensor of
the same name (frontends keep the framework's names; passes that merge ops, e.g.
a BatchNorm and a Relu folded into a Conv, remove the merged ops' outputs: those
are reported as fused away). Our values are captured through the observer API
right after the node that writes them; the framework's come from its runner with
the intermediates requested as extra outputs (onnxruntime, a TensorFlow session).
4-D activations run NHWC here: the to_nhwc pass records each tensor's layout
(mace/ir/layouts.py) and the framework's value is transposed the same way.

For a failing tensor whose node reads only mapped tensors, the node is also run
alone on the framework's inputs: if it still fails, the op itself is wrong; if
it passes, the error came in earlier and grew (`isolated_cosine`).
"""
from __future__ import annotations

import csv
import inspect
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mace.config.files import fetch_model_files
from mace.config.hints import command_hint
from mace.config.specs import user_to_framework
from mace.errors import ConfigError, ModelError
from mace.frontends import FRAMEWORK_FORMATS
from mace.frontends.caffe import caffe_pb2
from mace.frontends.tensorflow.loader import load_graph_def
from mace.frontends.tflite.model_file import read_model
from mace.ir.layouts import stored_perms
from mace.ir.quant_params import dequantize
from mace.ops.registry import Kernel
from mace.report.dump import capture_outputs
from mace.runtime.engine import is_quantized
from mace.validate.metrics import cosine, sqnr_db
from mace.validate.reference import reference_runner


@dataclass
class LayerCheck:
    index: int                 # node index in execution order
    op: str
    type: str
    tensor: str
    framework_ops: list
    shape: list                # as stored by the engine
    framework_shape: list      # as the framework has it
    cosine: float
    sqnr_db: float
    max_abs_error: float
    threshold: float
    passed: bool
    isolated_cosine: float | None = None   # the node alone on the framework's inputs
    note: str = ""

    @property
    def op_is_wrong(self) -> bool | None:
        """True: the node alone already fails; False: it passes alone; None: not checked."""
        if self.isolated_cosine is None:
            return None
        return not self.isolated_cosine >= self.threshold


@dataclass
class LayerValidation:
    model: str
    runtime: str
    against: str               # "framework" or the name of the reference runtime ("cpu")
    threshold: float
    checks: list = field(default_factory=list)       # LayerCheck in execution order
    fused_away: list = field(default_factory=list)   # framework tensors with no counterpart
    folded: list = field(default_factory=list)       # framework tensors folded into constants
    skipped: list = field(default_factory=list)      # (tensor, reason)
    csv_path: Path | None = None
    nothing_compared: str = ""                       # why no tensor was compared, when none was

    @property
    def first_failure(self) -> LayerCheck | None:
        return next((c for c in self.checks if not c.passed), None)

    @property
    def passed(self) -> bool:
        """No failing tensor, and at least one compared: a check of nothing has not passed."""
        return bool(self.checks) and self.first_failure is None

    def why_nothing(self) -> str:
        """'' when a tensor was compared; else why none was."""
        if self.checks:
            return ""
        if self.nothing_compared:
            return self.nothing_compared
        if self.skipped:
            return f"all {len(self.skipped)} tensor(s) to compare were skipped"
        return "no tensor has a counterpart to compare with"


# ---- which tensors the framework has ------------------------------------------
# Each lister returns [(tensor name, computed from constants only)] in the framework's order;
# constant ones (weights read through Identity/Cast chains, folded arithmetic) have no
# activation to compare: they are reported as folded.
def _onnx_tensors(model_path: Path, weight_path=None) -> list:
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    const = {i.name for i in model.graph.initializer}
    result = []
    for n in model.graph.node:
        is_const = all(i in const for i in n.input if i)
        for o in n.output:
            if o:
                result.append((o, is_const))
                if is_const:
                    const.add(o)
    return result


def _tf_tensors(model_path: Path, weight_path=None) -> list:
    const, result = set(), []
    for n in load_graph_def(model_path).node:
        if n.op in ("Placeholder", "NoOp"):
            continue
        data_inputs = [i.split(":")[0].lstrip("^") for i in n.input if not i.startswith("^")]
        is_const = n.op == "Const" or (bool(data_inputs) and all(i in const for i in data_inputs))
        if is_const:
            const.add(n.name)
        if n.op != "Const":
            result.append((f"{n.name}:0", is_const))
    return result


def _caffe_tensors(model_path: Path, weight_path=None) -> list:
    from google.protobuf import text_format


    net = text_format.Parse(Path(model_path).read_text(), caffe_pb2.NetParameter())
    # an in-place layer overwrites its blob: only the last writer's value can be compared
    writers = {}
    for layer in net.layer:
        if layer.type != "Input":
            for top in layer.top:
                writers[top] = layer.name
    return [(t, False) for t in writers]


def _tflite_tensors(model_path: Path, weight_path=None) -> list:

    model = read_model(model_path)
    const = {t.index for t in model.tensors if t.data is not None}
    result = []
    for op in model.ops:
        is_const = all(i in const for i in op.inputs if i >= 0)
        for o in op.outputs:
            result.append((model.tensors[o].name, is_const))
            if is_const:
                const.add(o)
    return result


FRAMEWORK_TENSORS = {"onnx": _onnx_tensors, "tensorflow": _tf_tensors, "keras": _tf_tensors,
                     "caffe": _caffe_tensors, "tflite": _tflite_tensors}


def _canonical(platform: str, name: str) -> str:
    if platform in ("tensorflow", "keras"):
        node, sep, index = name.rpartition(":")
        return name if sep and index.isdigit() else f"{name}:0"
    return name


def framework_tensors(platform: str, model_path, weight_path=None) -> list:
    """[(name, constant)] of every tensor the framework model computes."""
    try:
        lister = FRAMEWORK_TENSORS[platform]
    except KeyError:
        raise ModelError(f"layer-by-layer validation has no tensor list for platform '{platform}'") from None
    return lister(Path(model_path), weight_path)


def run_framework(platform: str, model_path, fw_inputs: dict, names: list, num_threads: int = 0,
                  weight_path=None) -> dict:
    """The framework's values of `names` (its own layout) on `fw_inputs`."""

    runner = reference_runner(platform)
    extra = {"weight_path": weight_path} if weight_path and \
        "weight_path" in inspect.signature(runner).parameters else {}
    return runner(model_path, fw_inputs, list(names), max(num_threads, 0), **extra)


# ---- comparing ----------------------------------------------------------------------
def _metrics(ref: np.ndarray, out: np.ndarray) -> tuple:
    a, b = np.asarray(ref, np.float64), np.asarray(out, np.float64)
    if a.size == 0:
        return 1.0, math.inf, 0.0
    finite = np.isfinite(a).all() and np.isfinite(b).all()
    if not finite:
        same = np.array_equal(a, b, equal_nan=True)
        return (1.0 if same else 0.0), (math.inf if same else -math.inf), (0.0 if same else math.inf)
    return cosine(a, b), sqnr_db(a, b), float(np.max(np.abs(a - b)))


def to_stored_layout(value: np.ndarray, perm, shape) -> tuple:
    """(framework value arranged as the engine stores it, a note), or (None, reason)."""
    value = np.asarray(value)
    if perm and value.ndim == len(perm):
        value = value.transpose(perm)
    if tuple(value.shape) == tuple(shape):
        return value, ""
    if value.size == int(np.prod(shape, dtype=np.int64)):
        return value.reshape(shape), f"framework shape {list(value.shape)} reshaped"
    return None, f"framework shape {list(value.shape)} vs ours {list(shape)}"


def _output_perms(config_outputs, platform: str, shapes: dict) -> dict:
    """Graph outputs are in the caller's layout: the perm from the framework's to it."""
    fw_format = FRAMEWORK_FORMATS[platform]
    perms = {}
    for s in config_outputs:
        if s.data_format != "NONE" and s.name in shapes:
            fw_shape = shapes[s.name]
            perms[s.name] = user_to_framework(fw_shape, fw_format, s.data_format)
    return perms


def compare_layers(engine, ours: dict, theirs: dict, perms: dict, threshold: float, model: str = "",
                   runtime: str = "cpu", against: str = "framework") -> LayerValidation:
    """Check every node output present in both `ours` and `theirs` (theirs already in
    framework layout; `perms` maps a tensor to the transpose taking it to ours)."""
    result = LayerValidation(model, runtime, against, threshold)
    for node in engine.nodes:
        for t in node.op.output:
            if t not in ours or t not in theirs:
                continue
            ref, note = to_stored_layout(theirs[t], perms.get(t), ours[t].shape)
            if ref is None:
                result.skipped.append((t, note))
                continue
            cos, sqnr, err = _metrics(ref, ours[t])
            result.checks.append(LayerCheck(
                node.index, node.op.name, node.op.type, t, list(node.op.framework_op),
                list(ours[t].shape), list(np.shape(theirs[t])), cos, sqnr, err, threshold,
                bool(cos >= threshold), note=note))
    return result


def run_alone(engine, node, feeds: dict) -> list | None:
    """Node's outputs computed by its kernel alone from `feeds` (tensor -> value as stored);
    None when an input is neither fed nor constant."""
    if not isinstance(node.kernel, Kernel):  # a device node (e.g. GPU) runs on its own memory
        return None
    consts = engine.graph.consts
    ins = []
    for t, bound in zip(node.op.input, node.inputs):
        if t in consts:
            ins.append(bound)
        elif t in feeds:
            ins.append(np.ascontiguousarray(feeds[t], dtype=bound.dtype).reshape(bound.shape))
        else:
            return None
    outs = [np.zeros(o.shape, o.dtype) for o in node.outputs]
    node.kernel.bind(ins, outs, None)()  # as the engine calls it (no scratch: its own)
    return outs


def isolate(engine, check: LayerCheck, feeds: dict, expected: np.ndarray) -> float | None:
    """Run node `check.index` alone on `feeds`; its cosine against `expected` (None: cannot)."""
    node = engine.nodes[check.index]
    outs = run_alone(engine, node, feeds)
    if outs is None:
        return None
    return _metrics(expected, outs[list(node.op.output).index(check.tensor)])[0]


def complete_feeds(engine, feeds: dict) -> dict:
    """Add the tensors the framework does not have (layout transposes, split-up ops), computed
    node by node from the framework's values, so that more nodes can be run alone."""
    for node in engine.nodes:
        if all(t in feeds for t in node.op.output):
            continue
        outs = run_alone(engine, node, feeds)
        if outs is not None:
            for t, v in zip(node.op.output, outs):
                feeds.setdefault(t, v)
    return feeds


# ---- the whole thing for one model of a deployment file --------------------------
def framework_inputs(sg, platform: str, inputs: dict) -> dict:
    fw_format = FRAMEWORK_FORMATS[platform]
    fw = {}
    for s in sg.inputs:
        perm = user_to_framework(s.shape, s.data_format, fw_format)
        fw[s.name] = inputs[s.name].transpose(perm) if perm else inputs[s.name]
    return fw


def _selected(sg, mapped: list) -> tuple:
    """check_tensors (when the .yml lists them) or every mapped tensor; (names, skipped)."""
    wanted = list(sg.values.get("check_tensors") or [])
    if not wanted:
        return mapped, []
    skipped = [(t, "not a tensor of the converted model (fused away or renamed)")
               for t in wanted if t not in mapped]
    return [t for t in wanted if t in mapped], skipped


def _why_nothing(sg, mapped: list, select: slice | None, all_layers: bool) -> str:
    """Why the selection holds no tensor: a validation of nothing is a failure, said plainly."""
    if select is not None and mapped:
        bounds = f"{'' if select.start is None else select.start}:{'' if select.stop is None else select.stop}"
        return f"the layer range {bounds} selects none of the {len(mapped)} mapped tensors (0 to {len(mapped) - 1})"
    if not mapped:
        return "no tensor of the converted model has a counterpart in the framework's graph"
    if not all_layers:
        wanted = list(sg.values.get("check_tensors") or [])
        return (f"none of check_tensors ({', '.join(wanted)}) is a tensor of the converted model; "
                f"mapped tensors: {', '.join(mapped[:8])}{' ...' if len(mapped) > 8 else ''}")
    return "no tensor selected"


def _check_shapes(sg, checks: list) -> None:
    """check_shapes: the framework shape of each check_tensors entry, as the .yml states it."""
    shapes = dict(zip(sg.values.get("check_tensors") or [], sg.values.get("check_shapes") or []))
    for c in checks:
        want = shapes.get(c.tensor)
        if want and list(want) != list(c.framework_shape) and list(want) != list(c.shape):
            c.passed = False
            c.note = (c.note + "; " if c.note else "") + f"check_shapes says {list(want)}"


def validate_layers(session, num_threads: int = 0, all_layers: bool = True, csv_path=None,
                    engine=None, runtime: str | None = None, threshold: float | None = None,
                    select: slice | None = None) -> LayerValidation:
    """Compare the mapped intermediate tensors of `session`'s model with its framework.

    `all_layers=False` checks only the .yml's check_tensors. `engine` defaults to the
    session's (another runtime's engine may be given). `select` keeps a slice of the mapped
    tensors in execution order (MACE's `run --layers start:end`)."""

    config, model, sg = session.config, session.model, session.subgraph
    engine = engine or session.engine
    model_path, weight_path = fetch_model_files(config, model, session.build_dir)
    listed = framework_tensors(model.platform, model_path, weight_path)
    fw_names = [n for n, _ in listed]
    constant = {n for n, c in listed if c}
    fw_set = {_canonical(model.platform, n) for n in fw_names}
    graph_inputs = set(engine.graph.input_names)
    produced = [t for op in engine.graph.net.op for t in op.output]
    mapped = [t for t in produced if _canonical(model.platform, t) in fw_set and t not in graph_inputs]
    names, skipped = _selected(sg, mapped) if not all_layers else (mapped, [])
    if select is not None:
        names = names[select]
    why = "" if names else _why_nothing(sg, mapped, select, all_layers)
    if not all_layers and not sg.values.get("check_tensors"):
        raise ConfigError(f"{config.path}: {sg.key_path}: no check_tensors to validate; "
                          f"run `{command_hint('run', config, session.build_dir, '--validate_all_layers')}` "
                          f"to check every layer")
    outputs, ours = capture_outputs(engine, session.inputs, names)
    ours = _dequantized(engine.graph, ours)
    fw_in = framework_inputs(sg, model.platform, session.inputs)
    theirs = run_framework(model.platform, model_path, fw_in, names, num_threads, weight_path) if names else {}
    perms = dict(stored_perms(engine.graph.net))
    perms.update(_output_perms(sg.outputs, model.platform, {n: np.shape(v) for n, v in theirs.items()}))
    result = compare_layers(engine, ours, theirs, perms, threshold or sg.threshold(), model.name,
                            runtime or sg.runtime)
    result.skipped = skipped + result.skipped
    result.nothing_compared = why
    present = set(produced) | {_canonical(model.platform, t) for t in produced}
    consts = set(engine.graph.consts)
    result.folded = [n for n in fw_names if n not in present and (n in consts or n in constant)]
    result.fused_away = [n for n in fw_names if n not in present and n not in consts
                         and n not in constant and n not in graph_inputs]
    _check_shapes(sg, result.checks)
    if not is_quantized(engine.graph):  # a quantized node cannot be fed the framework's floats
        _isolate_failures(engine, result, theirs, perms, session.inputs)
    if csv_path:
        write_csv(result, csv_path)
        result.csv_path = Path(csv_path)
    return result


def _dequantized(graph, tensors: dict) -> dict:
    """Quantized (uint8) intermediate tensors as the reals they stand for."""
    out = {}
    for name, value in tensors.items():
        p = graph.quant_params(name) if name in graph.specs or name in graph.consts else None
        out[name] = dequantize(value, p) if p is not None else value
    return out


def _isolate_failures(engine, result: LayerValidation, theirs: dict, perms: dict, inputs: dict) -> None:
    feeds = {}
    for t, v in theirs.items():
        shape = engine.graph.specs[t][0] if t in engine.graph.specs else np.shape(v)
        arranged, _ = to_stored_layout(v, perms.get(t), shape)
        if arranged is not None:
            feeds[t] = arranged
    for name in engine.graph.input_names:  # graph inputs: exactly what the engine was fed
        feeds[name] = np.asarray(inputs[name])
    if any(not c.passed for c in result.checks):
        complete_feeds(engine, feeds)
    for c in result.checks:
        if not c.passed and c.tensor in feeds:
            c.isolated_cosine = isolate(engine, c, feeds, feeds[c.tensor])


CSV_COLUMNS = ["index", "op", "type", "tensor", "framework_ops", "shape", "framework_shape", "cosine",
               "sqnr_db", "max_abs_error", "threshold", "status", "isolated_cosine", "note"]


def _num(x) -> str:
    return "" if x is None else ("inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:.6g}")


def write_csv(result: LayerValidation, path) -> None:
    """One row per checked tensor (status PASS/FAIL; the first failure is FIRST_FAIL), then the
    framework tensors that were fused away, folded into constants or skipped."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    first = result.first_failure
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for c in result.checks:
            status = "FIRST_FAIL" if c is first else "PASS" if c.passed else "FAIL"
            w.writerow([c.index, c.op, c.type, c.tensor, " ".join(c.framework_ops),
                        "x".join(map(str, c.shape)), "x".join(map(str, c.framework_shape)),
                        _num(c.cosine), _num(c.sqnr_db), _num(c.max_abs_error), c.threshold, status,
                        _num(c.isolated_cosine), c.note])
        for t in result.fused_away:
            w.writerow(["", "", "", t, "", "", "", "", "", "", "", "FUSED_AWAY", "", ""])
        for t in result.folded:
            w.writerow(["", "", "", t, "", "", "", "", "", "", "", "FOLDED", "", ""])
        for t, why in result.skipped:
            w.writerow(["", "", "", t, "", "", "", "", "", "", "", "SKIPPED", "", why])
