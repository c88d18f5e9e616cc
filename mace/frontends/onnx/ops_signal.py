"""ONNX signal ops: DFT and STFT run; the window generators (HannWindow, HammingWindow,
BlackmanWindow) and MelWeightMatrix take only static sizes, so they become constants here."""
import numpy as np
import onnx

from mace.errors import ModelError
from mace.frontends.onnx.ops_tensor import node_axis
from mace.frontends.onnx.registry import onnx_op


def _static(ctx, node, i, what, default=None):
    value = ctx.scalar(node, i, what, default)
    if value is None:
        raise ModelError(f"{node.op_type} '{ctx.op_name(node)}': {what} is required")
    return value


def _constant(ctx, node, value):
    dtype = onnx.helper.tensor_dtype_to_np_dtype(int(ctx.attr(node, "output_datatype", 1)))
    ctx.add("Identity", node, [ctx.add_const(ctx.temp(node, "value"), np.asarray(value).astype(dtype))])


@onnx_op("DFT")
def dft(ctx, node):
    x = ctx.inp(node, 0)
    shape = ctx.shape(x)
    inverse, onesided = int(ctx.attr(node, "inverse", 0)), int(ctx.attr(node, "onesided", 0))
    if ctx.opset < 20:
        axis = ctx.attr(node, "axis", 1)
    else:
        axis = _static(ctx, node, 2, "axis", -2)
    axis = node_axis(ctx, node, axis, len(shape))
    default = 2 * (shape[axis] - 1) if inverse and onesided else shape[axis]
    length = int(_static(ctx, node, 1, "dft_length", default))
    ctx.add("DFT", node, [x], axis=axis, length=length, inverse=inverse, onesided=onesided)


@onnx_op("STFT")
def stft(ctx, node):
    signal, window = ctx.inp(node, 0), ctx.inp(node, 2)
    step = int(_static(ctx, node, 1, "frame_step"))
    frame = ctx.scalar(node, 3, "frame_length")
    if frame is None:
        frame = ctx.shape(window)[0] if window else ctx.shape(signal)[1]
    ctx.add("STFT", node, [signal] + ([window] if window else []), frame_step=step,
            frame_length=int(frame), onesided=int(ctx.attr(node, "onesided", 1)))


def _window(ctx, node, terms):
    """a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1."""
    size = int(_static(ctx, node, 0, "size"))
    n = np.arange(size, dtype=np.float64)
    span = size if int(ctx.attr(node, "periodic", 1)) else size - 1
    phase = 2 * np.pi * n / span if span else np.zeros(size)
    _constant(ctx, node, sum(a * np.cos(k * phase) * (-1) ** k for k, a in enumerate(terms)))


@onnx_op("HannWindow")
def hann_window(ctx, node):
    _window(ctx, node, (0.5, 0.5))


@onnx_op("HammingWindow")
def hamming_window(ctx, node):
    _window(ctx, node, (25 / 46, 21 / 46))


@onnx_op("BlackmanWindow")
def blackman_window(ctx, node):
    _window(ctx, node, (0.42, 0.5, 0.08))


def _mel(n_mel, dft_length, rate, low, high):
    """Triangular filters between mel-spaced bin edges (ONNX MelWeightMatrix: the edges are
    spaced by (high - low) / (n_mel + 2) in mel and floored to DFT bins)."""
    to_mel = lambda f: 2595 * np.log10(1 + f / 700)  # noqa: E731
    mel_low, mel_high = to_mel(low), to_mel(high)
    mels = np.arange(n_mel + 2) * (mel_high - mel_low) / (n_mel + 2) + mel_low
    edges = (((dft_length + 1) * (700 * (10 ** (mels / 2595) - 1))) // rate).astype(int)
    out = np.zeros((dft_length // 2 + 1, n_mel))
    j = np.arange(out.shape[0])
    for i in range(n_mel):
        left, centre, right = edges[i:i + 3]
        if centre == left:
            out[centre, i] = 1
        else:
            rise = (j >= left) & (j <= centre)
            out[rise, i] = (j[rise] - left) / (centre - left)
        if right > centre:
            fall = (j >= centre) & (j < right)
            out[fall, i] = (right - j[fall]) / (right - centre)
    return out


@onnx_op("MelWeightMatrix")
def mel_weight_matrix(ctx, node):
    values = [_static(ctx, node, i, what) for i, what in
              enumerate(("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"))]
    _constant(ctx, node, _mel(int(values[0]), int(values[1]), values[2], values[3], values[4]))
