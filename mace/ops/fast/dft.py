"""DFT, fast CPU kernel: the two forms birdnet's spectrogram uses, bound at load.

- A forward one-sided DFT of a real signal is np.fft.rfft: the reference computes the full
  complex FFT of the real input (np.fft.fft), cuts it to length // 2 + 1 bins with np.take and
  stacks (real, imaginary): birdnet's 511 frames of 2048 samples 43 -> 12 ms. rfft writes the
  output itself, its float32 pairs viewed as complex64 (~20 -> 15 ms under load against rfft
  and two copies). The bins are the same values; where the full FFT leaves rounding noise on a
  bin rfft makes exactly real (the DC bin's imaginary part, ~1e-13 of a bin ~1e3), the result
  differs by that noise (in float32 precision, far below onnxruntime's own difference).
- A DFT of length 1 over an axis of size 1 (birdnet's second, "columns" DFT of a 1-row
  image) is the identity on (real, imaginary) pairs (a real input gains a zero imaginary part):
  one copy, the same bytes. The reference ran ~0.5 M one-point FFTs for it (15 ms).
Other DFTs (inverse, complex one-sided, other lengths) stay with the reference.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from mace.ops import dft as _reference
from mace.ops._common import normalize_axis, sequence
from mace.ops.fast._base import F32, FastKernel
from mace.ops.registry import kernel


def _form(ctx) -> str | None:
    shape = tuple(ctx.input_shapes[0])
    if np.dtype(ctx.input_dtypes[0]) != F32 or np.dtype(ctx.output_dtypes[0]) != F32 or 0 in shape:
        return None
    axis = normalize_axis(ctx.arg("axis"), len(shape))
    length, inverse, onesided = int(ctx.arg("length")), ctx.arg("inverse", 0), ctx.arg("onesided", 0)
    if length == 1 and shape[axis] == 1 and not (inverse and onesided):
        return "identity"
    if not inverse and onesided and shape[-1] == 1:
        return "rfft"
    return None


@kernel("DFT", "cpu:fast")
class DFTFast(FastKernel):
    @staticmethod
    def check(ctx) -> str | None:
        if _form(ctx) is not None:
            return None
        if np.dtype(ctx.input_dtypes[0]) != F32 or np.dtype(ctx.output_dtypes[0]) != F32:
            return f"{np.dtype(ctx.input_dtypes[0])} to {np.dtype(ctx.output_dtypes[0])} (float32 only)"
        if 0 in tuple(ctx.input_shapes[0]):
            return "empty input"
        return "neither a length-1 identity nor a one-sided FFT of real input"

    def setup(self, ctx):
        self.form = _form(ctx)
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.length = int(ctx.arg("length"))

    def bind(self, inputs, outputs, scratch=None):
        x, out = inputs[0], outputs[0]
        if self.form == "identity":
            if x.shape[-1] == 2:
                return partial(np.copyto, out, x)
            return sequence([partial(np.copyto, out[..., :1], x), partial(out[..., 1].fill, 0.0)])

        if out.flags.c_contiguous:   # (real, imaginary) float32 pairs are complex64: rfft writes them
            return partial(np.fft.rfft, x[..., 0], n=self.length, axis=self.axis,
                           out=out.view(np.complex64)[..., 0])

        def rfft():
            bins = np.fft.rfft(x[..., 0], n=self.length, axis=self.axis)
            np.copyto(out[..., 0], bins.real)
            np.copyto(out[..., 1], bins.imag)
        return rfft

    def run(self, inputs, outputs):
        if self.form is None:
            _reference.DFTCpu(self.ctx).run(inputs, outputs)
        else:
            super().run(inputs, outputs)
