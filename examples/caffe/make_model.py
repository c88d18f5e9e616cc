#!/usr/bin/env python3
"""Write the digits CNN (examples/digits) as a Caffe model: a deploy prototxt and a caffemodel.

No Caffe is needed and nothing is downloaded or trained: the trained weights are
read from examples/digits/digits_cnn.onnx and stored the way Caffe stores them,
so the files are byte-for-byte reproducible. The net uses what Caffe deploy files
typically contain: an Input layer, Convolution without bias followed by an
in-place BatchNorm (running sums with a scale factor, as Caffe keeps them) and
Scale, in-place ReLUs, InnerProduct and Softmax.

    data [1,1,8,8] -> conv1 3x3 (8) -> bn1 + scale1 -> relu1
                   -> conv2 3x3/2 (16) -> relu2 -> fc 10 -> prob [1,10]

Outputs (next to this file, or in --out DIR): digits_caffe.prototxt, digits_caffe.caffemodel.
The two files follow from digits_cnn.onnx alone; if that model is retrained (on another CPU
its float weights differ), the files differ too, so the script writes their sha256 into
digits_caffe.yml when that file sits in the output folder, and says what changed.
Run from anywhere:  python examples/caffe/make_model.py
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ONNX_MODEL = ROOT / "examples" / "digits" / "digits_cnn.onnx"
# Caffe's BatchNorm stores mean and variance multiplied by this running factor
# (1 / (1 - moving_average_fraction) after a long training run); the reader divides it out.
BN_FACTOR = 999.0
WHY = "pinned to the file just written, made from another examples/digits/digits_cnn.onnx than the .yml was"

PROTOTXT = """\
# The digits CNN of examples/digits as a Caffe deploy net (written by make_model.py).
name: "digits_caffe"
layer {
  name: "data"
  type: "Input"
  top: "data"
  input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } }
}
layer {
  name: "conv1"
  type: "Convolution"
  bottom: "data"
  top: "conv1"
  param { lr_mult: 1 decay_mult: 1 }
  convolution_param {
    num_output: 8
    bias_term: false
    pad: 1
    kernel_size: 3
    weight_filler { type: "msra" }
  }
}
layer {
  name: "bn1"
  type: "BatchNorm"
  bottom: "conv1"
  top: "conv1"
  batch_norm_param { use_global_stats: true eps: %(eps)s }
}
layer {
  name: "scale1"
  type: "Scale"
  bottom: "conv1"
  top: "conv1"
  scale_param { bias_term: true }
}
layer {
  name: "relu1"
  type: "ReLU"
  bottom: "conv1"
  top: "conv1"
}
layer {
  name: "conv2"
  type: "Convolution"
  bottom: "conv1"
  top: "conv2"
  convolution_param {
    num_output: 16
    pad: 1
    kernel_size: 3
    stride: 2
  }
}
layer {
  name: "relu2"
  type: "ReLU"
  bottom: "conv2"
  top: "conv2"
}
layer {
  name: "fc"
  type: "InnerProduct"
  bottom: "conv2"
  top: "fc"
  inner_product_param { num_output: 10 }
}
layer {
  name: "prob"
  type: "Softmax"
  bottom: "fc"
  top: "prob"
}
"""


def onnx_weights() -> tuple:
    """(initializers by name, BatchNormalization epsilon) of the digits ONNX model."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(ONNX_MODEL))
    weights = {i.name: numpy_helper.to_array(i).astype(np.float32) for i in model.graph.initializer}
    bn = next(n for n in model.graph.node if n.op_type == "BatchNormalization")
    eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
    return weights, float(eps)


def caffe_blobs(w: dict) -> dict:
    """Layer name -> its blobs in Caffe's layout and order."""
    factor = np.float32(BN_FACTOR)
    return {
        "conv1": [w["conv1.weight"]],
        "bn1": [w["bn1.mean"] * factor, w["bn1.var"] * factor, np.array([factor], np.float32)],
        "scale1": [w["bn1.scale"], w["bn1.bias"]],
        "conv2": [w["conv2.weight"], w["conv2.bias"]],
        "fc": [w["fc.weight"], w["fc.bias"]],   # (10, 256): Caffe's (num_output, K)
    }


def caffemodel(net, blobs: dict) -> bytes:
    """The binary NetParameter Caffe writes: every layer, with the trained blobs of those that have any."""
    from mace.frontends.caffe import caffe_pb2

    model = caffe_pb2.NetParameter(name=net.name)
    for layer in net.layer:
        stored = model.layer.add()
        stored.CopyFrom(layer)
        for value in blobs.get(layer.name, []):
            blob = stored.blobs.add()
            blob.shape.dim.extend(value.shape)
            blob.data.extend(value.reshape(-1).tolist())
    return model.SerializeToString()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: next to this file)")
    out = parser.parse_args(argv).out
    sys.path.insert(0, str(ROOT))  # the Caffe schema ships with pymace
    from google.protobuf import text_format

    from mace.config.pin_checksum import pin_checksum
    from mace.frontends.caffe import caffe_pb2

    weights, eps = onnx_weights()
    text = PROTOTXT % {"eps": str(np.float32(eps))}  # shortest form that reads back as the float32
    net = text_format.Parse(text, caffe_pb2.NetParameter())
    out.mkdir(parents=True, exist_ok=True)
    for name, data in (("digits_caffe.prototxt", text.encode()),
                       ("digits_caffe.caffemodel", caffemodel(net, caffe_blobs(weights)))):
        (out / name).write_bytes(data)
        print(f"wrote {out / name} ({len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()})")
        yml = out / "digits_caffe.yml"
        for pinned in pin_checksum(yml, out / name, required=True) if yml.exists() else ():
            print(f"  {yml.name}: {pinned.describe(WHY)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
