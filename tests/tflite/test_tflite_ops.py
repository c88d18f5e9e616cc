"""Each TFLite builtin we map, in a small model made by TensorFlow's converter, against LiteRT.

Float models must match LiteRT to float rounding; int8 models (TFLite's own scales
kept, run on our int8 kernels) to cosine >= 0.98 against LiteRT's int8 output.
Models are made once per session and per mode.
"""
import numpy as np
import pytest

from tests.tflite.tfl_case import compare, op_types, rand, tf, to_tflite

W = {k: tf.constant(v) for k, v in {
    "conv": rand(3, 3, 3, 8, seed=1), "bias": rand(8, seed=2), "dw": rand(3, 3, 8, 1, seed=3),
    "fc": rand(32, 10, seed=4), "fcb": rand(10, seed=5), "tconv": rand(3, 3, 4, 8, seed=6),
    "alpha": rand(1, 1, 8, seed=7, low=0.05, high=0.5), "c8": rand(8, seed=8, low=0.5, high=1.5)}.items()}


PRELU = tf.keras.layers.PReLU(alpha_initializer=tf.keras.initializers.Constant(W["alpha"].numpy()),
                              shared_axes=[1, 2])


def conv(x, act=tf.nn.relu):
    return act(tf.nn.bias_add(tf.nn.conv2d(x, W["conv"], 1, "SAME"), W["bias"]))


# name -> (function, input shapes, TFLite ops the model must contain)
CASES = {
    "conv_relu": (lambda x: conv(x), [(1, 8, 8, 3)], {"CONV_2D"}),
    "conv_relu6_stride": (lambda x: tf.nn.relu6(tf.nn.conv2d(x, W["conv"], 2, "VALID")), [(1, 9, 9, 3)],
                          {"CONV_2D"}),
    "depthwise": (lambda x: tf.nn.depthwise_conv2d(conv(x), W["dw"], [1, 2, 2, 1], "SAME"), [(1, 8, 8, 3)],
                  {"DEPTHWISE_CONV_2D"}),
    "fully_connected": (lambda x: tf.nn.relu(tf.matmul(tf.reshape(x, (1, 32)), W["fc"]) + W["fcb"]),
                        [(1, 4, 8)], {"FULLY_CONNECTED", "RESHAPE"}),
    "add_mul_sub_div": (lambda a, b: tf.nn.relu((a + b) * W["c8"] - b / W["c8"]),
                        [(1, 4, 4, 8), (1, 4, 4, 8)], {"ADD", "MUL", "SUB"}),
    "concat": (lambda a, b: tf.concat([conv(a), b], axis=3), [(1, 6, 6, 3), (1, 6, 6, 5)],
               {"CONCATENATION"}),
    "pools": (lambda x: tf.nn.max_pool2d(conv(x), 2, 2, "VALID") + tf.nn.avg_pool2d(conv(x), 3, 2, "SAME")
              [:, :4, :4], [(1, 8, 8, 3)], {"MAX_POOL_2D", "AVERAGE_POOL_2D"}),
    "mean_softmax": (lambda x: tf.nn.softmax(tf.reduce_mean(conv(x), axis=[1, 2])), [(1, 8, 8, 3)],
                     {"MEAN", "SOFTMAX"}),
    "activations": (lambda x: tf.concat([tf.sigmoid(x), tf.tanh(x), tf.nn.relu(x), tf.nn.relu6(x),
                                         x * tf.nn.relu6(x + 3) / 6, tf.nn.leaky_relu(x, 0.1)], axis=3),
                    [(1, 4, 4, 8)], {"LOGISTIC", "TANH", "RELU", "RELU6", "HARD_SWISH", "LEAKY_RELU"}),
    "prelu": (lambda x: PRELU(x), [(1, 4, 4, 8)], {"PRELU"}),
    "resize": (lambda x: tf.concat([tf.image.resize(x, (12, 12), "bilinear"),
                                    tf.image.resize(x, (12, 12), "nearest")], 3), [(1, 6, 6, 3)],
               {"RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"}),
    "pad": (lambda x: tf.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]]) +
            tf.pad(x, [[0, 0], [1, 2], [2, 1], [0, 0]], constant_values=0.5), [(1, 5, 5, 3)],
            {"PAD", "PADV2"}),
    "transpose_reshape": (lambda x: tf.reshape(tf.transpose(x, [0, 3, 1, 2]), (1, 8, 16)),
                          [(1, 4, 4, 8)], {"TRANSPOSE", "RESHAPE"}),
    "transpose_conv": (lambda x: tf.nn.conv2d_transpose(x, W["tconv"], (1, 12, 12, 4), 2, "SAME"),
                       [(1, 6, 6, 8)], {"TRANSPOSE_CONV"}),
    "strided_slice": (lambda x: x[:, 1:7:2, ::-1, 2:6] * 2.0, [(1, 8, 8, 8)], {"STRIDED_SLICE"}),
    "split": (lambda x: tf.split(x, 2, axis=3)[0] * tf.split(x, 2, axis=3)[1], [(1, 4, 4, 8)], {"SPLIT"}),
    "gather": (lambda x: tf.gather(x, [3, 1, 1, 0], axis=3), [(1, 4, 4, 8)], {"GATHER"}),
}
INT8 = ["conv_relu", "conv_relu6_stride", "depthwise", "fully_connected", "add_mul_sub_div", "concat",
        "pools", "mean_softmax", "resize", "pad", "transpose_conv"]


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    root, made = tmp_path_factory.mktemp("tflite_ops"), {}

    def get(name, mode):
        if (name, mode) not in made:
            fn, shapes, _ = CASES[name]
            made[name, mode] = to_tflite(fn, shapes, root / f"{name}_{mode}.tflite", mode)
        return made[name, mode]
    return get


@pytest.mark.parametrize("name", sorted(CASES))
def test_float_op_matches_litert(models, name):
    path = models(name, "float")
    missing = CASES[name][2] - op_types(path)
    assert not missing, f"TensorFlow's converter made no {missing} (it made {sorted(op_types(path))})"
    compare(path)


@pytest.mark.parametrize("name", ["conv_relu", "depthwise", "fully_connected", "transpose_conv"])
def test_fp16_weights_fold_to_float32(models, name):
    path = models(name, "fp16")
    assert "DEQUANTIZE" in op_types(path)
    compare(path, rtol=1e-3, atol=1e-4)


def pruned(*shape, seed):
    w = rand(*shape, seed=seed)
    w[np.random.default_rng(seed).uniform(size=shape) < 0.8] = 0.0   # what pruning leaves
    return tf.constant(w)


SPARSE_W = {"fc": pruned(64, 32, seed=21), "conv": pruned(3, 3, 8, 16, seed=22)}


def test_sparse_weights_are_densified(tmp_path):
    path = to_tflite(lambda x, y: (tf.matmul(x, SPARSE_W["fc"]), tf.nn.conv2d(y, SPARSE_W["conv"], 1, "SAME")),
                     [(2, 64), (1, 6, 6, 8)], tmp_path / "sparse.tflite", "sparse")
    assert "DENSIFY" in op_types(path)
    compare(path)


@pytest.mark.parametrize("name", INT8)
def test_int8_model_on_int8_kernels(models, name):
    path = models(name, "int8")
    assert "QUANTIZE" in op_types(path) and "DEQUANTIZE" in op_types(path)
    compare(path, quantize=True, min_cosine=0.98)
    compare(path, quantize=False, min_cosine=0.98)   # the float graph with the model's weights
