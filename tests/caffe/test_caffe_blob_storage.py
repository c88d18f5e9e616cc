"""Every BlobProto storage real .caffemodel files use (issue 34 item 4): `data`, `double_data`,
and `raw_data` with raw_data_type FLOAT16 (OpenCV's shrinkCaffeModel, NVIDIA's Caffe) or
FLOAT / DOUBLE; a blob whose values are in none of them is an error naming what it holds."""
from __future__ import annotations

import numpy as np
import pytest

from mace.errors import ModelError
from mace.frontends.caffe import caffe_pb2
from tests.caffe.caffe_case import check, convert_net
from tests.caffe.caffe_net import CaffeNet

RAW = {"FLOAT16": "<f2", "FLOAT": "<f4", "DOUBLE": "<f8"}


def _net():
    net = CaffeNet("shrunk", seed=3)
    net.input("data", (1, 3, 12, 12))
    net.conv("conv1", "data", 3, 8, kernel=3, pad=1)
    net.relu("relu1", "conv1")
    net.batch_norm_scale("bn1", "conv1", 8)
    net.pool("pool1", "conv1", 2, 2)
    net.fc("fc", "pool1", 8 * 6 * 6, 5)
    return net


def _to_raw(net, raw_type):
    """What shrinkCaffeModel does to every blob: data -> raw_data of `raw_type`, data cleared."""
    caffemodel = net.caffemodel

    def shrunk():
        model = caffe_pb2.NetParameter()
        model.ParseFromString(caffemodel())
        for layer in model.layer:
            for blob in layer.blobs:
                values = np.asarray(blob.data, np.float32)
                blob.ClearField("data")
                blob.raw_data_type = caffe_pb2.Type.Value(raw_type)
                blob.raw_data = values.astype(RAW[raw_type]).tobytes()
        return model.SerializeToString()
    net.caffemodel = shrunk
    return net


@pytest.mark.parametrize("raw_type", sorted(RAW))
def test_raw_data_blobs_match_the_reference(tmp_path, raw_type):
    """The converted net against the float64 numpy Caffe reading the same file; FLOAT16
    weights also against the float32 net (their rounding is all that differs)."""
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 12, 12)).astype(np.float32)
    got = check(tmp_path / raw_type, _to_raw(_net(), raw_type), {"data": x}, ["fc"])["fc"]
    full = check(tmp_path / "f32", _net(), {"data": x}, ["fc"])["fc"]
    if raw_type == "FLOAT16":
        assert not np.array_equal(got, full)   # the weights were rounded to half precision
        np.testing.assert_allclose(got, full, rtol=0, atol=5e-3 * np.abs(full).max())
    else:
        np.testing.assert_allclose(got, full, rtol=1e-6, atol=1e-6)


def test_double_data_blobs(tmp_path):
    net = _net()
    net.weights = {k: (a, legacy, True) for k, (a, legacy, _) in net.weights.items()}
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 12, 12)).astype(np.float32)
    check(tmp_path, net, {"data": x}, ["fc"])


def _broken(net, edit):
    caffemodel = net.caffemodel

    def edited():
        model = caffe_pb2.NetParameter()
        model.ParseFromString(caffemodel())
        edit(next(layer for layer in model.layer if layer.name == "conv1").blobs[0])
        return model.SerializeToString()
    net.caffemodel = edited
    return net


@pytest.mark.parametrize("edit,message", [
    (lambda b: (b.ClearField("data"), b.diff.extend([0.0] * 216)), "holds only diff"),
    (lambda b: (b.ClearField("data"), setattr(b, "raw_data_type", caffe_pb2.INT),
                setattr(b, "raw_data", b"\0" * 864)), "raw_data_type INT is not read"),
    (lambda b: (b.ClearField("data"), setattr(b, "raw_data_type", caffe_pb2.FLOAT16),
                setattr(b, "raw_data", b"\0" * 10)), "raw_data holds 10 bytes, expected 432"),
    (lambda b: b.ClearField("data"), "holds no values"),
])
def test_unread_storage_is_named(tmp_path, edit, message):
    x = np.zeros((1, 3, 12, 12), np.float32)
    with pytest.raises(ModelError, match=message) as e:
        convert_net(tmp_path, _broken(_net(), edit), {"data": x}, ["fc"])
    assert "conv1" in str(e.value)


def test_fields_the_schema_lacks_are_named(tmp_path):
    """Values in a field this schema does not know (field 20 here) are named, not read as 0."""
    def unknown(blob):
        blob.ClearField("data")
        blob.MergeFromString(bytes([0xA2, 0x01, 4]) + b"\0\0\0\0")   # field 20, 4 bytes
    x = np.zeros((1, 3, 12, 12), np.float32)
    with pytest.raises(ModelError, match="field\\(s\\) 20 that this Caffe schema does not know"):
        convert_net(tmp_path, _broken(_net(), unknown), {"data": x}, ["fc"])


def test_opencv_shrink_caffe_model(tmp_path):
    """A file written by OpenCV's own cv2.dnn.shrinkCaffeModel (Convolution and InnerProduct
    blobs as FLOAT16 raw_data, the rest left as data): converted, and compared with OpenCV's
    run of the same file and with the numpy Caffe reference."""
    cv2 = pytest.importorskip("cv2", reason="opencv-python-headless (the test extra)")
    from mace.runtime.engine import Engine
    from mace.validate.caffe_reference import run_caffe

    net = _net()
    proto, model = net.save(tmp_path)
    shrunk = tmp_path / "shrunk.caffemodel"
    cv2.dnn.shrinkCaffeModel(str(model), str(shrunk))
    stored = caffe_pb2.NetParameter()
    stored.ParseFromString(shrunk.read_bytes())
    conv = next(layer for layer in stored.layer if layer.name == "conv1")
    assert conv.blobs[0].raw_data_type == caffe_pb2.FLOAT16 and not len(conv.blobs[0].data)
    net.caffemodel = shrunk.read_bytes
    x = np.random.default_rng(4).uniform(-1, 1, (1, 3, 12, 12)).astype(np.float32)
    graph, _, _ = convert_net(tmp_path / "ours", net, {"data": x}, ["fc"])
    got = Engine(graph).run({"data": x})["fc"]
    opencv = cv2.dnn.readNetFromCaffe(str(proto), str(shrunk))
    opencv.setInput(x)
    want = opencv.forward("fc")
    reference = run_caffe(proto, {"data": x}, ["fc"], weight_path=shrunk)["fc"]
    np.testing.assert_allclose(got, reference, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-4, atol=1e-4)
