"""Pad, fast CPU kernel: the interior copied once and only the border written, as views bound
at load.

The reference fills the whole output with the constant and then copies the input over it
(CONSTANT: every interior element written twice), or builds np.pad's fresh array and copies
that (REFLECT / SYMMETRIC / EDGE / WRAP: an allocation and two full passes). Here the border
is cut into slabs, axis by axis: along axis d, the two end slabs span the whole output on the
axes before d and only the interior on the axes after it, so each border element is written
once. CONSTANT slabs are filled; the mirror modes copy, axis by axis, from what is already in
the output, in np.pad's own order (so the corners are its corners): every value is a copy,
the same bytes as the reference. A mirror wider than np.pad reflects in one go (REFLECT wider
than size - 1, SYMMETRIC / WRAP wider than size) stays with the reference, as do object
dtypes. Negative amounts crop the input first, as the reference does.

A float32 CONSTANT pad of the last axis only (TFLite detectors' channel padding before residual
adds) is one compiled pass per output row instead (_pad_loops.pad_rows: numpy's copy and fill
walk 24 and 4 floats per pixel), split across the compute pool's threads; one of an NHWC map's
rows and columns alone is the pass a padded conv makes of its input (_pad_loops.pad_image).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops import pad as _reference
from mace.ops._common import sequence
from mace.ops.fast._base import FastKernel
from mace.ops.fast._conv_gemm import pad_steps
from mace.ops.fast._jit import op_loops
from mace.ops.fast.compute import compute_of
from mace.ops.registry import kernel


def _widths(ctx):
    return _reference.split_paddings(ctx.arg("paddings"), len(ctx.input_shapes[0]))


def one_pass_mirror(ctx) -> bool:
    """Every axis's mirror is one copy from the interior (np.pad's single reflection)."""
    mode = ctx.arg("pad_type", "CONSTANT")
    if mode == "CONSTANT":
        return True
    if mode not in _reference.NUMPY_MODES:
        return False
    for size, (b, e) in zip(ctx.input_shapes[0], _widths(ctx)):
        kept = size - max(-b, 0) - max(-e, 0)
        reach = kept - 1 if mode == "REFLECT" else kept
        if max(b, 0) > reach or max(e, 0) > reach or (max(b, e) > 0 and kept == 0):
            return False
    return True


def mirror_copies(mode: str, begin: int, end: int, kept: int):
    """[(destination slice, source slice)] along one axis of the output for `mode`, the
    interior at begin:begin + kept."""
    stop = begin + kept
    pairs = []
    if begin:
        src = {"REFLECT": slice(2 * begin, begin, -1),
               "SYMMETRIC": slice(2 * begin - 1, begin - 1 if begin > 0 else None, -1),
               "EDGE": slice(begin, begin + 1), "WRAP": slice(stop - begin, stop)}[mode]
        pairs.append((slice(0, begin), src))
    if end:
        src = {"REFLECT": slice(stop - 2, (stop - 2 - end) if stop - 2 - end >= 0 else None, -1),
               "SYMMETRIC": slice(stop - 1, (stop - 1 - end) if stop - 1 - end >= 0 else None, -1),
               "EDGE": slice(stop - 1, stop), "WRAP": slice(begin, begin + end)}[mode]
        pairs.append((slice(stop, stop + end), src))
    return pairs


@kernel("Pad", "cpu:fast")
class PadFast(FastKernel):
    @staticmethod
    def check(ctx) -> str | None:
        if np.dtype(ctx.input_dtypes[0]).kind not in "fiub":
            return f"input is {np.dtype(ctx.input_dtypes[0])} (numbers and bool only)"
        if one_pass_mirror(ctx):
            return None
        mode = ctx.arg("pad_type", "CONSTANT")
        if mode not in _reference.NUMPY_MODES:
            return f"pad_type {mode} has no fast form"
        return f"{mode} padding wider than the input (more than one reflection)"

    def setup(self, ctx):
        pairs = _widths(ctx)
        self.mode = ctx.arg("pad_type", "CONSTANT")
        self.value = ctx.arg("constant_value", 0.0)
        self.crop = tuple(slice(max(-b, 0), d - max(-e, 0)) for d, (b, e) in zip(ctx.input_shapes[0], pairs))
        self.widths = [(max(b, 0), max(e, 0)) for b, e in pairs]
        self.inner = tuple(slice(b, b + s.stop - s.start) for (b, _), s in zip(self.widths, self.crop))
        # a float32 CONSTANT pad of the last axis alone: _rows_step's compiled pass
        self.last_axis_only = (self.mode == "CONSTANT" and np.dtype(ctx.input_dtypes[0]) == np.float32
                               and len(pairs) >= 1 and all(b == e == 0 for b, e in pairs[:-1])
                               and min(pairs[-1]) >= 0 and op_loops("_pad_loops") is not None)
        # a float32 CONSTANT pad of an NHWC map's rows and columns alone (explicit pads before
        # a conv): the conv's own padding pass (_conv_gemm.pad_steps)
        self.spatial_only = (self.mode == "CONSTANT" and np.dtype(ctx.input_dtypes[0]) == np.float32
                             and len(pairs) == 4 and pairs[0] == pairs[3] == (0, 0)
                             and min(min(pairs[1]), min(pairs[2])) >= 0)

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0][self.crop], outputs[0]
        if self.last_axis_only and x.flags.c_contiguous and out.flags.c_contiguous:
            return self._rows_step(x, out)
        if self.spatial_only:
            (t, b), (l, r) = self.widths[1], self.widths[2]
            return sequence(pad_steps(out, x, (t, l, b, r), self.value, compute_of(self.ctx)))
        steps = [partial(np.copyto, out[self.inner], x)]
        for d, ((b, e), inner) in enumerate(zip(self.widths, self.inner)):
            if not (b or e):
                continue
            before, after = (slice(None),) * d, self.inner[d + 1:]
            if self.mode == "CONSTANT":
                value = np.asarray(self.value).astype(out.dtype)
                for part in (slice(0, b), slice(inner.stop, inner.stop + e)):
                    if part.stop > part.start:
                        steps.append(partial(np.copyto, out[before + (part,) + after], value))
                continue
            for dst, src in mirror_copies(self.mode, b, e, inner.stop - inner.start):
                steps.append(partial(np.copyto, out[before + (dst,) + after], out[before + (src,) + after]))
        return sequence(steps)

    def _rows_step(self, x, out):
        """The last axis padded: out's rows from x's rows in one compiled pass (_pad_loops)."""
        rows = int(np.prod(out.shape[:-1], dtype=np.int64))
        args = (x.reshape(-1), out.reshape(-1), x.shape[-1], out.shape[-1], self.widths[-1][0],
                np.float32(self.value))
        return compute_of(self.ctx).loop("pad_rows", args, rows, x.size + out.size, lib=op_loops("_pad_loops"))
