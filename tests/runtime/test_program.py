"""The calls a run makes (mace/runtime/program.py): a kernel's sequence called step by step, a
failure still naming its op, and after the first run the compiled loops called without numba's
dispatcher, giving the same bytes as the dispatcher did."""
from functools import partial

import numpy as np
import pytest
from onnx import helper

from mace import onnx_backend
from mace.errors import ModelError
from mace.ops._common import sequence
from mace.ops.fast._jit import loops
from mace.runtime import program
from tests.ops.onnx_case import rand
from tests.ops.onnx_graph import graph_model, run_ort


def test_sequences_are_flattened_and_each_call_knows_its_node():
    calls = []
    steps = [partial(calls.append, "a"),
             sequence([partial(calls.append, "b1"), sequence([partial(calls.append, "b2"),
                                                              partial(calls.append, "b3")])]),
             partial(calls.append, "c")]
    flat, owners = program.build(steps, [], None)
    assert owners == [0, 1, 1, 1, 2]
    for call in flat:
        call()
    assert calls == ["a", "b1", "b2", "b3", "c"]


def _small_cnn():
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c1"], ["s1"]),
             helper.make_node("Mul", ["c1", "s1"], ["silu"]),
             helper.make_node("Conv", ["silu", "w2"], ["c2"], group=8, pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "silu"], ["res"]),
             helper.make_node("GlobalAveragePool", ["res"], ["y"])]
    consts = {"w1": rand(8, 3, 3, 3, seed=1), "b1": rand(8, seed=2), "w2": rand(8, 1, 3, 3, seed=3)}
    x = rand(1, 3, 12, 12, seed=4)
    return graph_model(nodes, {"x": x}, {"y": np.float32}, consts), x


@pytest.mark.skipif(loops() is None, reason="numba is not installed here: no compiled loops to call")
def test_after_the_first_run_loops_are_called_without_the_dispatcher():
    model, x = _small_cnn()
    engine = onnx_backend.prepare(model, {"x": x})
    dispatched = [c for c in engine._program if hasattr(getattr(c, "func", None), "overloads")]
    assert dispatched, "the model binds no compiled loop: nothing to check"
    first = engine.run({"x": x})["y"]
    assert engine._tight
    assert not [c for c in engine._program if hasattr(getattr(c, "func", None), "overloads")]
    for _ in range(3):   # the machine code gives the dispatcher's bytes, run after run
        np.testing.assert_array_equal(engine.run({"x": x})["y"], first)
    np.testing.assert_allclose(first, run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)
    other = rand(1, 3, 12, 12, seed=9)
    np.testing.assert_allclose(engine.run({"x": other})["y"], run_ort(model, {"x": other})[0],
                               rtol=1e-5, atol=1e-6)


def test_a_failing_step_inside_a_sequence_names_its_op():
    model, x = _small_cnn()
    engine = onnx_backend.prepare(model, {"x": x})
    engine.run({"x": x})
    victim = len(engine.nodes) - 1

    def broken():
        raise ValueError("boom")
    position = engine._program_nodes.index(victim)
    engine._program[position] = broken
    op = engine.nodes[victim].op
    with pytest.raises(ModelError, match=rf"op '{op.name}' \({op.type}\) failed: boom"):
        engine.run({"x": x})
