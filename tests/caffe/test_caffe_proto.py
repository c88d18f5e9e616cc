"""Our Caffe schema: the checked-in caffe_pb2.py matches third_party/caffe/caffe.proto, and the
field numbers real Caffe files are written with are the ones we read."""
from pathlib import Path

import pytest

from mace.frontends.caffe import caffe_pb2
from tests.project.test_proto_drift import _descriptor_in, generate_in_child

ROOT = Path(__file__).resolve().parents[2]


def test_generated_module_matches_proto(tmp_path):
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the 'dev' extra) compiles the .proto")
    expected = _descriptor_in(generate_in_child("generate_caffe", tmp_path))
    # The descriptor embedded in the checked-in module (CopyToProto would re-print float
    # defaults such as eps 1e-5 as 9.99999975e-06).
    actual = _descriptor_in(ROOT / "mace" / "frontends" / "caffe" / "caffe_pb2.py")
    assert actual == expected, "caffe_pb2.py is stale: run python tools/gen_proto.py"


# (message, field, number) as BVLC Caffe 1.0 (and the SSD fork for its layers) number them.
WIRE = [
    ("NetParameter", "input", 3), ("NetParameter", "input_dim", 4), ("NetParameter", "input_shape", 8),
    ("NetParameter", "layer", 100), ("NetParameter", "layers", 2),
    ("LayerParameter", "bottom", 3), ("LayerParameter", "top", 4), ("LayerParameter", "blobs", 7),
    ("LayerParameter", "include", 8), ("LayerParameter", "convolution_param", 106),
    ("LayerParameter", "pooling_param", 121), ("LayerParameter", "batch_norm_param", 139),
    ("LayerParameter", "scale_param", 142), ("LayerParameter", "input_param", 143),
    ("LayerParameter", "crop_param", 144), ("LayerParameter", "permute_param", 202),
    ("BlobProto", "data", 5), ("BlobProto", "shape", 7), ("BlobProto", "double_data", 8),
    ("BlobProto", "num", 1), ("BlobProto", "width", 4),
    ("BlobProto", "raw_data_type", 10), ("BlobProto", "raw_data", 12),   # NVIDIA Caffe, OpenCV
    ("ConvolutionParameter", "dilation", 18), ("ConvolutionParameter", "group", 5),
    ("PoolingParameter", "pad", 4), ("PoolingParameter", "round_mode", 13),
    ("EltwiseParameter", "coeff", 2), ("InnerProductParameter", "transpose", 6),
    # SSD fork
    ("LayerParameter", "prior_box_param", 203), ("LayerParameter", "detection_output_param", 204),
    ("LayerParameter", "norm_param", 206), ("PriorBoxParameter", "offset", 13),
    ("PriorBoxParameter", "step", 10), ("DetectionOutputParameter", "keep_top_k", 7),
    ("DetectionOutputParameter", "variance_encoded_in_target", 8),
    ("DetectionOutputParameter", "confidence_threshold", 9),
    ("NonMaximumSuppressionParameter", "eta", 3), ("NormalizeParameter", "channel_shared", 3),
]


@pytest.mark.parametrize("message,field,number", WIRE)
def test_field_numbers(message, field, number):
    assert getattr(caffe_pb2, message).DESCRIPTOR.fields_by_name[field].number == number


def test_defaults_caffe_relies_on():
    assert caffe_pb2.ConvolutionParameter().bias_term is True
    assert caffe_pb2.PoolingParameter().round_mode == caffe_pb2.PoolingParameter.CEIL
    assert caffe_pb2.EltwiseParameter().operation == caffe_pb2.EltwiseParameter.SUM
    assert caffe_pb2.BatchNormParameter().eps == pytest.approx(1e-5)
    assert caffe_pb2.ConcatParameter().axis == 1 and caffe_pb2.CropParameter().axis == 2
    assert caffe_pb2.LRNParameter().local_size == 5 and caffe_pb2.NetState().phase == caffe_pb2.TEST
