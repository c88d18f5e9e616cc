"""Run onnx's own operator test cases through our converter + CPU engine.

Each case (onnx.backend.test.case.node) is one small model with inputs and
expected outputs. Outcomes:
  pass         numbers match within the case's tolerance
  unsupported  conversion refused it with a clear error (op, attribute or dtype we do not cover)
  fail         we produced different numbers or shapes  <- a defect
  error        anything else raised                     <- a defect
"""
from __future__ import annotations

import collections
import warnings
from dataclasses import dataclass

import numpy as np

from mace import onnx_backend
from mace.errors import MaceError


@dataclass
class CaseResult:
    name: str
    op_type: str          # the op the case is about ("" for multi-node cases)
    outcome: str
    detail: str = ""


def collect_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in collect_testcases(None) if c.model is not None and c.data_sets]


def case_op(case) -> str:
    nodes = case.model.graph.node
    return nodes[0].op_type if len(nodes) == 1 else ""


def _arrays(values) -> list | None:
    from onnx import numpy_helper

    out = []
    for v in values:
        if hasattr(v, "dims"):  # a TensorProto
            v = numpy_helper.to_array(v)
        if isinstance(v, np.generic):
            v = np.asarray(v)
        if not isinstance(v, np.ndarray):
            return None  # sequences, optionals, maps: not tensors
        out.append(v)
    return out


STATIC_ONLY = ("must be static", "must be constant", "constant initializer")  # dynamic inputs


def _freeze(model, names, values, keep_first=True):
    """The model with every input but the first (or every input) turned into an initializer.

    Deployed models have constant weights, shapes and axes; onnx's cases often feed
    them as inputs, which a static-shape converter rightly refuses.
    """
    import onnx
    from onnx import numpy_helper

    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    first = 1 if keep_first else 0
    keep = [i for i in frozen.graph.input if i.name in names[:first]]
    del frozen.graph.input[:]
    frozen.graph.input.extend(keep)
    frozen.graph.initializer.extend(numpy_helper.from_array(v, n)
                                    for n, v in zip(names[first:], values[first:]))
    return frozen


def _run(model, feeds):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return onnx_backend.run(model, feeds)


def _run_frozen(model, names, values):
    """Freeze every input but the data input; if that is still too dynamic, freeze them all."""
    if len(names) > 1:
        try:
            return _run(_freeze(model, names, values), {names[0]: values[0]})
        except MaceError as e:
            if not any(k in str(e) for k in STATIC_ONLY):
                raise
    return _run(_freeze(model, names, values, keep_first=False), {})


def run_case(case) -> CaseResult:
    op = case_op(case)
    graph = case.model.graph
    inits = {i.name for i in graph.initializer}
    names = [i.name for i in graph.input if i.name not in inits]
    note = ""
    for inputs, expected in case.data_sets:
        ins, exp = _arrays(inputs), _arrays(expected)
        if ins is None or exp is None:
            return CaseResult(case.name, op, "unsupported", "non-tensor inputs or outputs")
        try:
            try:
                got = _run(case.model, dict(zip(names, ins)))
            except MaceError as e:
                if not any(k in str(e) for k in STATIC_ONLY):
                    raise
                got = _run_frozen(case.model, names, ins)
                note = "parameters frozen as constants"
        except (MaceError, ValueError) as e:
            return CaseResult(case.name, op, "unsupported", str(e).splitlines()[0][:200])
        except Exception as e:  # noqa: BLE001 - every other exception is a defect to report
            return CaseResult(case.name, op, "error", f"{type(e).__name__}: {e}"[:200])
        for i, (g, e) in enumerate(zip(got, exp)):
            problem = _mismatch(g, e, case.rtol, case.atol)
            if problem:
                return CaseResult(case.name, op, "fail", f"output {i}: {problem}")
    return CaseResult(case.name, op, "pass", note)


def _mismatch(got, exp, rtol, atol) -> str:
    got = np.asarray(got)
    if got.shape != exp.shape:
        return f"shape {list(got.shape)} != {list(exp.shape)}"
    if exp.dtype.kind in "fc":
        if not np.allclose(got.astype(np.float64), exp.astype(np.float64), rtol=max(rtol, 1e-4),
                           atol=max(atol, 1e-5), equal_nan=True):
            return f"max abs diff {np.nanmax(np.abs(got.astype(np.float64) - exp)):.3g}"
        return ""
    return "" if np.array_equal(got, exp) else "values differ"


def summarize(results, supported_ops) -> dict:
    """op -> Counter of outcomes, for single-node cases of every op type seen."""
    table = collections.defaultdict(collections.Counter)
    for r in results:
        table[r.op_type or "(multi-node cases)"][r.outcome] += 1
    return table


def markdown(results, supported_ops) -> str:
    table = summarize(results, supported_ops)
    total = collections.Counter(r.outcome for r in results if r.op_type in supported_ops)
    lines = ["# ONNX operator conformance", "",
             "Generated by `python tools/onnx_conformance.py` from onnx's own node test cases "
             "(`onnx.backend.test.case.node.collect_testcases`), run through the converter and the "
             "CPU engine. *unsupported* means conversion refused the case with a clear error "
             "(e.g. an attribute value, data type or dynamic shape we do not handle); *fail* and "
             "*error* are defects.", "",
             f"Supported op types: {len(supported_ops)}. Their cases: {total['pass']} passed, "
             f"{total['unsupported']} refused as unsupported, {total['fail']} failed, "
             f"{total['error']} errors.", "",
             "## Supported op types", "", "| op | passed | total | unsupported | fail | error |",
             "|---|---|---|---|---|---|"]
    for op in sorted(o for o in table if o in supported_ops):
        c = table[op]
        lines.append(f"| {op} | {c['pass']} | {sum(c.values())} | {c['unsupported']} | {c['fail']} | "
                     f"{c['error']} |")
    defects = [r for r in results if r.op_type in supported_ops and r.outcome in ("fail", "error")]
    if defects:
        lines += ["", "## Known defects", "", "| case | outcome | detail |", "|---|---|---|"]
        lines += [f"| {r.name} | {r.outcome} | {r.detail.replace('|', '/')} |" for r in defects]
    others = sorted(o for o in table if o not in supported_ops and o != "(multi-node cases)")
    lines += ["", "## Op types not supported", "",
              "These ONNX op types have test cases but no converter mapping yet: "
              + ", ".join(others) + "."]
    multi = table.get("(multi-node cases)")
    if multi:
        lines += ["", f"Multi-node cases (function expansions and the like): {multi['pass']} of "
                      f"{sum(multi.values())} pass."]
    return "\n".join(lines) + "\n"
