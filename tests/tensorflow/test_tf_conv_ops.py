"""Conv2D, DepthwiseConv2dNative, Conv2DBackpropInput, BiasAdd, pooling and batch norm
against TensorFlow, with random shapes and attributes (seeded)."""
import numpy as np
import pytest

from tests.tensorflow.tf_case import check, rand, tf

RNG_CASES = 6


def random_conv(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.choice([1, 2, 3, 5]))
    return dict(k=(k, int(rng.choice([k, 1, 3]))), stride=int(rng.integers(1, 3)),
                dilation=int(rng.choice([1, 1, 2])), padding=str(rng.choice(["SAME", "VALID"])),
                cin=int(rng.integers(1, 6)), cout=int(rng.integers(1, 9)),
                hw=(int(rng.integers(7, 14)), int(rng.integers(7, 14))))


@pytest.mark.parametrize("seed", range(RNG_CASES))
def test_conv2d_random(seed):
    c = random_conv(seed)
    stride = c["stride"] if c["dilation"] == 1 else 1  # TF: no stride with dilation
    w = tf.constant(rand(*c["k"], c["cin"], c["cout"], seed=seed + 100))
    b = tf.constant(rand(c["cout"], seed=seed + 200))

    def f(x):
        y = tf.nn.conv2d(x, w, strides=stride, padding=c["padding"], dilations=c["dilation"])
        return tf.nn.relu(tf.nn.bias_add(y, b))
    check(f, {"x": rand(2, *c["hw"], c["cin"], seed=seed)}, expect_ops={"Conv2D", "BiasAdd"})


def test_conv2d_explicit_padding():
    w = tf.constant(rand(3, 2, 3, 4, seed=1))
    check(lambda x: tf.nn.conv2d(x, w, strides=[1, 2, 1, 1], padding=[[0, 0], [1, 2], [0, 1], [0, 0]]),
          {"x": rand(1, 9, 8, 3)}, expect_ops={"Conv2D"})


def test_grouped_conv2d():
    w = tf.constant(rand(3, 3, 2, 6, seed=1))  # 6 input channels in 3 groups
    check(lambda x: tf.nn.conv2d(x, w, strides=1, padding="SAME"), {"x": rand(1, 7, 7, 6)},
          expect_ops={"Conv2D"})


@pytest.mark.parametrize("seed", range(RNG_CASES))
def test_depthwise_conv2d_random(seed):
    c = random_conv(seed + 50)
    mult = int(np.random.default_rng(seed).integers(1, 3))
    w = tf.constant(rand(*c["k"], c["cin"], mult, seed=seed + 100))
    stride = c["stride"]

    def f(x):
        return tf.nn.depthwise_conv2d(x, w, strides=[1, stride, stride, 1], padding=c["padding"])
    check(f, {"x": rand(1, *c["hw"], c["cin"], seed=seed)}, expect_ops={"DepthwiseConv2dNative"})


@pytest.mark.parametrize("seed", range(RNG_CASES))
def test_conv2d_transpose_random(seed):
    rng = np.random.default_rng(seed)
    k, stride = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    padding = str(rng.choice(["SAME", "VALID"]))
    cin, cout, h, w_ = int(rng.integers(1, 5)), int(rng.integers(1, 6)), int(rng.integers(3, 7)), \
        int(rng.integers(3, 7))
    out_h = h * stride if padding == "SAME" else (h - 1) * stride + k
    out_h += int(rng.integers(0, stride)) if padding == "VALID" else 0  # any size that convs back to h
    out_w = w_ * stride if padding == "SAME" else (w_ - 1) * stride + k
    filt = tf.constant(rand(k, k, cout, cin, seed=seed + 1))

    def f(x):
        return tf.nn.conv2d_transpose(x, filt, [2, out_h, out_w, cout], strides=stride, padding=padding)
    check(f, {"x": rand(2, h, w_, cin, seed=seed)}, expect_ops={"Conv2DBackpropInput"})


@pytest.mark.parametrize("op", ["max", "avg"])
@pytest.mark.parametrize("k,stride,padding", [(2, 2, "VALID"), (3, 2, "SAME"), (3, 1, "SAME"),
                                              ((3, 2), (2, 1), "SAME"), (5, 3, "VALID")])
def test_pool(op, k, stride, padding):
    pool = tf.nn.max_pool2d if op == "max" else tf.nn.avg_pool2d
    check(lambda x: pool(x, k, stride, padding), {"x": rand(2, 11, 10, 3)},
          expect_ops={"MaxPool" if op == "max" else "AvgPool"})


@pytest.mark.parametrize("version", ["FusedBatchNorm", "FusedBatchNormV3"])
def test_fused_batch_norm(version):
    c = 5
    scale, offset, mean = rand(c, seed=1), rand(c, seed=2), rand(c, seed=3)
    var = rand(c, seed=4, low=0.1, high=2.0)
    op = getattr(tf.raw_ops, version)

    def f(x):
        return op(x=x, scale=scale, offset=offset, mean=mean, variance=var, epsilon=1e-3,
                  is_training=False)[0]
    check(f, {"x": rand(2, 6, 7, c)}, expect_ops={version})


def test_conv_batch_norm_relu_folds_into_one_op():
    w = tf.constant(rand(3, 3, 3, 4, seed=1))
    p = [rand(4, seed=i) for i in range(2, 5)] + [rand(4, seed=5, low=0.5, high=1.5)]

    def f(x):
        y = tf.nn.conv2d(x, w, 1, "SAME")
        y = tf.compat.v1.nn.fused_batch_norm(y, p[0], p[1], p[2], p[3], is_training=False)[0]
        return tf.nn.relu(y)
    _, graph = check(f, {"x": rand(1, 8, 8, 3)}, expect_ops={"FusedBatchNormV3"})
    assert [op.type for op in graph.net.op] == ["Conv2D"]


def test_training_batch_norm_is_refused():
    from mace.errors import ModelError
    with pytest.raises(ModelError, match="is_training"):
        check(lambda x: tf.raw_ops.FusedBatchNormV3(x=x, scale=rand(2), offset=rand(2), mean=rand(2),
                                                    variance=rand(2, low=0.5), is_training=True)[0],
              {"x": rand(1, 3, 3, 2)})


def test_older_spellings():
    b = rand(3, seed=1)

    def f(x):
        y = tf.raw_ops.MaxPoolV2(input=x, ksize=[1, 3, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
        return tf.raw_ops.BiasAddV1(value=y, bias=b)
    check(f, {"x": rand(1, 7, 8, 3)}, expect_ops={"MaxPoolV2", "BiasAddV1"})


def test_nchw_conv_is_refused_with_the_reason(tmp_path):
    from mace.errors import ModelError
    from tests.tensorflow.tf_case import convert_pb, freeze, save_pb

    w = tf.constant(rand(3, 3, 2, 4, seed=1))
    # TensorFlow cannot run NCHW convs on a CPU, but frozen GPU graphs may contain them.
    graph_def, outputs = freeze(lambda x: tf.raw_ops.Conv2D(input=x, filter=w, strides=[1, 1, 1, 1],
                                                            padding="SAME", data_format="NCHW"),
                                {"x": rand(1, 2, 5, 5)})
    path = save_pb(tmp_path / "m.pb", graph_def)
    with pytest.raises(ModelError, match="Conv2D '.*': data_format NCHW is not supported"):
        convert_pb(path, {"x": rand(1, 2, 5, 5)}, outputs)
