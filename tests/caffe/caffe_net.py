"""Write Caffe nets for tests: a deploy .prototxt plus a .caffemodel with seeded random weights.

    net = CaffeNet("tiny")
    net.input("data", [1, 3, 8, 8])
    net.conv("conv1", "data", cin=3, cout=4, kernel=3, pad=1)
    net.layer("ReLU", "relu1", ["conv1"], ["conv1"])          # in place
    prototxt, caffemodel = net.save(tmp_path)

Layers are written as prototxt text (`params="pooling_param { ... }"`), so tests
read like the deploy files users have. Weights go only into the caffemodel, by
layer name, as Caffe stores them; `legacy=True` writes the old 4-D num/channels/
height/width form and `double=True` the double_data field.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from google.protobuf import text_format

from mace.frontends.caffe import caffe_pb2


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def fill_blob(blob, value, legacy=False, double=False):
    value = np.asarray(value, np.float32)
    if legacy:
        dims = (1,) * (4 - value.ndim) + value.shape
        blob.num, blob.channels, blob.height, blob.width = dims
    elif value.ndim:  # Caffe writes a 0-D blob with no shape at all
        blob.shape.dim.extend(value.shape)
    (blob.double_data if double else blob.data).extend(value.reshape(-1).tolist())


class CaffeNet:
    def __init__(self, name: str = "net", seed: int = 0):
        self.net = caffe_pb2.NetParameter(name=name)
        self.rng = np.random.default_rng(seed)
        self.weights = {}   # layer name -> (arrays, legacy, double)

    # ---- structure ------------------------------------------------------------------
    def input(self, name: str, shape, style: str = "layer"):
        """Declare an input: an Input layer, or net-level `input_shape` / `input_dim`."""
        if style == "layer":
            self.layer("Input", f"{name}_input", [], [name],
                       params="input_param { shape { %s } }" % " ".join(f"dim: {d}" for d in shape))
        elif style == "input_shape":
            self.net.input.append(name)
            self.net.input_shape.add().dim.extend(shape)
        elif style == "input_dim":
            self.net.input.append(name)
            self.net.input_dim.extend(shape)
        else:
            raise ValueError(style)
        return name

    def layer(self, layer_type: str, name: str, bottoms, tops=None, params: str = "",
              blobs=(), legacy=False, double=False):
        """Add a layer; `params` is prototxt text, `blobs` its trained weight arrays."""
        layer = self.net.layer.add(name=name, type=layer_type)
        layer.bottom.extend(bottoms)
        layer.top.extend([name] if tops is None else tops)
        if params:
            text_format.Merge(params, layer)
        if len(blobs):
            self.weights[name] = ([np.asarray(b, np.float32) for b in blobs], legacy, double)
        return layer

    def rand(self, *shape, scale: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    # ---- common layers, with weights of the right shapes ----------------------------------
    def conv(self, name, bottom, cin, cout, kernel=3, stride=1, pad=0, group=1, dilation=1,
             bias=True, top=None, deconv=False, params_extra=""):
        params = f"num_output: {cout} kernel_size: {kernel} stride: {stride} pad: {pad} " \
                 f"group: {group} dilation: {dilation} bias_term: {'true' if bias else 'false'} " \
                 f"{params_extra}"
        fan_in = (cin // group) * kernel * kernel
        shape = (cin, cout // group, kernel, kernel) if deconv else (cout, cin // group, kernel, kernel)
        blobs = [self.rand(*shape, scale=np.sqrt(2.0 / fan_in))]
        if bias:
            blobs.append(self.rand(cout, scale=0.1))
        return self.layer("Deconvolution" if deconv else "Convolution", name, [bottom], top and [top],
                          params=f"convolution_param {{ {params} }}", blobs=blobs)

    def fc(self, name, bottom, k, n, bias=True, top=None):
        blobs = [self.rand(n, k, scale=np.sqrt(1.0 / k))] + ([self.rand(n, scale=0.1)] if bias else [])
        return self.layer("InnerProduct", name, [bottom], top and [top],
                          params=f"inner_product_param {{ num_output: {n} "
                                 f"bias_term: {'true' if bias else 'false'} }}", blobs=blobs)

    def relu(self, name, blob):
        return self.layer("ReLU", name, [blob], [blob])

    def pool(self, name, bottom, kernel, stride, pad=0, pool="MAX", top=None):
        return self.layer("Pooling", name, [bottom], top and [top],
                          params=f"pooling_param {{ pool: {pool} kernel_size: {kernel} "
                                 f"stride: {stride} pad: {pad} }}")

    def batch_norm_scale(self, name, blob, channels, factor=None):
        """In-place BatchNorm (running sums with a scale factor) + Scale with bias."""
        factor = float(self.rng.uniform(0.5, 4.0)) if factor is None else factor
        mean = self.rand(channels, scale=0.5)
        var = self.rng.uniform(0.5, 2.0, channels).astype(np.float32)
        self.layer("BatchNorm", f"{name}_bn", [blob], [blob],
                   params="batch_norm_param { use_global_stats: true eps: 1e-5 }",
                   blobs=[mean * factor, var * factor, np.array([factor], np.float32)])
        self.layer("Scale", f"{name}_scale", [blob], [blob], params="scale_param { bias_term: true }",
                   blobs=[self.rng.uniform(0.5, 1.5, channels).astype(np.float32),
                          self.rand(channels, scale=0.1)])

    # ---- files -------------------------------------------------------------------------
    def prototxt(self) -> str:
        return text_format.MessageToString(self.net)

    def caffemodel(self) -> bytes:
        model = caffe_pb2.NetParameter(name=self.net.name)
        for layer in self.net.layer:  # Caffe saves every layer, with or without blobs
            stored = model.layer.add()
            stored.CopyFrom(layer)
            arrays, legacy, double = self.weights.get(layer.name, ((), False, False))
            for value in arrays:
                fill_blob(stored.blobs.add(), value, legacy, double)
        return model.SerializeToString()

    def save(self, directory: Path, stem: str | None = None) -> tuple:
        """Write <stem>.prototxt and <stem>.caffemodel; returns both paths."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        stem = stem or self.net.name
        proto, model = directory / f"{stem}.prototxt", directory / f"{stem}.caffemodel"
        proto.write_text(self.prototxt())
        model.write_bytes(self.caffemodel())
        return proto, model


# ---- weights for a prototxt written by hand ----------------------------------------------
def _conv_weights(layer, shapes, rng):
    from mace.validate.caffe_reference import _conv_geometry
    p = layer.convolution_param
    (kh, kw), _, _, _ = _conv_geometry(p)
    c, o, g = shapes[0][1], p.num_output, p.group
    deconv = layer.type == "Deconvolution"
    shape = (c, o // g, kh, kw) if deconv else (o, c // g, kh, kw)
    fan_in = (c // g) * kh * kw
    blobs = [rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)]
    return blobs + ([rng.standard_normal(o) * 0.1] if p.bias_term else [])


def _layer_weights(layer, shapes, rng) -> list:
    """Seeded trained-looking blobs for `layer`, given its bottom shapes (empty if it has none)."""
    if layer.type in ("Convolution", "Deconvolution"):
        return _conv_weights(layer, shapes, rng)
    c = shapes[0][1] if len(shapes[0]) > 1 else 1
    if layer.type == "InnerProduct":
        p = layer.inner_product_param
        k = int(np.prod(shapes[0][p.axis % len(shapes[0]):]))
        blobs = [rng.standard_normal((p.num_output, k)) * np.sqrt(2.0 / k)]
        return blobs + ([rng.standard_normal(p.num_output) * 0.1] if p.bias_term else [])
    if layer.type == "BatchNorm":
        factor = rng.uniform(0.5, 4.0)
        return [rng.standard_normal(c) * 0.3 * factor, rng.uniform(0.5, 2.0, c) * factor, [factor]]
    if layer.type == "Scale" and len(layer.bottom) == 1:
        assert layer.scale_param.axis == 1 and layer.scale_param.num_axes == 1, "per-channel only"
        return [rng.uniform(0.5, 1.5, c)] + ([rng.standard_normal(c) * 0.1]
                                             if layer.scale_param.bias_term else [])
    if layer.type == "Normalize":   # SSD initialises the scale at 20
        return [rng.uniform(10.0, 30.0, 1 if layer.norm_param.channel_shared else c)]
    if layer.type == "PReLU":
        return [rng.uniform(0.05, 0.3, 1 if layer.prelu_param.channel_shared else c)]
    return []


def net_from_prototxt(text: str, input_shapes: dict, seed: int = 0) -> CaffeNet:
    """A CaffeNet for a prototxt written out in a test, with seeded weights for every layer
    that has any. Blob shapes come from running the numpy reference forward layer by layer."""
    from mace.validate import caffe_reference as ref

    net = CaffeNet(seed=seed)
    text_format.Merge(text, net.net)
    values = {n: np.zeros(s) for n, s in input_shapes.items()}
    for layer in net.net.layer:
        if layer.type == "Input":
            continue
        bottoms = [values[b] for b in layer.bottom]
        blobs = [np.asarray(b, np.float32) for b in _layer_weights(layer, [b.shape for b in bottoms],
                                                                   net.rng)]
        if blobs:
            net.weights[layer.name] = (blobs, False, False)
        tops = ref.FORWARD[layer.type](layer, bottoms, [b.astype(np.float64) for b in blobs])
        values.update(zip(layer.top, tops))
    return net
