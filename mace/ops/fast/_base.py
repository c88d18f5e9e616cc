"""What the fast kernels share: scratch carving, typed activations, the run-through-bind rule."""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops._common import apply_activation
from mace.ops.fast._act_codes import CODES, STORE_CODES, loop_name, params
from mace.ops.fast._jit import act_loops, op_loops
from mace.ops.registry import Kernel
from mace.util.aligned import ALIGN, aligned_empty   # every carved array starts on a cache line

F32 = np.dtype(np.float32)   # the dtype the fast kernels take


def aligned(nbytes: int) -> int:
    return (int(nbytes) + ALIGN - 1) // ALIGN * ALIGN


def scratch_size(specs) -> int:
    """Bytes needed to carve `specs` [(shape, dtype)] one after another."""
    return sum(aligned(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize)
               for shape, dtype in specs)


def carve(scratch, specs) -> list:
    """Arrays for `specs` [(shape, dtype)] laid out in `scratch` (uint8); fresh ones when None."""
    if scratch is None:
        scratch = aligned_empty(scratch_size(specs))
    arrays, offset = [], 0
    for shape, dtype in specs:
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        arrays.append(scratch[offset:offset + n].view(dtype).reshape(shape))
        offset += aligned(n)
    return arrays


class FastKernel(Kernel):
    """A kernel whose work is defined by `bind`; `run` binds afresh (for one-off calls)."""

    def run(self, inputs, outputs):
        self.bind(inputs, outputs, None)()


def loop_bias(bias, n: int) -> np.ndarray:
    """The bias the compiled bias + clip loops take: `bias`, or n zeros where there is none."""
    return np.zeros(n, np.float32) if bias is None else bias


def clip_bounds(act: dict, dtype=np.float32):
    """(lo, hi) of the tensor's type when the fused activation is a clip (none: -inf, inf),
    else None (LEAKYRELU, TANH, ... need apply_activation)."""
    kind = act.get("act") or "NOOP"
    bounds = {"NOOP": (-np.inf, np.inf), "RELU": (0, np.inf),
              "RELUX": (0, act.get("max_limit", 0.0)),
              "CLIP": (act.get("alpha", 0.0), act.get("max_limit", 0.0))}.get(kind)
    if bounds is None or np.dtype(dtype).kind != "f":
        return None
    t = np.dtype(dtype).type
    return t(bounds[0]), t(bounds[1])


# copies up to this many elements run as a compiled loop (copy_step), larger ones numpy's
SMALL_COPY = 1 << 16
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def copy_step(out, src):
    """A step copying `src` into `out` (one shape and dtype): for a small copy whose arrays are
    both rows of their last axis (any strides: a split's channel piece, a slice) the compiled
    loop (_cast_loops.copy_rows, a step a chain calls: np.copyto's call costs more than a few
    hundred elements' copy), else np.copyto. The same bytes either way."""
    lib = op_loops("_cast_loops")
    if lib is not None and src.size <= SMALL_COPY and src.shape == out.shape and src.dtype == out.dtype:
        a, b = _rows(src), _rows(out)
        if a is not None and b is not None:
            return partial(lib.copy_rows, a, b)
    return partial(np.copyto, out, src)


def _rows(a: np.ndarray):
    """`a` as a 2-D view [rows, last axis] of unsigned ints of its item size, or None where that
    view needs a copy (or there is no such int, or no axis)."""
    bits = _BITS.get(a.dtype.itemsize)
    if bits is None or a.ndim == 0 or a.dtype.hasobject:
        return None
    view = a.view()
    try:   # (np.reshape's copy=False needs numpy 2.1)
        view.shape = (-1, a.shape[-1]) if a.size else (0, 0)
    except (AttributeError, ValueError):   # numpy would have to copy
        return None
    return view.view(bits)


# the store step's fused activation for none (or a clip: lo, hi do it): _loops._store's `epi`
NO_STORE = (0, 0, np.float32(0), np.float32(0), 0)


def store_epilogue(act: dict, slope=None):
    """(lo, hi, epi) for the packed GEMM's and the depthwise loop's store step: the clip of a
    RELU / RELUX / CLIP (or none) as lo, hi, any other activation with a compiled loop as `epi`
    (_loops._store: store_rows' address, its code and parameters, a PRELU's `slope` address: a
    float32 array per output channel the caller keeps alive); None where neither applies (a
    kind without a loop, no numba)."""
    bounds = clip_bounds(act)
    if bounds is not None:
        return bounds + (NO_STORE,)
    kind, lib = act.get("act"), act_loops()
    if lib is None or kind not in STORE_CODES or (kind == "PRELU") != (slope is not None):
        return None
    a, b = params(kind, act.get("alpha", 0.0), act.get("max_limit", 0.0))
    at = 0 if slope is None else int(slope.ctypes.data)
    return F32.type(-np.inf), F32.type(np.inf), (int(lib.store_rows.address), STORE_CODES[kind], a, b, at)


def fused_slope(ctx):
    """A conv's fused PRELU slope (its input 3: one per output channel, fuse_activation), as
    contiguous float32, or None."""
    if ctx.arg("activation", "") != "PRELU" or len(ctx.consts) < 4 or ctx.consts[3] is None:
        return None
    return np.ascontiguousarray(np.asarray(ctx.consts[3], np.float32).reshape(-1))


# np.clip's ufunc itself: the same bytes as np.clip (-0.0 kept, NaN through), without the
# Python wrapper that checks its arguments on every call (most of a 128-float RELU's step)
CLIP_UFUNC = getattr(getattr(np, "_core", None) or np.core, "umath").clip


def activation_fn(act: dict, dtype=np.float32, slope=None):
    """In-place activation `fn(x)` for a kernel's fused activation args, or None.

    RELU / RELUX / CLIP use np.clip's ufunc with bounds of the tensor's own type: numpy 2.4
    runs that ~4x faster than np.maximum(x, 0) (250 vs 61 us on 3136x256 float32).
    SIGMOID, LEAKYRELU, HARDSWISH, HARDSIGMOID on a contiguous float32 output run the fast
    Activation's compiled loop in place (serial: it runs inside the kernel's step), within 2 ulp
    of apply_activation (the same bytes for the last three); e.g. a conv's fused LEAKYRELU
    ~1.0 -> 0.6 ns an element, a fused SIGMOID ~20 -> 1 (bench_activations.py).
    """
    if (act.get("act") or "NOOP") == "NOOP":
        return None
    bounds = clip_bounds(act, dtype)
    if bounds is not None:
        lo, hi = bounds
        return lambda x: CLIP_UFUNC(x, lo, hi, out=x)
    compiled = compiled_in_place(act, dtype)
    return compiled or (lambda x: apply_activation(x, **act, slope=slope))


def in_place_step(act: dict, x: np.ndarray, slope=None):
    """A step applying the fused activation `act` to contiguous float32 `x` in place: a partial
    of _act_loops' loop where there is one (a step a chain calls), else activation_fn's."""
    kind, lib = act.get("act"), act_loops()
    if lib is not None and kind in CODES and x.dtype == F32 and x.flags.c_contiguous:
        flat = x.reshape(-1)
        a, b = params(kind, act.get("alpha", 0.0), act.get("max_limit", 0.0))
        code = CODES[kind]
        return partial(getattr(lib, loop_name(code, inplace=True)), flat, code, a, b, 0, flat.size)
    return partial(activation_fn(act, x.dtype, slope), x)


def compiled_in_place(act: dict, dtype):
    """fn(x) running _act_loops' loop for the fused activation in place, or None (no loop for
    the kind, not float32, no numba); a non-contiguous x takes apply_activation."""
    kind, lib = act.get("act"), act_loops()
    if lib is None or kind not in CODES or np.dtype(dtype) != F32:
        return None
    code = CODES[kind]
    fn = getattr(lib, loop_name(code, inplace=True))
    a, b = params(kind, act.get("alpha", 0.0), act.get("max_limit", 0.0))

    def run(x):
        if x.dtype != F32 or not x.flags.c_contiguous:
            return apply_activation(x, **act)
        flat = x.reshape(-1)
        fn(flat, code, a, b, 0, flat.size)
        return x
    return run
