"""A node whose preferred kernel declines it says why: in `run --vlog_level 2` (the loaded
engine's reasons) and in the offline report `convert` writes (the same check, asked of the
graph). Issue 32: before, a node fell back to the reference kernel silently."""
import numpy as np
import pytest

from mace.ops.fast import _jit
from tests.cli_helpers import cli, save_onnx, sha256, workdir, write_deployment

LINE = "norm (LayerNorm) runs cpu: cpu:fast: axis 1 is not the last"


def layer_norm_model(path) -> str:
    """LayerNormalization over axes 1.. of [2, 5, 8] (the fast kernel normalizes the last axis
    only), then Relu (taken by the fast kernel)."""
    from onnx import helper, numpy_helper

    g = numpy_helper.from_array(np.linspace(0.5, 1.5, 40, dtype=np.float32).reshape(5, 8), "g")
    b = numpy_helper.from_array(np.zeros((5, 8), np.float32), "b")
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["ln"], name="norm", axis=1),
             helper.make_node("Relu", ["ln"], ["y"], name="relu")]
    return save_onnx(path, nodes, [("x", [2, 5, 8])], [("y", [2, 5, 8])], [g, b], opset=17)


def test_a_fallback_shows_its_reason_in_vlog_2_and_the_report(tmp_path):
    if _jit.act_loops() is None:
        pytest.skip("without numba the fast LayerNorm declines for that reason first")
    work = workdir(tmp_path)
    model = work / "ln.onnx"
    layer_norm_model(model)
    entry = {"platform": "onnx", "model_file_path": str(model), "model_sha256_checksum": sha256(model),
             "subgraphs": [{"input_tensors": "x", "input_shapes": "2,5,8", "input_data_formats": "NONE",
                            "output_tensors": "y", "output_shapes": "2,5,8", "output_data_formats": "NONE"}],
             "runtime": "cpu"}
    config = write_deployment(work / "ln.yml", {"ln": entry}, library="ln")
    r = cli("convert", f"--config={config}", cwd=work)
    assert r.returncode == 0, r.stderr
    report = (work / "builds" / "ln" / "model" / "ln_report.txt").read_text()
    assert "Kernel fallbacks: 1 op(s) declined by their preferred kernel" in report
    assert f"  {LINE}\n" in report
    r = cli("run", f"--config={config}", "--vlog_level", "2", cwd=work)
    assert r.returncode == 0, r.stderr
    assert f"kernel fallback: {LINE}" in r.stdout, r.stdout
    quiet = cli("run", f"--config={config}", cwd=work)
    assert quiet.returncode == 0 and "kernel fallback" not in quiet.stdout   # vlog 2 only
