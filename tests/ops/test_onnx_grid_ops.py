"""Spatial transformer ops against onnxruntime: AffineGrid then GridSample (every mode, padding
and align_corners), as a spatial transformer network or an optical-flow warp exports them; and
RoiAlign as two-stage detectors use it."""
import numpy as np
import pytest
from onnx import helper

from mace import onnx_backend
from tests.ops.onnx_case import check, run_ort
from tests.ops.onnx_graph import graph_model

F32, I64 = np.float32, np.int64


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_spatial_transformer_warp(mode, padding, align):
    rng = np.random.default_rng(5)
    image = rng.uniform(0, 1, (2, 3, 9, 11)).astype(F32)
    # rotate, zoom out past the borders and shift: samples land outside, on edges and at halves
    angle = np.array([0.3, -0.7])
    theta = np.stack([[[1.3 * np.cos(a), -np.sin(a), 0.2], [np.sin(a), 1.3 * np.cos(a), -0.35]]
                      for a in angle]).astype(F32)
    nodes = [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align),
             helper.make_node("GridSample", ["image", "grid"], ["y"], mode=mode, padding_mode=padding,
                              align_corners=align)]
    model = graph_model(nodes, {"image": image, "theta": theta}, {"y": F32},
                        {"size": np.array([2, 3, 7, 8], I64)}, opset=20)
    got = onnx_backend.run(model, {"image": image, "theta": theta})[0]
    want = run_ort(model, {"image": image, "theta": theta})[0]
    assert got.shape == want.shape == (2, 3, 7, 8)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_grid_sample_opset_16_names_and_a_flow_grid():
    rng = np.random.default_rng(6)
    image = rng.uniform(-1, 1, (1, 2, 6, 6)).astype(F32)
    grid = rng.uniform(-1.2, 1.2, (1, 5, 4, 2)).astype(F32)
    check("GridSample", {"x": image, "grid": grid}, attrs={"mode": "bilinear", "padding_mode": "border"},
          opset=16)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("coords,opset", [("half_pixel", 16), ("output_half_pixel", 16), (None, 10)])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_like_a_two_stage_detector(mode, coords, opset, ratio):
    """Boxes of every size, one crossing the border, on a stride-8 feature map of two images."""
    rng = np.random.default_rng(7)
    fmap = rng.uniform(-1, 1, (2, 4, 12, 10)).astype(F32)
    rois = np.array([[0, 0, 40, 40], [10.5, 20.2, 70.9, 95.1], [60, 5, 90, 30], [3, 3, 6, 7],
                     [-12, 80, 30, 120]], F32)
    batch = np.array([0, 1, 1, 0, 1], I64)
    attrs = {"mode": mode, "output_height": 3, "output_width": 4, "sampling_ratio": ratio,
             "spatial_scale": 0.125}
    if coords:
        attrs["coordinate_transformation_mode"] = coords
    check("RoiAlign", {"x": fmap, "rois": rois, "batch": batch}, attrs=attrs, opset=opset, rtol=1e-4, atol=1e-5)
