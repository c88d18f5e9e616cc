"""Variable input dimensions on the OpenCL runtime: engine.run at other shapes re-infers, plans and
builds the GPU nodes once per shape (tests/runtime/test_variable_shapes.py covers the CPU)."""
import numpy as np
import pytest

from mace.runtime.engine import create_engine
from mace.testing.variable_shape_models import classifier, encoder
from tests.runtime.test_variable_shapes import convert

ort = pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("model, shape, fmt, shapes, atol", [
    (classifier, "-1..4,3,16,16", "NCHW", [(1, 3, 16, 16), (4, 3, 16, 16), (1, 3, 16, 16)], 2e-3),
    (encoder, "1,8..64,32", "NONE", [(1, 8, 32), (1, 64, 32), (1, 8, 32)], 3e-2),
])
def test_gpu_engine_runs_every_shape_in_the_range(tmp_path, model, shape, fmt, shapes, atol):
    result, onnx_path = convert(tmp_path, "g", model(), shape, fmt, runtime="gpu")
    engine = create_engine(result.pb_path, device="gpu")
    assert engine.gpu is not None and any(n.tag == "gpu" for n in engine.nodes if hasattr(n, "tag"))
    session = ort.InferenceSession(str(onnx_path))
    for s in shapes:   # fp16 storage: the GPU threshold's tolerance
        x = np.random.default_rng(0).standard_normal(s).astype(np.float32)
        (ours,) = engine.run({"x": x}).values()
        (ref,) = session.run(None, {"x": x})
        np.testing.assert_allclose(ours, ref, atol=atol, rtol=1e-2)
    assert engine.resize_stats == {"planned": 1, "reused": 1}
