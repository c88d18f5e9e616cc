"""Read a Caffe deploy net (text .prototxt) and its trained weights (binary .caffemodel).

Only Caffe 1.0 files (`layer {}`) are read; pre-1.0 files (`layers {}`) are
refused with the command that upgrades them. Layers are filtered for the TEST
phase as Caffe does (include / exclude rules), and blobs become numpy arrays.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from google.protobuf import text_format
from google.protobuf.message import DecodeError

from mace.errors import ModelError
from mace.frontends.caffe import caffe_pb2

UPGRADE_HINT = ("this is a pre-1.0 Caffe file (`layers {{ }}` / V1LayerParameter); upgrade it with "
                "Caffe's tools first: `$CAFFE_ROOT/build/tools/{tool} OLD NEW`")
# A `layers {` block at the top level of a prototxt (comments stripped first).
_V1_TEXT = re.compile(r"(^|[\s}])layers\s*:?\s*\{")


class SchemaGap(Exception):
    """The prototxt uses a field our schema lacks; `net` is the file read without it."""

    def __init__(self, error: str, net):
        super().__init__(error)
        self.net = net


def _strip_comments(text: str) -> str:
    # Quoted strings may hold '#': drop comments outside quotes only.
    return re.sub(r'("(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\')|#[^\n]*',
                  lambda m: m.group(1) or "", text)


def read_prototxt(path: Path) -> caffe_pb2.NetParameter:
    """The net in `path`; raises SchemaGap when only unknown fields stop it."""
    if not path.is_file():
        raise ModelError(f"{path}: model file not found")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ModelError(f"{path}: not a text .prototxt (model_file_path is the deploy prototxt; "
                         f"the binary .caffemodel goes in weight_file_path)") from None
    if _V1_TEXT.search(_strip_comments(text)):
        raise ModelError(f"{path}: " + UPGRADE_HINT.format(tool="upgrade_net_proto_text"))
    try:
        return text_format.Parse(text, caffe_pb2.NetParameter())
    except text_format.ParseError as strict:
        try:
            lenient = text_format.Parse(text, caffe_pb2.NetParameter(), allow_unknown_field=True)
        except text_format.ParseError:
            raise ModelError(f"{path}: not a Caffe prototxt: {strict}") from None
        raise SchemaGap(str(strict), lenient) from None


def read_caffemodel(path: Path) -> dict:
    """layer name -> list of BlobProto, from a binary .caffemodel."""
    if not path.is_file():
        raise ModelError(f"{path}: weight file not found")
    net = caffe_pb2.NetParameter()
    try:
        net.ParseFromString(path.read_bytes())
    except DecodeError as e:
        raise ModelError(f"{path}: not a binary .caffemodel ({e}); weight_file_path is the trained "
                         f"weights, model_file_path the deploy prototxt") from None
    if len(net.layers) and not len(net.layer):
        raise ModelError(f"{path}: " + UPGRADE_HINT.format(tool="upgrade_net_proto_binary"))
    if not len(net.layer):
        raise ModelError(f"{path}: the .caffemodel holds no layers (is it a Caffe weight file?)")
    return {layer.name: list(layer.blobs) for layer in net.layer}


LEGACY_DIMS = ("num", "channels", "height", "width")


def is_legacy(blob) -> bool:
    """Whether a blob gives its shape the pre-`shape` way (num/channels/height/width)."""
    return any(blob.HasField(f) for f in LEGACY_DIMS)


def blob_dims(blob) -> tuple:
    """A blob's shape: the legacy 4-D fields when set, else `shape` (absent for a 0-D blob,
    which Caffe writes with no dims at all)."""
    if is_legacy(blob):
        return tuple(getattr(blob, f) for f in LEGACY_DIMS)
    return tuple(int(d) for d in blob.shape.dim)


# raw_data_type -> the numpy type of raw_data's little-endian values (NVIDIA's Caffe, OpenCV)
RAW_TYPES = {caffe_pb2.FLOAT16: np.dtype("<f2"), caffe_pb2.FLOAT: np.dtype("<f4"),
             caffe_pb2.DOUBLE: np.dtype("<f8")}


def _blob_values(blob, where: str, count: int) -> np.ndarray:
    """The values of whichever BlobProto field holds them: `data`, `double_data`, or `raw_data`
    of raw_data_type FLOAT16 / FLOAT / DOUBLE. A blob holding none of them is an error naming
    what it does hold (only gradients, a raw type we do not read, fields our schema lacks)."""
    if len(blob.data):
        return np.asarray(blob.data, np.float32)
    if len(blob.double_data):
        return np.asarray(blob.double_data, np.float64)
    if blob.HasField("raw_data"):
        kind = blob.raw_data_type
        if kind not in RAW_TYPES:
            raise ModelError(f"{where}: blob raw_data of raw_data_type "
                             f"{caffe_pb2.Type.Name(kind)} is not read (FLOAT16, FLOAT and DOUBLE are)")
        dtype = RAW_TYPES[kind]
        if len(blob.raw_data) != count * dtype.itemsize:
            raise ModelError(f"{where}: blob raw_data holds {len(blob.raw_data)} bytes, expected "
                             f"{count * dtype.itemsize} ({count} {caffe_pb2.Type.Name(kind)} values)")
        return np.frombuffer(blob.raw_data, dtype)
    if count == 0:
        return np.zeros(0, np.float32)
    held = [f.name for f, _ in blob.ListFields() if f.name not in ("shape",) + LEGACY_DIMS]
    unknown = _unknown_field_numbers(blob)
    what = (f"only {', '.join(held)}" if held else "no values") + (
        f" and field(s) {', '.join(map(str, unknown))} that this Caffe schema does not know"
        if unknown else "")
    raise ModelError(f"{where}: blob of shape {list(blob_dims(blob))} holds {what}; its values "
                     f"are read from data, double_data or raw_data ({count} expected)")


def _unknown_field_numbers(message) -> list:
    try:
        from google.protobuf.unknown_fields import UnknownFieldSet
        return sorted({f.field_number for f in UnknownFieldSet(message)})
    except (ImportError, TypeError, AttributeError):   # an older protobuf
        return []


def blob_array(blob, where: str) -> np.ndarray:
    """A BlobProto's values (see _blob_values) as a float32 array of its shape."""
    dims = blob_dims(blob)
    count = int(np.prod(dims)) if dims else 1
    values = _blob_values(blob, where, count)
    if len(values) != count:
        raise ModelError(f"{where}: blob of shape {list(dims)} holds {len(values)} values, "
                         f"expected {count}")
    return np.asarray(values, np.float32).reshape(dims)


def _rule_met(rule, state) -> bool:
    if rule.HasField("phase") and rule.phase != state.phase:
        return False
    if rule.HasField("min_level") and state.level < rule.min_level:
        return False
    if rule.HasField("max_level") and state.level > rule.max_level:
        return False
    stages = set(state.stage)
    return all(s in stages for s in rule.stage) and not any(s in stages for s in rule.not_stage)


def inference_layers(net) -> list:
    """The layers a TEST-phase Caffe net keeps (Caffe's include / exclude rules)."""
    state = caffe_pb2.NetState()
    state.CopyFrom(net.state)
    state.phase = caffe_pb2.TEST
    kept = []
    for layer in net.layer:
        if len(layer.include) and len(layer.exclude):
            raise ModelError(f"layer '{layer.name}' ({layer.type}): has both include and exclude "
                             f"rules (Caffe allows one kind)")
        if len(layer.include):
            keep = any(_rule_met(r, state) for r in layer.include)
        else:
            keep = not any(_rule_met(r, state) for r in layer.exclude)
        if keep:
            kept.append(layer)
    return kept


def net_inputs(net, layers) -> dict:
    """Declared input blob -> shape list (or None): net-level inputs and Input layers."""
    names = list(net.input)
    if len(net.input_shape):
        shapes = [list(s.dim) for s in net.input_shape]
    elif len(net.input_dim):
        dims = list(net.input_dim)
        if len(dims) != 4 * len(names):
            raise ModelError(f"net has {len(names)} input(s) but {len(dims)} input_dim values "
                             f"(four per input)")
        shapes = [dims[4 * i:4 * i + 4] for i in range(len(names))]
    else:
        shapes = [None] * len(names)
    if len(shapes) != len(names):
        raise ModelError(f"net has {len(names)} input(s) but {len(shapes)} input_shape entries")
    declared = dict(zip(names, shapes))
    for layer in layers:
        if layer.type == "Input":
            declared.update(input_layer_shapes(layer))
    return declared


def input_layer_shapes(layer) -> dict:
    """top -> shape of an Input layer (one shape for all tops, or one each)."""
    shapes = [list(s.dim) for s in layer.input_param.shape]
    tops = list(layer.top)
    if len(shapes) == 1:
        shapes = shapes * len(tops)
    if shapes and len(shapes) != len(tops):
        raise ModelError(f"layer '{layer.name}' (Input): {len(tops)} tops but {len(shapes)} shapes")
    return dict(zip(tops, shapes or [None] * len(tops)))
