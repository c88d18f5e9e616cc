"""A thin onnx.backend over `mace.onnx_backend`, for onnx's own test runner.

`onnx.backend.test.BackendTest(MaceBackend, __name__)` then runs onnx's node,
simple and PyTorch-converted/operator cases against our converter and CPU
engine, graded by onnx's own `assert_similar_outputs` (shapes, dtypes and
numbers). A case the converter refuses with a clear `MaceError` becomes a
skip carrying that message: a refusal is honest, a wrong number is a failure.

Like the deployment flow, parameters onnx feeds as inputs (shapes, axes,
weights) are frozen into constants when the converter says they must be static.
"""
from __future__ import annotations

import unittest

import numpy as np
from onnx.backend.base import Backend, BackendRep

from mace.errors import MaceError
from mace.testing.onnx_conformance import STATIC_ONLY, _run, _run_frozen

# The suites that ship their data inside the onnx wheel (no downloads). The "real" models
# (ResNet, BVLC AlexNet...) are fetched from the internet by the runner, so they stay out.
LOCAL_KINDS = ("OnnxBackendNodeModelTest", "OnnxBackendSimpleModelTest",
               "OnnxBackendPyTorchConvertedModelTest", "OnnxBackendPyTorchOperatorModelTest")


def _refuse(reason: str):
    raise unittest.SkipTest(f"refused: {reason}"[:300])


class MaceRep(BackendRep):
    """A model waiting for inputs: we convert for the shapes it is run with."""

    def __init__(self, model):
        self.model = model
        inits = {i.name for i in model.graph.initializer}
        self.names = [i.name for i in model.graph.input if i.name not in inits]

    def run(self, inputs, **kwargs):  # noqa: ARG002 - the onnx API passes options we do not use
        if isinstance(inputs, dict):
            inputs = [inputs[n] for n in self.names]
        values = list(inputs)
        if any(not isinstance(v, (np.ndarray, np.generic)) for v in values):
            _refuse("sequence, optional or map inputs: only tensors are supported")
        values = [np.asarray(v) for v in values]
        try:
            try:
                return _run(self.model, dict(zip(self.names, values)))
            except MaceError as e:
                if not any(k in str(e) for k in STATIC_ONLY):
                    raise
                return _run_frozen(self.model, self.names, values)
        except MaceError as e:
            _refuse(str(e).splitlines()[0])


class MaceBackend(Backend):
    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs):  # noqa: ARG003
        for out in model.graph.output:
            if not out.type.HasField("tensor_type"):
                _refuse(f"output '{out.name}' is a sequence, optional or map: only tensors are supported")
        return MaceRep(model)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        _refuse(f"single nodes without a model ({node.op_type}): the converter takes whole models")


def backend_test(module_name: str, pattern: str | None = None):
    """onnx's BackendTest over our backend, CPU cases of the local suites only."""
    import onnx.backend.test

    bt = onnx.backend.test.BackendTest(MaceBackend, module_name)
    if pattern:
        bt.include(pattern)
    cases = {k: v for k, v in bt.test_cases.items() if k in LOCAL_KINDS}
    for cls in cases.values():  # drop the CUDA twins rather than list 2,000 device skips
        for attr in [a for a in vars(cls) if a.startswith("test_") and not a.endswith("_cpu")]:
            delattr(cls, attr)
    return cases


class _Collect(unittest.TestResult):
    """Outcome per case: pass, refused (the skip's reason), fail, error."""

    def __init__(self, on_case=None):
        super().__init__()
        self.rows, self.on_case = [], on_case

    def _add(self, test, outcome, detail=""):
        if not test._testMethodName.endswith("_cpu"):
            return  # the CUDA twins, skipped by onnx's runner for a CPU backend
        kind = type(test).__name__.replace("OnnxBackend", "").replace("ModelTest", "")
        name = test._testMethodName.removesuffix("_cpu")
        self.rows.append((kind, name, outcome, detail))
        if self.on_case:
            self.on_case()

    def addSuccess(self, test):
        self._add(test, "pass")

    def addSkip(self, test, reason):
        self._add(test, "refused", reason.removeprefix("refused: "))

    def addFailure(self, test, err):
        self._add(test, "fail", str(err[1]).strip().splitlines()[0][:200] if str(err[1]).strip() else "")

    def addError(self, test, err):
        self._add(test, "error", f"{err[0].__name__}: {err[1]}".splitlines()[0][:200])


def run_suite(pattern: str | None = None, on_case=None) -> list:
    """(suite, case, outcome, detail) for every local CPU case matching `pattern`."""
    import warnings

    loader = unittest.TestLoader()
    suite = unittest.TestSuite(loader.loadTestsFromTestCase(cls)
                               for cls in backend_test(__name__, pattern).values())
    result = _Collect(on_case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        suite.run(result)
    return result.rows


def _reason_kind(detail: str) -> str:
    """A refusal grouped by what it is about (the message names op and tensor)."""
    d = detail.lower()
    for key, label in (("unsupported onnx op", "op type not supported"),
                       ("element type", "input element type not supported"),
                       ("float64", "float64 (DOUBLE) at run time"),
                       ("sequence, optional or map", "sequence/optional/map values"),
                       ("cannot cast", "cast to a type the IR lacks"),
                       ("must be static", "value must be static at convert"),
                       ("must be constant", "value must be static at convert"),
                       ("constant initializer", "value must be static at convert")):
        if key in d:
            return label
    return "attribute or layout not supported"


def markdown(rows: list, op_of: dict) -> str:
    """docs/onnx_conformance.md from `run_suite` rows; `op_of`: node case name -> op type."""
    import collections

    total = collections.Counter(r[2] for r in rows)
    lines = ["# ONNX conformance (onnx's own backend test runner)", "",
             "Generated by `python tools/onnx_conformance.py`: onnx's `onnx.backend.test.BackendTest` "
             "runs its node, simple and PyTorch-converted/operator cases (they ship in the onnx wheel; "
             "CPU, no downloads) through a thin backend over `mace.onnx_backend` "
             "(`mace/testing/onnx_backend_suite.py`) and grades them itself: output count, shapes, "
             "dtypes and values within each case's tolerance. *refused* means the converter stopped "
             "with a clear error (the reason is the test's skip reason); *fail* and *error* are "
             "defects. CI runs the same cases (`tests/onnx/test_onnx_backend_suite.py`).", "",
             f"**{len(rows)} cases: {total['pass']} passed, {total['fail']} failed, "
             f"{total['error']} errors, {total['refused']} refused.**", "",
             "| suite | cases | passed | failed | errors | refused |", "|---|---|---|---|---|---|"]
    by_suite = collections.defaultdict(collections.Counter)
    for suite, _, outcome, _ in rows:
        by_suite[suite][outcome] += 1
    for suite, c in sorted(by_suite.items()):
        lines.append(f"| {suite} | {sum(c.values())} | {c['pass']} | {c['fail']} | {c['error']} | "
                     f"{c['refused']} |")
    reasons = collections.Counter(_reason_kind(r[3]) for r in rows if r[2] == "refused")
    lines += ["", "## Why cases are refused", "", "| reason | cases |", "|---|---|"]
    lines += [f"| {k} | {n} |" for k, n in reasons.most_common()]
    defects = [r for r in rows if r[2] in ("fail", "error")]
    if defects:
        lines += ["", "## Defects", "", "| case | outcome | detail |", "|---|---|---|"]
        lines += [f"| {n} | {o} | {d.replace('|', '/')} |" for _, n, o, d in defects]
    by_op = collections.defaultdict(collections.Counter)
    for suite, name, outcome, _ in rows:
        if suite == "Node" and op_of.get(name):
            by_op[op_of[name]][outcome] += 1
    lines += ["", "## Node cases by op type", "",
              "Single-node cases only (expanded function bodies and multi-node cases are counted "
              "above).", "", "| op | passed | refused | failed | errors |", "|---|---|---|---|---|"]
    for op, c in sorted(by_op.items()):
        lines.append(f"| {op} | {c['pass']} | {c['refused']} | {c['fail']} | {c['error']} |")
    return "\n".join(lines) + "\n"
