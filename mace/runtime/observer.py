"""Observer API: be told about every node the engine runs (ST's platform observer, in Python).

    handle = register(engine, callback, Event.BEFORE | Event.AFTER)
    def callback(flags: Event, node: NodeInfo) -> None: ...
    unregister(engine, handle)
    info = node_info(engine, 3)           # walks the graph without running it
    relocate_weights(engine, 3, buffer)   # ST's copy-before-run

Events: INIT (once per node, at registration: the engine is initialised by then),
BEFORE and AFTER (around each node's kernel during `engine.run`). FIRST and LAST
are added to the flags for the first and the last node of the execution list.
Several callbacks may be registered on one engine; they are called in
registration order. A callback sees a NodeInfo: the node's index in execution
order, its type, the original framework ops it came from, and its input, output,
weight and scratch tensors. Tensor data is read through the engine, so a device
runtime (an engine with `read_tensor(name)`) maps its memory back to the host.

Built only on the engine's `observers` hook (`fn(event, node, engine)`): the
profiler, the tensor dumper and the layer validator are clients of this module,
not special cases inside the engine.
"""
from __future__ import annotations

import enum
import weakref
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from mace.runtime.gpu.transfer import download_image


class Event(enum.IntFlag):
    INIT = 1
    BEFORE = 2
    AFTER = 4
    FIRST = 8     # added to the flags: the event is about the first node
    LAST = 16     # ... about the last node
    ALL = INIT | BEFORE | AFTER


@dataclass
class TensorInfo:
    """One tensor a node reads or writes; `data` is read when asked for (a live view on CPU)."""

    name: str
    kind: str                 # input | output | weight | scratch
    shape: tuple
    dtype: np.dtype
    scale: float | None = None        # quantized tensors only
    zero_point: int | None = None
    _read: Callable = field(default=None, repr=False)

    @property
    def data(self) -> np.ndarray:
        return self._read()

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass
class NodeInfo:
    index: int                # position in the execution list (ST's c_idx)
    type: str                 # IR op type
    name: str                 # IR op name
    framework_ops: tuple      # names of the original framework ops fused into this node
    kernel: str               # tag of the kernel variant that runs it ("cpu", ...)
    inputs: list = field(default_factory=list)    # TensorInfo, activations read
    outputs: list = field(default_factory=list)   # TensorInfo, activations written
    weights: list = field(default_factory=list)   # TensorInfo, constant inputs
    scratch: list = field(default_factory=list)   # TensorInfo, the kernel's own buffers


@dataclass
class _Registration:
    callback: Callable
    flags: Event


class _Hub:
    """The one engine observer that fans events out to the registered callbacks.

    Event flags and callback lists are prepared ahead (enum arithmetic is slow in
    Python), so an event costs a few lookups: the profiler's numbers stay honest."""

    def __init__(self, engine):
        self.registrations: list = []
        self.infos: dict = {}   # node index -> NodeInfo, built on first use
        self.quant = _activation_quant(engine)
        self.callbacks = {"before": [], "after": []}
        count = len(engine.nodes)
        self.flags = {name: [flag | _position(count, i) for i in range(count)]
                      for name, flag in (("before", Event.BEFORE), ("after", Event.AFTER))}

    def refresh(self) -> None:
        for name, flag in (("before", Event.BEFORE), ("after", Event.AFTER)):
            self.callbacks[name] = [r.callback for r in self.registrations if r.flags & flag]

    def info(self, engine, index: int) -> NodeInfo:
        info = self.infos.get(index)
        if info is None:
            info = self.infos[index] = build_node_info(engine, engine.nodes[index], self.quant)
        return info

    def __call__(self, event: str, node, engine) -> None:
        callbacks = self.callbacks.get(event)
        if not callbacks:
            return
        flags = self.flags[event][node.index]
        info = self.infos.get(node.index) or self.info(engine, node.index)
        for cb in callbacks:
            cb(flags, info)


_HUBS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _hub(engine) -> _Hub:
    hub = _HUBS.get(engine)
    if hub is None:
        hub = _HUBS[engine] = _Hub(engine)
    return hub


def _position(count: int, index: int) -> Event:
    flags = Event(0)
    if index == 0:
        flags |= Event.FIRST
    if index == count - 1:
        flags |= Event.LAST
    return flags


def register(engine, callback: Callable, flags: Event = Event.BEFORE | Event.AFTER) -> _Registration:
    """Call `callback(flags, node_info)` on the events in `flags`; returns a handle for unregister.

    With Event.INIT the callback is called once per node right away (the engine is
    initialised when it can be registered with)."""
    hub = _hub(engine)
    handle = _Registration(callback, Event(flags))
    hub.registrations.append(handle)
    hub.refresh()
    if hub not in engine.observers:
        engine.observers.append(hub)
    if flags & Event.INIT:
        for node in engine.nodes:
            callback(Event.INIT | _position(len(engine.nodes), node.index), hub.info(engine, node.index))
    return handle


def unregister(engine, handle) -> bool:
    """Remove a registration (the handle, or the callback itself); False if it was not there."""
    hub = _HUBS.get(engine)
    if hub is None:
        return False
    keep = [r for r in hub.registrations if r is not handle and r.callback is not handle]
    found = len(keep) != len(hub.registrations)
    hub.registrations = keep
    hub.refresh()
    if not keep and hub in engine.observers:
        engine.observers.remove(hub)  # an engine nobody observes runs without the hub's overhead
    return found


def node_info(engine, index: int) -> NodeInfo | None:
    """The node at `index` in execution order, without running anything; None past the end."""
    if not 0 <= index < len(engine.nodes):
        return None
    return _hub(engine).info(engine, index)


def iter_nodes(engine):
    """NodeInfo of every node in execution order (ST's node_info loop)."""
    index = 0
    while (info := node_info(engine, index)) is not None:
        yield info
        index += 1


# ---- weights -------------------------------------------------------------------
def replace_weight(engine, name: str, value: np.ndarray) -> list:
    """Give constant `name` new values (same shape and dtype) for every node that reads it.

    Kernels pre-pack their weights at load, so the engine rebuilds them; returns the
    indices of the rebuilt nodes. Call it between runs or from an INIT/BEFORE callback."""
    current = engine.graph.consts[name]
    value = np.asarray(value)
    if value.shape != current.shape or value.dtype != current.dtype:
        raise ValueError(f"weight '{name}': new value is {value.dtype}{list(value.shape)}, "
                         f"the model's is {current.dtype}{list(current.shape)}")
    rebuilt = engine.replace_const(name, value)
    _forget(engine, rebuilt)
    return rebuilt


def relocate_weights(engine, index: int, buffer: np.ndarray, align: int = 64) -> list:
    """Copy node `index`'s weights into `buffer` (bytes, e.g. faster memory) and run from there.

    Each weight starts at a multiple of `align` bytes of the buffer; returns the
    relocated TensorInfo list. ST's copy-before-run use case."""
    info = node_info(engine, index)
    if info is None:
        raise IndexError(f"no node {index}: the engine has {len(engine.nodes)}")
    raw = buffer.reshape(-1).view(np.uint8)
    offset = 0
    for w in info.weights:
        offset += (-(raw.ctypes.data + offset)) % align
        end = offset + w.nbytes
        if end > raw.size:
            raise ValueError(f"buffer of {raw.size} bytes is too small for the weights of node "
                             f"{index} ({info.name})")
        view = raw[offset:end].view(w.dtype).reshape(w.shape)
        view[...] = w.data
        replace_weight(engine, w.name, view)
        offset = end
    return node_info(engine, index).weights


def _forget(engine, indices) -> None:
    hub = _HUBS.get(engine)
    if hub:
        for i in indices:
            hub.infos.pop(i, None)


# ---- building NodeInfo ---------------------------------------------------------------
def build_node_info(engine, node, quant: dict | None = None) -> NodeInfo:
    op = node.op
    consts = engine.graph.consts
    info = NodeInfo(node.index, op.type, op.name, tuple(op.framework_op), node.tag)
    quant = _activation_quant(engine) if quant is None else quant
    for name in op.input:
        if name in consts:
            info.weights.append(_tensor(engine, name, "weight"))
        else:
            info.inputs.append(_tensor(engine, name, "input", quant.get(name)))
    for name in op.output:
        info.outputs.append(_tensor(engine, name, "output", quant.get(name)))
    info.scratch = kernel_buffers(node, getattr(engine, "scratch", None))
    need = int(getattr(node.kernel, "scratch_nbytes", 0) or 0)
    if need:  # the engine's scratch region, shared by the kernels one at a time
        info.scratch.append(TensorInfo("engine.scratch", "scratch", (need,), np.dtype(np.uint8),
                                       _read=lambda: engine.scratch[:need]))
    return info


def _activation_quant(engine) -> dict:
    """tensor -> (scale, zero point) of quantized activations (OperatorDef.quantize_info).

    Weights carry theirs in ConstTensor, which a loaded model does not keep yet."""
    quant = {}
    for op in engine.graph.net.op:
        for name, q in zip(op.output, op.quantize_info):
            if q.scale:
                quant[name] = (float(q.scale), int(q.zero_point))
    return quant


def _tensor(engine, name: str, kind: str, quant=None) -> TensorInfo:
    if name in engine.graph.consts:
        value = engine.graph.consts[name]
        shape, dtype = tuple(value.shape), value.dtype
        read = (lambda: engine.graph.consts[name])
    else:
        shape, dtype = engine.graph.specs[name]
        read = _activation_reader(engine, name)
    scale, zero_point = quant or (None, None)
    return TensorInfo(name, kind, tuple(shape), np.dtype(dtype), scale, zero_point, _read=read)


def _activation_reader(engine, name: str) -> Callable:
    """How to read an activation: the host buffer, or the device's memory mapped back."""
    reader = getattr(engine, "read_tensor", None)  # a runtime that says how itself
    if reader:
        return lambda: reader(name)
    gpu = getattr(engine, "gpu", None)
    if name not in engine.buffers and gpu is not None and name in getattr(gpu, "tensors", {}):
        return lambda: _read_gpu_image(gpu, name)
    return lambda: engine.buffers[name]


def _read_gpu_image(gpu, name: str) -> np.ndarray:
    """A tensor that only lives in an OpenCL image, copied back to the host (NHWC, float32)."""
    gpu.queue.finish()
    tensor = gpu.tensors[name]
    return download_image(gpu, tensor.image, "nhwc", tensor.shape)


def kernel_buffers(node, shared=None) -> list:
    """The kernel's own arrays (packed weights, im2col and padding buffers) as scratch tensors.

    Arrays that are views of the node's inputs or outputs, or of the engine's `shared`
    scratch region, are not the kernel's own."""
    bound = [a for a in list(node.inputs) + list(node.outputs) + [shared] if isinstance(a, np.ndarray)]
    found = []
    for attr, value in sorted(vars(node.kernel).items()):
        if not isinstance(value, np.ndarray) or value.size == 0:
            continue
        if any(np.may_share_memory(value, b) for b in bound):
            continue
        found.append(TensorInfo(f"{node.op.name}/{attr}", "scratch", tuple(value.shape), value.dtype,
                                _read=lambda v=value: v))
    return found
