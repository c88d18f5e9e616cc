"""MobileNet v2 (1.0, 224) as an ONNX model with seeded random weights, built with onnx.helper.

The architecture of Sandler et al. / torchvision: a 3x3/2 stem conv, 17
inverted-residual blocks (1x1 expand, 3x3 depthwise, 1x1 linear projection,
a residual add where the shape allows), a 1x1 conv to 1280 channels, global
average pooling and a 1000-way classifier (logits). Conv + BatchNormalization +
Clip(0, 6) as a framework exports them. He-scaled conv weights and BN scales near
1 keep activations O(1) through the depth, so latency and error numbers mean
something. Used by benchmarks/bench_cpu.py and the tests.
"""
from __future__ import annotations

import numpy as np

# (expansion t, output channels c, repeats n, first stride s), as in the paper's table 2
BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
          (6, 160, 3, 2), (6, 320, 1, 1))
INPUT_NAME = "input"


class _Builder:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def const(self, kind: str, value) -> str:
        from onnx import numpy_helper

        name = self.name(kind)
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(self, op: str, inputs, **attrs) -> str:
        from onnx import helper

        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int, group: int = 1,
                relu6: bool = True) -> str:
        fan_in = cin // group * k * k
        w = self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)
        y = self.node("Conv", [x, self.const("w", w)], kernel_shape=[k, k], strides=[stride, stride],
                      pads=[k // 2] * 4, group=group)
        bn = [self.const("scale", self.rng.uniform(0.8, 1.2, cout)),
              self.const("bias", self.rng.standard_normal(cout) * 0.05),
              self.const("mean", self.rng.standard_normal(cout) * 0.05),
              self.const("var", self.rng.uniform(0.8, 1.2, cout))]
        y = self.node("BatchNormalization", [y] + bn, epsilon=1e-5)
        if relu6:
            y = self.node("Clip", [y, self.const("min", 0.0), self.const("max", 6.0)])
        return y

    def inverted_residual(self, x: str, cin: int, cout: int, stride: int, t: int) -> str:
        hidden = cin * t
        y = self.conv_bn(x, cin, hidden, 1, 1) if t != 1 else x
        y = self.conv_bn(y, hidden, hidden, 3, stride, group=hidden)
        y = self.conv_bn(y, hidden, cout, 1, 1, relu6=False)
        return self.node("Add", [x, y]) if stride == 1 and cin == cout else y


def mobilenet_v2(seed: int = 0, resolution: int = 224, classes: int = 1000):
    """The model (onnx.ModelProto, opset 13), input 'input' [1, 3, res, res], output logits."""
    from onnx import TensorProto, helper

    b = _Builder(seed)
    x = b.conv_bn(INPUT_NAME, 3, 32, 3, 2)
    cin = 32
    for t, c, n, s in BLOCKS:
        for i in range(n):
            x = b.inverted_residual(x, cin, c, s if i == 0 else 1, t)
            cin = c
    x = b.conv_bn(x, cin, 1280, 1, 1)
    x = b.node("GlobalAveragePool", [x])
    x = b.node("Flatten", [x], axis=1)
    w = b.rng.standard_normal((classes, 1280)) * np.sqrt(1.0 / 1280)
    logits = b.node("Gemm", [x, b.const("fc_w", w), b.const("fc_b", b.rng.standard_normal(classes) * 0.05)],
                    transB=1)
    graph = helper.make_graph(
        b.nodes, "mobilenet_v2",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, [1, 3, resolution, resolution])],
        [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, classes])], initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="mace.testing.mobilenet_v2")
    model.ir_version = 8   # what every onnxruntime release since 1.10 reads
    return model
