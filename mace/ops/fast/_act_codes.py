"""Which float activations and unary Eltwise types have a compiled loop (_act_loops.py), under
which code, and the float32 parameters the loop takes: shared by the fast Activation and Eltwise
kernels and by the conv / FC epilogues' fused activations (_base.activation_fn)."""
from __future__ import annotations

import numpy as np

# Activation kind -> its code in _act_loops (PRELU has a loop of its own)
CODES = {"SIGMOID": 0, "SWISH": 1, "GELU": 2, "GELU_TANH": 3, "ELU": 5, "SELU": 6,
         "SOFTPLUS": 7, "MISH": 8, "HARDSWISH": 9, "HARDSIGMOID": 10, "LEAKYRELU": 11}
# Eltwise type -> its code (EXP, LOG: numpy's float32 np.exp / np.log are one vectorized pass
# already, as fast as the float64 loop or faster; TANH likewise stays np.tanh)
UNARY_CODES = {"ERF": 4, "SQRT": 12, "RSQRT": 13, "RECIPROCAL": 14, "NEG": 15, "ABS": 16,
               "SQUARE": 17}
EXACT_FROM = 9   # codes from here on are the float32-step kinds of _act_loops.exact
# a conv's / FC's fused activation in the packed GEMM's store step (_act_loops.store_rows): every
# Activation code, and TANH (standalone it stays np.tanh) and PRELU (a slope per channel)
STORE_CODES = dict(CODES, TANH=18, PRELU=19)


# what the pool's split rule counts for an element of a transcendental code (the float64
# polynomial kinds before EXACT_FROM, 1-2.5 ns an element against ~0.1 for a copy): a MiniLM's
# GELU of 16 x 1536 (50 us) was held serial as "49 k elements touched"
TRANSCENDENTAL_WORK = 10


def work(code: int, size: int) -> int:
    """Elements touched, as the compute pool's split rule counts them (compute.loop's `work`),
    of loop `code` over `size` elements."""
    return 2 * size * (TRANSCENDENTAL_WORK if code < EXACT_FROM else 1)


def loop_name(code: int, inplace: bool = False) -> str:
    """The _act_loops loop for `code`; `inplace`: its one-array twin, for x is out (two aliased
    arrays would run the loop's scalar fallback, ~10x slower)."""
    return ("exact" if code >= EXACT_FROM else "unary") + ("_inplace" if inplace else "")


def aliasing(x, out) -> str:
    """'same' (one buffer: the in-place loops), 'apart', or 'overlap' (neither: the reference)."""
    if x.ctypes.data == out.ctypes.data and x.shape == out.shape and x.strides == out.strides:
        return "same"
    return "overlap" if np.shares_memory(x, out) else "apart"


def params(kind: str, alpha: float, max_limit: float, beta: float = 0.0) -> tuple:
    """(a, b): the loop's float32 parameters, as the references' numpy expressions round them
    (HARDSIGMOID: slope, offset; SELU: alpha, gamma; SWISH / ELU / LEAKYRELU: alpha)."""
    pair = {"HARDSIGMOID": (alpha, max_limit), "SELU": (alpha, beta)}.get(kind, (alpha, 0.0))
    return tuple(np.float32(v) for v in pair)
