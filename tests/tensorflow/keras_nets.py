"""Seeded Keras networks for the end-to-end tests, frozen to GraphDefs the way a user would.

Weights are random (weights=None, then batch-norm statistics and biases
randomised too, so no layer is an identity); nothing is downloaded.
"""
from __future__ import annotations

import numpy as np

from tests.tensorflow.tf_case import tf

keras = tf.keras
L = keras.layers


def deeplab_head(shape=(96, 96, 3), classes=5):
    """A DeepLab-style segmentation net: strided backbone, atrous depthwise conv, ASPP with
    dilation rates 2/4/6 and image pooling, bilinear upsampling to the input size."""
    inp = keras.Input(shape, name="image")
    x = L.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inp)
    x = L.ReLU(6.0)(L.BatchNormalization()(x))
    x = L.DepthwiseConv2D(3, strides=2, padding="same")(x)
    x = L.ReLU()(L.Conv2D(24, 1)(x))
    x = L.DepthwiseConv2D(3, dilation_rate=2, padding="same")(x)
    x = L.ReLU()(L.BatchNormalization()(x))
    feat = L.Conv2D(32, 1)(x)
    branches = [L.Conv2D(16, 1, activation="relu")(feat)]
    for rate in (2, 4, 6):
        branches.append(L.Conv2D(16, 3, dilation_rate=rate, padding="same", activation="relu")(feat))
    pool = L.Conv2D(16, 1, activation="relu")(L.GlobalAveragePooling2D(keepdims=True)(feat))
    branches.append(L.UpSampling2D(size=tuple(feat.shape[1:3]), interpolation="bilinear")(pool))
    x = L.Conv2D(16, 1, activation="relu")(L.Concatenate()(branches))
    x = L.Resizing(shape[0], shape[1], interpolation="bilinear")(L.Conv2D(classes, 1)(x))
    return keras.Model(inp, L.Softmax(name="prob")(x))


NETWORKS = {
    "mobilenet_v1": lambda: keras.applications.MobileNet(input_shape=(96, 96, 3), alpha=0.5, weights=None),
    "mobilenet_v2": lambda: keras.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35,
                                                           weights=None),
    "resnet50": lambda: keras.applications.ResNet50(input_shape=(96, 96, 3), weights=None),
    "deeplab": deeplab_head,
}


def randomize(model, seed: int):
    """Give batch norms random statistics and every bias random values (initialisers make them
    identities), keeping the activations' scale reasonable."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        weights = layer.get_weights()
        if isinstance(layer, L.BatchNormalization):
            gamma, beta, mean, var = weights
            layer.set_weights([rng.uniform(0.8, 1.2, gamma.shape), rng.uniform(-0.1, 0.1, beta.shape),
                               rng.uniform(-0.1, 0.1, mean.shape), rng.uniform(0.8, 1.2, var.shape)])
        elif len(weights) == 2 and weights[1].ndim == 1:  # kernel + bias
            layer.set_weights([weights[0], rng.uniform(-0.1, 0.1, weights[1].shape)])
    return model


def build(name: str, seed: int = 0):
    keras.utils.set_random_seed(seed)
    return randomize(NETWORKS[name](), seed)


def freeze_keras(model):
    """The model's inference graph as a GraphDef: input 'input' (batch left open), output 'Identity'."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    spec = tf.TensorSpec((None,) + tuple(model.inputs[0].shape[1:]), tf.float32, name="input")
    fn = tf.function(lambda x: model(x, training=False), autograph=False).get_concrete_function(spec)
    return convert_variables_to_constants_v2(fn).graph.as_graph_def()


def softmax_input(graph_def) -> str:
    """The logits: the tensor the last Softmax reads (a stronger check than near-uniform probabilities)."""
    return [n for n in graph_def.node if n.op == "Softmax"][-1].input[0]
