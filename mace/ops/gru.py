"""GRU: ONNX GRU over a whole sequence; CPU only (placed on the CPU under cpu+gpu, float in a quantized model, refused on the DSP).

Gates z, r, h as ONNX orders them.

Inputs (all present; the ONNX mapping fills omitted ones with zeros): X, W [dirs, 3*hidden,
input], R [dirs, 3*hidden, hidden], B [dirs, 6*hidden] (Wb then Rb), initial_h; shapes and
layouts as LSTM's (mace/ops/lstm.py). Outputs: Y, Y_h. Args: direction, hidden_size, layout,
clip, linear_before_reset (1: the reset gate scales (H Rh + Rbh), as cuDNN and PyTorch
compute; 0: it scales H before Rh). Default activations (sigmoid, tanh) only.
"""
import numpy as np

from mace.ops.lstm import directions, from_seq_major, recurrent_shapes, sigmoid, to_seq_major
from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op


@register_op("GRU", layout=Layout.ANY)
class Gru(OpSpec):
    attrs = {
        "clip": 0.0, "direction": "forward", "hidden_size": REQUIRED, "layout": 0, "linear_before_reset": 0
    }

    @staticmethod
    def infer(ctx):
        y, h = recurrent_shapes(ctx, 3)
        return [(y, np.float32), (h, np.float32)]


def gru_direction(x, w, r, b, h, reverse: bool, clip: float, linear_before_reset: bool):
    """One direction over x [seq, batch, input]: (Y [seq, batch, hidden], h)."""
    n = r.shape[1]
    wb, rb = b[:3 * n], b[3 * n:]
    xw = x @ w.T + wb                          # every step's input part at once: [seq, batch, 3n]
    rz, rr, rh = r[:n], r[n:2 * n], r[2 * n:]
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    y = np.empty((x.shape[0], x.shape[1], n), np.float32)
    bound = (lambda g: np.clip(g, -clip, clip)) if clip else (lambda g: g)
    for t in steps:
        z = sigmoid(bound(xw[t, :, :n] + h @ rz.T + rb[:n]))
        rt = sigmoid(bound(xw[t, :, n:2 * n] + h @ rr.T + rb[n:2 * n]))
        if linear_before_reset:
            hh = xw[t, :, 2 * n:] + rt * (h @ rh.T + rb[2 * n:])
        else:
            hh = xw[t, :, 2 * n:] + (rt * h) @ rh.T + rb[2 * n:]
        h = (1 - z) * np.tanh(bound(hh)) + z * h
        y[t] = h
    return y, h


@kernel("GRU", "cpu")
class GruCpu(Kernel):
    uses_blas = True

    def setup(self, ctx):
        self.reverse = directions(ctx.arg)
        self.layout = int(ctx.arg("layout"))
        self.clip = float(ctx.arg("clip"))
        self.linear_before_reset = bool(ctx.arg("linear_before_reset"))

    def run(self, inputs, outputs):
        x, w, r, b, h0 = (np.asarray(a, np.float32) for a in inputs)
        x, h0 = to_seq_major(self.layout, x, h0)
        ys, hs = [], []
        for d, reverse in enumerate(self.reverse):
            y, h = gru_direction(x, w[d], r[d], b[d], h0[d], reverse, self.clip,
                                 self.linear_before_reset)
            ys.append(y)
            hs.append(h)
        y, (h,) = from_seq_major(np.stack(ys, 1), [np.stack(hs)], self.layout)
        for out, value in zip(outputs, (y, h)):
            np.copyto(out, value)
