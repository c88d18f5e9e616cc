"""Weights are mapped from the .data file, not copied; a kernel that packs a weight at load never
reads the mapped copy again, so the engine lets those pages go (madvise) instead of keeping both
resident (docs/memory.md). Numbers must not change: a page read again faults back in, unchanged."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import helper, numpy_helper

from mace.ir.model_io import load_model
from mace.runtime.engine import Engine
from tests.cli_helpers import cli, save_onnx, write_deployment

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc/self/smaps (Linux only) for the mapping's resident size")


def mapped_rss_kb(path) -> int | None:
    """Resident KB of this process's mappings of `path` (None: not mapped)."""
    total, inside = None, False
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split()[0]
            if "-" in first and not first.endswith(":"):   # a mapping's header line
                inside = line.rstrip().endswith(str(path))
                if inside and total is None:
                    total = 0
            elif inside and first == "Rss:":
                total += int(line.split()[1])
    return total


def test_packed_weights_are_not_kept_resident_twice_and_outputs_are_unchanged(tmp_path):
    import onnxruntime as ort
    rng = np.random.default_rng(0)
    c = 512   # four 1x1 convs of 512x512: 4 MB of weights
    nodes, inits, prev = [], [], "x"
    for i in range(4):
        w = (rng.standard_normal((c, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"] if i < 3 else ["y"]))
        prev = f"r{i}"
    sha = save_onnx(tmp_path / "m.onnx", nodes, [("x", [1, c, 8, 8])], [("y", [1, c, 8, 8])], inits)
    sg = {"input_tensors": "x", "input_shapes": f"1,{c},8,8", "input_data_formats": "NCHW",
          "output_tensors": "y", "output_data_formats": "NCHW"}
    write_deployment(tmp_path / "d.yml", {"m": {"platform": "onnx", "model_file_path": "m.onnx",
                                                "model_sha256_checksum": sha, "runtime": "cpu", "subgraphs": [sg]}},
                     library="pages")
    r = cli("convert", "--config=d.yml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pb = next((tmp_path / "builds").rglob("*.pb"))
    data = pb.with_suffix(".data").resolve()
    graph = load_model(pb, data)
    for value in graph.consts.values():
        np.asarray(value).sum()   # every weight page resident, as a kernel reading it would leave it
    before = mapped_rss_kb(data)
    assert before is not None and before >= 3 * 1024, f"the weights file is not mapped resident: {before} KB"
    engine = Engine(graph)
    after = mapped_rss_kb(data)
    x = rng.standard_normal((1, c, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    first, second = engine.run({"x": x})["y"].copy(), engine.run({"x": x})["y"]
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(first, second)
    assert after is not None and after < before / 4, f"mapped weights still resident: {before} -> {after} KB"
