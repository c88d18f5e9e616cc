"""Element-wise math, activations, Softmax and the shape/plumbing ops against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from mace import onnx_backend

from tests.ops.onnx_case import check, make_model, rand, run_ort
from tests.ops.onnx_graph import check_model, check_op, graph_model, op_types

I64 = np.int64
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean"]
SHAPE_PAIRS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), ()), ((), (3, 5)), ((4,), (2, 3, 4)),
               ((3, 1), (1, 5)), ((2, 1, 4, 1), (3, 1, 5)), ((1,), (7,))]


def _operand(op, shape, seed):
    # Pow needs a positive base; Div a divisor away from zero.
    if op in ("Pow", "Div"):
        return rand(*shape, seed=seed, low=0.5, high=2.0)
    return rand(*shape, seed=seed)


# ---- binary and n-ary Eltwise --------------------------------------------------------
@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("a,b", SHAPE_PAIRS)
def test_binary_inputs(op, a, b):
    check(op, {"a": _operand(op, a, 1), "b": _operand(op, b, 2)})


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("const_first", [False, True])
@pytest.mark.parametrize("a,b", [((2, 3, 4), (4,)), ((2, 5, 3, 3), (5, 1, 1)), ((3, 4), ())])
def test_binary_const(op, const_first, a, b):
    x, c = _operand(op, a, 1), _operand(op, b, 2)
    order = ["c", "x"] if const_first else ["x", "c"]
    check(op, {"x": x}, {"c": c}, input_order=order)


@pytest.mark.parametrize("seed", range(20))
def test_binary_random_broadcast(seed):
    """Random op, random ranks; each operand drops leading dims and sets some to 1."""
    rng = np.random.default_rng(seed)
    op = str(rng.choice(BINARY))
    full = [int(d) for d in rng.integers(1, 6, rng.integers(0, 5))]
    shapes = [tuple(d if rng.random() < 0.6 else 1 for d in full[rng.integers(0, len(full) + 1):])
              for _ in range(2)]
    x, c = _operand(op, shapes[0], seed), _operand(op, shapes[1], seed + 1)
    if rng.random() < 0.5:
        check(op, {"x": x, "c": c})
    else:
        check(op, {"x": x}, {"c": c}, input_order=["c", "x"] if rng.random() < 0.5 else None)


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_nary(op):
    check(op, {"a": rand(2, 1, 4), "b": rand(3, 1, seed=1), "c": rand(4, seed=2)})
    check(op, {"a": rand(3, 2)}, {"k": rand(2, 3, 1, seed=3)}, input_order=["a", "k", "a"])
    check(op, {"a": rand(3, 2)})  # one input: an identity


def test_pow_mixed_types():
    """Pow's result has the base's type whatever the exponent's."""
    check_op("Pow", {"x": rand(3, 4, low=-2.0, high=2.0)}, {"e": np.array([2, 3, 0, 1], I64)})
    base = np.array([[1, 4, 9], [16, 2, 3]], I64)
    check_op("Pow", {"x": base}, {"e": np.float32(0.5)}, out_types=[I64])
    check_op("Pow", {"x": base, "e": np.array([2.0, 0.5, 1.0], np.float32)}, out_types=[I64])


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_binary_int64(op):
    rng = np.random.default_rng(5)
    a, b = rng.integers(-20, 20, (3, 4)), rng.integers(1, 6, (4,)) * rng.choice([-1, 1], (4,))
    check(op, {"a": a, "b": b}, out_types=[I64])


@pytest.mark.parametrize("fmod,dtype", [(0, I64), (1, I64), (1, np.float32)])
def test_mod(fmod, dtype):
    rng = np.random.default_rng(2)
    a = rng.integers(-20, 20, (3, 5)).astype(dtype)
    b = (rng.integers(1, 6, (5,)) * rng.choice([-1, 1], (5,))).astype(dtype)
    check("Mod", {"a": a, "b": b}, attrs={"fmod": fmod}, out_types=[dtype])


# ---- comparisons and logic ----------------------------------------------------------
@pytest.mark.parametrize("op", ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, I64])
def test_compare(op, dtype):
    rng = np.random.default_rng(4)
    a, b = rng.integers(-2, 3, (2, 3, 4)).astype(dtype), rng.integers(-2, 3, (3, 1)).astype(dtype)
    check(op, {"a": a, "b": b}, out_types=[np.bool_])
    check(op, {"a": a}, {"k": dtype(1)}, out_types=[np.bool_])


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    check(op, {"a": rand(2, 3, 4) > 0, "b": rand(3, 1, seed=1) > 0}, out_types=[np.bool_])


def test_not():
    check("Not", {"a": rand(3, 5) > 0}, out_types=[np.bool_])


# ---- unary math ---------------------------------------------------------------------
UNARY = {"Neg": (-3, 3), "Abs": (-3, 3), "Sqrt": (0.01, 4), "Exp": (-5, 5), "Log": (0.01, 9),
         "Erf": (-3, 3), "Reciprocal": (0.2, 3), "Floor": (-5, 5), "Ceil": (-5, 5),
         "Sign": (-2, 2), "Sin": (-7, 7), "Cos": (-7, 7)}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op):
    low, high = UNARY[op]
    x = rand(2, 3, 5, low=low, high=high)
    if op == "Sign":
        x[0, 0] = 0.0
    check(op, {"x": x})


def test_round_half_to_even():
    check("Round", {"x": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, 3.7], np.float32)})


def test_unary_int64():
    x = np.arange(-4, 4, dtype=I64).reshape(2, 4)
    for op in ("Neg", "Abs", "Sign"):
        check(op, {"x": x}, out_types=[I64])


# ---- activations --------------------------------------------------------------------
@pytest.mark.parametrize("op,attrs,opset", [
    ("Relu", {}, 14), ("Sigmoid", {}, 13), ("Tanh", {}, 13), ("HardSwish", {}, 14),
    ("Softplus", {}, 1), ("Softsign", {}, 1), ("Mish", {}, 18),
    ("LeakyRelu", {}, 16), ("LeakyRelu", {"alpha": 0.3}, 16), ("LeakyRelu", {"alpha": 1.7}, 16),
    ("LeakyRelu", {"alpha": -0.5}, 16),
    ("HardSigmoid", {}, 6), ("HardSigmoid", {"alpha": 0.5, "beta": 0.1}, 6),
    ("Elu", {}, 6), ("Elu", {"alpha": 0.4}, 6),
    ("Selu", {}, 6), ("Selu", {"alpha": 1.2, "gamma": 0.8}, 6),
    ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20),
])
def test_activation(op, attrs, opset):
    x = rand(2, 3, 4, 5, low=-6.0, high=6.0)
    x[0, 0, 0, :2] = [-80.0, 80.0]  # far tails (sigmoid/softplus overflow)
    check_op(op, {"x": x}, attrs=attrs, opset=opset)


@pytest.mark.parametrize("slope_shape,const", [((4, 1, 1), True), ((1,), True), ((5,), True),
                                               ((4, 1, 5), False), ((), True)])
def test_prelu(slope_shape, const):
    x, slope = rand(2, 4, 3, 5, low=-3, high=3), rand(*slope_shape, seed=1)
    if const:
        check("PRelu", {"x": x}, {"s": slope})
    else:
        check("PRelu", {"x": x, "s": slope})


@pytest.mark.parametrize("attrs", [{"min": -0.5, "max": 0.7}, {"min": 0.0, "max": 6.0}, {"min": 0.2},
                                   {"max": -0.1}, {}, {"min": 0.0}])
def test_clip_opset6(attrs):
    check("Clip", {"x": rand(3, 4, 5, low=-8, high=8)}, attrs=attrs, opset=6)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("lo,hi", [(-0.5, 0.7), (0.0, 6.0), (0.0, None), (0.3, None), (None, 0.2),
                                   (None, None), (2.0, 1.0)])
def test_clip_inputs(opset, lo, hi):
    consts, order = {}, ["x", "", ""]
    if lo is not None:
        consts["lo"], order[1] = np.float32(lo), "lo"
    if hi is not None:
        consts["hi"], order[2] = np.float32(hi), "hi"
    while order[-1] == "":
        order.pop()
    check("Clip", {"x": rand(3, 4, 5, low=-8, high=8)}, consts, input_order=order, opset=opset)


@pytest.mark.parametrize("dtype", [I64, np.int32])
@pytest.mark.parametrize("lo,hi", [(-2, 3), (0, 3), (None, 3), (-2, None), (0, None)])
def test_clip_int(dtype, lo, hi):
    consts, order = {}, ["x", "", ""]
    if lo is not None:
        consts["lo"], order[1] = np.array(lo, dtype), "lo"
    if hi is not None:
        consts["hi"], order[2] = np.array(hi, dtype), "hi"
    while order[-1] == "":
        order.pop()
    check("Clip", {"x": np.arange(-5, 6, dtype=dtype)}, consts, input_order=order, opset=13,
          out_types=[dtype])


@pytest.mark.parametrize("act,attrs,fused", [
    ("Relu", {}, True), ("Clip", {"min": -0.2, "max": 0.4}, True), ("LeakyRelu", {"alpha": 0.2}, True),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, True), ("HardSwish", {}, True),
    ("Sigmoid", {}, True), ("Tanh", {}, True), ("Elu", {"alpha": 0.5}, False), ("Gelu", {}, False),
])
@pytest.mark.parametrize("producer", ["Conv", "Add"])
def test_fused_activation(act, attrs, fused, producer):
    """fuse_activation folds these into the conv / add that feeds them; results must not change."""
    x = rand(1, 3, 6, 5, low=-2, high=2)
    if producer == "Conv":
        first = helper.make_node("Conv", ["x", "w", "b"], ["h"], pads=[1, 1, 1, 1])
        consts = {"w": rand(4, 3, 3, 3, seed=1), "b": rand(4, seed=2)}
    else:
        first = helper.make_node("Add", ["x", "b"], ["h"])
        consts = {"b": rand(3, 1, 1, seed=2)}
    if act == "Clip":  # opset 11+ spells Clip's bounds as inputs
        consts.update(lo=np.float32(attrs["min"]), hi=np.float32(attrs["max"]))
        second = helper.make_node("Clip", ["h", "lo", "hi"], ["y"])
    else:
        second = helper.make_node(act, ["h"], ["y"], **attrs)
    model = graph_model([first, second], {"x": x}, {"y": np.float32}, consts, opset=20)
    _, engine = check_model(model, {"x": x})
    assert ("Activation" not in op_types(engine)) == fused


# ---- Softmax ------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("shape,axis", [((3, 7), None), ((2, 3, 4), 0), ((2, 3, 4), 1),
                                        ((2, 3, 4), -1), ((2, 3, 4, 5), -3), ((2, 3, 4, 5), 2),
                                        ((6,), 0)])
def test_softmax(op, opset, shape, axis):
    attrs = {} if axis is None else {"axis": axis}
    check(op, {"x": rand(*shape, low=-5, high=5)}, attrs=attrs, opset=opset)


def test_softmax_after_conv_channels():
    """Softmax over NCHW channels must follow the conv's NHWC output (AXIS remap)."""
    x = rand(1, 3, 5, 4)
    model = graph_model([helper.make_node("Conv", ["x", "w"], ["h"]),
                         helper.make_node("Softmax", ["h"], ["y"], axis=1)],
                        {"x": x}, {"y": np.float32}, {"w": rand(6, 3, 1, 1, seed=1)}, opset=13)
    _, engine = check_model(model, {"x": x})
    assert op_types(engine).count("Transpose") == 2


# ---- Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat ------------------------
@pytest.mark.parametrize("shape,target,allowzero", [
    ((2, 3, 4), (6, -1), 0), ((2, 3, 4), (0, -1), 0), ((2, 3, 4), (0, 0, 2, 2), 0),
    ((2, 3, 4), (-1,), 0), ((2, 3, 4), (4, 0, 2), 0), ((6, 4), (2, -1, 3), 1),
    ((1, 5), (5,), 1),
])
def test_reshape(shape, target, allowzero):
    check("Reshape", {"x": rand(*shape)}, {"s": np.array(target, I64)}, {"allowzero": allowzero},
          opset=14)


def test_reshape_allowzero_empty():
    """allowzero keeps a 0 in the target shape as a zero-size axis."""
    check("Reshape", {"x": np.zeros((0, 3), np.float32)}, {"s": np.array([3, 0], I64)},
          {"allowzero": 1}, opset=14)


@pytest.mark.parametrize("shape,axis", [((2, 3, 4, 5), 0), ((2, 3, 4, 5), 1), ((2, 3, 4, 5), 3),
                                        ((2, 3, 4, 5), 4), ((2, 3, 4, 5), -1), ((2, 3, 4, 5), -3),
                                        ((7,), 1)])
def test_flatten(shape, axis):
    check("Flatten", {"x": rand(*shape)}, attrs={"axis": axis})


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 5), [0]), ((1, 3, 1, 5), [-2, 0]),
                                        ((1, 3, 1, 5), None), ((4, 1), [1])])
def test_squeeze(opset, shape, axes):
    if axes is None:
        check("Squeeze", {"x": rand(*shape)}, opset=opset)
    elif opset >= 13:
        check("Squeeze", {"x": rand(*shape)}, {"a": np.array(axes, I64)}, opset=opset)
    else:
        check("Squeeze", {"x": rand(*shape)}, attrs={"axes": axes}, opset=opset)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("shape,axes", [((3, 5), [0]), ((3, 5), [-1, 1]), ((4,), [0, -1, 2]),
                                        ((2, 3), [3, 0])])
def test_unsqueeze(opset, shape, axes):
    if opset >= 13:
        check("Unsqueeze", {"x": rand(*shape)}, {"a": np.array(axes, I64)}, opset=opset)
    else:
        check("Unsqueeze", {"x": rand(*shape)}, attrs={"axes": axes}, opset=opset)


@pytest.mark.parametrize("shape,perm", [((2, 3, 4), None), ((2, 3, 4), [1, 0, 2]),
                                        ((2, 3, 4, 5), [0, 2, 3, 1]), ((2, 3, 4, 5), [3, 1, 0, 2]),
                                        ((5, 6), [1, 0])])
def test_transpose(shape, perm):
    check("Transpose", {"x": rand(*shape)}, attrs={} if perm is None else {"perm": perm})


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_concat(axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for i, s in enumerate(shapes):
        s[axis] += i  # odd sizes along the joined axis
    check("Concat", {"a": rand(*shapes[0]), "b": rand(*shapes[1], seed=1)},
          {"c": rand(*shapes[2], seed=2)}, {"axis": axis}, input_order=["a", "c", "b"])


# ---- Identity, Dropout, Constant, ConstantOfShape, Shape ----------------------------
def test_identity():
    check("Identity", {"x": rand(3, 4)})
    check("Identity", {"x": np.arange(6, dtype=I64)}, out_types=[I64])


@pytest.mark.parametrize("opset", [7, 12, 13])
def test_dropout(opset):
    check("Dropout", {"x": rand(3, 4)}, opset=opset)


def test_dropout_mask():
    x = rand(3, 4)
    model = graph_model([helper.make_node("Dropout", ["x"], ["d", "m"]),
                         helper.make_node("Cast", ["m"], ["mf"], to=1),
                         helper.make_node("Mul", ["d", "mf"], ["y"])],
                        {"x": x}, {"y": np.float32}, opset=13)
    check_model(model, {"x": x})


def _const_node(**attrs):
    return helper.make_node("Constant", [], ["k"], **attrs)


@pytest.mark.parametrize("attrs,dtype", [
    ({"value": helper.make_tensor("v", TensorProto.FLOAT, [2, 1], [0.5, -2.0])}, np.float32),
    ({"value_float": 1.5}, np.float32), ({"value_floats": [1.0, 2.0, 3.0]}, np.float32),
    ({"value_int": 3}, I64), ({"value_ints": [1, -2, 3]}, I64),
])
def test_constant(attrs, dtype):
    x = (rand(2, 3) * 4).astype(dtype)
    model = graph_model([_const_node(**attrs), helper.make_node("Add", ["x", "k"], ["y"])],
                        {"x": x}, {"y": dtype}, opset=13)
    check_model(model, {"x": x})


def test_constant_is_output():
    model = graph_model([_const_node(value_floats=[1.0, 2.0])], {}, {"k": np.float32}, opset=13)
    check_model(model, {})


@pytest.mark.parametrize("value,dtype", [(None, np.float32), (2.5, np.float32), (7, I64),
                                         (1, np.int32)])
def test_constant_of_shape(value, dtype):
    """Shape -> ConstantOfShape folds; adding it to x checks shape, dtype and fill."""
    attrs = {} if value is None else {
        "value": helper.make_tensor("v", {np.float32: TensorProto.FLOAT, I64: TensorProto.INT64,
                                          np.int32: TensorProto.INT32}[dtype], [1], [value])}
    x = (rand(3, 1, 4) * 5).astype(dtype)
    model = graph_model([helper.make_node("Shape", ["x"], ["s"]),
                         helper.make_node("ConstantOfShape", ["s"], ["c"], **attrs),
                         helper.make_node("Add", ["x", "c"], ["y"])],
                        {"x": x}, {"y": dtype}, opset=13)
    _, engine = check_model(model, {"x": x})
    assert op_types(engine) == ["Eltwise"]


@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -3, "end": 3},
                                   {"start": 2, "end": 1}, {"start": -10, "end": 10}])
def test_shape(attrs):
    check("Shape", {"x": rand(2, 3, 4, 5)}, attrs=attrs, opset=15, out_types=[I64])


@pytest.mark.parametrize("which", ["lo", "hi", "both", "crossed"])
def test_clip_bounds_computed_at_run_time(which):
    # torchaudio's AmplitudeToDB exports Clip(x, min=ReduceMax(x) - 80): a bound only known
    # at run time (openWakeWord's melspectrogram.onnx in the corpus). Bounds fed as inputs.
    x = rand(3, 4, 5, low=-8, high=8)
    bounds = {"lo": np.array(-1.5, np.float32), "hi": np.array(2.5, np.float32)}
    if which == "crossed":  # min > max: ONNX gives max everywhere
        bounds = {"lo": np.array(3.0, np.float32), "hi": np.array(-1.0, np.float32)}
    inputs, order = {"x": x}, ["x", "", ""]
    if which in ("lo", "both", "crossed"):
        inputs["lo"], order[1] = bounds["lo"], "lo"
    if which in ("hi", "both", "crossed"):
        inputs["hi"], order[2] = bounds["hi"], "hi"
    while order[-1] == "":
        order.pop()
    check("Clip", inputs, input_order=order, opset=13)


def test_clip_run_time_min_with_infinite_max():
    # torch's clamp(min=t) exports Clip(x, t, inf): the infinite max is dropped, not an operand
    x = rand(2, 6, low=-8, high=8)
    model = make_model("Clip", {"x": x, "lo": np.array(-2.0, np.float32)},
                       {"hi": np.array(np.inf, np.float32)}, input_order=["x", "lo", "hi"], opset=13)
    engine = onnx_backend.prepare(model, {"x": x, "lo": np.array(-2.0, np.float32)})
    assert [op.type for op in engine.graph.net.op].count("Eltwise") == 1
    got = engine.run({"x": x, "lo": np.array(-2.0, np.float32)})["y0"]
    np.testing.assert_array_equal(got, run_ort(model, {"x": x, "lo": np.array(-2.0, np.float32)})[0])
