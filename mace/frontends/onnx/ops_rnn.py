"""ONNX LSTM and GRU -> the LSTM / GRU ops (mace/ops/lstm.py, gru.py).

Omitted optional inputs (B, initial_h, initial_c, P) become zero constants, so
the op always has every input; an omitted output gets a temporary name nobody
reads. Refused with the node's name: sequence_lens that is not every sequence's
full length (padded batches), activations other than ONNX's defaults, and
input_forget (coupled input and forget gates).
"""
import numpy as np

from mace.errors import ModelError
from mace.frontends.onnx.registry import onnx_op
from mace.ops.lstm import DIRECTIONS

DEFAULT_ACTIVATIONS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"]}


def _fail(ctx, node, message):
    return ModelError(f"{node.op_type} '{ctx.op_name(node)}': {message}")


def _common(ctx, node) -> dict:
    """Checks shared by LSTM and GRU; the op's args."""
    direction = ctx.attr(node, "direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in DIRECTIONS:
        raise _fail(ctx, node, f"direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
    acts = [a.decode().lower() if isinstance(a, bytes) else a.lower()
            for a in ctx.attr(node, "activations", []) or []]
    if acts and acts != DEFAULT_ACTIVATIONS[node.op_type] * DIRECTIONS[direction]:
        raise _fail(ctx, node, f"activations {acts} are not supported (only ONNX's defaults, "
                               f"{DEFAULT_ACTIVATIONS[node.op_type]})")
    for i, what in ((1, "W"), (2, "R")):
        if ctx.const(ctx.inp(node, i)) is None:
            raise _fail(ctx, node, f"the weights {what} (input '{ctx.inp(node, i)}') must be constant")
    x_shape = ctx.shape(ctx.inp(node, 0))
    layout = int(ctx.attr(node, "layout", 0))
    seq, batch = (x_shape[1], x_shape[0]) if layout else (x_shape[0], x_shape[1])
    lens = ctx.inp(node, 4)
    if lens is not None:
        value = ctx.const(lens)
        if value is None or np.any(np.asarray(value) != seq):
            raise _fail(ctx, node, f"sequence_lens (input '{lens}') must be the constant full length "
                                   f"{seq} of every sequence (padded batches are not supported)")
    hidden = int(ctx.attr(node, "hidden_size", 0)) or ctx.shape(ctx.inp(node, 2))[2]
    dirs = DIRECTIONS[direction]
    return {"direction": direction, "hidden_size": hidden, "layout": layout,
            "clip": float(ctx.attr(node, "clip", 0.0)), "dirs": dirs, "batch": batch}


def _input_or_zeros(ctx, node, i: int, shape, what: str) -> str:
    name = ctx.inp(node, i)
    return name if name is not None else ctx.add_const(ctx.temp(node, what), np.zeros(shape, np.float32))


def _state_shape(a: dict) -> tuple:
    return (a["batch"], a["dirs"], a["hidden_size"]) if a["layout"] else \
        (a["dirs"], a["batch"], a["hidden_size"])


def _outputs(ctx, node, n: int) -> list:
    return [node.output[i] if i < len(node.output) and node.output[i] else ctx.temp(node, f"unused{i}")
            for i in range(n)]


def _args(a: dict) -> dict:
    return {k: a[k] for k in ("direction", "hidden_size", "layout", "clip")}


@onnx_op("LSTM")
def lstm(ctx, node):
    a = _common(ctx, node)
    if int(ctx.attr(node, "input_forget", 0)):
        raise _fail(ctx, node, "input_forget=1 (coupled input and forget gates) is not supported")
    h, d = a["hidden_size"], a["dirs"]
    inputs = [ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2),
              _input_or_zeros(ctx, node, 3, (d, 8 * h), "B"),
              _input_or_zeros(ctx, node, 5, _state_shape(a), "initial_h"),
              _input_or_zeros(ctx, node, 6, _state_shape(a), "initial_c"),
              _input_or_zeros(ctx, node, 7, (d, 3 * h), "P")]
    ctx.add("LSTM", node, inputs, outputs=_outputs(ctx, node, 3), **_args(a))


@onnx_op("GRU")
def gru(ctx, node):
    a = _common(ctx, node)
    h, d = a["hidden_size"], a["dirs"]
    inputs = [ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2),
              _input_or_zeros(ctx, node, 3, (d, 6 * h), "B"),
              _input_or_zeros(ctx, node, 5, _state_shape(a), "initial_h")]
    ctx.add("GRU", node, inputs, outputs=_outputs(ctx, node, 2), **_args(a),
            linear_before_reset=int(ctx.attr(node, "linear_before_reset", 0)))
