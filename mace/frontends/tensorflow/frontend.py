"""TensorFlow frozen graph -> Graph (TensorFlow's NHWC layout, which is also ours).

Only the nodes the requested outputs depend on are converted, stopping at the
requested inputs (so a graph may be cut at inner tensors, as in MACE). Before
converting a single node, everything a user can get wrong is checked: the
input/output names (with or without ':0'), the input shapes against the
placeholders, and the op types (all unsupported ones are listed at once).
Tensor names inside the IR are TensorFlow's 'node:index'; the model's inputs
and outputs keep the spelling of the deployment file.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mace.config.specs import ModelSpec, user_to_framework
from mace.errors import ModelError, UnsupportedOpError
from mace.frontends.base import (add_framework_input, add_named_outputs, add_note, check_variable_dims, map_node,
                                 new_graph, rename_tensor, unsupported_listing)
from mace.frontends.context import MappingContext
from mace.frontends.tensorflow.loader import import_tf, load_model_file, split_tensor, tensor_name
from mace.frontends.tensorflow.registry import load_mappers
from mace.frontends.tensorflow.unroll import needs_unrolling, unroll_loops
from mace.ir.graph import Graph
from mace.ir.qat_ranges import record_ranges
from mace.transform.shape_inference import infer_shapes

FRAMEWORK_FORMAT = "NHWC"


class TfContext(MappingContext):
    """What a mapping function sees: the graph being built and helpers over NodeDefs."""

    def __init__(self, graph: Graph, tf, keep: set):
        super().__init__(graph, keep)
        self.tf = tf
        self.fake_quant = []      # (tensor, min, max, num_bits, narrow_range)

    def op_name(self, node) -> str:
        return node.name

    def op_type(self, node) -> str:
        return node.op

    def name(self, t: str) -> str:
        return super().name(tensor_name(t))   # 'x' and 'x:0' are one tensor

    def data_inputs(self, node) -> list:
        return [t for t in node.input if not t.startswith("^")]

    def inp(self, node, i: int):
        """Data input i of `node` (IR name), or None when absent."""
        ins = self.data_inputs(node)
        return self.name(ins[i]) if i < len(ins) else None

    def inputs(self, node) -> list:
        return [self.name(t) for t in self.data_inputs(node)]

    def out(self, node, i: int = 0) -> str:
        return f"{node.name}:{i}"

    def attr(self, node, name: str, default=None):
        if name not in node.attr:
            return default
        return attr_value(self.tf, node.attr[name])

    def const_output(self, node, i: int, value) -> None:
        """Output i of `node` is the constant `value`."""
        value = np.asarray(value)
        if value.dtype == np.float64:
            value = value.astype(np.float32)  # the IR keeps no float64 tensors
        out = self.out(node, i)
        if out in self.keep:  # a model output must be written by an op
            src = self.add_const(self.temp(node, "value"), value)
            self.add("Identity", node, [src], [out], name=self.temp(node, "const"))
        else:
            self.add_const(out, value)


def numpy_dtype(tf, enum_value) -> np.dtype:
    try:
        dtype = np.dtype(tf.dtypes.as_dtype(enum_value).as_numpy_dtype)
    except (TypeError, ValueError):   # a damaged GraphDef: DT_INVALID (0) or a number TF does not know
        raise ValueError(f"data type {enum_value!r} is not a TensorFlow data type") from None
    return np.dtype(np.float32) if dtype == np.float64 else dtype


def attr_value(tf, a):
    """An AttrValue as a Python value (bytes -> str, type -> numpy dtype, tensor -> ndarray)."""
    kind = a.WhichOneof("value")
    if kind == "s":
        return a.s.decode("utf-8", "replace")
    if kind in ("i", "f", "b"):
        return getattr(a, kind)
    if kind == "type":
        return numpy_dtype(tf, a.type)
    if kind == "shape":
        return None if a.shape.unknown_rank else [d.size for d in a.shape.dim]
    if kind == "tensor":
        dims = [d.size for d in a.tensor.tensor_shape.dim]
        if any(d < 0 for d in dims):   # make_ndarray would quietly take the data's own length
            raise ValueError(f"a constant tensor declares shape {dims}: dimensions must be >= 0")
        return tf.make_ndarray(a.tensor)
    if kind == "list":
        lst = a.list
        for field in ("i", "f", "b"):
            if len(getattr(lst, field)):
                return list(getattr(lst, field))
        if len(lst.s):
            return [s.decode("utf-8", "replace") for s in lst.s]
        if len(lst.type):
            return [numpy_dtype(tf, t) for t in lst.type]
        if len(lst.shape):
            return [[d.size for d in s.dim] for s in lst.shape]
        return []
    return None


# ---- which nodes to convert -------------------------------------------------------------
def needed_nodes(nodes: dict, outputs: list, fed: set, path: Path) -> list:
    """Nodes the outputs depend on (stopping at fed tensors), in dependency order."""
    order, state = [], {}
    for out in outputs:
        if out in fed:
            continue  # an input that is also an output needs no node
        stack = [(split_tensor(out)[0], False)]
        while stack:
            name, expanded = stack.pop()
            if expanded:
                state[name] = "done"
                order.append(nodes[name])
                continue
            if state.get(name):
                continue  # done, or on the stack (a cycle: its ops are refused below)
            state[name] = "open"
            stack.append((name, True))
            for t in nodes[name].input:
                if t.startswith("^") or tensor_name(t) in fed:
                    continue  # control edges carry no data
                src = split_tensor(t)[0]
                if src not in nodes:
                    raise ModelError(f"{path}: node '{name}' reads '{t}', which no node produces")
                if not state.get(src):
                    stack.append((src, False))
    return order


def _check_ops(order: list, path: Path, mappers: dict) -> None:
    bad = {}
    for node in order:
        if node.op not in mappers:
            bad.setdefault(node.op, []).append(node.name)
    if bad:
        listing = unsupported_listing(bad, "node")
        raise UnsupportedOpError(f"{path}: unsupported TensorFlow op(s): {listing}. "
                                 f"Supported: {', '.join(sorted(mappers))}")


def _placeholders(nodes: dict) -> list:
    return [n.name for n in nodes.values() if n.op in ("Placeholder", "PlaceholderWithDefault")]


def _graph_outputs(nodes: dict) -> list:
    """Nodes whose outputs nobody reads: what a frozen graph's outputs usually are."""
    read = {split_tensor(t.lstrip("^"))[0] for n in nodes.values() for t in n.input}
    return [n.name for n in nodes.values() if n.name not in read and n.op not in ("NoOp", "Const")]


def _check_inputs(ctx: TfContext, spec: ModelSpec, nodes: dict, path: Path) -> None:
    for t in spec.inputs:
        name, _ = split_tensor(t.name)
        if name not in nodes:
            raise ModelError(f"{path}: input tensor '{t.name}' is not in the model; its placeholders "
                             f"are {_placeholders(nodes)}")
        node = nodes[name]
        if node.op not in ("Placeholder", "PlaceholderWithDefault"):
            continue  # an inner tensor: the graph is cut there, its shape is the caller's word
        perm = user_to_framework(t.shape, t.data_format, FRAMEWORK_FORMAT)
        logical = [t.shape[p] for p in perm] if perm else list(t.shape)
        declared = ctx.attr(node, "shape")
        if declared is not None and not (isinstance(declared, list) and
                                         all(type(d) is int for d in declared)):   # a damaged GraphDef
            raise ModelError(f"{path}: placeholder '{node.name}': its 'shape' attribute holds "
                             f"{type(declared).__name__} {str(declared)[:40]!r}, not a shape")
        if declared is not None and (len(declared) != len(logical) or any(
                m >= 0 and m != d for m, d in zip(declared, logical))):
            hint = ""
            if perm and t.data_format == "NCHW":
                hint = " (TensorFlow models are NHWC; input_data_formats NCHW transposes the input)"
            raise ModelError(f"{path}: input tensor '{t.name}': shape {list(t.shape)} ({t.data_format}) "
                             f"is {logical} in the model's {FRAMEWORK_FORMAT} layout, but the "
                             f"placeholder declares {[d if d >= 0 else '?' for d in declared]}{hint}")
        check_variable_dims(path, t, declared or [], perm, "the placeholder")
        try:
            dtype = ctx.attr(node, "dtype")
        except ValueError as e:   # a damaged GraphDef (DT_INVALID): name the placeholder
            raise ModelError(f"{path}: placeholder '{node.name}': attribute 'dtype': {e}") from None
        if dtype is not None and np.dtype(dtype) != np.dtype(t.dtype):
            raise ModelError(f"{path}: input tensor '{t.name}' is {np.dtype(dtype)} in the model, the "
                             f"deployment file says {t.dtype} (set input_data_types)")


def _check_outputs(spec: ModelSpec, nodes: dict, path: Path) -> None:
    for t in spec.outputs:
        if split_tensor(t.name)[0] not in nodes:
            ends = _graph_outputs(nodes)
            listing = f"{ends[:20]}{f' and {len(ends) - 20} more' if len(ends) > 20 else ''}"
            raise ModelError(f"{path}: output tensor '{t.name}' is not in the model; its outputs "
                             f"are {listing}")


def _add_inputs(ctx: TfContext, spec: ModelSpec) -> None:
    for t in spec.inputs:
        source = add_framework_input(ctx.graph, t, FRAMEWORK_FORMAT)
        if source != tensor_name(t.name):
            ctx.rename[tensor_name(t.name)] = source


def _feeds(spec: ModelSpec) -> dict:
    """Input tensor -> (NHWC shape, dtype): what the loop unrolling evaluates trip counts with."""
    feeds = {}
    for t in spec.inputs:
        perm = user_to_framework(t.shape, t.data_format, FRAMEWORK_FORMAT)
        feeds[tensor_name(t.name)] = ([t.shape[p] for p in perm] if perm else list(t.shape), np.dtype(t.dtype))
    return feeds


def _rename_everywhere(ctx: TfContext, old: str, new: str) -> None:
    rename_tensor(ctx.graph, old, new)
    ctx.fake_quant = [(new if q[0] == old else q[0],) + q[1:] for q in ctx.fake_quant]


def _check_used_outputs(ctx: TfContext, node, used: set) -> None:
    """Every output of `node` that something reads must have been produced by its mapping."""
    for t in used:
        name = ctx.name(t)
        if name not in ctx.graph.specs and name not in ctx.graph.consts:
            raise ctx.fail(node, f"output {t} is used, but only the first output(s) of "
                                 f"{node.op} are supported")


def _record_fake_quant(ctx: TfContext) -> None:
    if ctx.fake_quant:
        record_ranges(ctx.graph.net, ctx.fake_quant)  # the net args of mace/ir/qat_ranges.py


def convert(spec: ModelSpec) -> Graph:
    path = Path(spec.model_path)
    tf = import_tf()
    loaded = load_model_file(path)
    graph_def = loaded.graph_def
    nodes = {n.name: n for n in graph_def.node}
    if len(nodes) != len(graph_def.node):   # TensorFlow refuses such a graph; a dict would hide it
        seen = set()
        dup = next(n.name for n in graph_def.node if n.name in seen or seen.add(n.name))
        raise ModelError(f"{path}: two nodes are named '{dup}' (node names must be unique)")
    mappers = load_mappers()
    graph = new_graph(spec, "tensorflow", FRAMEWORK_FORMAT)
    if loaded.note:
        add_note(graph, f"{path.name}: {loaded.note}")
    outputs = [tensor_name(t.name) for t in spec.outputs]  # a list: the op order is reproducible
    keep = set(outputs)
    ctx = TfContext(graph, tf, keep)
    _check_inputs(ctx, spec, nodes, path)
    _check_outputs(spec, nodes, path)
    order = needed_nodes(nodes, outputs, {tensor_name(t.name) for t in spec.inputs}, path)
    if needs_unrolling(order):   # TF1 while loops with a static trip count, TensorArrays
        graph_def = unroll_loops(tf, graph_def, _feeds(spec), path, [n.name for n in order])
        nodes = {n.name: n for n in graph_def.node}
        order = needed_nodes(nodes, outputs, {tensor_name(t.name) for t in spec.inputs}, path)
    _check_ops(order, path, mappers)
    used = {}
    for node in order:
        for t in ctx.data_inputs(node):
            name, index = split_tensor(t)
            used.setdefault(name, set()).add(f"{name}:{index}")
    for t in keep:
        used.setdefault(split_tensor(t)[0], set()).add(t)
    _add_inputs(ctx, spec)
    for node in order:
        map_node(graph, mappers[node.op], ctx, node, keep, path, lambda: f"node '{node.name}' ({node.op})")
        _check_used_outputs(ctx, node, used.get(node.name, ()))
    infer_shapes(graph)
    add_named_outputs(graph, spec.outputs, ctx.name, FRAMEWORK_FORMAT,
                      lambda old, new: _rename_everywhere(ctx, old, new))
    _record_fake_quant(ctx)
    infer_shapes(graph)
    return graph
