"""ONNX activations -> Activation (fuse_activation later folds most into their producer)."""
import numpy as np

from mace.frontends.onnx.registry import onnx_op

SIMPLE = {"Relu": "RELU", "Sigmoid": "SIGMOID", "Tanh": "TANH", "HardSwish": "HARDSWISH",
          "Softplus": "SOFTPLUS", "Softsign": "SOFTSIGN", "Mish": "MISH"}


def _make(onnx_type, kind):
    @onnx_op(onnx_type)
    def mapper(ctx, node):
        ctx.add("Activation", node, [ctx.inp(node, 0)], activation=kind)
    return mapper


for _t, _k in SIMPLE.items():
    _make(_t, _k)

# one `alpha` attribute -> activation_coefficient: (our kind, ONNX's default alpha)
WITH_ALPHA = {"LeakyRelu": ("LEAKYRELU", 0.01), "Elu": ("ELU", 1.0), "Swish": ("SWISH", 1.0),
              "Celu": ("CELU", 1.0), "ThresholdedRelu": ("THRESHOLDEDRELU", 1.0)}


def _make_alpha(onnx_type, kind, default):
    @onnx_op(onnx_type)
    def mapper(ctx, node):
        ctx.add("Activation", node, [ctx.inp(node, 0)], activation=kind,
                activation_coefficient=float(ctx.attr(node, "alpha", default)))
    return mapper


for _t, (_k, _alpha) in WITH_ALPHA.items():
    _make_alpha(_t, _k, _alpha)


@onnx_op("Selu")
def selu(ctx, node):
    ctx.add("Activation", node, [ctx.inp(node, 0)], activation="SELU",
            activation_coefficient=float(ctx.attr(node, "alpha", 1.67326319217681884765625)),
            beta=float(ctx.attr(node, "gamma", 1.05070102214813232421875)))


@onnx_op("Shrink")
def shrink(ctx, node):
    ctx.add("Activation", node, [ctx.inp(node, 0)], activation="SHRINK",
            activation_coefficient=float(ctx.attr(node, "bias", 0.0)),
            beta=float(ctx.attr(node, "lambd", 0.5)))


@onnx_op("HardSigmoid")
def hard_sigmoid(ctx, node):
    ctx.add("Activation", node, [ctx.inp(node, 0)], activation="HARDSIGMOID",
            activation_coefficient=float(ctx.attr(node, "alpha", 0.2)),
            max_limit=float(ctx.attr(node, "beta", 0.5)))


@onnx_op("Gelu")
def gelu(ctx, node):
    approx = ctx.attr(node, "approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    ctx.add("Activation", node, [ctx.inp(node, 0)], activation="GELU_TANH" if approx == "tanh" else "GELU")


@onnx_op("PRelu")
def prelu(ctx, node):
    ctx.add("Activation", node, [ctx.inp(node, 0), ctx.inp(node, 1)], activation="PRELU")


@onnx_op("Clip")
def clip(ctx, node):
    if ctx.opset < 11:
        lo, hi = ctx.attr(node, "min", -np.inf), ctx.attr(node, "max", np.inf)
    elif _runtime_bound(ctx, node, 1) or _runtime_bound(ctx, node, 2):
        _clip_by_tensors(ctx, node)
        return
    else:
        lo = float(ctx.scalar(node, 1, "min", -np.inf))
        hi = float(ctx.scalar(node, 2, "max", np.inf))
    x = ctx.inp(node, 0)
    if lo == 0 and np.isfinite(hi):
        ctx.add("Activation", node, [x], activation="RELUX", max_limit=float(hi))
    elif lo == 0 and not np.isfinite(hi):
        ctx.add("Activation", node, [x], activation="RELU")
    else:
        ctx.add("Activation", node, [x], activation="CLIP", activation_coefficient=float(max(lo, -3.4e38)),
                max_limit=float(min(hi, 3.4e38)))


def _runtime_bound(ctx, node, i: int) -> bool:
    name = ctx.inp(node, i)
    return name is not None and ctx.const(name) is None


def _bound(ctx, node, i: int):
    """Clip's input i, or None where absent or a constant +-inf (torch's `clamp(min=t)` exports
    max=inf: as a tensor it would only give the quantizer an infinite range to cover)."""
    name = ctx.inp(node, i)
    value = ctx.const(name)
    if value is not None and np.asarray(value).size == 1 and np.isinf(np.asarray(value)).all():
        return None
    return name


def _clip_by_tensors(ctx, node):
    """Clip whose min or max is computed at run time (torchaudio's top_db clamp: the max of the
    spectrogram minus 80 dB) -> Eltwise MAX then MIN; ONNX's min > max case gives max as well."""
    x, lo, hi = ctx.inp(node, 0), _bound(ctx, node, 1), _bound(ctx, node, 2)
    if lo is not None and hi is not None:
        mid = ctx.temp(node, "clip_min")
        ctx.add("Eltwise", node, [x, lo], outputs=[mid], name=f"{ctx.op_name(node)}_min", type="MAX")
        ctx.add("Eltwise", node, [mid, hi], type="MIN")
    elif lo is not None:
        ctx.add("Eltwise", node, [x, lo], type="MAX")
    else:
        ctx.add("Eltwise", node, [x, hi], type="MIN")
