"""The op registry: the single source of truth for what ops exist.

One op type = one module in `mace/ops/` declaring an `OpSpec` subclass with
`@register_op`: its layout class (how the NHWC pass treats it), its shape
function, and its kernels. Kernels are registered per tag with `@kernel`;
an engine asks for an ordered tag list (e.g. ["cpu:fast", "cpu"]) and gets
the first that exists, as TFLite Micro's optimised kernels replace the
portable reference. The numpy "cpu" kernel is the reference and test oracle.
"""
from __future__ import annotations

import enum
import functools
import importlib
import os
import pkgutil
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from mace.errors import UnsupportedOpError
from mace.ir.args import get_arg

_MISSING = object()
REQUIRED = _MISSING   # an attribute without a default: the converter always writes it

# With MACE_STRICT_ATTRS=1 (read once, at import; tests/conftest.py sets STRICT_ATTRS itself) a
# shape function or kernel reading an attribute its op spec does not declare is an error: a
# misspelt name cannot silently read a default.
STRICT_ATTRS = os.environ.get("MACE_STRICT_ATTRS", "") not in ("", "0")

# What a fused activation writes on the op it is fused into (fuse_activation, the frontends'
# fused activations, the int8 table activations' input range).
FUSED_ACTIVATION = {"activation": "", "activation_coefficient": 0.0, "max_limit": 0.0,
                    "pre_activation_range": None}


class UndeclaredAttributeError(AttributeError):
    pass


def read_attr(op, name: str, default=_MISSING):
    """Attribute `name` of `op` as its spec declares it (OpSpec.attrs): the op's own value, else
    `default`, else the declared default (KeyError for a REQUIRED one the op lacks)."""
    cls = _SPECS.get(op.type)
    declared = cls.attrs if cls is not None else {}
    if name not in declared:
        if STRICT_ATTRS and cls is not None:
            raise UndeclaredAttributeError(
                f"op '{op.name}' ({op.type}) reads attribute '{name}', which {cls.__module__}."
                f"{cls.__name__}.attrs does not declare (declared: {', '.join(sorted(declared)) or 'none'})")
    elif default is _MISSING:
        default = declared[name]
        default = list(default) if isinstance(default, list) else default   # a caller may change it
    return get_arg(op, name) if default is _MISSING else get_arg(op, name, default)


class Layout(enum.Enum):
    """How an op relates to the 4-D data layout (see transform/passes/to_nhwc.py)."""

    FIXED = "fixed"              # needs NHWC activations (conv, pooling, resize, ...)
    ELEMENTWISE = "elementwise"  # works in any layout if all operands agree
    AXIS = "axis"                # works in any layout once its axis arguments are remapped
    ANY = "any"                  # needs the framework's own layout (reshape, matmul, ...)


@dataclass
class InferContext:
    """What a shape function sees: the op, its input shapes/dtypes, const input values."""

    op: object
    shapes: list
    dtypes: list
    values: list  # np.ndarray for constant inputs, else None

    def arg(self, name, default=_MISSING):
        return read_attr(self.op, name, default)


class OpSpec:
    """Base of every op type. Subclasses set `layout` and implement `infer`."""

    type: str = ""
    layout: Layout = Layout.ANY
    kernels: dict = {}
    # it changes state kept between runs (AssignVariable): never folded, kept without readers
    side_effects: bool = False
    # The attributes its shape function and kernels read, {name: default} (REQUIRED: none, the
    # converter always writes it), declared once: `ctx.arg(name)` without a default takes the
    # declared one; reading a name not declared is an error under STRICT_ATTRS.
    attrs: dict = {}

    @staticmethod
    def infer(ctx: InferContext) -> list:
        """Return [(shape tuple, numpy dtype)] for each output."""
        raise NotImplementedError

    @staticmethod
    def ragged(op) -> dict:
        """Outputs whose length along one axis depends on the data (NonZero, NonMaxSuppression):
        {output index: (axis, index of the int64 output holding that length)}. `infer` gives
        the static upper bound; the kernel fills the rest with zeros (mace/ops/_ragged.py)."""
        return {}

    @staticmethod
    def remap_axes(op, perm: tuple, ranks: list):
        """AXIS ops: rewrite axis args for inputs stored as logical.transpose(perm).

        Return the output perm, or None when the op must see the logical layout.
        """
        return None


# When a kernel's `check(ctx)` is asked (KernelContext.stage):
CONVERT = "convert"   # by a pass, of the graph it is still deciding on (the quantize pass asks an
                      # int8 kernel of a float op whether it could run it once quantized)
LOAD = "load"         # of the graph as it runs (the engine at load; reports predicting it)


@dataclass
class KernelContext:
    """What a kernel is built from, and what its `check` reads: the op, tensor specs and
    constant inputs. The engine makes one per node at load; `graph_context` makes the same
    from a graph at convert time (shapes, dtypes, constants and quantization are in the IR)."""

    op: object
    input_shapes: list
    input_dtypes: list
    output_shapes: list
    output_dtypes: list
    consts: list = field(default_factory=list)  # np.ndarray or None per input
    options: dict = field(default_factory=dict)  # engine options (num_threads, ...)
    # mace.ir.quant_params.QuantParams (or None: float tensor) per input / output
    input_quant: list = field(default_factory=list)
    output_quant: list = field(default_factory=list)
    variables: object = None   # the engine's mace.ops.variable.Variables (state between runs)
    stage: str = LOAD          # CONVERT or LOAD: who asks (see above)
    # the engine's mace.ops.fast.compute.ComputeContext: its threads and the compute pool, which
    # fast kernels bind their steps with; None (outside an engine): serial (compute.SERIAL)
    compute: object = None

    def arg(self, name, default=_MISSING):
        return read_attr(self.op, name, default)


def graph_context(graph, op, stage: str = CONVERT, options: dict | None = None, variables=None,
                  quantized: bool = False, compute=None) -> KernelContext:
    """The KernelContext of `op` in `graph`, from the IR alone: shapes and dtypes from the
    constants and `graph.specs`, quantization parameters when `quantized`. KeyError names a
    input without a known shape (an output without one has shape and dtype None)."""
    consts = [graph.consts.get(t) for t in op.input]
    inputs = [(tuple(c.shape), c.dtype) if c is not None
              else (tuple(graph.specs[t][0]), np.dtype(graph.specs[t][1])) for t, c in zip(op.input, consts)]
    outputs = [graph.specs.get(t) for t in op.output]
    return KernelContext(
        op=op,
        input_shapes=[s for s, _ in inputs],
        input_dtypes=[d for _, d in inputs],
        output_shapes=[None if o is None else tuple(o[0]) for o in outputs],
        output_dtypes=[None if o is None else np.dtype(o[1]) for o in outputs],
        consts=consts,
        options=options if options is not None else {},
        input_quant=[graph.quant_params(t) for t in op.input] if quantized else [],
        output_quant=[graph.quant_params(t) for t in op.output] if quantized else [],
        variables=variables,
        stage=stage,
        compute=compute,
    )


class Kernel:
    """A runnable op. Built once at engine load; `run` writes into `outputs`.

    Whether a kernel class takes a node is its `check(ctx) -> str | None` (a staticmethod or
    classmethod): None, it takes it; else a short reason ("dilation 2", "fused activation
    PRELU not supported") and the next kernel in tag order is asked. The engine records the
    reasons of the kernels a node fell back from (`Node.declined`; `run --vlog_level 2`, the
    offline report), and the quantize pass and GPU placement ask the same method at convert."""

    # check(ctx) -> reason | None; None here: every node is taken
    check = None

    # Bytes of the engine's shared scratch region that `bind` wants (set in setup).
    scratch_nbytes: int = 0
    # Its work is mostly BLAS calls (np.matmul): inside a compute pool session, which holds
    # OpenBLAS at one thread, its step gets OpenBLAS's threads back while it runs
    # (mace/ops/fast/compute.py, ComputeContext.with_blas_threads).
    uses_blas: bool = False

    def __init__(self, ctx: KernelContext):
        self.ctx = ctx
        self.setup(ctx)

    def setup(self, ctx: KernelContext) -> None:
        """Pre-compute everything that does not depend on input values."""
    def run(self, inputs: list, outputs: list) -> None:
        raise NotImplementedError

    def bind(self, inputs: list, outputs: list, scratch=None) -> Callable:
        """A zero-argument callable that runs the op on these (fixed) buffers.

        The engine binds every node once at load and calls the result on each run,
        so a kernel may compute its views here. `scratch` (uint8, at least
        scratch_nbytes, or None: allocate your own) is shared by all kernels and
        holds nothing between calls.
        """
        return functools.partial(self.run, inputs, outputs)


class SimpleKernel(Kernel):
    """A kernel written as a function of its inputs; results are copied out."""

    def compute(self, *inputs):
        raise NotImplementedError

    def run(self, inputs, outputs):
        results = self.compute(*inputs)
        if not isinstance(results, (tuple, list)):
            results = (results,)
        for out, res in zip(outputs, results):
            np.copyto(out, np.asarray(res).reshape(out.shape), casting="unsafe")


_SPECS: dict = {}


# kernels whose op type's spec has not registered yet (its module imports later)
_PENDING: dict = {}


def register_op(op_type: str, layout: Layout = Layout.ANY) -> Callable:
    def wrap(cls):
        if op_type in _SPECS:
            raise ValueError(f"op type {op_type} registered twice")
        cls.type, cls.layout, cls.kernels = op_type, layout, _PENDING.pop(op_type, {})
        _SPECS[op_type] = cls
        return cls
    return wrap


def kernel(op_type: str, tag: str = "cpu") -> Callable:
    def wrap(cls):
        # Held until the spec registers, not found by importing every module (_load_all): a
        # kernel module imported first would otherwise import, through _load_all, modules that
        # import it back while it is half-initialised (a fast kernel subclassing a reference).
        kernels = _SPECS[op_type].kernels if op_type in _SPECS else _PENDING.setdefault(op_type, {})
        kernels[tag] = cls
        cls.op_type, cls.tag = op_type, tag
        return cls
    return wrap


def spec(op_type: str) -> type:
    _load_all()
    try:
        return _SPECS[op_type]
    except KeyError:
        raise UnsupportedOpError(
            f"op type '{op_type}' is not registered; known: {', '.join(sorted(_SPECS))}") from None


def all_ops() -> dict:
    _load_all()
    return dict(_SPECS)


def select_kernel(op_type: str, tags) -> tuple:
    """Return (kernel class, tag) for the first tag in `tags` that has a kernel."""
    kernels = spec(op_type).kernels
    for tag in tags:
        if tag in kernels:
            return kernels[tag], tag
    raise UnsupportedOpError(
        f"op type '{op_type}' has no kernel for {list(tags)}; it has {sorted(kernels)}")


def kernel_check(cls, ctx: KernelContext) -> str | None:
    """Why kernel class `cls` does not take ctx's node, or None when it does."""
    check = getattr(cls, "check", None)
    return None if check is None else check(ctx)


def choose_kernel(op_type: str, ctx: KernelContext, tags) -> tuple:
    """(kernel class, tag, declined) for the first kernel in tag order whose check takes ctx's
    node; `declined`: ((tag, reason), ...) of the kernels before it that did not."""
    tags, declined = list(tags), []
    while True:
        cls, tag = select_kernel(op_type, tags)
        reason = kernel_check(cls, ctx)
        if reason is None:
            return cls, tag, tuple(declined)
        declined.append((tag, reason))
        tags = tags[tags.index(tag) + 1:]


def declined_line(op, tag: str, declined) -> str:
    """One line for a node that fell back: `conv1 (Conv2D) runs cpu: cpu:fast: dilation 2`
    (tags declining for the same reason one after another share it: `int8:fast, int8: ...`)."""
    groups = []   # [tags, reason]
    for t, r in declined:
        if groups and groups[-1][1] == r:
            groups[-1][0].append(t)
        else:
            groups.append([[t], r])
    return f"{op.name} ({op.type}) runs {tag}: " + "; ".join(f"{', '.join(ts)}: {r}" for ts, r in groups)


_loaded = False


def _load_all() -> None:
    """Import every module of mace.ops so their decorators run (no hand-kept list)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    here = [str(Path(__file__).parent)]   # this package's folder: no import of mace.ops itself
    for info in pkgutil.walk_packages(here, "mace.ops."):
        if not info.name.rsplit(".", 1)[-1].startswith("_") and info.name != __name__:
            importlib.import_module(info.name)
