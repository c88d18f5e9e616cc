"""Shared by the GPU tests: skip (saying why) without a device, and run one IR op on CPU and GPU.

Tolerances (max |gpu - cpu| / max(1, max |cpu|), per output):
  fp32_fp32  2e-4  float storage: only summation order and transcendental ulps differ
  fp16_fp32  2e-2  every tensor (weights too) is rounded to half (11-bit mantissa,
                   ~5e-4 relative each) and K-long sums accumulate that rounding
"""
from __future__ import annotations

import numpy as np
import pytest

from mace.ir.graph import Graph
from mace.ir.dtypes import from_numpy
from mace.runtime.engine import Engine
from mace.runtime.gpu import unavailable_reason
from mace.transform.shape_inference import infer_shapes

TOLERANCE = {"fp32_fp32": 2e-4, "fp16_fp32": 2e-2}
DATA_TYPES = tuple(TOLERANCE)


def require_gpu():
    """Skip the calling test (or module) with the reason when no OpenCL device works here."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no OpenCL device for the GPU runtime: {reason}")


def op_graph(op_type: str, inputs: dict, consts: dict | None = None, outputs=("y",), **args) -> Graph:
    """A graph of one op: `inputs` name -> array (fed at run time), `consts` name -> array.
    Inputs are listed in the op in dict order: inputs first, then consts."""
    g = Graph()
    for name, value in inputs.items():
        info = g.net.input_info.add(name=name, dims=list(np.shape(value)))
        info.data_type = from_numpy(np.asarray(value).dtype)
    for name, value in (consts or {}).items():
        g.add_const(name, np.asarray(value))
    order = list(inputs) + list(consts or {})
    g.add_op(op_type, args.pop("input_order", order), list(outputs), name="op", **args)
    for name in outputs:
        g.net.output_info.add(name=name)
    infer_shapes(g)
    return g


def chain_graph(steps, inputs: dict, consts: dict | None = None, outputs=("y",)) -> Graph:
    """Several ops: steps = [(op_type, inputs, outputs, args)]."""
    g = Graph()
    for name, value in inputs.items():
        info = g.net.input_info.add(name=name, dims=list(np.shape(value)))
        info.data_type = from_numpy(np.asarray(value).dtype)
    for name, value in (consts or {}).items():
        g.add_const(name, np.asarray(value))
    for i, (op_type, ins, outs, args) in enumerate(steps):
        g.add_op(op_type, ins, outs, name=f"op{i}", **args)
    for name in outputs:
        g.net.output_info.add(name=name)
    infer_shapes(g)
    return g


def run_both(graph: Graph, feed: dict, data_type: str, options: dict | None = None):
    """(cpu outputs, gpu outputs, gpu engine)."""
    cpu = Engine(graph).run(feed)
    engine = Engine(graph, device="gpu", options={"data_type": data_type, **(options or {})})
    return cpu, engine.run(feed), engine


def assert_close(cpu: dict, gpu: dict, data_type: str, what: str = ""):
    for name, want in cpu.items():
        got = gpu[name]
        assert got.shape == want.shape, (name, got.shape, want.shape)
        scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
        err = float(np.max(np.abs(got.astype(np.float64) - want))) / scale if want.size else 0.0
        assert err <= TOLERANCE[data_type], f"{what} {name}: relative error {err:.3g} > {TOLERANCE[data_type]}"


def check_op(op_type, inputs, consts=None, data_type="fp32_fp32", on_gpu=True, options=None, **args):
    g = op_graph(op_type, inputs, consts, **args)
    cpu, gpu, engine = run_both(g, inputs, data_type, options)
    if on_gpu:
        assert engine.gpu.runs(g.net.op[0]), engine.gpu.reasons
    assert_close(cpu, gpu, data_type, f"{op_type} {args}")
    return engine
