"""DFT: discrete Fourier transform along one signal axis (ONNX DFT).

The last axis holds a value: size 1 real, size 2 (real, imaginary). Args: axis (a signal axis,
never the last), length (the DFT size: the signal is cut or zero-padded to it), inverse
(1/N-scaled inverse transform), onesided (forward: keep bins 0..length//2; inverse: the input
holds those bins of a real signal, which comes back with a last axis of 1). numpy's FFT computes
in the input's precision (float32 -> complex64), as onnxruntime does. Layout ANY.
"""
import numpy as np

from mace.ops._common import normalize_axis
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


def dft_shape(shape, axis, length, inverse, onesided):
    shape = list(shape)
    shape[axis] = length // 2 + 1 if onesided and not inverse else length
    shape[-1] = 1 if inverse and onesided else 2
    return tuple(shape)


@register_op("DFT", layout=Layout.ANY)
class DFT(OpSpec):
    attrs = {"axis": REQUIRED, "inverse": 0, "length": REQUIRED, "onesided": 0}

    @staticmethod
    def infer(ctx):
        shape = tuple(ctx.shapes[0])
        axis = normalize_axis(ctx.arg("axis"), len(shape))
        if axis == len(shape) - 1 or shape[-1] not in (1, 2):
            raise ValueError(f"DFT '{ctx.op.name}': input {list(shape)} must end in a value axis of 1 "
                             f"(real) or 2 (complex), and axis {axis} must be a signal axis")
        return [(dft_shape(shape, axis, int(ctx.arg("length")), ctx.arg("inverse"), ctx.arg("onesided")),
                 ctx.dtypes[0])]


def as_complex(x):
    """(..., 1|2) real or (real, imaginary) values -> real or complex (...), same precision."""
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.dtype == np.float16:
        x = x.astype(np.float32)
    return x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]


def as_pairs(z):
    return np.stack([z.real, z.imag], axis=-1)


def dft(x, axis, length, inverse, onesided):
    z = as_complex(x)
    if inverse:
        if onesided:
            return np.fft.irfft(z, n=length, axis=axis)[..., None]
        return as_pairs(np.fft.ifft(z, n=length, axis=axis))
    y = np.fft.fft(z, n=length, axis=axis)
    if onesided:
        y = np.take(y, np.arange(length // 2 + 1), axis=axis)
    return as_pairs(y)


@kernel("DFT", "cpu")
class DFTCpu(Kernel):
    def setup(self, ctx):
        self.axis = normalize_axis(ctx.arg("axis"), len(ctx.input_shapes[0]))
        self.length = int(ctx.arg("length"))
        self.inverse, self.onesided = bool(ctx.arg("inverse")), bool(ctx.arg("onesided"))

    def run(self, inputs, outputs):
        np.copyto(outputs[0], dft(inputs[0], self.axis, self.length, self.inverse, self.onesided),
                  casting="unsafe")
