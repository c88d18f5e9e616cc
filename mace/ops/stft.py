"""STFT: short-time Fourier transform of a batch of signals (ONNX STFT).

Inputs: signal (batch, length, 1 real | 2 complex), and an optional window (frame_length
weights; absent: all ones). Args: frame_step, frame_length, onesided (keep bins
0..frame_length//2). Output (batch, frames, bins, 2) with frames = (length - frame_length) //
frame_step + 1. numpy's FFT computes in the signal's precision (float32 -> complex64). Layout ANY.
"""
import numpy as np

from mace.ops.dft import as_complex, as_pairs
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("STFT", layout=Layout.ANY)
class STFT(OpSpec):
    attrs = {"frame_length": REQUIRED, "frame_step": REQUIRED, "onesided": 1}

    @staticmethod
    def infer(ctx):
        shape = tuple(ctx.shapes[0])
        step, frame = int(ctx.arg("frame_step")), int(ctx.arg("frame_length"))
        if len(shape) != 3 or shape[2] not in (1, 2) or not 0 < frame <= shape[1] or step <= 0:
            raise ValueError(f"STFT '{ctx.op.name}': signal {list(shape)} with frame_length {frame} and "
                             f"frame_step {step}: expected (batch, length >= frame_length, 1 or 2)")
        if len(ctx.shapes) > 1 and tuple(ctx.shapes[1]) != (frame,):
            raise ValueError(f"STFT '{ctx.op.name}': window shape {list(ctx.shapes[1])}, expected [{frame}]")
        bins = frame // 2 + 1 if ctx.arg("onesided") else frame
        return [((shape[0], (shape[1] - frame) // step + 1, bins, 2), ctx.dtypes[0])]


@kernel("STFT", "cpu")
class STFTCpu(Kernel):
    def setup(self, ctx):
        self.step, self.frame = int(ctx.arg("frame_step")), int(ctx.arg("frame_length"))
        self.bins = ctx.output_shapes[0][2]
        self.frames = ctx.output_shapes[0][1]

    def run(self, inputs, outputs):
        z = as_complex(inputs[0])                                           # (batch, length)
        starts = np.arange(self.frames) * self.step
        frames = z[:, starts[:, None] + np.arange(self.frame)]              # (batch, frames, frame)
        if len(inputs) > 1:
            frames = frames * np.asarray(inputs[1], frames.real.dtype)
        spectrum = np.fft.fft(frames, axis=-1)[..., :self.bins]
        np.copyto(outputs[0], as_pairs(spectrum), casting="unsafe")
