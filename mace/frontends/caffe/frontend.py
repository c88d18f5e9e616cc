"""Caffe deploy prototxt + caffemodel -> Graph (still in Caffe's NCHW layout; to_nhwc converts later).

Checks everything a user can get wrong before converting a layer: the files
(pre-1.0 files are refused with the upgrade command), the layer types (all
unsupported ones are listed at once), the input and output blob names and the
input shapes. Layers are matched to their trained weights by name.

Caffe layers often write their result into their input blob (in-place ReLU,
BatchNorm, Scale, Dropout). The IR needs one writer per tensor, so every write
gets its own tensor; the last write of each blob keeps the blob's name, which
is what `output_tensors` and Caffe's own `net.blobs[name]` refer to.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mace.config.schema import MAX_DIM
from mace.config.specs import ModelSpec, user_to_framework
from mace.errors import ModelError, UnsupportedOpError
from mace.frontends.base import add_framework_input, add_outputs, map_node, new_graph, unsupported_listing
from mace.frontends.context import MappingContext
from mace.frontends.caffe.model_file import (SchemaGap, blob_array, blob_dims, inference_layers,
                                             is_legacy, net_inputs, read_caffemodel, read_prototxt)
from mace.frontends.caffe.registry import load_mappers
from mace.ir.graph import Graph
from mace.ops._common import normalize_axis
from mace.transform.shape_inference import infer_shapes

FRAMEWORK_FORMAT = "NCHW"
INPUT_LAYERS = {"Input"}


class CaffeContext(MappingContext):
    """What a mapping function sees: the graph being built, blob names and weights."""

    def __init__(self, graph: Graph, path: Path, weight_path, weights, reserved: set):
        super().__init__(graph)
        self.path = path
        self.weight_path = weight_path
        self.weights = weights      # layer name -> [BlobProto], or None without a weight file
        self.reserved = reserved    # every Caffe blob name: temporaries never take one
        self.blobs = {}             # Caffe blob -> the tensor holding its current value
        self.outs = []              # tensors the layer being converted writes, one per top

    # ---- names -------------------------------------------------------------------
    def op_name(self, layer) -> str:
        return layer.name

    def op_type(self, layer) -> str:
        return layer.type

    def ir_name(self, layer) -> str:
        return self.unique(layer.name)   # never a blob's name (temporaries are not either)

    def unique(self, base: str) -> str:
        name = self.graph.unique_name(base)
        while name in self.reserved:
            name = self.graph.unique_name(base)
        return name

    # ---- tensors -------------------------------------------------------------------
    def inp(self, layer, i: int = 0) -> str:
        return self.blobs[layer.bottom[i]]

    def inputs(self, layer) -> list:
        return [self.blobs[b] for b in layer.bottom]

    def out(self, layer, i: int = 0) -> str:
        return self.outs[i]

    def default_outputs(self, layer) -> list:
        return list(self.outs)

    # ---- parameters and weights -------------------------------------------------
    def fail(self, layer, message: str) -> ModelError:
        return ModelError(f"{self.path}: layer '{layer.name}' ({layer.type}): {message}")

    def axis(self, layer, axis: int, rank: int, what: str = "axis") -> int:
        try:
            return normalize_axis(int(axis), rank)
        except ValueError:
            raise self.fail(layer, f"{what} {axis} is out of range for a {rank}-D input") from None

    def layer_blobs(self, layer) -> list:
        """The trained blobs of `layer`: the caffemodel's (by layer name), else the prototxt's."""
        if self.weights is not None and layer.name in self.weights:
            return self.weights[layer.name]
        if len(layer.blobs):
            return list(layer.blobs)
        if self.weights is None:
            raise self.fail(layer, "needs trained weights, but the deployment file gives no "
                                   "weight_file_path (the .caffemodel)")
        raise self.fail(layer, f"has no weights in {self.weight_path} (no layer of that name)")

    def weight(self, layer, i: int, shape, count: int) -> np.ndarray:
        """Blob i of `layer` (which must have `count` blobs) as float32 of `shape`.

        Legacy 4-D blobs (num, channels, height, width) match when their leading
        dims are 1, as Caffe's own loader accepts them."""
        blobs = self.layer_blobs(layer)
        if len(blobs) != count:
            raise self.fail(layer, f"has {len(blobs)} weight blob(s), expected {count}")
        where = f"{self.path}: layer '{layer.name}' ({layer.type}) blob {i}"
        value = blob_array(blobs[i], where)
        shape = tuple(int(d) for d in shape)
        legacy = is_legacy(blobs[i]) and len(shape) <= 4 and \
            blob_dims(blobs[i]) == (1,) * (4 - len(shape)) + shape
        if value.shape != shape and not legacy:
            raise self.fail(layer, f"weight blob {i} has shape {list(value.shape)}, "
                                   f"expected {list(shape)}")
        return value.reshape(shape)


def _check_layers(path: Path, layers, mappers: dict) -> None:
    bad = {}
    for layer in layers:
        if not layer.top and layer.type in mappers:   # a mapped layer makes a result: it needs a blob
            raise ModelError(f"{path}: layer '{layer.name}' ({layer.type or 'no type'}) has no top blob")
        if layer.type not in mappers and layer.type not in INPUT_LAYERS:
            bad.setdefault(layer.type or "(no type)", []).append(layer.name)
    if bad:
        listing = unsupported_listing(bad, "layer")
        raise UnsupportedOpError(f"{path}: unsupported Caffe layer type(s): {listing}. "
                                 f"Supported: {', '.join(sorted(set(mappers) | INPUT_LAYERS))}")


def _read_net(path: Path, mappers: dict):
    try:
        return read_prototxt(path)
    except SchemaGap as gap:
        # An unknown field inside a layer we cannot convert anyway: name the layer type.
        _check_layers(path, inference_layers(gap.net), mappers)
        raise ModelError(f"{path}:{gap} (pymace's Caffe schema, third_party/caffe/caffe.proto, "
                         f"does not have this field)") from None


def _check_declared_dims(declared: dict, path: Path) -> None:
    """Every dimension the net declares for an input is a real size (Caffe's blobs are 1..2^31-1)."""
    for name, shape in declared.items():
        if shape and any(not 0 < d <= MAX_DIM for d in shape):
            raise ModelError(f"{path}: input blob '{name}' is declared with shape {list(shape)}: every "
                             f"dimension must be between 1 and {MAX_DIM}")


def _check_inputs(spec: ModelSpec, declared: dict, path: Path) -> None:
    for t in spec.inputs:
        if t.name not in declared:
            raise ModelError(f"{path}: input tensor '{t.name}' is not an input of the net; "
                             f"its inputs (input / Input layer tops) are {sorted(declared)}")
        perm = user_to_framework(t.shape, t.data_format, FRAMEWORK_FORMAT)
        logical = [t.shape[p] for p in perm] if perm else list(t.shape)
        model = declared[t.name]
        if model is None:
            continue
        # Caffe nets reshape to the input they are given (N, H, W may change), but the
        # rank and the channels are fixed by the weights.
        if len(model) != len(logical) or (len(model) > 1 and model[1] != logical[1]):
            hint = ""
            if perm and t.data_format == "NHWC":
                hint = " (input_data_formats defaults to NHWC; Caffe nets are NCHW: set " \
                       "input_data_formats: NCHW if your shape is NCHW)"
            raise ModelError(f"{path}: input tensor '{t.name}': shape {list(t.shape)} "
                             f"({t.data_format}) is {logical} in Caffe's {FRAMEWORK_FORMAT} layout, "
                             f"but the net declares {model}{hint}")


def _check_outputs(spec: ModelSpec, layers, declared: dict, path: Path) -> None:
    tops = [t for layer in layers if layer.type not in INPUT_LAYERS for t in layer.top]
    read = {b for layer in layers for b in layer.bottom}
    for t in spec.outputs:
        if t.name not in tops and t.name in declared:
            raise ModelError(f"{path}: output tensor '{t.name}' is an input of the net, not "
                             f"computed by a layer")
        if t.name not in tops:
            ends = [b for b in dict.fromkeys(tops) if b not in read]
            raise ModelError(f"{path}: output tensor '{t.name}' is not a top of any layer; "
                             f"the net's outputs are {ends}")
        if t.name in declared:
            raise ModelError(f"{path}: output tensor '{t.name}' names a net input that layers "
                             f"overwrite in place; give the layer a top of its own")


def _add_inputs(ctx: CaffeContext, spec: ModelSpec) -> None:
    for t in spec.inputs:
        ctx.blobs[t.name] = add_framework_input(ctx.graph, t, FRAMEWORK_FORMAT, ctx.unique)


def _top_tensors(ctx: CaffeContext, layer, index: int, last_writer: dict, inputs: set) -> list:
    """Tensor names for a layer's tops: the blob name for its last writer, else a fresh one."""
    return [top if last_writer[top] == index and top not in inputs
            else ctx.unique(f"{top}_{layer.name}") for top in layer.top]


def _check_bottoms(ctx: CaffeContext, layer, declared: dict) -> None:
    for b in layer.bottom:
        if b in ctx.blobs:
            continue
        if b in declared:
            raise ctx.fail(layer, f"reads net input '{b}', which is not in the deployment file's "
                                  f"input_tensors")
        raise ctx.fail(layer, f"reads blob '{b}', which no earlier layer writes")


def _check_tops(ctx: CaffeContext, layer, ops) -> None:
    """Every output of the ops `layer` became has a shape: a layer given more tops than it makes
    (a Softmax with four) had ops writing blobs that nothing computes."""
    written = {t for op in ops for t in op.output}
    missing = [top for top, t in zip(layer.top, ctx.outs) if t in written and t not in ctx.graph.specs]
    if missing:
        raise ctx.fail(layer, f"has {len(layer.top)} top blobs, more than a {layer.type} layer writes: "
                              f"nothing computes {', '.join(map(repr, missing[:8]))}")


def convert(spec: ModelSpec) -> Graph:
    path = Path(spec.model_path)
    mappers = load_mappers()
    net = _read_net(path, mappers)
    layers = inference_layers(net)
    _check_layers(path, layers, mappers)
    declared = net_inputs(net, layers)
    _check_declared_dims(declared, path)
    _check_inputs(spec, declared, path)
    _check_outputs(spec, layers, declared, path)
    weight_path = Path(spec.weight_path) if spec.weight_path else None
    weights = read_caffemodel(weight_path) if weight_path else None

    graph = new_graph(spec, "caffe", FRAMEWORK_FORMAT)
    reserved = set(declared) | {b for layer in layers for b in (*layer.top, *layer.bottom)}
    ctx = CaffeContext(graph, path, weight_path, weights, reserved)
    _add_inputs(ctx, spec)
    last_writer = {top: i for i, layer in enumerate(layers) if layer.type not in INPUT_LAYERS
                   for top in layer.top}
    keep = {t.name for t in spec.outputs}
    for index, layer in enumerate(layers):
        if layer.type in INPUT_LAYERS:
            continue  # its tops are the model inputs, added above
        _check_bottoms(ctx, layer, declared)
        ctx.outs = _top_tensors(ctx, layer, index, last_writer, set(declared))
        first = len(graph.net.op)
        map_node(graph, mappers[layer.type], ctx, layer, keep, path,
                 lambda: f"layer '{layer.name}' ({layer.type})")
        _check_tops(ctx, layer, graph.net.op[first:])
        ctx.blobs.update(zip(layer.top, ctx.outs))
    infer_shapes(graph)
    add_outputs(graph, spec.outputs, ctx.blobs.__getitem__, FRAMEWORK_FORMAT, ctx.unique)
    infer_shapes(graph)
    return graph
