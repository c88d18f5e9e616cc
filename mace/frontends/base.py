"""What every frontend shares: the graph it starts from, the model's inputs and outputs in the
caller's layout, and how one framework node becomes IR ops (mapped, settled, errors named)."""
from __future__ import annotations

from mace.config.specs import ModelSpec, TensorSpec, user_to_framework
from mace.errors import ModelError, UnsupportedOpError
from mace.ir.args import set_arg
from mace.ir.dtypes import BY_NAME, to_numpy
from mace.ir.graph import Graph
from mace.proto import pb
from mace.transform.settle import settle_new_ops
from mace.transform.shape_inference import infer_op


FORMAT_ENUM = {"NHWC": pb.NHWC, "NCHW": pb.NCHW, "NONE": pb.DF_NONE}


def new_graph(spec: ModelSpec, platform: str, framework_format: str) -> Graph:
    """The empty Graph a frontend fills: named after the model, tagged with its framework."""
    graph = Graph()
    graph.net.name = spec.name
    set_arg(graph.net, "framework_data_format", framework_format)
    set_arg(graph.net, "platform", platform)
    return graph


NOTES_ARG = "frontend_notes"   # a net arg while converting: what the user should hear about the read


def add_note(graph: Graph, text: str) -> None:
    """Say something about how the model file was read (convert prints it as a note)."""
    set_arg(graph.net, NOTES_ARG, take_notes(graph) + [text])


def take_notes(graph: Graph) -> list:
    """The frontend's notes, removed from the graph (they are not part of the model)."""
    notes = next(([s.decode() for s in a.strings] for a in graph.net.arg if a.name == NOTES_ARG), [])
    keep = [a for a in graph.net.arg if a.name != NOTES_ARG]
    del graph.net.arg[:]
    graph.net.arg.extend(keep)
    return notes


def unsupported_listing(bad: dict, what: str) -> str:
    """The unsupported op types `bad` (type -> names of its nodes) as one sorted line, naming the
    first three nodes of each (`what`: node, op, layer)."""
    return "; ".join(f"{t} ({what} {', '.join(n[:3])}{' ...' if len(n) > 3 else ''})"
                     for t, n in sorted(bad.items()))


def map_node(graph: Graph, mapper, ctx, node, keep: set, where, what) -> None:
    """Run one node's mapper, then fold or shape the ops it added (`keep`: model outputs, which
    stay produced by an op). Any failure but ours becomes one ModelError naming the model file
    `where` and the node, `what()`."""
    try:
        first_new = len(graph.net.op)
        mapper(ctx, node)
        settle_new_ops(graph, first_new, keep)
    except (ModelError, UnsupportedOpError):
        raise
    except Exception as e:
        raise ModelError(f"{where}: cannot convert {what()}: {e}") from e


def add_outputs(graph: Graph, outputs: list, source_of, framework_format: str, unique) -> None:
    """Declare the model outputs; where the caller's layout differs from the framework's, the
    framework's tensor `source_of(name)` is renamed (`unique`) and a Transpose makes the output."""
    for t in outputs:
        add_output_info(graph, t)
        src = source_of(t.name)
        perm = user_to_framework(graph.shape(src), framework_format, t.data_format) \
            if t.data_format != "NONE" else None
        if perm:
            inner = unique(f"{t.name}_nchw")
            rename_tensor(graph, src, inner)
            graph.add_op("Transpose", [inner], [t.name], name=f"{t.name}_to_nhwc", dims=list(perm))


def rename_tensor(graph: Graph, old: str, new: str) -> None:
    """Tensor `old` is called `new` in every op (and in the shape table)."""
    for op in graph.net.op:
        op.output[:] = [new if o == old else o for o in op.output]
        op.input[:] = [new if i == old else i for i in op.input]
    if old in graph.specs:
        graph.specs[new] = graph.specs.pop(old)


def add_named_outputs(graph: Graph, outputs: list, source_of, framework_format: str, rename) -> None:
    """The output step of the NHWC frontends (TensorFlow, TFLite), whose tensor names differ from
    the deployment file's ('x:0' vs 'x'): each output takes the file's name (`rename(old, new)`),
    a transposed one keeps the model's tensor under another name, and an output that is a
    constant or a model input gets an op of its own."""
    for t in outputs:
        add_output_info(graph, t)
        src = source_of(t.name)
        if src not in graph.specs and src not in graph.consts:
            raise ModelError(f"output tensor '{t.name}' was not produced (its node has fewer outputs)")
        perm = user_to_framework(graph.shape(src), framework_format, t.data_format) \
            if t.data_format != "NONE" else None
        if perm and src == t.name:  # the transposed tensor takes the name; the model keeps NHWC
            src = graph.unique_name(f"{t.name}_nhwc")
            rename(t.name, src)
        if perm or src in graph.consts or src in graph.input_names:
            op = graph.add_op("Transpose" if perm else "Identity", [src], [t.name],
                              name=graph.unique_name(f"{t.name}_out"), dims=list(perm) if perm else None)
            infer_op(graph, op)
        elif src != t.name:
            rename(src, t.name)


def check_variable_dims(path, t: TensorSpec, declared, perm, what: str = "the model") -> None:
    """A dimension the deployment file declares variable (input_shapes: -1..8,...) must be one in
    the framework model too: `declared` in the framework's layout, None / 0 / -1 where open."""
    for i, m in enumerate(declared):
        dim = perm[i] if perm else i
        if dim in t.dim_ranges and m is not None and m > 0:
            low, high = t.dim_ranges[dim]
            raise ModelError(f"{path}: input tensor '{t.name}': dimension {dim} is declared variable "
                             f"({low}..{high if high is not None else ''}) but {what} fixes it at {m}")


def add_input_info(graph: Graph, t: TensorSpec) -> None:
    info = graph.net.input_info.add(name=t.name, data_type=BY_NAME[t.dtype],
                                    data_format=FORMAT_ENUM[t.data_format])
    info.dims.extend(t.shape)
    info.minval, info.maxval = float(t.value_range[0]), float(t.value_range[1])
    graph.specs[t.name] = (tuple(t.shape), to_numpy(BY_NAME[t.dtype]))


def add_framework_input(graph: Graph, t: TensorSpec, framework_format: str, unique=None) -> str:
    """Declare model input `t` and return the tensor the framework's ops read: the input itself,
    or a Transpose of it when the caller's layout is not the framework's (`<input>_nchw` or
    `_nhwc` after the framework's layout, made unique by `unique`, default graph.unique_name)."""
    add_input_info(graph, t)
    perm = user_to_framework(t.shape, t.data_format, framework_format)
    if not perm:
        return t.name
    layout = framework_format.lower()
    inner = (unique or graph.unique_name)(f"{t.name}_{layout}")
    op = graph.add_op("Transpose", [t.name], [inner], name=f"{t.name}_to_{layout}", dims=list(perm))
    infer_op(graph, op)
    return inner


def add_output_info(graph: Graph, t: TensorSpec) -> None:
    info = graph.net.output_info.add(name=t.name, data_format=FORMAT_ENUM[t.data_format])
    if t.shape:
        info.dims.extend(t.shape)
