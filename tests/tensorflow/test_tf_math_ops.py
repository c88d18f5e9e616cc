"""Element-wise math, activations, reductions, ArgMax, Cast, Softmax, MatMul and
FakeQuant against TensorFlow."""
import numpy as np
import pytest

from tests.tensorflow.tf_case import check, rand, tf

BINARY = {"Add": tf.raw_ops.Add, "AddV2": tf.raw_ops.AddV2, "Sub": tf.raw_ops.Sub, "Mul": tf.raw_ops.Mul,
          "RealDiv": tf.raw_ops.RealDiv, "Maximum": tf.raw_ops.Maximum, "Minimum": tf.raw_ops.Minimum,
          "SquaredDifference": tf.raw_ops.SquaredDifference, "Pow": tf.raw_ops.Pow,
          "FloorDiv": tf.raw_ops.FloorDiv, "FloorMod": tf.raw_ops.FloorMod}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (5,)),
                                    ((1, 4, 1), (3, 1, 6))])
def test_binary(op, shapes):
    a = rand(*shapes[0], seed=1, low=0.5, high=2.0)
    b = rand(*shapes[1], seed=2, low=0.5, high=2.0)
    if op in ("Sub", "Mul", "Maximum", "Minimum", "Add", "AddV2", "SquaredDifference"):
        a, b = a - 1.25, b - 1.25  # signs matter for these, not for pow/div
    check(lambda x, y: BINARY[op](x=x, y=y), {"x": a, "y": b}, expect_ops={op})


def test_binary_with_constant():
    c = rand(1, 1, 5, seed=3)
    check(lambda x: x * c + 0.5, {"x": rand(2, 4, 5)}, expect_ops={"Mul", "AddV2"})


UNARY = ["Rsqrt", "Sqrt", "Square", "Neg", "Abs", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Round",
         "Sign", "Sin", "Cos", "Erf"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op):
    positive = op in ("Rsqrt", "Sqrt", "Log")
    x = rand(2, 3, 7, seed=4, low=0.1 if positive else -3.0, high=3.0)
    check(lambda t: getattr(tf.raw_ops, op)(x=t), {"x": x}, expect_ops={op}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual"])
def test_comparison_and_select(op):
    a, b = np.round(rand(2, 6, seed=1) * 2), np.round(rand(2, 6, seed=2) * 2)

    def f(x, y):
        return tf.where(getattr(tf.raw_ops, op)(x=x, y=y), x, y * 2.0)
    check(f, {"x": a, "y": b}, expect_ops={op, "SelectV2"})


def test_add_n():
    check(lambda x, y: tf.add_n([x, y, x]), {"x": rand(3, 4), "y": rand(3, 4, seed=1)}, expect_ops={"AddN"})


ACTIVATIONS = {"Relu": tf.nn.relu, "Relu6": tf.nn.relu6, "Elu": tf.nn.elu, "Selu": tf.nn.selu,
               "Sigmoid": tf.sigmoid, "Tanh": tf.tanh, "Softplus": tf.nn.softplus,
               "Softsign": tf.nn.softsign, "LeakyRelu": lambda x: tf.nn.leaky_relu(x, 0.13)}


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_activation(op):
    check(ACTIVATIONS[op], {"x": rand(2, 5, 6, 3, low=-8, high=8)}, expect_ops={op})


def test_clip_by_value():
    check(lambda x: tf.raw_ops.ClipByValue(t=x, clip_value_min=-0.3, clip_value_max=0.6), {"x": rand(4, 5)},
          expect_ops={"ClipByValue"})


@pytest.mark.parametrize("log", [False, True])
def test_softmax(log):
    fn = tf.nn.log_softmax if log else tf.nn.softmax
    check(fn, {"x": rand(2, 3, 10, low=-5, high=5)}, expect_ops={"LogSoftmax" if log else "Softmax"})


@pytest.mark.parametrize("op", ["Mean", "Sum", "Max", "Min", "Prod"])
@pytest.mark.parametrize("axes,keep", [([1, 2], True), ([1, 2], False), (-1, False), ([0, 3], True),
                                       ([], False)])
def test_reduce(op, axes, keep):
    fn = {"Mean": tf.reduce_mean, "Sum": tf.reduce_sum, "Max": tf.reduce_max, "Min": tf.reduce_min,
          "Prod": tf.reduce_prod}[op]
    x = rand(2, 4, 5, 3, low=0.5, high=1.5)
    check(lambda t: fn(t, axis=axes, keepdims=keep), {"x": x}, expect_ops={op})


@pytest.mark.parametrize("op,axis,out_type", [("ArgMax", -1, tf.int64), ("ArgMax", 1, tf.int32),
                                              ("ArgMin", 0, tf.int64)])
def test_arg_max(op, axis, out_type):
    fn = tf.math.argmax if op == "ArgMax" else tf.math.argmin
    check(lambda x: fn(x, axis=axis, output_type=out_type), {"x": rand(3, 4, 5)}, expect_ops={op})


@pytest.mark.parametrize("to", [tf.int32, tf.bool, tf.int64])
def test_cast(to):
    check(lambda x: tf.cast(tf.cast(x * 4.0, to), tf.float32) + 1.0, {"x": rand(3, 5)}, expect_ops={"Cast"})


def test_int_input():
    check(lambda x: tf.cast(x * 2, tf.float32), {"x": np.arange(12, dtype=np.int32).reshape(3, 4)})


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_matmul(ta, tb):
    a = rand(5, 4) if ta else rand(4, 5)
    w = rand(6, 5, seed=1) if tb else rand(5, 6, seed=1)
    b = rand(6, 5, seed=2) if tb else rand(5, 6, seed=2)
    # constant right operand (-> FullyConnected unless transpose_a) and a variable one
    check(lambda x: tf.matmul(x, w, transpose_a=ta, transpose_b=tb), {"x": a}, expect_ops={"MatMul"})
    check(lambda x, y: tf.matmul(x, y, transpose_a=ta, transpose_b=tb), {"x": a, "y": b},
          expect_ops={"MatMul"})


def test_batch_matmul():
    check(lambda x, y: tf.matmul(x, y, adjoint_b=True),
          {"x": rand(2, 3, 4, 5), "y": rand(1, 3, 6, 5, seed=1)}, expect_ops={"BatchMatMulV2"})


def test_dense_layer_folds_bias():
    w, b = rand(8, 4, seed=1), rand(4, seed=2)
    _, graph = check(lambda x: tf.nn.relu(tf.matmul(x, w) + b), {"x": rand(2, 8)})
    assert [op.type for op in graph.net.op] == ["FullyConnected"]


def test_lrn():
    check(lambda x: tf.nn.local_response_normalization(x, depth_radius=2, bias=1.5, alpha=0.3, beta=0.6),
          {"x": rand(1, 4, 5, 9)}, expect_ops={"LRN"})


@pytest.mark.parametrize("narrow", [False, True])
def test_fake_quant_ranges_are_kept(narrow):
    from mace.frontends.tensorflow.fake_quant import fake_quant_ranges

    w = tf.constant(rand(3, 3, 2, 4, seed=3))

    def f(x):
        wq = tf.quantization.fake_quant_with_min_max_vars(w, -0.8, 0.9, num_bits=8, narrow_range=narrow)
        y = tf.nn.relu6(tf.nn.conv2d(x, wq, 1, "SAME"))
        return tf.quantization.fake_quant_with_min_max_vars(y, 0.0, 6.0, narrow_range=narrow) * 2.0
    # The weights are quantized while converting (as TensorFlow does); the activation's fake
    # quantization is a FakeQuantize on TensorFlow's nudged grid: the same values
    _, graph = check(f, {"x": rand(1, 6, 6, 2, low=-3, high=3)}, expect_ops={"FakeQuantWithMinMaxVars"},
                     atol=1e-5)
    assert [op.type for op in graph.net.op].count("FakeQuantize") == 1
    ranges = fake_quant_ranges(graph.net)
    assert len(ranges) == 2   # the FakeQuant's input and output
    tensors = {t for op in graph.net.op for t in op.output}
    for tensor, (lo, hi, bits, narrow_flag) in ranges.items():
        assert (lo, hi, bits, narrow_flag) == (0.0, 6.0, 8, int(narrow))
        assert tensor in tensors  # names a tensor of the model


def test_fake_quant_of_constants_matches_tensorflow():
    from mace.frontends.tensorflow.ops_graph import fake_quant

    x = rand(20000, seed=5, low=-7, high=7)
    # Bit for bit, which is what tells the two TF kernels (multiply vs divide) apart: they are
    # Eigen element-wise arithmetic compiled into the wheel for one instruction set (no per-CPU
    # dispatch, no sums whose order varies, no oneDNN), so every CPU running the wheel agrees.
    for lo, hi, bits, narrow in [(-1.0, 1.0, 8, False), (-0.3, 1.7, 8, True), (0.2, 3.0, 4, False),
                                 (-6.0, 6.0, 8, False), (-0.1, 0.35, 7, True)]:
        want = tf.quantization.fake_quant_with_min_max_args(x, lo, hi, num_bits=bits, narrow_range=narrow)
        np.testing.assert_array_equal(fake_quant(x, lo, hi, bits, narrow, divide=False), want.numpy())
        want = tf.quantization.fake_quant_with_min_max_vars(x, lo, hi, num_bits=bits, narrow_range=narrow)
        np.testing.assert_array_equal(fake_quant(x, lo, hi, bits, narrow, divide=True), want.numpy())


def test_older_and_rarer_spellings():
    def f(x, y):
        r = tf.raw_ops
        m = r.BatchMatMul(x=x, y=y) + r.BatchMatMulV3(x=x, y=y, Tout=tf.float32, adj_x=False)
        mask = r.LogicalOr(x=r.LogicalAnd(x=m > 0.0, y=m < 1.0), y=r.LogicalNot(x=m > -0.5))
        return r.Select(condition=mask, x=r.Inv(x=m + 3.0), y=m)
    check(f, {"x": rand(2, 3, 4), "y": rand(2, 4, 5, seed=1)},
          expect_ops={"BatchMatMul", "BatchMatMulV3", "LogicalAnd", "LogicalOr", "LogicalNot", "Select", "Inv"})


def test_fake_quant_args_on_activations_keeps_the_range():
    from mace.frontends.tensorflow.fake_quant import fake_quant_ranges

    def f(x):
        return tf.quantization.fake_quant_with_min_max_args(tf.nn.relu(x), 0.0, 2.0, num_bits=6) + 1.0
    # TensorFlow's values (its ...Args multiplies by 1 / scale where FakeQuantize divides: only
    # a near-tie could land a step away, none here)
    got, graph = check(f, {"x": rand(3, 4)}, expect_ops={"FakeQuantWithMinMaxArgs"}, atol=1e-5)
    assert list(fake_quant_ranges(graph.net).values()) == [(0.0, 2.0, 6, 0)] * 2


def test_div_no_nan_is_zero_where_the_divisor_is():
    """basic-pitch's SavedModel normalises by a range with DivNoNan; zeros in y give 0, not inf."""
    a = rand(2, 3, 8, seed=5)
    b = np.round(rand(2, 3, 8, seed=6))  # about a third of it exactly 0
    assert (b == 0).any() and (b != 0).any()
    check(lambda x, y: tf.math.divide_no_nan(x, y), {"x": a, "y": b}, expect_ops={"DivNoNan"})
