"""ONNX model -> Graph (still in ONNX's NCHW layout; to_nhwc converts later).

Checks everything a user can get wrong before converting a single node: the
file, the input/output names, the input shapes against the model's, and the
op types (all unsupported ones are listed at once, never failing at run time).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mace.errors import ModelError, UnsupportedOpError
from mace.frontends.base import add_framework_input, add_outputs, map_node, new_graph
from mace.config.specs import ModelSpec, user_to_framework
from mace.frontends.onnx.registry import load_mappers
from mace.ir.graph import Graph
from mace.transform.shape_inference import infer_op, infer_shapes

FRAMEWORK_FORMAT = "NCHW"


class OnnxContext:
    """What a mapping function sees: the graph being built and helpers over ONNX nodes."""

    def __init__(self, graph: Graph, opset: int):
        self.graph = graph
        self.opset = opset
        self.rename = {}

    def name(self, t: str) -> str:
        return self.rename.get(t, t)

    def inp(self, node, i: int):
        """Input i of `node` (renamed), or None when absent/empty."""
        if i >= len(node.input) or not node.input[i]:
            return None
        return self.name(node.input[i])

    def inputs(self, node) -> list:
        return [self.name(t) for t in node.input if t]

    def const(self, name):
        return None if name is None else self.graph.consts.get(name)

    def shape(self, name) -> tuple:
        """Static shape of a tensor converted so far (constants fold as nodes arrive)."""
        return self.graph.shape(name)

    def attr(self, node, name: str, default=None):
        import onnx

        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def op_name(self, node) -> str:
        return node.name or f"{node.op_type}_{node.output[0]}"

    def add(self, op_type: str, node, inputs, outputs=None, name=None, **args):
        """Add an IR op for ONNX `node`; outputs default to the node's outputs."""
        outputs = list(node.output) if outputs is None else outputs
        op = self.graph.add_op(op_type, inputs, outputs, name=name or self.op_name(node),
                               framework_op=[self.op_name(node)], **args)
        infer_op(self.graph, op)  # later ops of the same node may ask for its shape
        return op

    def temp(self, node, suffix: str) -> str:
        return self.graph.unique_name(f"{node.output[0]}_{suffix}")

    def add_const(self, name: str, value) -> str:
        return self.graph.add_const(name, np.asarray(value))


def _load(path: Path):
    import onnx

    if not path.exists():
        raise ModelError(f"{path}: model file not found")
    try:
        model = onnx.load(str(path))
    except Exception as e:
        raise ModelError(f"{path}: not a valid ONNX model ({type(e).__name__}: {e})") from None
    if not model.graph.node:
        raise ModelError(f"{path}: the ONNX graph has no nodes")
    _check_model(model, path)
    return model


AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _check_model(model, path: Path) -> None:
    """What onnxruntime would refuse (attributes out of range, unknown auto_pad, an opset from
    the future, inconsistent shapes), refused here too: onnx's strict shape inference, which
    names the node. Custom-domain nodes are left to _check_ops."""
    import onnx

    opset, known = _opset(model), onnx.defs.onnx_opset_version()
    if opset > known:   # the checker lets it through; onnxruntime refuses it
        raise ModelError(f"{path}: ONNX opset {opset} is newer than any this onnx knows ({known})")
    if any(n.domain not in ("", "ai.onnx") for n in model.graph.node):
        return   # the checker has no schema for them; _check_ops says they are unsupported
    try:   # strict shape inference, not check_model: that also wants shapes ort does not need
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"{path}: invalid ONNX model (onnxruntime would refuse it too): {first}") from None
    except UnicodeDecodeError:   # the checker's message quotes a name that is not UTF-8
        raise ModelError(f"{path}: invalid ONNX model: a name or string attribute is not UTF-8") from None
    for node in model.graph.node:   # the checker takes any string; onnxruntime does not
        for attr in node.attribute:
            if attr.name == "auto_pad" and attr.s.decode(errors="replace") not in AUTO_PADS:
                raise ModelError(f"{path}: node '{node.name or node.output[0]}' ({node.op_type}): "
                                 f"auto_pad {attr.s.decode(errors='replace')!r} is not one of "
                                 f"{', '.join(AUTO_PADS)}")


def _opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return 1


def _model_inputs(model) -> dict:
    inits = {i.name for i in model.graph.initializer}
    result = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
        result[vi.name] = dims
    return result


def _check_ops(model, path: Path, mappers: dict) -> None:
    bad = {}
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in mappers:
            bad.setdefault(node.op_type, []).append(node.name or node.output[0])
    if bad:
        listing = "; ".join(f"{t} (node {', '.join(n[:3])}{' ...' if len(n) > 3 else ''})"
                            for t, n in sorted(bad.items()))
        raise UnsupportedOpError(f"{path}: unsupported ONNX op(s): {listing}. "
                                 f"Supported: {', '.join(sorted(mappers))}")


def _check_inputs(spec: ModelSpec, declared: dict, path: Path) -> None:
    for t in spec.inputs:
        if t.name not in declared:
            raise ModelError(f"{path}: input tensor '{t.name}' is not an input of the model; "
                             f"its inputs are {sorted(declared)}")
        perm = user_to_framework(t.shape, t.data_format, FRAMEWORK_FORMAT)
        logical = [t.shape[p] for p in perm] if perm else list(t.shape)
        model_dims = declared[t.name]
        if len(model_dims) != len(logical) or any(
                m is not None and m > 0 and m != d for m, d in zip(model_dims, logical)):
            hint = ""
            if perm and t.data_format == "NHWC":
                hint = " (input_data_formats defaults to NHWC; ONNX models are NCHW: " \
                       "set input_data_formats: NCHW if your shape is NCHW)"
            raise ModelError(
                f"{path}: input tensor '{t.name}': shape {list(t.shape)} ({t.data_format}) is "
                f"{logical} in the model's {FRAMEWORK_FORMAT} layout, but the model declares "
                f"{[d if d else '?' for d in model_dims]}{hint}")


def _check_outputs(spec: ModelSpec, model, path: Path) -> None:
    produced = {o for n in model.graph.node for o in n.output}
    graph_outs = [o.name for o in model.graph.output]
    for t in spec.outputs:
        if t.name not in produced:
            raise ModelError(f"{path}: output tensor '{t.name}' is not produced by the model; "
                             f"its outputs are {graph_outs}")


def _add_inputs(ctx: OnnxContext, spec: ModelSpec) -> None:
    for t in spec.inputs:
        inner = add_framework_input(ctx.graph, t, FRAMEWORK_FORMAT)
        if inner != t.name:
            ctx.rename[t.name] = inner


def convert(spec: ModelSpec) -> Graph:
    path = Path(spec.model_path)
    model = _load(path)
    mappers = load_mappers()
    _check_ops(model, path, mappers)
    _check_inputs(spec, _model_inputs(model), path)
    _check_outputs(spec, model, path)
    import onnx.numpy_helper as nh

    graph = new_graph(spec, "onnx", FRAMEWORK_FORMAT)
    ctx = OnnxContext(graph, _opset(model))
    for init in model.graph.initializer:
        try:
            graph.consts[init.name] = nh.to_array(init)
        except Exception as e:  # dims that disagree with the data, an unknown data type
            raise ModelError(f"{path}: initializer '{init.name}' (dims {list(init.dims)}) cannot be "
                             f"read: {e}") from None
    _add_inputs(ctx, spec)
    keep = {t.name for t in spec.outputs}
    for node in model.graph.node:
        map_node(graph, mappers[node.op_type], ctx, node, keep, path,
                 lambda: f"node '{ctx.op_name(node)}' ({node.op_type})")
    infer_shapes(graph)
    add_outputs(graph, spec.outputs, ctx.name, FRAMEWORK_FORMAT, graph.unique_name)
    infer_shapes(graph)
    return graph
