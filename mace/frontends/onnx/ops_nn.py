"""ONNX BatchNormalization, Gemm, Softmax / LogSoftmax."""
import numpy as np

from mace.errors import ModelError
from mace.frontends.onnx.registry import onnx_op


@onnx_op("BatchNormalization")
def batch_norm(ctx, node):
    x = ctx.inp(node, 0)
    params = [ctx.const(ctx.inp(node, i)) for i in range(1, 5)]
    if any(p is None for p in params):
        raise ModelError(f"BatchNormalization '{ctx.op_name(node)}': scale, bias, mean and var "
                         f"must be constant")
    if len([o for o in node.output if o]) > 1:
        raise ModelError(f"BatchNormalization '{ctx.op_name(node)}': training mode is not supported")
    gamma, beta, mean, var = (np.asarray(p, np.float64) for p in params)
    scale = gamma / np.sqrt(var + float(ctx.attr(node, "epsilon", 1e-5)))
    offset = beta - mean * scale
    s = ctx.add_const(ctx.temp(node, "scale"), scale.astype(np.float32))
    o = ctx.add_const(ctx.temp(node, "offset"), offset.astype(np.float32))
    ctx.add("BatchNorm", node, [x, s, o], outputs=[node.output[0]], data_format="NCHW")


@onnx_op("Gemm")
def gemm(ctx, node):
    a, b, c = ctx.inp(node, 0), ctx.inp(node, 1), ctx.inp(node, 2)
    alpha, beta = float(ctx.attr(node, "alpha", 1.0)), float(ctx.attr(node, "beta", 1.0))
    trans_a, trans_b = int(ctx.attr(node, "transA", 0)), int(ctx.attr(node, "transB", 0))
    bw = ctx.const(b)
    if trans_a:
        at = ctx.temp(node, "at")
        ctx.add("Transpose", node, [a], [at], name=at, dims=[1, 0])
        a = at
    if bw is not None:
        weight = (bw if trans_b else bw.T).astype(np.float32) * alpha  # (O, K)
        inputs = [a, ctx.add_const(ctx.temp(node, "weight"), np.ascontiguousarray(weight))]
        cv = ctx.const(c)
        out_features = weight.shape[0]
        if cv is not None and np.asarray(cv).size in (1, out_features) and \
                (np.asarray(cv).ndim < 2 or np.asarray(cv).shape[0] == 1):
            bias = np.broadcast_to(np.asarray(cv, np.float32).reshape(-1), (out_features,)) * beta
            inputs.append(ctx.add_const(ctx.temp(node, "bias"), np.ascontiguousarray(bias)))
            ctx.add("FullyConnected", node, inputs)
            return
        y = ctx.temp(node, "fc") if c else node.output[0]
        ctx.add("FullyConnected", node, inputs, [y])
        if not c:  # no C input: the FullyConnected is the whole Gemm
            return
    else:
        y = ctx.temp(node, "mm")
        ctx.add("MatMul", node, [a, b], [y], name=y, transpose_b=trans_b)
        if alpha != 1.0:
            scaled = ctx.temp(node, "alpha")
            alpha_c = ctx.add_const(ctx.temp(node, "alpha_c"), np.float32(alpha))
            ctx.add("Eltwise", node, [y, alpha_c], [scaled], name=scaled, type="PROD")
            y = scaled
        if not c:
            ctx.add("Identity", node, [y])
            return
    c_in = c
    if beta != 1.0:
        c_in = ctx.temp(node, "beta")
        beta_c = ctx.add_const(ctx.temp(node, "beta_c"), np.float32(beta))
        ctx.add("Eltwise", node, [c, beta_c], [c_in], name=c_in, type="PROD")
    ctx.add("Eltwise", node, [y, c_in], type="SUM")


def _over_axis(ctx, node, op_type, **args):
    """Softmax / LogSoftmax / Hardmax: one axis from opset 13; before, the trailing axes
    [axis, rank) flattened into one (reshape, the op on axis 1, reshape back)."""
    x = ctx.inp(node, 0)
    shape = ctx.shape(x)
    rank = len(shape)
    axis = int(ctx.attr(node, "axis", -1 if ctx.opset >= 13 else 1)) % rank
    if ctx.opset >= 13 or axis == rank - 1:
        ctx.add(op_type, node, [x], axis=axis, **args)
        return
    flat = ctx.temp(node, "flat")
    ctx.add("Reshape", node, [x], [flat], name=flat,
            dims=[int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))])
    done = ctx.temp(node, "done")
    ctx.add(op_type, node, [flat], [done], name=done, axis=1, **args)
    ctx.add("Reshape", node, [done], name=ctx.temp(node, "unflat"), dims=list(shape))


def _softmax(ctx, node, use_log):
    _over_axis(ctx, node, "Softmax", use_log=int(use_log))


@onnx_op("Softmax")
def softmax(ctx, node):
    _softmax(ctx, node, False)


@onnx_op("LogSoftmax")
def log_softmax(ctx, node):
    _softmax(ctx, node, True)


@onnx_op("Hardmax")
def hardmax(ctx, node):
    _over_axis(ctx, node, "Hardmax")


@onnx_op("Attention")
def attention(ctx, node):
    """ONNX Attention (opset 23+): optional inputs become has_* args, optional outputs temps."""
    present = [ctx.inp(node, i) is not None for i in range(7)]
    if present[4] != present[5]:
        raise ModelError(f"Attention '{ctx.op_name(node)}': past_key and past_value come together")
    inputs = [ctx.inp(node, i) for i in range(7) if present[i]]
    outputs = list(node.output)
    while outputs and not outputs[-1]:
        outputs.pop()
    outputs = [o or ctx.temp(node, f"unused{i}") for i, o in enumerate(outputs)]
    args = dict(has_mask=int(present[3]), has_past=int(present[4]), has_nonpad=int(present[6]),
                is_causal=int(ctx.attr(node, "is_causal", 0)), qk_mode=int(ctx.attr(node, "qk_matmul_output_mode", 0)),
                softcap=float(ctx.attr(node, "softcap", 0.0)),
                left_window=int(ctx.attr(node, "left_window_size", -1)),
                right_window=int(ctx.attr(node, "right_window_size", -1)))
    for onnx_name, ours in (("q_num_heads", "q_num_heads"), ("kv_num_heads", "kv_num_heads")):
        if ctx.attr(node, onnx_name) is not None:
            args[ours] = int(ctx.attr(node, onnx_name))
    if ctx.attr(node, "scale") is not None:
        args["scale"] = float(ctx.attr(node, "scale"))
    ctx.add("Attention", node, inputs, outputs, **args)


@onnx_op("RotaryEmbedding")
def rotary_embedding(ctx, node):
    args = dict(interleaved=int(ctx.attr(node, "interleaved", 0)),
                rotary_dim=int(ctx.attr(node, "rotary_embedding_dim", 0)))
    if ctx.attr(node, "num_heads") is not None:
        args["num_heads"] = int(ctx.attr(node, "num_heads"))
    ctx.add("RotaryEmbedding", node, ctx.inputs(node), **args)
