#!/usr/bin/env python3
"""Build the example TensorFlow model: a frozen Keras MobileNet v2 GraphDef (mobilenet_v2.pb).

Nothing is downloaded: the weights are random but seeded (and the batch-norm
statistics randomised, so no layer is an identity), and the GraphDef is serialized
deterministically. Its bytes still depend on the TensorFlow version (and on any float
result it computes, which can differ between CPUs), so the script writes the sha256 of
the file it made into mobilenet_v2.yml (model_sha256_checksum) and says what changed.
The graph looks like MACE's example model: input `input` (NHWC 1x224x224x3), output
`MobilenetV2/Predictions/Reshape_1`.

    python examples/tensorflow/make_model.py      # needs: pip install -e ".[tf]"
"""
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2  # noqa: E402

from mace.config.pin_checksum import pin_checksum  # noqa: E402

HERE = Path(__file__).resolve().parent
OUTPUT = "MobilenetV2/Predictions/Reshape_1"
WHY = f"pinned to what TensorFlow {tf.__version__} wrote on this machine: other versions write other bytes"


def build(seed=0):
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.applications.MobileNetV2(input_shape=(224, 224, 3), alpha=1.0, weights=None)
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([rng.uniform(0.8, 1.2, gamma.shape), rng.uniform(-0.1, 0.1, beta.shape),
                               rng.uniform(-0.1, 0.1, mean.shape), rng.uniform(0.8, 1.2, var.shape)])
    return model


def freeze(model):
    spec = tf.TensorSpec((None, 224, 224, 3), tf.float32, name="input")
    fn = tf.function(lambda x: model(x, training=False), autograph=False).get_concrete_function(spec)
    graph_def = convert_variables_to_constants_v2(fn).graph.as_graph_def()
    # The function's result is an Identity node; give it the name MACE's example uses.
    for node in graph_def.node:
        if node.name == "Identity":
            node.name = OUTPUT
    return graph_def


def main():
    data = freeze(build()).SerializeToString(deterministic=True)
    path = HERE / "mobilenet_v2.pb"
    path.write_bytes(data)
    print(f"wrote {path} ({len(data) / 1e6:.1f} MB)")
    yml = HERE / "mobilenet_v2.yml"
    for pinned in pin_checksum(yml, path, required=True):
        print(f"  {yml.name}: {pinned.describe(WHY)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
