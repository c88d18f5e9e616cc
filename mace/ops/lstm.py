"""LSTM: ONNX LSTM over a whole sequence; CPU only (placed on the CPU under cpu+gpu, float in a quantized model, refused on the DSP).

Gates i, o, f, c as ONNX orders them.

Inputs (all present; the ONNX mapping fills omitted ones with zeros):
  X [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1),
  W [dirs, 4*hidden, input], R [dirs, 4*hidden, hidden], B [dirs, 8*hidden] (Wb then Rb),
  initial_h, initial_c [dirs, batch, hidden] (layout 1: [batch, dirs, hidden]),
  P [dirs, 3*hidden] (peepholes i, o, f).
Outputs: Y [seq, dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden]), Y_h, Y_c
(the last states, shaped like initial_h).
Args: direction ("forward", "reverse", "bidirectional"), hidden_size, layout (0 or 1),
clip (0: none; else gate inputs clamped to [-clip, clip]). The activations are ONNX's
defaults (sigmoid, tanh, tanh); the mapping refuses others. The kernel computes in float32
like onnxruntime; the time loop is sequential, so each step is one small matmul per gate block.
"""
import numpy as np

from mace.ops.registry import REQUIRED, Kernel, Layout, OpSpec, kernel, register_op

DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def sigmoid(x):
    return 0.5 * (np.tanh(0.5 * x) + 1.0)   # no overflow warning for large -x


def recurrent_shapes(ctx, gates: int):
    """(Y, Y_h) shapes of an ONNX recurrent op (LSTM, GRU) from X and W, checking W/R/B."""
    x, w, r = (tuple(s) for s in ctx.shapes[:3])
    layout = int(ctx.arg("layout", 0))
    hidden, dirs = int(ctx.arg("hidden_size")), DIRECTIONS[ctx.arg("direction", "forward")]
    if len(x) != 3:
        raise ValueError(f"{ctx.op.type} '{ctx.op.name}': X must be 3-D, got {list(x)}")
    seq, batch = (x[1], x[0]) if layout else (x[0], x[1])
    if w != (dirs, gates * hidden, x[2]) or r != (dirs, gates * hidden, hidden):
        raise ValueError(f"{ctx.op.type} '{ctx.op.name}': W {list(w)} / R {list(r)} do not fit "
                         f"{dirs} direction(s), hidden_size {hidden} and input size {x[2]}")
    if layout:
        return (batch, seq, dirs, hidden), (batch, dirs, hidden)
    return (seq, dirs, batch, hidden), (dirs, batch, hidden)


def directions(op_arg):
    d = op_arg("direction", "forward")
    return [False, True] if d == "bidirectional" else [d == "reverse"]


def to_seq_major(layout: int, *tensors):
    """X as [seq, batch, input] and states as [dirs, batch, hidden] whatever the layout
    (layout 1 swaps the first two axes of both)."""
    return [t.transpose(1, 0, 2) if layout else t for t in tensors]


def from_seq_major(y, states, layout: int):
    """Y [seq, dirs, batch, hidden] and states [dirs, batch, hidden] back to `layout`."""
    if layout:
        return y.transpose(2, 0, 1, 3), [s.transpose(1, 0, 2) for s in states]
    return y, states


@register_op("LSTM", layout=Layout.ANY)
class Lstm(OpSpec):
    attrs = {"clip": 0.0, "direction": "forward", "hidden_size": REQUIRED, "layout": 0}

    @staticmethod
    def infer(ctx):
        y, h = recurrent_shapes(ctx, 4)
        return [(y, np.float32), (h, np.float32), (h, np.float32)]


def lstm_direction(x, w, r, b, h, c, p, reverse: bool, clip: float):
    """One direction over x [seq, batch, input]: (Y [seq, batch, hidden], h, c)."""
    hidden = r.shape[1]
    bias = b[:4 * hidden] + b[4 * hidden:]
    xw = x @ w.T + bias                       # every step's input part at once: [seq, batch, 4h]
    pi, po, pf = p[:hidden], p[hidden:2 * hidden], p[2 * hidden:]
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    y = np.empty((x.shape[0], x.shape[1], hidden), np.float32)
    # clip bounds each gate's whole input, peephole term included (as onnxruntime computes)
    bound = (lambda g: np.clip(g, -clip, clip)) if clip else (lambda g: g)
    for t in steps:
        g = xw[t] + h @ r.T
        gi, go, gf, gc = (g[:, k * hidden:(k + 1) * hidden] for k in range(4))
        i = sigmoid(bound(gi + pi * c))
        f = sigmoid(bound(gf + pf * c))
        c = f * c + i * np.tanh(bound(gc))
        o = sigmoid(bound(go + po * c))
        h = o * np.tanh(c)
        y[t] = h
    return y, h, c


@kernel("LSTM", "cpu")
class LstmCpu(Kernel):
    uses_blas = True

    def setup(self, ctx):
        self.reverse = directions(ctx.arg)
        self.layout = int(ctx.arg("layout"))
        self.clip = float(ctx.arg("clip"))

    def run(self, inputs, outputs):
        x, w, r, b, h0, c0, p = (np.asarray(a, np.float32) for a in inputs)
        x, h0, c0 = to_seq_major(self.layout, x, h0, c0)
        ys, hs, cs = [], [], []
        for d, reverse in enumerate(self.reverse):
            y, h, c = lstm_direction(x, w[d], r[d], b[d], h0[d], c0[d], p[d], reverse, self.clip)
            ys.append(y)
            hs.append(h)
            cs.append(c)
        y, (h, c) = from_seq_major(np.stack(ys, 1), [np.stack(hs), np.stack(cs)], self.layout)
        for out, value in zip(outputs, (y, h, c)):
            np.copyto(out, value)
