"""ONNX If (issue 22: torch.onnx's shape tests in silero VAD, openWakeWord's two-stage
hey_jarvis), against onnxruntime: a condition constant for the input shapes inlines the
taken branch (outer-scope references, branch initializers, nested Ifs); a run-time
condition computes both branches and selects, on inputs that take each branch; what is
refused names the node. Also ONNX Size, which such shape tests use."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mace import onnx_backend
from mace.errors import ModelError, UnsupportedOpError
from tests.ops.onnx_case import check, rand
from tests.ops.onnx_graph import check_model, graph_model, op_types

F = TensorProto.FLOAT


def _branch(name, nodes, out, initializers=()):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, F, None)],
                             initializer=list(initializers))


def _shape_test_model(nested=False):
    """torch.onnx's idiom: `if x.shape[1] == 1: x.squeeze(1) * 3 else x`, then a Relu."""
    scale = numpy_helper.from_array(np.array(3.0, np.float32), "three")
    then_nodes = [helper.make_node("Squeeze", ["x", "axis1"], ["sq"]),
                  helper.make_node("Mul", ["sq", "three"], ["t_out"])]
    else_nodes = [helper.make_node("Identity", ["x"], ["e_out"])]
    if nested:  # the else branch asks again (dim 2 == 4), as silero's LSTM wrapper does
        inner_then = _branch("inner_then", [helper.make_node("Neg", ["x"], ["in_t"])], "in_t")
        inner_else = _branch("inner_else", [helper.make_node("Abs", ["x"], ["in_e"])], "in_e")
        else_nodes = [helper.make_node("Shape", ["x"], ["s2"]),
                      helper.make_node("Gather", ["s2", "two"], ["d2"]),
                      helper.make_node("Equal", ["d2", "four"], ["c2"]),
                      helper.make_node("If", ["c2"], ["e_out"], name="inner_if",
                                       then_branch=inner_then, else_branch=inner_else)]
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["d1"]),
             helper.make_node("Equal", ["d1", "one"], ["cond"]),
             helper.make_node("If", ["cond"], ["branch"], name="shape_if",
                              then_branch=_branch("then", then_nodes, "t_out", [scale]),
                              else_branch=_branch("else", else_nodes, "e_out")),
             helper.make_node("Relu", ["branch"], ["y"])]
    consts = {"one": np.array(1, np.int64), "axis1": np.array([1], np.int64),
              "two": np.array(2, np.int64), "four": np.array(4, np.int64)}
    return nodes, consts


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("shape", [(2, 1, 4), (2, 3, 4), (2, 3, 5)])
def test_if_on_a_static_shape_inlines_the_taken_branch(shape, nested):
    nodes, consts = _shape_test_model(nested)
    x = rand(*shape, seed=3)
    model = graph_model(nodes, {"x": x}, {"y": np.float32}, consts, opset=13)
    for i, dim in enumerate(model.graph.input[0].type.tensor_type.shape.dim):
        dim.dim_param = f"d{i}"   # dynamic axes, as exported: the branch not taken stays valid
    _, engine = check_model(model, {"x": x})
    assert "Select" not in op_types(engine)   # folded: nothing of the branch not taken is left
    if shape[1] != 1 and nested:
        untaken = "Abs_in_e" if shape[2] == 4 else "Neg_in_t"   # the inner branch not taken
        assert untaken not in [op.name for op in engine.graph.net.op]


def _runtime_model(else_shape=(2, 3)):
    """A condition on values (sum(x) > 0) choosing between two computations of x."""
    then_nodes = [helper.make_node("Relu", ["x"], ["r"]),
                  helper.make_node("Mul", ["r", "w"], ["t_out"])]
    if else_shape == (2, 3):
        else_nodes = [helper.make_node("Neg", ["x"], ["e_out"])]
    else:
        else_nodes = [helper.make_node("ReduceSum", ["x"], ["e_out"], keepdims=0)]
    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], name="value_if",
                              then_branch=_branch("then", then_nodes, "t_out"),
                              else_branch=_branch("else", else_nodes, "e_out"))]
    return nodes, {"w": rand(2, 3, seed=5), "zero": np.array(0.0, np.float32)}


@pytest.mark.parametrize("offset", [2.0, -2.0])   # the sum is positive, then negative
def test_if_on_a_runtime_value_runs_both_branches_and_selects(offset):
    nodes, consts = _runtime_model()
    x = rand(2, 3, seed=1) + np.float32(offset)
    model = graph_model(nodes, {"x": x}, {"y": np.float32}, consts, opset=13)
    (got,), engine = check_model(model, {"x": x})
    assert "Select" in op_types(engine)
    other = rand(2, 3, seed=2) - np.float32(offset)   # the same engine, the other branch
    (expected,) = check_model(model, {"x": other})[0]
    np.testing.assert_allclose(engine.run({"x": other})[engine.graph.output_names[0]], expected,
                               rtol=1e-5, atol=1e-6)


def test_if_on_a_runtime_value_with_branches_of_different_shapes_is_refused():
    nodes, consts = _runtime_model(else_shape=())
    x = rand(2, 3, seed=1)
    model = graph_model(nodes, {"x": x}, {"y": np.float32}, consts, opset=13)
    with pytest.raises(ModelError, match=r"If 'value_if': the condition 'cond' is computed at run "
                                         r"time .* output 0 is \[2, 3\] float32 from then_branch "
                                         r"but \[\] float32 from else_branch"):
        onnx_backend.prepare(model, {"x": x})


def test_unsupported_op_inside_a_branch_is_listed_before_converting():
    then_g = _branch("then", [helper.make_node("Unique", ["x"], ["t_out"])], "t_out")
    else_g = _branch("else", [helper.make_node("Identity", ["x"], ["e_out"])], "e_out")
    nodes = [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    model = graph_model(nodes, {"x": rand(3)}, {"y": np.float32}, {"c": np.array(True)}, opset=13)
    with pytest.raises(UnsupportedOpError, match=r"unsupported ONNX op\(s\): Unique"):
        onnx_backend.prepare(model, {"x": rand(3)})


@pytest.mark.parametrize("shape", [(), (3,), (2, 3, 4)])
def test_size(shape):
    check("Size", {"x": rand(*shape)}, out_types=[np.int64], opset=13)


@pytest.mark.parametrize("runtime_condition", [False, True])
def test_if_written_before_the_node_its_branch_reads_is_sorted_after_it(runtime_condition):
    """onnxruntime's quantize_dynamic writes silero VAD's `/decoder/If_1` before `/decoder/If`,
    whose output a node inside If_1's branch reads (an outer-scope name, not an input of the
    If node): onnxruntime sorts by what branches read too, and so does the frontend."""
    then_nodes = [helper.make_node("Mul", ["late", "x"], ["t_out"])]
    else_nodes = [helper.make_node("Sub", ["late", "x"], ["e_out"])]
    cond = ([helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["cond"])] if runtime_condition else
            [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "one"], ["d1"]),
             helper.make_node("Equal", ["d1", "three"], ["cond"])])
    nodes = cond + [helper.make_node("If", ["cond"], ["y"], name="reads_late",
                                     then_branch=_branch("then", then_nodes, "t_out"),
                                     else_branch=_branch("else", else_nodes, "e_out")),
                    helper.make_node("Relu", ["x"], ["late"])]   # after the If that reads it
    consts = {"zero": np.array(0.0, np.float32), "one": np.array(1, np.int64),
              "three": np.array(3, np.int64)}
    x = rand(2, 3, seed=4)
    model = graph_model(nodes, {"x": x}, {"y": np.float32}, consts, opset=13)
    check_model(model, {"x": x})
