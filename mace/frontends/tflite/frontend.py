"""TFLite FlatBuffer -> Graph (TFLite's NHWC layout, which is also ours: no layout round trip).

Only the ops the requested outputs depend on are converted, stopping at the
requested inputs (a model may be cut at inner tensors). Before converting a single
op, everything a user can get wrong is checked: the input/output names, the input
shapes and types against the model, and the op types (all unsupported builtins and
custom ops are listed at once). IR tensors keep TFLite's tensor names; an op is
named after its first output (TFLite ops have no names).

Constants are read as float32 where TFLite stores them quantized (int8 weights,
int32 bias: (q - zero_point) * scale, per axis where the file says so). Quantized
activations become float tensors whose range (scale, zero point) is recorded for
the quantize pass, as QAT ranges are (mace/quantize/qat_ranges.py), so a
pre-quantized model runs on our int8 kernels with its own parameters
(docs/tflite.md).
"""
from __future__ import annotations

import numpy as np

from mace.errors import ModelError, UnsupportedOpError
from mace.frontends.base import (add_framework_input, add_named_outputs, map_node, new_graph, rename_tensor,
                                 unsupported_listing)
from mace.frontends.context import MappingContext
from mace.config.specs import ModelSpec, user_to_framework
from mace.frontends.tflite.edges import (check_edge_type, input_to_reals, is_quantized_edge,
                                         reals_to_output)
from mace.frontends.tflite.model_file import TflModel, TflOp, read_model
from mace.frontends.tflite.ops_signal import COMPLEX_OPS, complex_mapper, complex_refusals, touches_complex
from mace.frontends.tflite.ops_state import read_state
from mace.frontends.tflite.registry import CUSTOM_OPS, load_mappers
from mace.ir.graph import Graph
from mace.ir.qat_ranges import carry_range, record_ranges
from mace.transform.shape_inference import infer_shapes

FRAMEWORK_FORMAT = "NHWC"

# TFLite's ActivationFunctionType -> the IR's fused activation args
FUSED = {0: {}, 1: {"activation": "RELU"}, 2: {"activation": "CLIP", "activation_coefficient": -1.0,
                                                "max_limit": 1.0},
         3: {"activation": "RELUX", "max_limit": 6.0}, 4: {"activation": "TANH"}}


class TflContext(MappingContext):
    """What a mapping function sees: the graph being built and helpers over TFLite ops."""

    NOT_STATIC = "must be constant"

    def __init__(self, graph: Graph, model: TflModel, keep: set):
        super().__init__(graph, keep)
        self.model = model
        self.state = read_state(model)   # resource variables (ops_state.py)

    def op_name(self, op: TflOp) -> str:
        return self.model.op_name(op)

    def op_type(self, op: TflOp) -> str:
        return op.type

    def tensor(self, op: TflOp, i: int):
        """The TflTensor of input i (None when left out)."""
        if i >= len(op.inputs) or op.inputs[i] < 0:
            return None
        return self.model.tensors[op.inputs[i]]

    def inp(self, op: TflOp, i: int):
        t = self.tensor(op, i)
        return None if t is None else self.name(t.name)

    def inputs(self, op: TflOp) -> list:
        return [self.name(self.model.tensors[i].name) for i in op.inputs if i >= 0]

    def out(self, op: TflOp, i: int = 0) -> str:
        return self.model.tensors[op.outputs[i]].name

    def options(self, op: TflOp):
        if op.options is None:
            raise self.fail(op, "the op has no options table")
        return op.options

    def fused(self, op: TflOp) -> dict:
        """The fused activation of `op`'s options as IR args."""
        kind = int(op.options.FusedActivationFunction()) if op.options is not None else 0
        if kind not in FUSED:
            raise self.fail(op, f"fused activation {kind} (SIGN_BIT) is not supported")
        return dict(FUSED[kind])


# ---- which ops to convert ---------------------------------------------------------
def needed_ops(model: TflModel, outputs: list, fed: set) -> list:
    """Ops the output tensors depend on (stopping at fed tensors), in the file's order."""
    producer = {t: op for op in model.ops for t in op.outputs}
    wanted, stack = set(), [model.by_name[n].index for n in outputs]
    for op in model.ops:   # state for the next run: needed though no output reads it
        if op.type == "ASSIGN_VARIABLE":
            wanted.add(op.index)
            stack.extend(i for i in op.inputs if i >= 0)
    while stack:
        t = stack.pop()
        op = producer.get(t)
        if op is None or model.tensors[t].name in fed or op.index in wanted:
            continue
        wanted.add(op.index)
        stack.extend(i for i in op.inputs if i >= 0)
    return [op for op in model.ops if op.index in wanted]


def _check_ops(order: list, model: TflModel, mappers: dict) -> None:
    bad = {}
    for op in order:
        if op.key not in mappers or (op.type == "CUSTOM") != (op.key in CUSTOM_OPS):
            label = f"custom op {op.custom_code or '(unnamed)'}" if op.type == "CUSTOM" else op.type
            bad.setdefault(label, []).append(model.op_name(op))
    if bad:
        listing = unsupported_listing(bad, "op")
        raise UnsupportedOpError(f"{model.path}: unsupported TFLite op(s): {listing}. "
                                 f"Supported: {', '.join(sorted(set(mappers) - CUSTOM_OPS))} (custom ops: "
                                 f"{', '.join(sorted(CUSTOM_OPS)) or 'none'})")


def _check_complex(order: list, model: TflModel, spec: ModelSpec) -> None:
    edges = [model.tensor(t.name) for t in [*spec.inputs, *spec.outputs]]
    bad = complex_refusals(model, order, edges)
    if bad:
        raise UnsupportedOpError(f"{model.path}: complex values are carried only through "
                                 f"{', '.join(sorted(COMPLEX_OPS))}: {'; '.join(bad)}")


def _model_io(model: TflModel, indices) -> list:
    return [model.tensors[i].name for i in indices]


def _check_inputs(spec: ModelSpec, model: TflModel) -> None:
    path = model.path
    for t in spec.inputs:
        tensor = model.tensor(t.name)
        if tensor is None or tensor.data is not None:
            raise ModelError(f"{path}: input tensor '{t.name}' is not in the model; its inputs are "
                             f"{_model_io(model, model.inputs)}")
        if 0 in t.shape:   # LiteRT's kernels refuse an empty input at prepare (conv: dims->data[1] > 0)
            raise ModelError(f"{path}: input tensor '{t.name}': shape {list(t.shape)} has a dimension 0 "
                             f"(an empty input: nothing to run); give the size the model runs at "
                             f"(input_shapes)")
        perm = user_to_framework(t.shape, t.data_format, FRAMEWORK_FORMAT)
        logical = [t.shape[p] for p in perm] if perm else list(t.shape)
        declared = list(tensor.signature or tensor.shape)   # -1: open (a dynamic input)
        if declared and (len(declared) != len(logical) or any(
                m > 0 and m != d for i, (m, d) in enumerate(zip(declared, logical)) if i or m != 1)):
            hint = " (TFLite models are NHWC; input_data_formats NCHW transposes the input)" \
                if perm and t.data_format == "NCHW" else ""
            raise ModelError(f"{path}: input tensor '{t.name}': shape {list(t.shape)} ({t.data_format}) "
                             f"is {logical} in the model's NHWC layout, but the model declares "
                             f"{declared}{hint}")
        if is_quantized_edge(tensor):   # int8/uint8 inputs: the integers, or the reals (edges.py)
            check_edge_type(tensor, t.dtype, "input", path)
        elif tensor.dtype is not None and tensor.dtype != np.dtype(t.dtype):
            raise ModelError(f"{path}: input tensor '{t.name}' is {tensor.dtype} in the model, the "
                             f"deployment file says {t.dtype} (set input_data_types)")


def _check_outputs(spec: ModelSpec, model: TflModel) -> None:
    for t in spec.outputs:
        tensor = model.tensor(t.name)
        if tensor is None or tensor.data is not None:
            raise ModelError(f"{model.path}: output tensor '{t.name}' is not computed by the model; "
                             f"its outputs are {_model_io(model, model.outputs)}")
        if is_quantized_edge(tensor):
            check_edge_type(tensor, t.dtype, "output", model.path)


def _add_consts(ctx: TflContext) -> None:
    for t in ctx.model.tensors:
        if t.data is not None:
            value = t.real()
            if value.dtype == np.float64:
                value = value.astype(np.float32)   # the IR keeps no float64 tensors
            ctx.graph.consts[t.name] = value


def _add_inputs(ctx: TflContext, spec: ModelSpec) -> None:
    for t in spec.inputs:
        inner = add_framework_input(ctx.graph, t, FRAMEWORK_FORMAT)
        if inner != t.name:
            ctx.rename[t.name] = inner
        tensor = ctx.model.tensor(t.name)
        if is_quantized_edge(tensor):
            ctx.rename[t.name] = input_to_reals(ctx.graph, ctx.name(t.name), tensor, t.dtype)


def _integer_outputs(ctx: TflContext, spec: ModelSpec) -> None:
    """Quantized outputs asked for as integers (output_data_types int8/uint8): the reals mapped
    back to the tensor's integers; the real tensor gives up the output's name."""
    for t in spec.outputs:
        tensor = ctx.model.tensor(t.name)
        if not is_quantized_edge(tensor) or t.dtype == "float32":
            continue
        source = ctx.name(t.name)
        if source == t.name:
            source = ctx.graph.unique_name(f"{t.name}_real")
            _rename_everywhere(ctx.graph, t.name, source)
        ctx.rename[t.name] = reals_to_output(ctx.graph, source, tensor)


def _rename_everywhere(graph: Graph, old: str, new: str) -> None:
    carry_range(graph.net, old, new)   # a recorded quantization range follows the tensor
    rename_tensor(graph, old, new)


def _record_quant_ranges(ctx: TflContext, order: list) -> None:
    """Each quantized activation's range, in op order (a tensor's first range wins)."""
    rows, seen = [], set()
    for op in order:
        for i in [*op.inputs, *op.outputs]:
            t = ctx.model.tensors[i] if i >= 0 else None
            if t is None or t.data is not None or i in seen:
                continue
            seen.add(i)
            r = t.real_range()
            name = ctx.name(t.name)
            if r is not None and (name in ctx.graph.specs or name in ctx.graph.input_names):
                rows.append((name, r[0], r[1], r[2], 0))
    if rows:
        record_ranges(ctx.graph.net, rows)


def convert(spec: ModelSpec) -> Graph:
    model = read_model(spec.model_path)
    mappers = load_mappers()
    _check_inputs(spec, model)
    _check_outputs(spec, model)
    outputs = [t.name for t in spec.outputs]
    order = needed_ops(model, outputs, {t.name for t in spec.inputs})
    _check_ops(order, model, mappers)
    _check_complex(order, model, spec)
    graph = new_graph(spec, "tflite", FRAMEWORK_FORMAT)
    ctx = TflContext(graph, model, set(outputs))
    _add_consts(ctx)
    _add_inputs(ctx, spec)
    for op in order:
        mapper = (touches_complex(model, op) and complex_mapper(op.type)) or mappers[op.key]
        map_node(graph, mapper, ctx, op, ctx.keep, model.path,
                 lambda: f"op '{model.op_name(op)}' ({op.type})")
    infer_shapes(graph)
    _record_quant_ranges(ctx, order)
    _integer_outputs(ctx, spec)
    add_named_outputs(graph, spec.outputs, ctx.name, FRAMEWORK_FORMAT,
                      lambda old, new: _rename_everywhere(graph, old, new))
    infer_shapes(graph)
    return graph
