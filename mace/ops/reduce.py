"""Reduce: arg `reduce_type` (MEAN MAX MIN SUM PROD L1 L2 LOGSUMEXP SUMSQUARE LOGSUM)
over arg `axis` (a list; empty = all axes, unless noop_with_empty_axes), keeping
dims when `keepdims`."""
import numpy as np

from mace.ir.args import get_arg, set_arg
from mace.ops._common import normalize_axis
from mace.ops.registry import Kernel, Layout, OpSpec, kernel, register_op

FUNCS = {
    "MEAN": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "MAX": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "MIN": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "SUM": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "PROD": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "L1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "L2": lambda x, a, k: np.sqrt(np.sum(np.square(x), axis=a, keepdims=k)),
    "LOGSUMEXP": lambda x, a, k: _logsumexp(x, a, k),
    "SUMSQUARE": lambda x, a, k: np.sum(np.square(x), axis=a, keepdims=k),
    "LOGSUM": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
}


def _lowest(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return False
    return np.iinfo(dtype).min if dtype.kind in "iu" else -np.inf


def _highest(dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return True
    return np.iinfo(dtype).max if dtype.kind in "iu" else np.inf


# What a reduction over zero elements gives (ONNX: the operation's identity).
EMPTY = {"MAX": _lowest, "MIN": _highest, "LOGSUMEXP": lambda d: -np.inf, "LOGSUM": lambda d: -np.inf,
         "SUM": lambda d: 0, "SUMSQUARE": lambda d: 0, "L1": lambda d: 0, "L2": lambda d: 0,
         "PROD": lambda d: 1, "MEAN": lambda d: np.nan}


def _logsumexp(x, axes, keepdims):
    # Shift by the max so exp cannot overflow (inf maxima shift by 0 to keep inf/nan right).
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    res = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return res if keepdims else np.squeeze(res, axis=axes)


def reduce_axes(op_arg, rank):
    axes = op_arg("axis", [])
    if not axes:
        return () if op_arg("noop_with_empty_axes", 0) else tuple(range(rank))
    return tuple(sorted(normalize_axis(a, rank) for a in axes))


@register_op("Reduce", layout=Layout.AXIS)
class Reduce(OpSpec):
    attrs = {"axis": [], "keepdims": 1, "noop_with_empty_axes": 0, "reduce_type": ""}

    @staticmethod
    def infer(ctx):
        shape = ctx.shapes[0]
        axes = reduce_axes(ctx.arg, len(shape))
        keep = bool(ctx.arg("keepdims"))
        out = [1 if i in axes else d for i, d in enumerate(shape)] if keep else \
            [d for i, d in enumerate(shape) if i not in axes]
        return [(tuple(out), ctx.dtypes[0])]

    @staticmethod
    def remap_axes(op, perm, ranks):
        rank = ranks[0]
        axes = reduce_axes(lambda n, d=None: get_arg(op, n, d), rank)
        if not axes:
            return perm
        set_arg(op, "axis", [list(perm).index(a) for a in axes])
        if get_arg(op, "keepdims", 1):
            return perm
        kept = [p for p in perm if p not in axes]  # logical axes in stored order
        return tuple(sorted(kept).index(p) for p in kept)


@kernel("Reduce", "cpu")
class ReduceCpu(Kernel):
    def setup(self, ctx):
        self.fn = FUNCS[ctx.arg("reduce_type")]
        self.axes = reduce_axes(ctx.arg, len(ctx.input_shapes[0]))

    def run(self, inputs, outputs):
        x = inputs[0]
        if not self.axes:
            np.copyto(outputs[0], x)
            return
        if any(x.shape[a] == 0 for a in self.axes):
            outputs[0][...] = EMPTY[self.ctx.arg("reduce_type")](x.dtype)
            return
        res = self.fn(x, self.axes, True)
        np.copyto(outputs[0], res.reshape(outputs[0].shape), casting="unsafe")
