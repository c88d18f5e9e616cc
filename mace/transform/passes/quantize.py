"""quantize: rewrite a float graph into MACE's uint8 scheme (mace/ir/quant_params.py).

Runs last, on the optimised float graph, so tensor names are those that
`run --quantize_stat` logged. Range sources, first wins per tensor:
  1. quantization-aware ranges the frontend kept (TF FakeQuant, ONNX Q/DQ pairs;
     net args read by mace/ir/qat_ranges.py),
  2. the .yml's quantize_range_file (options["quantize_ranges"]),
  3. calibration over sample inputs (options["calibrate"]: graph -> ranges),
  4. input_ranges for model inputs (options["input_ranges"]).
An op with a fused activation that is no clamp (HARDSWISH, SIGMOID, ...: TABLE_ACTIVATIONS)
also needs the range before the activation, its `pre_activation_range` arg: fuse_activation
sets it from a QAT range, calibration (calibrated_ranges) from a copy of the graph with such
activations unfused; without it the op stays float.
An op is quantized when its type has an "int8" kernel (mace/ops/int8) whose
`check(ctx)`, asked of the float op's context (graph_context, stage CONVERT), finds nothing
against it; the others stay float (the reason in the plan) and get
Dequantize/Quantize ops at the boundary. On the DSP every op must be quantized:
the pass lists those that cannot be, as MACE does at convert time.

Mixed precision (options["target_cosine"], the .yml's quantize_target_cosine): the pass
quantizes a copy, runs it and the float graph over the calibration samples
(options["samples"]), ranks the quantizable ops by their SQNR drop once, and finds how many
of the worst must stay float for the worst output's cosine to reach the target by doubling,
then bisecting (mace/quantize/mixed_precision.py search_float_layers; bounded in quantized
runs and seconds); the calibration report lists each op kept float with its drop and every
step's cosine. On the DSP (runtime dsp, or dsp groups of a
placement) the ops kept float go to a cpu group (`place_float_ops_on_cpu`): the
quantized ops are placed on the DSP (HEXAGON), the float ones and the Quantize/Dequantize at
the group edges on the CPU, with the net arg the placement machinery sets (docs/placement.md).
"""
from __future__ import annotations

import numpy as np

from mace.errors import ModelError
from mace.ir import quant_params as qp
from mace.ir.args import del_arg, get_arg, has_arg, set_arg
from mace.ir.qat_ranges import qat_ranges
from mace.ops.int8._base import PRE_ACTIVATION_ARG, TABLE_ACTIVATIONS
from mace.ops.registry import CONVERT, graph_context, kernel_check, spec
from mace.proto import pb
from mace.ir.graph import Graph
from mace.quantize.mixed_precision import search_bounds, search_float_layers
from mace.quantize.report import MixedPrecision, calibration_report
from mace.transform.decided import Decided
from mace.transform.shape_inference import infer_shapes
from mace.ir.runtimes import QUANTIZED_ONLY

INT8 = "int8"
# net arg: device_type was chosen per op at convert (mace/transform/placement/plan.py's PLACED_ARG;
# spelt here because placement imports this module)
PLACED_ARG = "op_placement"


def wants_quantize(options) -> bool:
    return bool(options.get("quantize"))


def int8_kernel(op_type: str):
    return spec(op_type).kernels.get(INT8)


def quantize_plan(graph) -> dict:
    """op name -> None (quantizable) or the reason it stays float."""
    plan = {}
    for op in graph.net.op:
        cls = int8_kernel(op.type)
        if cls is None:
            plan[op.name] = f"no quantized kernel for {op.type}"
            continue
        bad = [t for t in op.input if t not in graph.consts and graph.dtype(t).kind != "f"]
        plan[op.name] = (f"reads non-float tensor {bad[0]}" if bad
                         else kernel_check(cls, graph_context(graph, op, CONVERT)))
    if any(op.device_type == pb.HEXAGON for op in graph.net.op):   # dsp groups (docs/placement.md)
        for op in graph.net.op:   # a model placed on dsp and cpu quantizes its dsp ops only
            if op.device_type != pb.HEXAGON:
                plan[op.name] = f"placed on {pb.DeviceType.Name(op.device_type)}"
    return plan


# ops whose int8 kernels apply a fused table activation (needing the pre-activation range)
TABLE_HOSTS = ("Conv2D", "DepthwiseConv2d", "FullyConnected", "Deconv2D")


def _unfused_for_calibration(graph):
    """(a copy of graph whose ops with a fused table activation and no pre_activation_range
    write their pre-activation tensor and a separate Activation the output, {op name: that
    tensor}), or (None, {}) when there is no such op. Calibrating the copy gives the range
    before each activation, which the int8 kernel requantizes to (mace/ops/int8/_gemm.py)."""
    todo = {op.name for op in graph.net.op if op.type in TABLE_HOSTS and len(op.output) == 1
            and (get_arg(op, "activation", "") or "") in TABLE_ACTIVATIONS and not has_arg(op, PRE_ACTIVATION_ARG)}
    if not todo:
        return None, {}
    trial, pre, ops = _copy(graph), {}, []
    for op in trial.net.op:
        ops.append(op)
        if op.name not in todo:
            continue
        args = {name: get_arg(op, name) for name in ("activation", "activation_coefficient", "max_limit")
                if has_arg(op, name)}
        for name in args:
            del_arg(op, name)
        out, pre[op.name] = op.output[0], trial.unique_name(f"{op.output[0]}_pre_activation")
        op.output[0] = pre[op.name]
        ops.append(trial.make_op("Activation", [pre[op.name]], [out], name=trial.unique_name(f"{op.name}_act"),
                                 **args))
    trial.set_ops(ops)
    infer_shapes(trial)
    return trial, pre


def calibrated_ranges(graph, calibrate) -> dict:
    """calibrate(graph), and each op with a fused table activation given the calibrated range
    before it as its pre_activation_range arg."""
    trial, pre = _unfused_for_calibration(graph)
    ranges = calibrate(trial if trial is not None else graph)
    ops = {op.name: op for op in graph.net.op}
    for name, t in pre.items():
        if t in ranges:
            set_arg(ops[name], PRE_ACTIVATION_ARG, [float(v) for v in ranges.pop(t)])
    return ranges


def merged_ranges(graph, options, sources: dict | None = None) -> dict:
    """tensor -> (min, max), sources merged in priority order (see module doc);
    `sources` (when given) gets tensor -> which source won, for the calibration report.
    Calibrating also gives each op with a fused table activation (HARDSWISH, SIGMOID, ...)
    the range before it (calibrated_ranges)."""
    calibrate = options.get("calibrate")
    layers = (("input_ranges", options.get("input_ranges")),
              ("calibration", calibrated_ranges(graph, calibrate) if calibrate else None),
              ("range file", options.get("quantize_ranges")),
              ("QAT", {t: (lo, hi) for t, (lo, hi, _, _) in qat_ranges(graph.net).items()}))
    ranges = {}
    for source, found in layers:
        ranges.update(found or {})
        if sources is not None:
            sources.update(dict.fromkeys(found or {}, source))
    return ranges


# A constant or calibrated range reaching this far (inf, or float32's extremes that torch and
# transformers use as "minus infinity" in attention masks and logit clamps) has no useful 8-bit
# grid: its step would exceed 1e27, rounding every ordinary value to the zero point.
SENTINEL = 1e30


def _sentinel(values) -> bool:
    values = np.asarray(values)
    return values.dtype.kind == "f" and values.size > 0 and not bool(
        np.all(np.abs(values.astype(np.float64)) < SENTINEL))


def keep_sentinels_float(graph, plan, ranges) -> None:
    """Ops reading or writing inf, NaN or float32's extremes (a -inf attention mask, a logit
    clamp at float32's max: a constant, or a tensor whose range says so) stay float, with the
    reason in the plan; quantization goes on around them. Updates `plan`."""
    for op in graph.net.op:
        if plan.get(op.name) is not None:
            continue
        for t in list(op.input) + list(op.output):
            value = graph.consts.get(t)
            if value is not None and _sentinel(value):
                plan[op.name] = f"constant {t} holds inf, NaN or |x| >= {SENTINEL:g}: kept float"
                break
            if value is None and t in ranges and _sentinel(ranges[t]):
                lo, hi = ranges[t]
                plan[op.name] = (f"tensor {t} ranges over [{lo:g}, {hi:g}], beyond any 8-bit "
                                 f"grid: kept float")
                break


def quantize_graph(graph, options) -> bool:
    sources = {}
    ranges = merged_ranges(graph, options, sources)   # first: calibration adds pre-activation ranges
    plan = quantize_plan(graph)
    keep_sentinels_float(graph, plan, ranges)
    if options.get("runtime") in QUANTIZED_ONLY:
        refused = [f"{op.name} ({op.type}): {plan[op.name]}" for op in graph.net.op if plan[op.name]]
        if refused:
            where = options.get("where", "")
            raise ModelError(f"{where}{': ' if where else ''}runtime dsp: the DSP cannot run "
                             f"{len(refused)} op(s) (no quantized form):\n  "
                             + "\n  ".join(refused))
    mixed = None
    on_dsp = options.get("runtime") in QUANTIZED_ONLY or any(op.device_type == pb.HEXAGON for op in graph.net.op)
    if options.get("target_cosine"):
        mixed = _mixed_precision(graph, plan, ranges, options)
        if on_dsp:
            mixed.cpu_ops = _mixed_kept(plan)
    if mixed is not None and mixed.cpu_ops:
        place_float_ops_on_cpu(graph, plan)
    q = _Rewriter(graph, plan, ranges, options.get("per_channel", True))
    q.run()
    # convert writes it as <model>_quantize_report.txt/.json (mace/quantize/report.py)
    report = calibration_report(graph, plan, q.ranges, sources, q.domain, q.params)
    report.mixed_precision = mixed
    return Decided(report)


def _copy(graph) -> Graph:
    net = pb.NetDef()
    net.CopyFrom(graph.net)
    return Graph(net, dict(graph.consts), dict(graph.specs), dict(graph.quant))


def _mixed_precision(graph, plan, ranges, options) -> MixedPrecision:
    """Keep float the fewest quantizable ops, worst SQNR drop first, so that the outputs'
    cosine over the calibration samples reaches the target (search_float_layers: the damage
    measured once, then a doubling and a bisection over how many of the worst stay float,
    bounded in quantized runs and seconds). Updates `plan`."""
    target, where = float(options["target_cosine"]), options.get("where", "")
    samples = options.get("samples")
    samples = samples() if samples else None
    if not samples:
        raise ModelError(f"{where}: quantize_target_cosine needs calibration samples "
                         f"(quantize_calibration_data, or validation_inputs_data)")

    def quantized(trial_plan):
        trial = _copy(graph)
        q = _Rewriter(trial, trial_plan, ranges, options.get("per_channel", True))
        q.run()
        return trial, q.domain

    return search_float_layers(graph, plan, samples, target, quantized, options.get("progress"),
                               search_bounds(options))


def _mixed_kept(plan) -> list:
    return [name for name, why in plan.items() if why and "quantize_target_cosine" in why]


def place_float_ops_on_cpu(graph, plan) -> None:
    """runtime dsp with ops kept float: a dsp/cpu placement as `placement:` rules would make
    (docs/placement.md): quantized ops on HEXAGON, the others on the CPU. The Quantize and
    Dequantize ops the rewrite adds at the group edges stay on the CPU (the default), as they
    do for placed models."""
    for op in graph.net.op:
        op.device_type = pb.HEXAGON if plan.get(op.name) is None else pb.CPU
    set_arg(graph.net, PLACED_ARG, 1)


def _requantizes(op) -> bool:
    """op's int8 kernel writes any output parameters at no extra cost (Int8Kernel.requantizes)."""
    cls = int8_kernel(op.type)
    if hasattr(cls, "requantizes"):
        return cls.requantizes(op)
    return getattr(cls, "output_range", "own") == "own"


def shared_concat_ranges(graph, plan, ranges, consumers) -> dict:
    """`ranges` with each quantized Concat's inputs given the Concat's own range, where the
    input is made by a quantized op that requantizes to any range (its int8 kernel's
    `requantizes`: convs, FCs, eltwise, AVG pooling) for this Concat alone. The producers
    then write the Concat's parameters and the int8 Concat copies instead of rescaling each
    byte through a table (TFLite asks the same of its quantized Concat); the Concat's range
    covers its inputs', so nothing clips: a narrower input only gets the coarser step.
    Ranges from QAT (FakeQuant, Q/DQ pairs) are the model's own and stay."""
    producers = graph.producers()
    fixed = set(qat_ranges(graph.net)) | set(graph.output_names)
    shared = dict(ranges)
    for op in graph.net.op:
        if op.type != "Concat" or plan.get(op.name) is not None or op.output[0] not in ranges:
            continue
        for t in op.input:
            src = producers.get(t)
            if (src is None or t in fixed or t not in ranges or plan.get(src.name) is not None
                    or [c.name for c in consumers.get(t, [])] != [op.name]
                    or not _requantizes(src)):
                continue
            shared[t] = ranges[op.output[0]]
    return shared


class _Rewriter:
    def __init__(self, graph, plan, ranges, per_channel):
        self.g, self.plan, self.ranges, self.per_channel = graph, plan, ranges, per_channel
        self.params = {}        # quantized-domain tensor name -> QuantParams
        self.domain = {}        # float-graph tensor name -> its quantized-domain name
        self.missing = []
        self.consumers = graph.consumers()

    def quantized(self, op) -> bool:
        return self.plan.get(op.name) is None

    def act_params(self, t, op=None):
        if t in self.domain:
            return self.params[self.domain[t]]
        if t in self.ranges:
            return qp.activation_params(*self.ranges[t])
        self.missing.append(f"{t}" + (f" (read by {op.name})" if op is not None else ""))
        return qp.activation_params(0.0, 1.0)

    def run(self):
        g, new_ops = self.g, []
        outputs = set(g.output_names)
        self.ranges = shared_concat_ranges(g, self.plan, self.ranges, self.consumers)
        for op in list(g.net.op):
            if not self.quantized(op):
                new_ops.append(op)
                continue
            cls = int8_kernel(op.type)
            in_params = self._inputs(op, cls, new_ops)
            deq = self._outputs(op, cls, in_params, outputs)
            new_ops.append(op)
            for t in deq:
                new_ops.append(g.make_op("Dequantize", [self.domain[t]], [t],
                                         name=g.unique_name(f"{t}_dequantize")))
        if self.missing:
            raise ModelError("no quantization range for tensor(s): " + ", ".join(self.missing[:10])
                             + (" ..." if len(self.missing) > 10 else "")
                             + "; give quantize_range_file (from run --quantize_stat), calibration "
                               "samples, or input_ranges for model inputs")
        g.set_ops(new_ops)
        self._drop_unused_consts()
        infer_shapes(g)
        for name, p in self.params.items():   # the quantized domain is uint8 whatever infer said
            g.specs[name] = (g.specs[name][0], np.dtype(np.uint8))
        for op in g.net.op:
            for t, info in zip(op.output, op.quantize_info):
                qp.fill_info(info, self.params[t])
        g.record_shapes()
        set_arg(g.net, "quantize", 1)

    def _inputs(self, op, cls, new_ops) -> list:
        """Point op's inputs at quantized tensors; returns their params (None: int input)."""
        g, params = self.g, []
        weights = getattr(cls, "weight_inputs", {}) or {}
        weights = dict(weights(op) if callable(weights) else weights)  # axis may depend on op args
        bias_index = getattr(cls, "bias_input", None)
        keep_float = getattr(cls, "float_inputs", ())
        for i, t in enumerate(op.input):
            if t in g.consts:
                if i == bias_index or g.consts[t].dtype.kind != "f" or i in keep_float:
                    params.append(None)   # bias needs the others first; ints and float_inputs stay
                    continue
                axis = weights.get(i) if self.per_channel else None
                value = g.consts[t]
                p = (qp.weight_params(value, axis) if i in weights
                     else qp.activation_params(float(value.min(initial=0)), float(value.max(initial=0))))
                op.input[i] = self._const(t, qp.quantize(value, p), p)
                params.append(p)
            elif t in self.domain:
                op.input[i] = self.domain[t]
                params.append(self.params[self.domain[t]])
            else:
                op.input[i] = self._quantize_edge(t, op, new_ops)
                params.append(self.params[op.input[i]])
        if bias_index is not None and bias_index < len(op.input):
            t = op.input[bias_index]
            w = params[1] if len(params) > 1 else None
            if params[0] is None or w is None:
                raise ModelError(f"op '{op.name}' ({op.type}): bias needs a quantized input and weight")
            b, p = qp.quantize_bias(g.consts[t], params[0].scale, w)
            op.input[bias_index] = self._const(t, b, p)
            params[bias_index] = p
        return params

    def _quantize_edge(self, t, op, new_ops) -> str:
        """A Quantize op turning float tensor t into its uint8 twin (made once per tensor)."""
        g = self.g
        name = g.unique_name(f"{t}_quantized")
        self.params[name] = self.act_params(t, op)
        quant = g.make_op("Quantize", [t], [name], name=g.unique_name(f"{t}_quantize"))
        quant.quantize_info.add()
        new_ops.append(quant)
        self.domain[t] = name
        return name

    def _outputs(self, op, cls, in_params, graph_outputs) -> list:
        """Give op's outputs params; returns float names that need a Dequantize after it."""
        mode = getattr(cls, "output_range", "own")
        deq = []
        for k, t in enumerate(op.output):
            if isinstance(mode, tuple):
                p = qp.activation_params(*mode)
            elif t in self.ranges or mode != "input":
                p = self.act_params(t, op)
            else:
                p = in_params[0]
            float_users = [c for c in self.consumers.get(t, []) if not self.quantized(c)]
            name = t
            if t in graph_outputs or float_users:
                name = self.g.unique_name(f"{t}_quantized")
                op.output[k] = name
                deq.append(t)
            self.domain[t], self.params[name] = name, p
            op.quantize_info.add()
        return deq

    def _const(self, t, value, p) -> str:
        g = self.g
        name = g.unique_name(f"{t}_quantized")
        g.consts[name] = np.ascontiguousarray(value)
        g.quant[name] = p
        return name

    def _drop_unused_consts(self):
        used = {t for op in self.g.net.op for t in op.input}
        for c in [c for c in self.g.consts if c not in used]:
            del self.g.consts[c]
            self.g.quant.pop(c, None)
