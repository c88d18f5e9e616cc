"""Models for the quantization tests: QDQ ONNX models and a fake-quantized TensorFlow graph.

    qdq_model(float_path, qdq_path, samples)   onnxruntime's quantize_static, QDQ format
    qat_tf_graph(...)                          a frozen GraphDef with FakeQuant nodes
    uniform_samples(shape, n, seed)            inputs in [-1, 1], the validation distribution

Weights are seeded random values; nothing is downloaded. TensorFlow is imported only
by the TensorFlow builder (through the frontend's loader).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mace.frontends.tensorflow.loader import import_tf


def uniform_samples(shape, n: int, seed: int = 0, lo: float = -1.0, hi: float = 1.0) -> list:
    """n float32 arrays of `shape` uniform in [lo, hi] (how `run` draws random inputs)."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(lo, hi, shape).astype(np.float32) for _ in range(n)]


def qdq_model(float_path, qdq_path, input_name: str, samples, per_channel: bool = True,
              activation_int8: bool = False, qoperator: bool = False, op_types=None) -> Path:
    """Quantize an ONNX model to QDQ format with onnxruntime, calibrated on `samples`
    (arrays in the model's layout): uint8 activations (int8 when asked), int8 weights.
    `qoperator`: QOperator format instead (QLinearConv, com.microsoft's QLinearAdd, ...);
    `op_types`: quantize only those op types (default: all onnxruntime can).

    The model is pre-processed first as onnxruntime recommends (BatchNormalization folded
    into Conv), so each layer is quantized once, as MACE quantizes it after its own folds."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    folded = Path(qdq_path).with_suffix(".folded.onnx")
    quant_pre_process(str(float_path), str(folded), skip_symbolic_shape=True)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{input_name: s} for s in samples])

        def get_next(self):
            return next(self.items, None)

    fmt = QuantFormat.QOperator if qoperator else QuantFormat.QDQ
    quantize_static(str(folded), str(qdq_path), Reader(), quant_format=fmt,
                    op_types_to_quantize=op_types, per_channel=per_channel,
                    activation_type=QuantType.QInt8 if activation_int8 else QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    return Path(qdq_path)


# The fake-quantized TensorFlow model: (input range) and the range after each layer.
QAT_RANGES = {"input": (-2.0, 2.0), "conv1": (0.0, 6.0), "dw_pre_relu": (-4.0, 4.0),
              "conv2": (-6.0, 6.0), "pool": (-3.0, 3.0), "logits": (-8.0, 8.0)}


def qat_tf_graph(size: int = 12, seed: int = 0):
    """(GraphDef, output name) of a small quantization-aware-trained style network:

        input -FQ-> conv3x3/2 + bias + relu6 -FQ-> depthwise3x3 + bias -FQ-> relu
              -> conv1x1 + bias -FQ-> mean -FQ-> matmul + bias -FQ-> logits

    Weights go through FakeQuantWithMinMaxVars (narrow range, as QAT exports them); every
    activation has its own FakeQuant with the range in QAT_RANGES (one before a ReLU, so
    the range must survive the activation fusion). Input 'input' [1, size, size, 3]."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2


    tf = import_tf()
    rng = np.random.default_rng(seed)

    def weight(shape, fan_in):
        w = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        peak = float(np.abs(w).max())
        return tf.quantization.fake_quant_with_min_max_vars(tf.constant(w), -peak, peak,
                                                            narrow_range=True)

    def bias(n):
        return tf.constant(rng.uniform(-0.2, 0.2, n).astype(np.float32))

    def fq(x, key):
        lo, hi = QAT_RANGES[key]
        return tf.quantization.fake_quant_with_min_max_vars(x, lo, hi)

    w1, b1 = weight((3, 3, 3, 16), 27), bias(16)
    wd, bd = weight((3, 3, 16, 1), 9), bias(16)
    w2, b2 = weight((1, 1, 16, 24), 16), bias(24)
    wf, bf = weight((24, 10), 24), bias(10)

    def net(x):
        x = fq(x, "input")
        x = fq(tf.nn.relu6(tf.nn.bias_add(tf.nn.conv2d(x, w1, 2, "SAME"), b1)), "conv1")
        x = fq(tf.nn.bias_add(tf.nn.depthwise_conv2d(x, wd, [1, 1, 1, 1], "SAME"), bd), "dw_pre_relu")
        x = fq(tf.nn.bias_add(tf.nn.conv2d(tf.nn.relu(x), w2, 1, "SAME"), b2), "conv2")
        x = fq(tf.reduce_mean(x, axis=[1, 2]), "pool")
        return tf.identity(fq(tf.matmul(x, wf) + bf, "logits"), name="logits")

    spec = tf.TensorSpec((1, size, size, 3), tf.float32, name="input")
    frozen = convert_variables_to_constants_v2(tf.function(net, autograph=False).get_concrete_function(spec))
    return frozen.graph.as_graph_def(), "logits"


# MobileNet v1's body at a small width: (pointwise channels, depthwise stride) per block.
MOBILENET_BLOCKS = ((32, 1), (48, 2), (48, 1), (96, 2), (96, 1), (160, 2))


def tf_mobilenet(size: int = 32, classes: int = 10, seed: int = 0):
    """(GraphDef, [probabilities, logits]) of a Keras MobileNet v1-style network (3x3/2 stem,
    depthwise-separable blocks with BatchNorm + ReLU6, global pooling, dense, softmax),
    frozen. He-scaled weights and batch norms near identity keep activations O(1) through
    the depth, so the output depends on the input (Keras' default initialisers let a
    random MobileNet collapse to a constant). Input 'input' [1, size, size, 3]."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2


    tf = import_tf()
    keras, L = tf.keras, tf.keras.layers
    keras.utils.set_random_seed(seed)
    he = keras.initializers.HeNormal(seed)

    def bn_relu6(x):
        return L.ReLU(6.0)(L.BatchNormalization()(x))

    inp = keras.Input((size, size, 3))
    x = bn_relu6(L.Conv2D(16, 3, strides=2, padding="same", use_bias=False, kernel_initializer=he)(inp))
    for channels, stride in MOBILENET_BLOCKS:
        # He scaling over the 9 taps of one channel (Keras would count all channels in)
        dw = keras.initializers.RandomNormal(stddev=np.sqrt(2.0 / 9), seed=seed)
        x = bn_relu6(L.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False,
                                       depthwise_initializer=dw)(x))
        x = bn_relu6(L.Conv2D(channels, 1, use_bias=False, kernel_initializer=he)(x))
    logits = L.Dense(classes, kernel_initializer=he)(L.GlobalAveragePooling2D()(x))
    model = keras.Model(inp, L.Softmax()(logits))
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            n = layer.get_weights()[0].shape
            layer.set_weights([rng.uniform(0.8, 1.2, n), rng.uniform(-0.1, 0.1, n),
                               rng.uniform(-0.1, 0.1, n), rng.uniform(0.8, 1.2, n)])
    spec = tf.TensorSpec((1, size, size, 3), tf.float32, name="input")
    fn = tf.function(lambda v: model(v, training=False), autograph=False).get_concrete_function(spec)
    graph_def = convert_variables_to_constants_v2(fn).graph.as_graph_def()
    logits_name = [n for n in graph_def.node if n.op == "Softmax"][-1].input[0]
    return graph_def, ["Identity:0", logits_name]
