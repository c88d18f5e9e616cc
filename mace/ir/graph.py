"""`Graph`: a NetDef plus its constant tensors as numpy arrays.

Frontends build one, passes rewrite it, the serializer writes it to .pb/.data
and the engine runs it. Constants live in `consts` (name -> ndarray) while
the graph is in memory; `net.tensors` is only filled when it is written out.
"""
from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from mace.ir.args import set_arg
from mace.ir.dtypes import from_numpy
from mace.ir.quant_params import params_from_info
from mace.proto import pb


@dataclass
class Graph:
    net: pb.NetDef = field(default_factory=pb.NetDef)
    consts: dict = field(default_factory=dict)  # name -> np.ndarray
    # name -> (shape tuple, numpy dtype) for every non-const tensor, filled by infer_shapes
    specs: dict = field(default_factory=dict)
    # name -> mace.ir.quant_params.QuantParams for quantized constants (weights, bias);
    # activations keep theirs in their producer's OperatorDef.quantize_info
    quant: dict = field(default_factory=dict)
    _uid: itertools.count = field(default_factory=lambda: itertools.count(), repr=False)

    # ---- names ---------------------------------------------------------
    def unique_name(self, base: str) -> str:
        taken = self.all_tensor_names() | {op.name for op in self.net.op}
        while True:
            name = f"{base}__{next(self._uid)}"
            if name not in taken:
                return name

    def all_tensor_names(self) -> set:
        names = set(self.consts) | {i.name for i in self.net.input_info}
        for op in self.net.op:
            names.update(op.input)
            names.update(op.output)
        return names

    @property
    def input_names(self) -> list:
        return [i.name for i in self.net.input_info]

    @property
    def output_names(self) -> list:
        return [o.name for o in self.net.output_info]

    # ---- ops -----------------------------------------------------------
    def make_op(self, op_type: str, inputs, outputs, name: str | None = None,
                framework_op=(), **args) -> pb.OperatorDef:
        """Build an OperatorDef (not yet inserted)."""
        op = pb.OperatorDef(type=op_type, name=name or self.unique_name(op_type))
        op.input.extend(inputs)
        op.output.extend(outputs)
        op.framework_op.extend(framework_op)
        for k, v in args.items():
            if v is not None:
                set_arg(op, k, v)
        return op

    def add_op(self, op_type: str, inputs, outputs, **kw) -> pb.OperatorDef:
        op = self.make_op(op_type, inputs, outputs, **kw)
        self.net.op.append(op)
        return self.net.op[-1]

    def add_const(self, name: str, value) -> str:
        # not np.ascontiguousarray: it turns a 0-d scalar into shape (1,), which changes the
        # rank of everything computed from it (ONNX Shape->Gather(scalar)->Unsqueeze chains)
        self.consts[name] = np.asarray(value, order="C")
        return name

    def set_ops(self, ops) -> None:
        ops = [_copy_op(op) for op in ops]  # detach before clearing the repeated field
        del self.net.op[:]
        self.net.op.extend(ops)

    def producers(self) -> dict:
        return {t: op for op in self.net.op for t in op.output}

    def consumers(self) -> dict:
        users = defaultdict(list)
        for op in self.net.op:
            for t in op.input:
                users[t].append(op)
        return users

    def is_const(self, name: str) -> bool:
        return name in self.consts

    def shape(self, name: str) -> tuple:
        if name in self.consts:
            return tuple(self.consts[name].shape)
        return tuple(self.specs[name][0])

    def dtype(self, name: str) -> np.dtype:
        if name in self.consts:
            return self.consts[name].dtype
        return np.dtype(self.specs[name][1])

    def nbytes(self, name: str) -> int:
        """Bytes of a constant or a shaped tensor (0 for a name the graph does not know)."""
        if name in self.consts:
            return int(self.consts[name].nbytes)
        if name not in self.specs:
            return 0
        shape, dtype = self.specs[name]
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize

    def quant_params(self, name: str):
        """QuantParams of a quantized tensor (constant or op output), or None for float ones."""
        if name in self.consts:
            return self.quant.get(name)
        if np.dtype(self.specs[name][1]) not in (np.dtype(np.uint8), np.dtype(np.int8)):
            return None
        for op in self.net.op:
            if name in op.output:
                i = list(op.output).index(name)
                return params_from_info(op.quantize_info[i]) if i < len(op.quantize_info) else None
        return None

    def rename_tensor(self, old: str, new: str) -> None:
        """Make every consumer (and graph output) read `new` instead of `old`."""
        for op in self.net.op:
            for i, t in enumerate(op.input):
                if t == old:
                    op.input[i] = new
        for o in self.net.output_info:
            if o.name == old:
                o.name = new

    def record_shapes(self) -> None:
        """Copy `specs` into each op's output_shape/output_type fields."""
        for op in self.net.op:
            del op.output_shape[:]
            del op.output_type[:]
            for t in op.output:
                shape, dtype = self.specs[t]
                op.output_shape.add().dims.extend(shape)
                op.output_type.append(from_numpy(dtype))


def _copy_op(op) -> pb.OperatorDef:
    new = pb.OperatorDef()
    new.CopyFrom(op)
    return new
