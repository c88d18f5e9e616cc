"""ONNX model -> Graph (still in ONNX's NCHW layout; to_nhwc converts later).

Checks everything a user can get wrong before converting a single node: the
file, the input/output names, the input shapes against the model's, and the
op types (all unsupported ones are listed at once, never failing at run time).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mace.config.specs import ModelSpec, user_to_framework
from mace.errors import ModelError, UnsupportedOpError
from mace.frontends.base import (add_framework_input, add_outputs, check_variable_dims, map_node, new_graph,
                                 unsupported_listing)
from mace.frontends.context import MappingContext
from mace.frontends.onnx.ops_integer import DYNAMIC_MICROSOFT
from mace.frontends.onnx.ops_qattention import QATTENTION
from mace.frontends.onnx.ops_qlinear import COM_MICROSOFT, GRID_PASSTHROUGH, on_grid
from mace.frontends.onnx.registry import load_mappers
from mace.ir.graph import Graph
from mace.ir.order import stable_order
from mace.transform.shape_inference import infer_shapes

FRAMEWORK_FORMAT = "NCHW"


class OnnxContext(MappingContext):
    """What a mapping function sees: the graph being built and helpers over ONNX nodes."""

    def __init__(self, graph: Graph, opset: int, mappers: dict | None = None, keep=(),
                 path: Path | None = None):
        super().__init__(graph, keep)
        self.opset = opset
        self.mappers = mappers or {}
        self.path = path

    def add_initializers(self, onnx_graph) -> None:
        add_initializers(self.graph, onnx_graph, self.path)

    def convert_nodes(self, nodes) -> None:
        """Map ONNX nodes in order, folding what is constant as each arrives (the model's
        graph, and the branch of an `If` that the converter inlines)."""
        for node in nodes:
            mapper = self.mappers[node.op_type]
            if node.op_type in GRID_PASSTHROUGH:
                mapper = on_grid(mapper)   # reading a QOperator model's integers: their floats
            map_node(self.graph, mapper, self, node, self.keep, self.path,
                     lambda: f"node '{self.op_name(node)}' ({node.op_type})")

    def op_name(self, node) -> str:
        return node.name or f"{node.op_type}_{node.output[0]}"

    def op_type(self, node) -> str:
        return node.op_type

    def inp(self, node, i: int):
        """Input i of `node` (renamed), or None when absent/empty."""
        if i >= len(node.input) or not node.input[i]:
            return None
        return self.name(node.input[i])

    def inputs(self, node) -> list:
        return [self.name(t) for t in node.input if t]

    def out(self, node, i: int = 0) -> str:
        return node.output[i]

    def default_outputs(self, node) -> list:
        return list(node.output)

    def temp_stem(self, node) -> str:
        return node.output[0]

    def scalar(self, node, i: int, what: str, default=None):
        """Input i of `node` as a Python number where ONNX means a scalar.

        Exporters give scalars as 0-d tensors or as 1-element tensors of any rank
        (Paddle2ONNX's Clip min/max are shape [1]); both are accepted. Absent or empty
        (or 0-element) inputs give `default`; a non-constant or many-element input is an error.
        """
        name = self.inp(node, i)
        if name is None:
            return default
        value = self.const(name)
        if value is None:
            raise self.fail(node, f"{what} (input '{name}') {self.NOT_STATIC}")
        value = np.asarray(value)
        if value.size == 0:  # an empty tensor is an omitted input to some exporters
            return default
        if value.size != 1:
            raise self.fail(node, f"{what} (input '{name}') must be a scalar or a 1-element tensor, "
                                  f"got shape {list(value.shape)}")
        return value.reshape(-1)[0].item()

    def attr(self, node, name: str, default=None):
        import onnx

        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default


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
    _sort_nodes(model.graph)   # first: onnx's strict inference reads the nodes in file order
    _check_model(model, path)
    return model


def _sort_nodes(graph) -> None:
    """ONNX wants a graph's nodes in topological order; Paddle2ONNX's multiclass_nms3 writes a
    Squeeze after the Cast that reads it, and onnxruntime sorts the graph itself. Nodes are put
    in an order where each comes after those it reads from, keeping the file's order otherwise
    (a sorted graph is left as it is). Names no node here produces (inputs, initializers, an
    enclosing graph's tensors) count as ready; a cycle keeps its nodes' order and is reported
    where a read finds no producer. A node with a subgraph (If, Loop) also reads what its
    branches read from this graph: onnxruntime's quantize_dynamic writes silero VAD's If, whose
    branch reads another If's output, before that If."""
    nodes = list(graph.node)
    made = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    needs = [{made[t] for t in _reads(n) if t in made and made[t] != i} for i, n in enumerate(nodes)]
    if all(d < i for i, deps in enumerate(needs) for d in deps):
        return
    order, stuck = stable_order(needs)
    order += stuck   # a cycle: left as written
    del graph.node[:]
    graph.node.extend(nodes[i] for i in order)


def _reads(node) -> list:
    """The tensors `node` reads: its inputs, and the enclosing graph's tensors its subgraphs read."""
    names = list(node.input)
    for a in node.attribute:
        for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            local = ({i.name for i in g.input} | {i.name for i in g.initializer}
                     | {o for n in g.node for o in n.output})
            names += [t for n in g.node for t in _reads(n) if t and t not in local]
    return names


AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _check_model(model, path: Path) -> None:
    """Models onnx's strict shape inference finds inconsistent (attributes out of range, an
    opset from the future, shapes that do not fit), refused naming the node, and auto_pad
    values outside ONNX's four. Custom-domain nodes are left to _check_ops. The messages say
    what failed here and claim nothing about other engines (nothing here runs them)."""
    import onnx

    opset, known = _opset(model), onnx.defs.onnx_opset_version()
    if opset > known:   # the checker lets it through; onnxruntime refuses it
        raise ModelError(f"{path}: ONNX opset {opset} is newer than any this onnx knows ({known})")
    _check_input_kinds(model, path)
    if any(n.domain not in ("", "ai.onnx") for n in model.graph.node):
        return   # the checker has no schema for them; _check_ops says they are unsupported
    ir_version = model.ir_version
    if ir_version < 4:
        # IR 3 wants every initializer listed as a graph input, and onnx's inference reads an
        # unlisted one as a tensor of no type; onnxruntime reads it as a constant, as IR 4
        # says, and runs such models (onnx's own light Inception/DenseNet files with their
        # weights as initializers). Inferred under IR 4's rule; the model is not changed.
        model.ir_version = 4
    known_types = set(onnx.TensorProto.DataType.values()) - {onnx.TensorProto.UNDEFINED}
    for init in model.graph.initializer:   # onnx's inference raises a bare ValueError naming none
        if init.data_type not in known_types:
            raise ModelError(f"{path}: initializer '{init.name}' has data type {init.data_type}, "
                             f"which is no ONNX tensor type")
    try:   # strict shape inference, not check_model: that also wants shapes ort does not need
        _infer_strict(model)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError, ValueError) as e:
        # ValueError: "Invalid tensor data type 999." of a value_info or attribute tensor
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"{path}: invalid ONNX model (onnx's strict shape inference: {first})") \
            from None
    except UnicodeDecodeError:   # the checker's message quotes a name that is not UTF-8
        raise ModelError(f"{path}: invalid ONNX model: a name or string attribute is not UTF-8") from None
    finally:
        model.ir_version = ir_version
    for node in model.graph.node:   # the checker takes any string; onnxruntime does not
        for attr in node.attribute:
            if attr.name == "auto_pad" and attr.s.decode(errors="replace") not in AUTO_PADS:
                raise ModelError(f"{path}: node '{node.name or node.output[0]}' ({node.op_type}): "
                                 f"auto_pad {attr.s.decode(errors='replace')!r} is not one of "
                                 f"{', '.join(AUTO_PADS)}")


def _infer_strict(model) -> None:
    """onnx's strict shape inference. An intermediate's value_info is a hint, and exporters
    leave stale ones (Paddle2ONNX's multiclass_nms3: a Gather annotated rank 1 that computes
    rank 2): where inference disagrees with a hint only, onnxruntime warns and goes on with what
    it infers, so the hints are dropped here (nothing reads them) and inference is run again;
    a model inconsistent without them is refused as before."""
    import onnx

    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except onnx.shape_inference.InferenceError:
        if not model.graph.value_info:
            raise
        hints = list(model.graph.value_info)
        del model.graph.value_info[:]
        try:
            onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        except Exception:
            model.graph.value_info.extend(hints)
            raise


def _check_input_kinds(model, path: Path) -> None:
    """Graph inputs must be tensors: pymace has no sequence, map or optional values."""
    inits = {i.name for i in model.graph.initializer}
    for vi in model.graph.input:
        kind = vi.type.WhichOneof("value")
        if vi.name not in inits and kind not in (None, "tensor_type"):
            what = {"sequence_type": "a sequence", "map_type": "a map",
                    "optional_type": "an optional", "sparse_tensor_type": "a sparse tensor"}
            raise ModelError(f"{path}: graph input '{vi.name}' is {what.get(kind, kind)}; pymace "
                             f"takes only tensor inputs (it has no sequence, optional or map values, "
                             f"nor sparse tensors)")


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


def _all_nodes(graph):
    """Every node of an ONNX graph, those inside `If` branches (and other subgraphs) too."""
    import onnx

    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _all_nodes(g)


def _known_domain(node) -> bool:
    return node.domain in ("", "ai.onnx") or (node.domain == "com.microsoft"
                                              and node.op_type in COM_MICROSOFT | DYNAMIC_MICROSOFT | QATTENTION)


def _check_ops(model, path: Path, mappers: dict) -> None:
    bad = {}
    for node in _all_nodes(model.graph):
        if node.op_type not in mappers or not _known_domain(node):
            bad.setdefault(node.op_type, []).append(node.name or node.output[0])
    if bad:
        listing = unsupported_listing(bad, "node")
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
        check_variable_dims(path, t, model_dims, perm)


def _check_input_types(spec: ModelSpec, model, path: Path) -> None:
    """The model's declared element type against input_data_types (default float32): token
    ids fed as float32 would otherwise convert and fail only when run or validated."""
    import onnx

    declared = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input}
    for t in spec.inputs:
        elem = declared.get(t.name, 0)
        if not elem:  # no type given: nothing to check against
            continue
        try:
            want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
        except (KeyError, TypeError, ValueError):
            continue
        if want.name != t.dtype:
            raise ModelError(f"{path}: input tensor '{t.name}' is {want.name} in the model, but "
                             f"input_data_types gives {t.dtype} (the default is float32); "
                             f"set input_data_types: {want.name}")


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
    _check_input_types(spec, model, path)
    _check_outputs(spec, model, path)
    graph = new_graph(spec, "onnx", FRAMEWORK_FORMAT)
    keep = {t.name for t in spec.outputs}
    ctx = OnnxContext(graph, _opset(model), mappers, keep, path)
    add_initializers(graph, model.graph, path)
    _add_inputs(ctx, spec)
    ctx.convert_nodes(model.graph.node)
    infer_shapes(graph)
    _check_float64(graph, path, keep)
    add_outputs(graph, spec.outputs, ctx.name, FRAMEWORK_FORMAT, graph.unique_name)
    infer_shapes(graph)
    return graph


def add_initializers(graph: Graph, onnx_graph, path: Path) -> None:
    """The initializers of an ONNX graph (or of an inlined branch) as constants."""
    import onnx.numpy_helper as nh

    for init in onnx_graph.initializer:
        try:
            graph.consts[init.name] = nh.to_array(init)
        except Exception as e:  # dims that disagree with the data, an unknown data type
            raise ModelError(f"{path}: initializer '{init.name}' (dims {list(init.dims)}) cannot be "
                             f"read: {e}") from None


def _check_float64(graph: Graph, path: Path, keep) -> None:
    """Refuse float64 (ONNX DOUBLE) math left for run time rather than run it in float32.

    The runtimes compute in float32 at most and the IR has no float64 type, so a Cast to
    DOUBLE (or a double initializer) is fine only where it folds while converting, or
    where it is a round trip that changes no value (float32 -> DOUBLE -> float32).
    """
    _drop_float64_round_trips(graph, keep)
    for op in graph.net.op:
        for t in list(op.input) + list(op.output):
            if graph.dtype(t) == np.float64:
                raise ModelError(
                    f"{path}: node '{op.name}' ({op.type}) computes with tensor '{t}' in float64 "
                    f"(ONNX DOUBLE) at run time; pymace runs float32 at most and does not silently "
                    f"narrow it. Export the model without double-precision casts")


# Types whose every value float64 holds exactly: a Cast from them to DOUBLE and on to
# another type gives what the direct Cast gives (int64 could round twice; not listed).
_EXACT_IN_DOUBLE = {np.dtype(t) for t in (np.float32, np.float16, np.int8, np.int16, np.int32,
                                          np.uint8, np.uint16, np.uint32, np.bool_)}


def _drop_float64_round_trips(graph: Graph, keep) -> None:
    """Cast(x -> DOUBLE) read only by Casts: those Casts read x instead (torch's .double().float())."""
    consumers = graph.consumers()
    drop = []
    for i, op in enumerate(graph.net.op):
        if op.type != "Cast" or graph.dtype(op.output[0]) != np.float64 \
                or graph.dtype(op.input[0]) not in _EXACT_IN_DOUBLE:
            continue
        users = consumers.get(op.output[0], [])
        if not users or any(u.type != "Cast" for u in users) or op.output[0] in keep:
            continue
        for u in users:
            u.input[0] = op.input[0]
        drop.append(i)
    if drop:
        graph.set_ops([op for i, op in enumerate(graph.net.op) if i not in drop])
