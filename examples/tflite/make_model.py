#!/usr/bin/env python3
"""Build the example TFLite models with TensorFlow's converter: a small Keras MobileNet v2
(alpha 0.35, 96x96, 10 classes, seeded random weights) as a float .tflite and as a
full-integer int8 .tflite (int8 weights per channel, int8 activations, float input
and output behind QUANTIZE/DEQUANTIZE), the usual two exports of a phone model.

Nothing is downloaded. The int8 export is calibrated on seeded random images. TensorFlow's
float kernels and calibrator give other bits on other CPUs (instruction sets, oneDNN) and
versions, so the bytes written here are this machine's: the script writes their sha256 into
mobilenet_v2.yml (model_sha256_checksum of the model naming each file) and says what changed.

    python examples/tflite/make_model.py      # needs: pip install -e ".[tf,tflite]"
"""
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from mace.config.pin_checksum import pin_checksum  # noqa: E402

HERE = Path(__file__).resolve().parent
SHAPE = (1, 96, 96, 3)
WHY = (f"pinned to what TensorFlow {tf.__version__} wrote on this machine: its float kernels and calibrator "
       "give other bits on other CPUs and versions")


def build(seed=0):
    tf.keras.utils.set_random_seed(seed)
    image = tf.keras.Input(SHAPE[1:], batch_size=1, name="image")
    model = tf.keras.applications.MobileNetV2(input_tensor=image, alpha=0.35, weights=None, classes=10)
    rng = np.random.default_rng(seed)
    for layer in model.layers:   # no batch norm left an identity
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([rng.uniform(0.8, 1.2, gamma.shape), rng.uniform(-0.1, 0.1, beta.shape),
                               rng.uniform(-0.1, 0.1, mean.shape), rng.uniform(0.8, 1.2, var.shape)])
    return model


def convert(model, int8: bool) -> bytes:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        rng = np.random.default_rng(1)
        conv.representative_dataset = lambda: ([rng.uniform(-1, 1, SHAPE).astype(np.float32)]
                                               for _ in range(32))
    return conv.convert()


def main():
    model = build()
    yml = HERE / "mobilenet_v2.yml"
    for kind in ("float", "int8"):
        path = HERE / f"mobilenet_v2_{kind}.tflite"
        path.write_bytes(convert(model, kind == "int8"))
        print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")
        for pinned in pin_checksum(yml, path, required=True):
            print(f"  {yml.name}: {pinned.describe(WHY)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
