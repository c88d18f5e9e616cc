"""A run-time If's branches (mace/runtime/branches.py): the ops only the branch not taken needs
are skipped, as onnxruntime runs only the branch taken, and outputs still match onnxruntime on
inputs that take each branch; observers still see every node; an op another output needs, or
one that runs before the condition is known, always runs."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from mace import onnx_backend
from mace.runtime.program import Guarded
from mace.runtime.observer import Event, register
from tests.ops.onnx_case import rand
from tests.ops.onnx_graph import graph_model, run_ort

F = TensorProto.FLOAT


def _branch(name, nodes, out):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, F, None)])


def _two_stage(nested=False, expose=False):
    """openWakeWord hey_jarvis's shape: p = sigmoid(x @ w1); when p >= 0.5 a second classifier
    (x @ w2, relu, @ w3, sigmoid) gives the score, else p itself. `nested`: the second stage
    asks again (its own score >= 0.7: doubled). `expose`: the second stage's hidden layer is
    computed outside the If and also summed into a graph output, so it must always run.
    Returns the model and inputs whose first-stage score is far below 0.5 ("quiet") and far
    above it ("fires")."""
    hidden = [helper.make_node("MatMul", ["x", "w2"], ["h"]), helper.make_node("Relu", ["h"], ["hr"])]
    second = [helper.make_node("MatMul", ["hr", "w3"], ["z"]), helper.make_node("Sigmoid", ["z"], ["s2"])]
    if nested:
        inner_then = _branch("inner_then", [helper.make_node("Add", ["s2", "s2"], ["twice"])], "twice")
        inner_else = _branch("inner_else", [helper.make_node("Identity", ["s2"], ["same"])], "same")
        second += [helper.make_node("GreaterOrEqual", ["s2", "high"], ["c2"]),
                   helper.make_node("Reshape", ["c2", "scalar"], ["c2s"]),
                   helper.make_node("If", ["c2s"], ["t_out"], name="inner_if",
                                    then_branch=inner_then, else_branch=inner_else)]
    else:
        second += [helper.make_node("Identity", ["s2"], ["t_out"])]
    condition = [helper.make_node("MatMul", ["x", "w1"], ["z1"]),
                 helper.make_node("Sigmoid", ["z1"], ["p"]),
                 helper.make_node("GreaterOrEqual", ["p", "half"], ["c"])]
    # c is [1, 1] as in hey_jarvis: the frontend reshapes it to a scalar after both branches
    if_node = helper.make_node(
        "If", ["c"], ["y"], name="second_stage",
        then_branch=_branch("then", second if expose else hidden + second, "t_out"),
        else_branch=_branch("else", [helper.make_node("Identity", ["p"], ["e_out"])], "e_out"))
    nodes, outputs = condition + [if_node], {"y": np.float32}
    if expose:
        nodes = condition + hidden + [if_node, helper.make_node("ReduceSum", ["hr"], ["hidden_sum"], keepdims=0)]
        outputs["hidden_sum"] = np.float32
    consts = {"w1": rand(16, 1, seed=1), "w2": rand(16, 32, seed=2), "w3": rand(32, 1, seed=3) * 4,
              "half": np.array(0.5, np.float32), "scalar": np.array([], np.int64)}
    if nested:
        consts["high"] = np.array(0.7, np.float32)
    model = graph_model(nodes, {"x": rand(1, 16)}, outputs, consts, opset=13)
    base, toward = rand(1, 16, seed=7), consts["w1"][:, 0] / np.linalg.norm(consts["w1"])
    return model, {"fires": base + 6 * toward, "quiet": base - 6 * toward}


def _count_guarded(engine) -> dict:
    """{side: how many of its steps ran}, by wrapping each Guarded step's steps."""
    ran = {True: 0, False: 0}
    for call in engine._program:
        if isinstance(call, Guarded):
            def counting(step, side=call.side):
                def wrapped():
                    ran[side] += 1
                    step()
                return wrapped
            call.steps = [counting(s) for s in call.steps]
    return ran


@pytest.mark.parametrize("nested", [False, True])
def test_the_branch_not_taken_is_not_run(nested):
    model, inputs = _two_stage(nested)
    engine = onnx_backend.prepare(model, {"x": inputs["quiet"]})
    assert engine.skippable_ops >= 2   # the second stage: two FullyConnected (Relu, Sigmoid fused)
    ran = _count_guarded(engine)
    for kind in ("quiet", "fires", "quiet"):
        before = dict(ran)
        (expected,) = run_ort(model, {"x": inputs[kind]})
        got = engine.run({"x": inputs[kind]})["y"]
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=kind)
        then_ran = ran[True] - before[True]
        assert then_ran == 0 if kind == "quiet" else then_ran >= 2, kind


def test_observers_see_every_node_and_outputs_agree():
    model, inputs = _two_stage()
    engine = onnx_backend.prepare(model, {"x": inputs["quiet"]})
    seen = []
    register(engine, lambda flags, node: seen.append(node.index), Event.AFTER)
    for kind in ("quiet", "fires"):
        seen.clear()
        got = engine.run({"x": inputs[kind]})["y"]
        np.testing.assert_allclose(got, run_ort(model, {"x": inputs[kind]})[0], rtol=1e-5, atol=1e-6)
        assert seen == list(range(len(engine.nodes)))


def test_an_op_read_outside_the_branch_always_runs():
    model, inputs = _two_stage(expose=True)
    engine = onnx_backend.prepare(model, {"x": inputs["quiet"]})
    assert engine.skippable_ops == 1   # hr @ w3 with its sigmoid; not x @ w2 and its relu
    for kind in ("quiet", "fires"):
        expected = run_ort(model, {"x": inputs[kind]})
        got = engine.run({"x": inputs[kind]})
        np.testing.assert_allclose(got["y"], expected[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["hidden_sum"], expected[1], rtol=1e-5, atol=1e-5)
