"""Read a .tflite FlatBuffer into plain Python objects, through the `tflite` package.

The `tflite` package is the FlatBuffers compiler's output for TFLite's own
schema.fbs (one class per table), so no field is parsed by hand here. Only the
main subgraph (index 0) is read; control-flow ops that call other subgraphs are
refused as unsupported ops by the frontend.

Quantized constants (int8/uint8 weights, int32 bias, per-tensor or per-axis
along `quantized_dimension`) are kept as stored, with their scale and zero
point; `TflTensor.real()` gives their float value as TFLite computes it.
Tensor names are TFLite's, made unique (`name`, `name_1`, ...) when a file
repeats one, so that they can name IR tensors and be looked up in LiteRT.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mace.errors import ModelError
from mace.frontends.tflite.sparsity import densify, read_levels
from mace.util.invocation import install_hint

FILE_IDENTIFIER = b"TFL3"

# tflite.TensorType value -> numpy dtype (None: not a numeric type we can hold)
_DTYPES = {"FLOAT32": np.float32, "FLOAT16": np.float16, "INT32": np.int32, "UINT8": np.uint8,
           "INT64": np.int64, "BOOL": np.bool_, "INT16": np.int16, "INT8": np.int8,
           "FLOAT64": np.float64, "UINT32": np.uint32, "UINT16": np.uint16, "UINT64": np.uint64}


def _import_tflite():
    try:
        import tflite
    except ImportError:
        raise ModelError(f"platform tflite needs the `tflite` package: {install_hint('tflite')}") from None
    return tflite


def _enum_names(enum_cls) -> dict:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_")}


@dataclass
class TflTensor:
    index: int
    name: str
    shape: tuple
    type_name: str                  # TFLite's TensorType name (FLOAT32, INT8, ...)
    data: np.ndarray | None         # constant value as stored (None: an activation)
    scale: np.ndarray | None = None
    zero_point: np.ndarray | None = None
    quantized_dimension: int = 0
    sparse: bool = False            # stored sparse in the file (`data` is expanded)
    signature: tuple | None = None  # the shape with -1 for dimensions left open (dynamic inputs)

    @property
    def dtype(self):
        d = _DTYPES.get(self.type_name)
        return None if d is None else np.dtype(d)

    @property
    def quantized(self) -> bool:
        return self.scale is not None and self.scale.size > 0 and self.type_name != "FLOAT32"

    def _along(self, v: np.ndarray, rank: int) -> np.ndarray:
        if v.size == 1 or rank == 0:
            return v.reshape(())
        shape = [1] * rank
        shape[self.quantized_dimension] = -1
        return v.reshape(shape)

    def real(self) -> np.ndarray:
        """The constant as float32 ((q - zero_point) * scale for quantized tensors)."""
        value = self.data
        if not self.quantized:
            return value
        zp = self.zero_point if self.zero_point is not None and self.zero_point.size else \
            np.zeros_like(self.scale, np.int64)
        s, z = self._along(self.scale, value.ndim), self._along(zp, value.ndim)
        return ((value.astype(np.int64) - z.astype(np.int64)) * s.astype(np.float64)).astype(np.float32)

    def real_range(self) -> tuple | None:
        """(min, max) the integers of a per-tensor quantized activation stand for."""
        if not self.quantized or self.scale.size != 1 or self.dtype is None or self.dtype.kind not in "iu":
            return None
        info = np.iinfo(self.dtype)
        s = float(self.scale.reshape(-1)[0])
        z = int(self.zero_point.reshape(-1)[0]) if self.zero_point is not None and self.zero_point.size \
            else 0
        return s * (info.min - z), s * (info.max - z), info.bits


@dataclass
class TflOp:
    index: int
    type: str                       # BuiltinOperator name, or "CUSTOM"
    inputs: list                    # tensor indices; -1 = optional input left out
    outputs: list
    options: object = None          # the op's *Options table (tflite class), or None
    custom_code: str = ""
    custom_options: bytes = b""     # a custom op's options, as the op's author laid them out
    name: str = ""                  # its first output's name (TFLite ops have no names)

    @property
    def key(self) -> str:
        """What mappers are registered under: the builtin's name, or the custom op's code."""
        return self.custom_code if self.type == "CUSTOM" else self.type


@dataclass
class TflModel:
    path: Path
    version: int
    tensors: list                   # TflTensor by index
    ops: list                       # TflOp in execution order
    inputs: list                    # tensor indices
    outputs: list
    subgraphs: int = 1
    by_name: dict = field(default_factory=dict)
    # subgraph index -> (tensors, ops) for the other subgraphs (CALL_ONCE's initialiser), or the
    # reason one could not be read
    others: dict = field(default_factory=dict)

    def tensor(self, name: str) -> TflTensor | None:
        return self.by_name.get(name)

    def op_name(self, op: TflOp) -> str:
        """TFLite ops have no names: an op is named after its first output tensor."""
        return op.name


def read_model(path) -> TflModel:
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: model file not found")
    buf = path.read_bytes()
    if len(buf) < 8 or buf[4:8] != FILE_IDENTIFIER:
        raise ModelError(f"{path}: not a TFLite FlatBuffer (no '{FILE_IDENTIFIER.decode()}' file "
                         f"identifier)")
    tflite = _import_tflite()
    try:
        model = tflite.Model.GetRootAsModel(buf, 0)
        if model.SubgraphsLength() < 1:
            raise ModelError(f"{path}: the TFLite model has no subgraph")
        _check_count(path, model.SubgraphsLength(), "subgraphs", len(buf))
        sg = model.Subgraphs(0)
        tensors = _tensors(tflite, model, sg, buf, path)
        ops = _ops(tflite, model, sg, path)
        inputs = [int(i) for i in sg.InputsAsNumpy()] if sg.InputsLength() else []
        outputs = [int(i) for i in sg.OutputsAsNumpy()] if sg.OutputsLength() else []
    except ModelError:
        raise
    except Exception as e:  # a truncated or corrupt buffer fails inside the generated reader
        raise ModelError(f"{path}: cannot read the TFLite FlatBuffer ({type(e).__name__}: {e})") from None
    _check_indices(path, tensors, ops, inputs, outputs)
    for t in tensors:
        _check_quantization(path, t)
    for t in tensors:
        if t.data is None:   # activations, the model's inputs among them
            _check_activation_quantization(path, t)
    for op in ops:
        op.name = tensors[op.outputs[0]].name if op.outputs else f"{op.type}_{op.index}"
    try:   # the version and the other subgraphs are read only now: a damaged offset fails here
        m = TflModel(path, model.Version(), tensors, ops, inputs, outputs, model.SubgraphsLength())
        m.by_name = {t.name: t for t in tensors}
        m.others = {i: _other_subgraph(tflite, model, buf, i, path) for i in range(1, model.SubgraphsLength())}
    except ModelError:
        raise
    except Exception as e:
        raise ModelError(f"{path}: cannot read the TFLite FlatBuffer ({type(e).__name__}: {e})") from None
    return m


def _check_count(path: Path, count: int, what: str, size: int) -> None:
    """A vector's length as stored: each entry takes 4 bytes at least (an offset), so a file of
    `size` bytes holds fewer than size / 4. A damaged length of 2^31 made the subgraph loop
    (which reports unreadable subgraphs instead of failing) run for hours."""
    if count * 4 > size:
        raise ModelError(f"{path}: the file claims {count} {what}, more than its {size} bytes can hold: "
                         f"a damaged or truncated file")


def _other_subgraph(tflite, model, buf: bytes, index: int, path: Path):
    """(tensors, ops) of subgraph `index`, or why it cannot be read (only what uses it fails)."""
    try:
        sg = model.Subgraphs(index)
        tensors, ops = _tensors(tflite, model, sg, buf, path), _ops(tflite, model, sg, path)
    except Exception as e:  # noqa: BLE001 - reported by the op that needs the subgraph
        return f"{type(e).__name__}: {e}"
    for op in ops:
        op.name = tensors[op.outputs[0]].name if op.outputs else f"{op.type}_{op.index}"
    return tensors, ops


def _check_indices(path: Path, tensors: list, ops: list, inputs: list, outputs: list) -> None:
    """Every tensor index in range (-1 only for an op's optional input left out): a file that
    points past its tensor list would otherwise fail later, or wrap around to the last tensors."""
    n = len(tensors)
    for what, indices, optional in (("the subgraph's inputs", inputs, False),
                                    ("the subgraph's outputs", outputs, False),
                                    *((f"op {op.index} ({op.type}) inputs", op.inputs, True) for op in ops),
                                    *((f"op {op.index} ({op.type}) outputs", op.outputs, False) for op in ops)):
        bad = [i for i in indices if not (0 <= i < n or (optional and i == -1))]
        if bad:
            raise ModelError(f"{path}: {what} name tensor {bad[0]}, but the subgraph has {n} tensors "
                             f"(0..{n - 1}): a damaged or hand-edited file")


def _check_quantization(path: Path, t: TflTensor) -> None:
    """Per-channel parameters that fit the tensor: one scale, or one per channel of
    quantized_dimension, and as many zero points as scales."""
    if t.scale is None or t.scale.size <= 1:
        if t.zero_point is not None and t.zero_point.size > 1:
            raise ModelError(f"{path}: tensor '{t.name}' has {t.zero_point.size} zero points for "
                             f"{0 if t.scale is None else t.scale.size} scale(s)")
        return
    where = f"{path}: tensor '{t.name}' {list(t.shape)}"
    if not 0 <= t.quantized_dimension < len(t.shape):
        raise ModelError(f"{where}: quantized_dimension {t.quantized_dimension} is out of range for a "
                         f"rank-{len(t.shape)} tensor")
    channels = t.shape[t.quantized_dimension]
    if t.scale.size != channels:
        raise ModelError(f"{where}: {t.scale.size} scales for {channels} channels along dimension "
                         f"{t.quantized_dimension}")
    if t.zero_point is not None and t.zero_point.size not in (0, t.scale.size):
        raise ModelError(f"{where}: {t.zero_point.size} zero points for {t.scale.size} scales")


def _check_activation_quantization(path: Path, t: TflTensor) -> None:
    """A quantized activation's (an input's, an op's output's) scale finite, positive and normal,
    its zero point in its type's range: LiteRT crashes the process (a segfault in its quantize
    kernels) on the others, and our int8 kernels would divide by them."""
    if not t.quantized:
        return
    tiny = np.finfo(np.float32).tiny
    if not np.all(np.isfinite(t.scale)) or np.any(t.scale < tiny):
        raise ModelError(f"{path}: tensor '{t.name}' has quantization scale {t.scale.tolist()}; a scale "
                         f"is a finite number above {tiny:g}")
    if t.zero_point is not None and t.zero_point.size and t.dtype is not None and t.dtype.kind in "iu":
        info = np.iinfo(t.dtype)
        if t.zero_point.min() < info.min or t.zero_point.max() > info.max:
            raise ModelError(f"{path}: tensor '{t.name}' ({t.type_name}) has zero point "
                             f"{t.zero_point.tolist()}, outside {info.min}..{info.max}")


def _tensors(tflite, model, sg, buf: bytes, path: Path) -> list:
    type_names = _enum_names(tflite.TensorType)
    seen, result = set(), []
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        name = _unique((t.Name() or b"").decode("utf-8", "replace") or f"tensor_{i}", seen)
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        type_name = type_names.get(t.Type(), str(t.Type()))
        sparsity = t.Sparsity()
        if sparsity is None:
            data = _data(model, t.Buffer(), buf, shape, type_name, path)
        else:   # the buffer holds only the stored values: expanded here, DENSIFY then folds
            stored = _data(model, t.Buffer(), buf, (-1,), type_name, path)
            data = None if stored is None else densify(stored, shape, *read_levels(tflite, sparsity))
        tensor = TflTensor(i, name, shape, type_name, data, sparse=sparsity is not None,
                           signature=tuple(int(d) for d in t.ShapeSignatureAsNumpy())
                           if t.ShapeSignatureLength() else None)
        q = t.Quantization()
        if q is not None and q.ScaleLength():
            tensor.scale = q.ScaleAsNumpy().astype(np.float32)
            tensor.zero_point = q.ZeroPointAsNumpy().astype(np.int64) if q.ZeroPointLength() else None
            tensor.quantized_dimension = int(q.QuantizedDimension())
        result.append(tensor)
    return result


def _unique(name: str, seen: set) -> str:
    base, k = name, 0
    while name in seen:
        k += 1
        name = f"{base}_{k}"
    seen.add(name)
    return name


def _data(model, index: int, buf: bytes, shape, type_name: str, path: Path):
    """A tensor's constant value, or None (buffer 0 and empty buffers hold no data)."""
    if index <= 0 or index >= model.BuffersLength():
        return None
    b = model.Buffers(index)
    if b.Offset() > 1:   # large models keep buffers after the FlatBuffer, addressed by offset
        raw = buf[b.Offset():b.Offset() + b.Size()]
    elif b.DataLength():
        raw = b.DataAsNumpy().tobytes()
    else:
        return None
    dtype = _DTYPES.get(type_name)
    if dtype is None:
        raise ModelError(f"{path}: constant tensor {index} has type {type_name}, which is not supported")
    value = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
    return value.astype(dtype).reshape(shape)


def _ops(tflite, model, sg, path: Path) -> list:
    op_names = _enum_names(tflite.BuiltinOperator)
    option_names = _enum_names(tflite.BuiltinOptions)
    result = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        if not 0 <= op.OpcodeIndex() < model.OperatorCodesLength():
            raise ModelError(f"{path}: op {i} names operator code {op.OpcodeIndex()}, but the model has "
                             f"{model.OperatorCodesLength()}: a damaged or hand-edited file")
        code = model.OperatorCodes(op.OpcodeIndex())
        # builtin codes >= 127 live in builtin_code, older ones in deprecated_builtin_code
        value = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
        type_name = op_names.get(value, f"BUILTIN_{value}")
        custom = (code.CustomCode() or b"").decode("utf-8", "replace") if type_name == "CUSTOM" else ""
        result.append(TflOp(i, type_name,
                            [int(x) for x in op.InputsAsNumpy()] if op.InputsLength() else [],
                            [int(x) for x in op.OutputsAsNumpy()] if op.OutputsLength() else [],
                            _options(tflite, op, option_names), custom,
                            op.CustomOptionsAsNumpy().tobytes() if op.CustomOptionsLength() else b""))
    return result


def _options(tflite, op, option_names: dict):
    table = op.BuiltinOptions()
    name = option_names.get(op.BuiltinOptionsType())
    if table is None or not name or name == "NONE":
        return None
    cls = getattr(tflite, name, None)
    if cls is None:
        return None
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    return obj
