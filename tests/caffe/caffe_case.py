"""Convert a test CaffeNet, run it on our engine and compare with the numpy Caffe reference."""
from __future__ import annotations

import numpy as np

from mace.frontends import convert
from mace.config.specs import ModelSpec, TensorSpec
from mace.runtime.engine import Engine
from mace.transform.pipeline import transform
from mace.validate.caffe_reference import run_caffe


def rand(*shape, seed=0, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def convert_net(tmp_path, net, inputs: dict, outputs, fmt: str = "NONE"):
    """Graph (after all passes) of `net` for inputs {name: array} fed in layout `fmt`."""
    prototxt, caffemodel = net.save(tmp_path)
    spec = ModelSpec(prototxt, [TensorSpec(n, tuple(v.shape), fmt) for n, v in inputs.items()],
                     [TensorSpec(o, None, fmt) for o in outputs], caffemodel)
    graph = convert("caffe", spec)
    transform(graph)
    return graph, prototxt, caffemodel


def check(tmp_path, net, inputs: dict, outputs, rtol=1e-4, atol=1e-5) -> dict:
    """Assert our engine matches the reference on `net`; returns our outputs (NCHW)."""
    graph, prototxt, caffemodel = convert_net(tmp_path, net, inputs, outputs)
    got = Engine(graph).run(inputs)
    expected = run_caffe(prototxt, inputs, list(outputs), weight_path=caffemodel)
    for name in outputs:
        assert got[name].shape == expected[name].shape, \
            f"{name}: shape {got[name].shape} != reference {expected[name].shape}"
        np.testing.assert_allclose(got[name], expected[name], rtol=rtol, atol=atol, err_msg=name)
    return got
