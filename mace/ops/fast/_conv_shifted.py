"""k x k stride-1 convolution as kh*kw GEMMs accumulating over shifted rows of one buffer.

Lay the zero-padded NHWC image out flat, [Hp*Wp, C]. Output pixel (y, x) computed
on the padded width (x in [0, Wp)) is row p = y*Wp + x of an [oh*Wp, O]
accumulator, and its tap (i, j) reads input row p + i*dh*Wp + j*dw: for each tap
the rows of all pixels are one contiguous window of the flat image. So
acc += flat[off_ij : off_ij + oh*Wp] @ W[i, j] for every tap, with cblas beta=1
(_cblas), and no im2col copy at all: the input is read kh*kw times from cache
instead of being copied out kh*kw times. The Wp - ow extra columns per row are
junk (their taps wrap into the next row) and are dropped when the epilogue
crops the accumulator into the output, adding bias first (it is in the
accumulator before the first tap) and clipping in the same pass.

Measured (2-core EPYC, OpenBLAS SkylakeX, 2 threads), against im2col + GEMM:
inside ResNet-50 runs 56x56x64->64 0.72 vs 0.80 ms, 28x28x128->128 even; on its
own (im2col buffer cold) 56x56x64 0.72 vs 1.32 and VGG's 224x224x64 12.2 vs 22.9;
at 14x14 they are even and at 7x7 im2col wins (the GEMMs get too short), hence
MIN_PIXELS. Each tap's GEMM has K = C, so few channels make poor GEMMs:
MIN_CHANNELS (below 64 the compiled im2col copy wins: SqueezeNet's 27x27x32->128
0.17 vs 0.22 ms on the pool, even on one thread). conv2d.choose takes im2col into
the packed GEMM instead wherever that applies (conv2d.PREFER_PACKED_IM2COL).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops.fast._cblas import sgemm
from mace.ops.fast._conv_gemm import ConvGeometry, pad_steps
from mace.ops.fast._jit import loops
from mace.ops.fast.compute import SERIAL, ComputeContext

MIN_PIXELS = 400      # oh * ow
MIN_CHANNELS = 64     # C, the K of each tap's GEMM
# On the compute pool the accumulator rows go in blocks of this many bytes, every tap
# on one block before the next: VGG's 224x224x64 accumulator (12.8 MB) is otherwise
# streamed through memory nine times. Blocks keep at least BLOCK_MIN_ROWS rows: every
# block re-packs each tap's weights, and short GEMMs run slower (105-row blocks made
# VGG's 28x28x512 convs 9.0 -> 11.0 ms).
BLOCK_BYTES = 256 << 10
BLOCK_MIN_ROWS = 512


def fits(geo: ConvGeometry) -> bool:
    return (sgemm() is not None and geo.group == 1 and tuple(geo.strides) == (1, 1)
            and geo.kh * geo.kw > 1 and geo.oh * geo.ow >= MIN_PIXELS and geo.c >= MIN_CHANNELS)


class Shifted:
    """The conv with bias and activation fused: `steps` write the finished output."""
    name = "shifted"   # what the profiler shows (Conv2DFast.algorithm_name)
    fused_epilogue = True

    def __init__(self, geo: ConvGeometry, w: np.ndarray, bias, act, bounds, compute: ComputeContext = SERIAL):
        self.geo, self.bias, self.act, self.bounds, self.compute = geo, bias, act, bounds, compute
        # taps[i, j] is tap (i, j)'s [C, O] matrix
        self.taps = np.ascontiguousarray(np.asarray(w, np.float32).transpose(2, 3, 1, 0))
        hp, wp = geo.padded_hw
        # the last taps' windows run (kw-1)*dw rows past the image (junk columns only)
        self.tail = (geo.kw - 1) * geo.dilations[1]
        self.specs = [((hp * wp + self.tail, geo.c), np.float32), ((geo.oh * wp, geo.o), np.float32)]

    def steps(self, x, out, scratch) -> list:
        g = self.geo
        flat, acc = scratch
        hp, wp = g.padded_hw
        image = flat[:hp * wp].reshape(1, hp, wp, g.c)
        gemm = sgemm()
        rows = g.oh * wp
        steps = []
        for b in range(g.n):
            steps += pad_steps(image, x[b:b + 1], g.pads, compute=self.compute)
            if self.tail:
                steps.append(partial(np.copyto, flat[hp * wp:], np.float32(0)))
            if self.bias is not None:
                steps.append(partial(np.copyto, acc, self.bias))
            if self.compute.active():   # a chain per row block, blocks split evenly over the threads
                steps.append(self.compute.gemms([self._taps(flat, acc, r0, r1) for r0, r1 in
                                                 self._blocks(rows, self.compute.width())]))
            else:
                steps += [gemm.bound(a, w, c, beta=beta)
                          for a, w, c, beta, _ in self._taps(flat, acc, 0, rows)]
            steps += self._crop(acc.reshape(g.oh, wp, g.o), out[b])
        return steps

    def _taps(self, flat, acc, r0: int, r1: int) -> list:
        """The kh*kw products (a, w, c, beta, trans_b) adding every tap into acc[r0:r1]."""
        g = self.geo
        wp = g.padded_hw[1]
        first = self.bias is None
        return [(flat[off + r0:off + r1], self.taps[i, j], acc[r0:r1],
                 0.0 if first and i == j == 0 else 1.0, False)
                for i in range(g.kh) for j in range(g.kw)
                for off in [i * g.dilations[0] * wp + j * g.dilations[1]]]

    def _blocks(self, rows: int, parts: int) -> list:
        """Row ranges of about BLOCK_BYTES of accumulator, a multiple of `parts` of them."""
        per = max(BLOCK_MIN_ROWS, BLOCK_BYTES // (self.geo.o * 4))
        count = parts * max(1, -(-rows // (per * parts)))
        step = -(-rows // count)
        return [(r0, min(rows, r0 + step)) for r0 in range(0, rows, step)]

    def _crop(self, acc3, out3) -> list:
        """Steps copying acc3[:, :ow] into out3 with the activation applied."""
        ow = out3.shape[1]
        compiled = loops()
        if self.bounds is not None and compiled is not None:
            return [self.compute.loop("crop_clip", (acc3, *self.bounds, out3), out3.shape[0], 2 * out3.size)]
        if self.bounds is not None:
            return [partial(np.clip, acc3[:, :ow], *self.bounds, out=out3)]
        return [partial(np.copyto, out3, acc3[:, :ow]), partial(self.act, out3)]
