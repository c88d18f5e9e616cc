"""Neural-network layers: FusedBatchNorm (V1-V3), activations, Softmax/LogSoftmax, LRN,
MatMul, BatchMatMul (V1-V3)."""
import numpy as np

from mace.frontends.tensorflow.registry import tf_op

ACTIVATIONS = {"Relu": "RELU", "Sigmoid": "SIGMOID", "Tanh": "TANH", "Softplus": "SOFTPLUS",
               "Softsign": "SOFTSIGN"}


def _make(tf_type, kind):
    @tf_op(tf_type)
    def mapper(ctx, node):
        ctx.add("Activation", node, [ctx.inp(node, 0)], activation=kind)
    mapper.__name__ = f"map_{tf_type}"
    return mapper


for _t, _k in ACTIVATIONS.items():
    _make(_t, _k)


@tf_op("Relu6")
def relu6(ctx, node):
    ctx.add("Activation", node, [ctx.inp(node, 0)], activation="RELUX", max_limit=6.0)


@tf_op("LeakyRelu")
def leaky_relu(ctx, node):
    ctx.add("Activation", node, [ctx.inp(node, 0)], activation="LEAKYRELU",
            activation_coefficient=float(ctx.attr(node, "alpha", 0.2)))


@tf_op("Elu")
def elu(ctx, node):
    ctx.add("Activation", node, [ctx.inp(node, 0)], activation="ELU", activation_coefficient=1.0)


@tf_op("Selu")
def selu(ctx, node):
    ctx.add("Activation", node, [ctx.inp(node, 0)], activation="SELU",
            activation_coefficient=1.6732632423543772, beta=1.0507009873554805)


@tf_op("ClipByValue")
def clip_by_value(ctx, node):
    lo, hi = ctx.static(node, 1, "clip_value_min"), ctx.static(node, 2, "clip_value_max")
    if lo.size != 1 or hi.size != 1:
        raise ctx.fail(node, "only scalar clip values are supported")
    ctx.add("Activation", node, [ctx.inp(node, 0)], activation="CLIP",
            activation_coefficient=float(lo.reshape(-1)[0]), max_limit=float(hi.reshape(-1)[0]))


@tf_op("Softmax", "LogSoftmax")
def softmax(ctx, node):
    ctx.add("Softmax", node, [ctx.inp(node, 0)], axis=-1, use_log=int(node.op == "LogSoftmax"))


@tf_op("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def fused_batch_norm(ctx, node):
    if ctx.attr(node, "is_training", True):
        raise ctx.fail(node, "is_training is true: batch statistics are a training feature; "
                             "freeze the model in inference mode (training=False)")
    params = [ctx.const(ctx.inp(node, i)) for i in range(1, 5)]
    if any(p is None for p in params):
        raise ctx.fail(node, "scale, offset, mean and variance must be constant")
    gamma, beta, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in params)
    scale = gamma / np.sqrt(var + float(ctx.attr(node, "epsilon", 1e-4)))
    offset = beta - mean * scale
    fmt = ctx.attr(node, "data_format", "NHWC")
    if fmt not in ("NHWC", "NCHW"):
        raise ctx.fail(node, f"data_format {fmt} is not supported")
    s = ctx.add_const(ctx.temp(node, "scale"), scale.astype(np.float32))
    o = ctx.add_const(ctx.temp(node, "offset"), offset.astype(np.float32))
    ctx.add("BatchNorm", node, [ctx.inp(node, 0), s, o], data_format=fmt)


@tf_op("LRN")
def lrn(ctx, node):
    x = ctx.inp(node, 0)
    if len(ctx.shape(x)) != 4:
        raise ctx.fail(node, "only 4-D inputs are supported")
    radius = int(ctx.attr(node, "depth_radius", 5))
    size = 2 * radius + 1
    # TensorFlow scales the plain sum by alpha; the IR divides alpha by the window size.
    ctx.add("LocalResponseNorm", node, [x], size=size, alpha=float(ctx.attr(node, "alpha", 1.0)) * size,
            beta=float(ctx.attr(node, "beta", 0.5)), bias=float(ctx.attr(node, "bias", 1.0)),
            data_format="NHWC")


@tf_op("MatMul")
def matmul(ctx, node):
    a, b = ctx.inp(node, 0), ctx.inp(node, 1)
    ta, tb = bool(ctx.attr(node, "transpose_a", False)), bool(ctx.attr(node, "transpose_b", False))
    bw = ctx.const(b)
    # A constant float matrix on the right is a FullyConnected (weight (O, K), packed once).
    if (bw is not None and bw.ndim == 2 and not ta and len(ctx.shape(a)) == 2
            and ctx.dtype(a) == np.float32 and bw.dtype == np.float32):
        weight = ctx.add_const(ctx.temp(node, "weight"), np.ascontiguousarray(bw if tb else bw.T))
        ctx.add("FullyConnected", node, [a, weight])
        return
    ctx.add("MatMul", node, [a, b], transpose_a=int(ta), transpose_b=int(tb))


@tf_op("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def batch_matmul(ctx, node):
    # adj_x / adj_y are adjoints: plain transposes for real numbers.
    ctx.add("MatMul", node, [ctx.inp(node, 0), ctx.inp(node, 1)],
            transpose_a=int(bool(ctx.attr(node, "adj_x", False))),
            transpose_b=int(bool(ctx.attr(node, "adj_y", False))))
