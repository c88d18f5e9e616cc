"""The integer GEMM's host side: packing a quantized filter once at load, and its steps.

The reference (mace/ops/int8/_gemm.py) computes, per output channel c,

    acc[c] = sum_k (x_k - zx) * (w_k - zw[c]) + bias[c]

Here the weight is split as w - zw = w' + d with w' = w - off an int8 (off 0 for the
per-channel int8 weights, 128 for per-tensor uint8 ones, whose w - zw spans
[-255, 255]) and d = off - zw a constant per channel, so

    acc[c] = sum_k x_k w'_k[c]                  (uint8 x int8 -> int32: the tile's dot products)
           + bias[c] - zx * sum_k w'_k[c] - d[c] * K * zx      (corr: folded at load)
           + d[c] * sum_k x_k                   (only where d != 0: the window sums)

Pads hold zx, so a pad tap adds zx * w' and zx to the window sum, which corr takes off
again: exactly the reference's "centred pad is 0". Everything is integer arithmetic:
the int32 dot products cannot overflow while K * 255 * 128 < 2^31 (MAX_K; beyond that
the kernels decline), the rest is int64, clipped to int32 before requantizing as
mace/ir/quant_params.requantize does. So outputs equal the reference's byte for byte.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops.fast._pool import by_rows
from mace.ops.fast.compute import SERIAL, ComputeContext
from mace.util.aligned import aligned_copy

MAX_K = (2**31 - 1) // (255 * 128)   # taps per output whose int32 dot product cannot overflow
SLACK = 64   # bytes after an input buffer: a window row's last 4-byte load may run past it


def offset_of(wq: np.ndarray) -> int:
    """What w' = w - offset subtracts: 0 for int8 weights, 128 for uint8 ones."""
    return 128 if wq.dtype == np.uint8 else 0


def channel_values(values, channels: int, dtype=np.int64) -> np.ndarray:
    """A per-tensor scalar or per-channel vector as one value per output channel."""
    return np.broadcast_to(np.asarray(values, dtype).reshape(-1), (channels,)).astype(dtype)


class QPanels:
    """One quantized filter (or one group's) packed for _qloops: w3 [O, segments, segment
    length] integers (a conv's kernel rows, each kw * C bytes of the window), its zero
    points (`w_zero`: a scalar or one per row of w3), and the output stage
    (mace/ops/int8/_gemm.OutputStage) of the whole op, `channels` its slice that w3 is; split
    into `parts` on `compute`'s pool. Without a stage (None) the steps store the exact int32
    sums, A's zero point given per run (set_x_zero)."""

    def __init__(self, lib, w3: np.ndarray, w_zero, stage, x_zero: int, channels: slice, parts: int,
                 compute: ComputeContext = SERIAL):
        o, nseg, seg_len = w3.shape
        nr = lib.NR
        seg4 = -(-seg_len // lib.KB)
        off = offset_of(w3)
        wp = (w3.astype(np.int16) - off).astype(np.int8)
        count = -(-o // nr)
        full = np.zeros((count * nr, nseg, seg4 * lib.KB), np.int8)
        full[:o, :, :seg_len] = wp
        # [panel, k step, column, 4 k's]: one tile row's 16 columns x 4 k's are 64 bytes
        steps = nseg * seg4
        self.panels = aligned_copy(
            full.reshape(count, nr, steps, lib.KB).transpose(0, 2, 1, 3)).reshape(count, steps, nr * lib.KB)
        d = off - channel_values(w_zero, o)
        if stage is None:   # the int32 sums themselves (MatMulInteger), A's zero point set per run
            self.ep = np.zeros((lib.EP_ROWS, count * nr), np.int64)
            self.ep[lib.EP_D, :o] = d
            self.base = wp.astype(np.int64).sum(axis=(1, 2)) + d * (nseg * seg_len)
            self.mode = lib.VNNI | lib.RAW
            self.zero = self.qmin = self.qmax = 0
        else:
            self.ep = self._epilogue(lib, wp, d, stage, x_zero, channels, count * nr)
            self.mode = lib.VNNI | (lib.SHORT if self._short(lib, self.ep[:, :o], nseg * seg4 * lib.KB) else 0)
            self.zero, self.qmin, self.qmax = int(stage.zero), int(stage.qmin), int(stage.qmax)
        self.needs_sums = bool(np.any(self.ep[lib.EP_D] != 0))
        self.lib, self.kh, self.seg_len, self.parts = lib, nseg, seg_len, max(1, parts)
        self.compute = compute
        # every panel reads all of A's row: seg4 steps per segment from its first byte
        self.ksteps = np.full(count, seg4, np.int64)
        self.koffs = np.zeros(count, np.int64)

    def set_x_zero(self, zero: int) -> None:
        """Without an output stage (stage None): the sums' correction for A's zero point, known
        only at run time (a DynamicQuantizeLinear's): corr = -zx * (sum_k w' + d * K)."""
        np.multiply(self.base, -zero, out=self.ep[self.lib.EP_CORR, :self.base.size])

    def read_runs(self, starts, widths) -> None:
        """Panel j reads only widths[j] bytes (a multiple of KB) of each A row, from byte
        starts[j]: a grouped 1x1 conv's column runs (int8/conv2d.py). The runs give no
        window sums: the kernel uses them only where the weights' zero points are 0."""
        assert not self.needs_sums and self.kh == 1
        self.koffs = np.asarray(starts, np.int64)
        self.ksteps = np.asarray(widths, np.int64) // self.lib.KB

    @staticmethod
    def _short(lib, ep, k_padded: int) -> bool:
        """Whether the tile's short epilogue gives the same bytes: no window sums, no left
        shift, acc + corr within int32 (so the int32 clip is a no-op), and a multiplier
        below 2^-1 (shift >= 32: the requantized value fits int32 lanes with room for + zero)."""
        bound = np.abs(ep[lib.EP_CORR]).max(initial=0) + k_padded * 255 * 128
        return bool(not np.any(ep[lib.EP_D]) and not np.any(ep[lib.EP_LEFT])
                    and np.all(ep[lib.EP_SHIFT] >= 32) and bound < 2**31 - 1)

    @staticmethod
    def _epilogue(lib, wp, d, stage, x_zero, channels, width) -> np.ndarray:
        """The int64 table [EP_ROWS, width] the tile's store reads per output column."""
        o, nseg, seg_len = wp.shape

        def pick(v):   # the stage holds every channel of the op (or one value); ours are `channels`
            v = np.asarray(v).reshape(-1)
            return (v[channels] if v.size > 1 else np.broadcast_to(v, (o,))).astype(np.int64)
        bias = np.zeros(o, np.int64) if stage.bias is None else pick(stage.bias)
        mult, shift = pick(stage.multiplier), pick(stage.shift)
        left = np.maximum(1 - shift, 0)   # as requantize: a multiplier >= 1 pre-shifts left
        shift = shift + left
        ep = np.zeros((lib.EP_ROWS, width), np.int64)
        ep[lib.EP_SHIFT] = ep[lib.EP_ROUND] = 1   # padding columns: defined shifts, never stored
        k = nseg * seg_len
        ep[lib.EP_CORR, :o] = bias - x_zero * wp.astype(np.int64).sum(axis=(1, 2)) - d * k * x_zero
        ep[lib.EP_D, :o] = d
        ep[lib.EP_LEFT, :o] = left
        ep[lib.EP_MULT, :o] = mult
        ep[lib.EP_ROUND, :o] = np.left_shift(np.int64(1), shift - 1)
        ep[lib.EP_SHIFT, :o] = shift
        return ep

    def conv_steps(self, xp, ow: int, strides, dh: int, out2d, sums) -> list:
        """Steps writing out2d [oh * ow, O] (uint8, or int32 without a stage; rows evenly spaced)
        for one image from its padded input xp [Hp, Wp, C]; `sums` int64 [oh * ow] scratch for
        the window sums."""
        lib, loop = self.lib, self.compute.loop
        m, n = out2d.shape
        lines = m // ow
        sh, sw = strides
        steps = []
        if self.needs_sums:
            steps.append(loop("window_sums", (xp, ow, sh, sw, dh, self.kh, self.seg_len, sums), lines,
                              m * self.kh * self.seg_len, self.parts, lib))
        else:
            sums = np.zeros(0, np.int64)
        args = (self.mode, xp, ow, sh, sw, dh, self.kh, self.panels, self.ksteps, self.koffs, self.ep,
                sums, self.zero,
                self.qmin, self.qmax, out2d)
        work = m * self.panels.shape[1] * lib.KB * n
        if self.parts == 1 or (lines >= self.parts and by_rows(m, n, self.parts)):
            steps.append(loop("qconv", args, lines, work, self.parts, lib))
        else:
            steps.append(loop("qconv_panels", args, len(self.panels), work, self.parts, lib))
        return steps


def table_step(compute: ComputeContext, lib, stage, out):
    """The step mapping `out`'s codes in place through the output stage's activation table (a
    fused HARDSWISH, SIGMOID, ...: mace/ops/int8/_gemm.OutputStage requantized to the
    pre-activation grid), as the reference applies it after requantizing; None without one.
    One compiled lookup per byte (_qloops.lookup, reading each byte before writing it back), split
    on `compute`'s pool."""
    table = getattr(stage, "table", None)
    if table is None:
        return None
    if out.flags.c_contiguous:
        flat = out.reshape(-1)
        return compute.loop("lookup", (flat, table, flat), flat.size, 2 * flat.size, lib=lib)
    return partial(_lookup_view, table, out)   # a view into a Concat's output


def _lookup_view(table, out):
    out[...] = table[out]


def pool_width(compute: ComputeContext) -> int:
    """Threads the integer GEMM splits across on `compute` (1 where there is no compute pool)."""
    return max(1, compute.gemm_width())
