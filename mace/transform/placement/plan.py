"""Op placement: which runtime (cpu, gpu, dsp) runs each op of a model (docs/placement.md).

Three sources, from the deployment file, resolved once at convert into each
OperatorDef.device_type (CPU, GPU, HEXAGON):
  * named subgraphs (`subgraphs:` as a mapping): each covers the ops between its
    input_tensors and output_tensors and brings its `runtime`;
  * `placement:` rules, `{ops: <selection>, runtime: cpu|gpu|dsp}`, later rules
    overriding earlier ones; a selection is op names (IR op, framework op or
    output tensor), `first..last` (inclusive, in converted op order), `start:stop`
    (a Python slice of the converted op list), an index, or a list of these;
  * `placement: auto`: mace/transform/placement/auto.py.
Ops a rule names must have a kernel on its runtime (an error lists those that
do not); ops that only inherit a subgraph's gpu / cpu+gpu runtime fall back to
the CPU where the GPU cannot run them, as MACE's cpu+gpu does.

The subgraph boundaries must survive optimisation, so convert asks the
frontend for them as extra outputs (`boundary_specs`); `assign_parts` notes on
the frontend's graph which framework op belongs to which subgraph, and the
place pass drops the extra outputs again before it places (so op indices in
rules are those of the final model).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mace.config.deployment import default_preference
from mace.config.specs import TensorSpec
from mace.errors import ModelError
from mace.ir.args import set_arg
from mace.ir.runtimes import QUANTIZED_ONLY, RUNTIMES
from mace.ir.layouts import record_perms, stored_perms
from mace.ops.gpu.support import gpu_reason
from mace.ops.registry import spec
from mace.transform.passes.cleanup import remove_dead_ops
from mace.transform.passes.quantize import PLACED_ARG, quantize_plan
from mace.transform.placement.auto import auto_place

DEVICE = {n: RUNTIMES[n].device for n in ("cpu", "gpu", "dsp")}   # the runtimes a placement rule names


@dataclass
class Rule:
    items: list            # parsed selections (mace/config/schema.py parse_op_item)
    runtime: str
    where: str             # key path for messages
    own: bool              # written on this subgraph (not inherited from the model)


@dataclass
class Part:
    name: str
    key_path: str
    runtime: str           # cpu, gpu, cpu+gpu, dsp
    inputs: list
    outputs: list
    rules: list            # Rule, or the string "auto"
    preference: list       # for auto
    placement_key: str = ""   # key path of the placement that applies (messages)


@dataclass
class PlacementPlan:
    where: str                                      # "<file>: models.<name>"
    file: str                                       # the deployment file
    parts: list                                     # Part, in run order
    boundaries: list                                # tensors between parts
    members: dict = field(default_factory=dict)     # framework op / IR op name -> part index


# ---- from the deployment file ------------------------------------------------------
def plan_for(config, model) -> PlacementPlan | None:
    """The plan of a model, or None when it is one subgraph without `placement` (runtime only)."""
    parts = model.subgraphs
    if len(parts) == 1 and parts[0].placement is None:
        return None
    plan_parts = []
    for sg in parts:
        own = sg.origin.get("placement") == "file"
        base = f"{sg.key_path if own else model.key_path}.placement"
        if sg.placement == "auto":
            rules = "auto"
            origin = sg.origin.get("placement_preference")
            if origin in ("file", "model"):   # name the key the list came from
                base = f"{sg.key_path if origin == 'file' else model.key_path}.placement_preference"
        else:
            rules = [Rule(r["ops"], r["runtime"], f"{base}[{i}]", own)
                     for i, r in enumerate(sg.placement or [])]
        plan_parts.append(Part(sg.name, sg.key_path, sg.runtime, list(sg.input_tensors),
                               list(sg.output_tensors), rules,
                               list(sg.placement_preference or default_preference(sg.runtime)), base))
    made = {t for p in plan_parts for t in p.outputs}
    read = {t for p in plan_parts for t in p.inputs}
    boundaries = [t for p in plan_parts for t in p.outputs if t in read and t in made]
    return PlacementPlan(f"{config.path}: {model.key_path}", str(config.path), plan_parts, boundaries)


def boundary_specs(plan: PlacementPlan | None) -> list:
    """Extra outputs for the frontend: tensors between subgraphs must not be fused away."""
    return [TensorSpec(t, None, "NONE") for t in plan.boundaries] if plan else []


def assign_parts(plan: PlacementPlan, graph) -> None:
    """On the frontend's graph: which subgraph each op belongs to (by its framework ops)."""
    producer = {t: i for i, op in enumerate(graph.net.op) for t in op.output}
    owner = {}
    for index, part in enumerate(plan.parts):
        stop = set(part.inputs) | set(graph.consts) | set(graph.input_names)
        stack = list(part.outputs)
        while stack:
            t = stack.pop()
            if t in stop or t not in producer:
                if t not in stop:
                    raise ModelError(f"{plan.where}: subgraph '{part.name}': tensor '{t}' is not made by "
                                     f"any op and is not one of its input_tensors {part.inputs}")
                continue
            i = producer[t]
            if i in owner:
                continue
            owner[i] = index
            stack.extend(graph.net.op[i].input)
    for i, op in enumerate(graph.net.op):
        index = owner.get(i, len(plan.parts) - 1)   # feeds no output: harmless anywhere
        for name in [op.name, *op.framework_op]:
            plan.members.setdefault(name, index)


# ---- the place pass ---------------------------------------------------------------
def drop_boundary_outputs(graph, plan: PlacementPlan) -> None:
    bounds = set(plan.boundaries)
    keep = [o for o in graph.net.output_info if o.name not in bounds]
    if len(keep) == len(graph.net.output_info):
        return
    # to_nhwc gave each one back in the framework's layout: a Transpose from '<b>_nhwc...'
    inner = {op.output[0]: op.input[0] for op in graph.net.op
             if op.type == "Transpose" and op.output[0] in bounds and op.input[0].startswith(op.output[0] + "_nhwc")}
    kept = [type(o)() for o in keep]
    for new, old in zip(kept, keep):
        new.CopyFrom(old)
    del graph.net.output_info[:]
    graph.net.output_info.extend(kept)
    remove_dead_ops(graph, {})   # the layout Transposes that only fed them
    perms = stored_perms(graph.net)
    for name, src in inner.items():   # the tensor between the groups keeps the name the user wrote
        if any(name in op.output for op in graph.net.op):
            continue
        for op in graph.net.op:
            op.input[:] = [name if t == src else t for t in op.input]
            op.output[:] = [name if t == src else t for t in op.output]
        graph.specs[name] = graph.specs.pop(src)
        if src in perms:
            perms[name] = perms.pop(src)
    record_perms(graph, perms)


def op_parts(graph, plan: PlacementPlan) -> list:
    """Subgraph index per op of the optimised graph: by its framework ops; ops a pass made
    (layout Transposes, ...) join the op that makes their input, else the one reading them."""
    ops = graph.net.op
    parts = [next((plan.members[n] for n in [*op.framework_op, op.name] if n in plan.members), None)
             for op in ops]
    producer = {t: i for i, op in enumerate(ops) for t in op.output}
    for i, op in enumerate(ops):
        if parts[i] is None:
            made = [producer[t] for t in op.input if t in producer and parts[producer[t]] is not None]
            parts[i] = parts[made[0]] if made else None
    readers = {}
    for j, op in enumerate(ops):
        for t in op.input:
            readers.setdefault(t, []).append(j)
    for i in reversed(range(len(ops))):
        if parts[i] is None:
            known = [parts[j] for t in ops[i].output for j in readers.get(t, []) if parts[j] is not None]
            parts[i] = known[0] if known else 0
    return parts


def can_run(graph, op, runtime: str, quant_plan=None):
    """None when `runtime` has a kernel for `op` (its shapes and args), else why not."""
    if runtime == "gpu":
        return gpu_reason(op, graph)
    if runtime in QUANTIZED_ONLY:   # a verdict per op of the graph's quantize plan
        return (quant_plan if quant_plan is not None else _quant_plan(graph)).get(op.name, "unknown op")
    kernels = spec(op.type).kernels
    return None if any(t in kernels for t in RUNTIMES["cpu"].kernel_tags) else "no CPU kernel"


def _quant_plan(graph) -> dict:
    return quantize_plan(graph)


class _Checker:
    """can_run with the DSP's per-graph verdicts computed once."""

    def __init__(self, graph):
        self.graph, self._quant = graph, None

    def __call__(self, op, runtime):
        if runtime in QUANTIZED_ONLY and self._quant is None:
            self._quant = _quant_plan(self.graph)
        return can_run(self.graph, op, runtime, self._quant)


def _matches(op, name: str) -> bool:
    return op.name == name or name in op.framework_op or name in op.output


def select(ops, item, where: str) -> list:
    """Op indices one parsed selection names (an error when it names none)."""
    n = len(ops)
    kind = item[0]
    if kind == "index":
        i = item[1]
        if not -n <= i < n:
            raise ModelError(f"{where}: op index {i} is out of range (the model has {n} ops)")
        return [i % n]
    if kind == "slice":
        found = list(range(n))[item[1]:item[2]]
        if not found:
            raise ModelError(f"{where}: slice '{_text(item)}' selects no op (the model has {n} ops)")
        return found
    if kind == "name":
        found = [i for i, op in enumerate(ops) if _matches(op, item[1])]
        if not found:
            raise ModelError(f"{where}: no op is named '{item[1]}' (IR op, framework op or output "
                             f"tensor); see <model>.pb_txt or <model>_report.txt")
        return found
    first = 0 if item[1] is None else min(select(ops, ("name", item[1]), where))
    last = n - 1 if item[2] is None else max(select(ops, ("name", item[2]), where))
    if first > last:
        raise ModelError(f"{where}: '{_text(item)}': '{item[1]}' (op {first}) comes after "
                         f"'{item[2]}' (op {last})")
    return list(range(first, last + 1))


def _text(item) -> str:
    if item[0] == "slice":
        return f"{'' if item[1] is None else item[1]}:{'' if item[2] is None else item[2]}"
    if item[0] == "range":
        return f"{item[1] or ''}..{item[2] or ''}"
    return str(item[1])


def resolve(graph, plan: PlacementPlan) -> tuple:
    """(runtime per op index, reasons: op name -> why it fell back to the CPU)."""
    ops = list(graph.net.op)
    check = _Checker(graph)
    parts = op_parts(graph, plan)
    runtime, reasons, strict = [None] * len(ops), {}, {}   # strict: op index -> key that put it there
    for index, part in enumerate(plan.parts):
        mine = [i for i in range(len(ops)) if parts[i] == index]
        if part.rules != "auto":
            for i in mine:
                runtime[i] = _part_default(ops[i], part, check, reasons)
                if part.runtime in QUANTIZED_ONLY:   # no fallback: every op of a dsp subgraph must quantize
                    strict[i] = f"{part.key_path}.runtime"
            _apply_rules(plan, part, ops, set(mine), runtime, strict, reasons)
    for index, part in enumerate(plan.parts):   # after the others: transfer costs see their placement
        if part.rules == "auto":
            mine = [i for i in range(len(ops)) if parts[i] == index]
            auto_place(graph, mine, part.preference, check, f"{plan.file}: {part.placement_key} (auto)",
                       runtime)
    _refuse(plan, ops, runtime, strict, check)
    return runtime, reasons


def _apply_rules(plan, part, ops, mine: set, runtime, strict, reasons) -> None:
    for rule in part.rules:
        chosen = set()
        for item in rule.items:
            chosen.update(select(ops, item, f"{plan.file}: {rule.where}"))
        inside = sorted(chosen & mine)
        if rule.own and not inside:
            raise ModelError(f"{plan.file}: {rule.where}: selects no op of subgraph '{part.name}'")
        for i in inside:
            runtime[i], strict[i] = rule.runtime, rule.where
            reasons.pop(ops[i].name, None)


def _refuse(plan, ops, runtime, strict, check) -> None:
    """Ops a rule or a dsp subgraph put where no kernel takes them: one error listing each."""
    refused = [(strict[i], ops[i], runtime[i], why) for i in sorted(strict)
               for why in [check(ops[i], runtime[i])] if why]
    if refused:
        raise ModelError(f"{plan.where}: {len(refused)} op(s) cannot run where placement puts them:\n  "
                         + "\n  ".join(f"{w}: {rt} cannot run op '{op.name}' ({op.type}): {why}"
                                       for w, op, rt, why in refused))


def _part_default(op, part, check, reasons) -> str:
    """The runtime a subgraph's own `runtime` gives an op (gpu falls back to the CPU)."""
    if part.runtime in ("gpu", "cpu+gpu"):
        why = check(op, "gpu")
        if why:
            reasons[op.name] = why
            return "cpu"
        return "gpu"
    return part.runtime


def place_plan(graph, plan: PlacementPlan) -> dict:
    """Set device_type on every op from the plan; returns op name -> CPU fallback reason."""
    drop_boundary_outputs(graph, plan)
    runtime, reasons = resolve(graph, plan)
    for op, rt in zip(graph.net.op, runtime):
        op.device_type = DEVICE[rt]
    set_arg(graph.net, PLACED_ARG, 1)
    return reasons
