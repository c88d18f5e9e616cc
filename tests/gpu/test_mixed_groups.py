"""Models placed on both CPU and GPU (docs/placement.md), run on the OpenCL device (PoCL here):
`placement:` rules, named subgraphs and `placement: auto`, each validated against onnxruntime
at the GPU threshold (cosine 0.995, the least precise runtime involved), plus the benchmark's
per-group and per-transfer times. The model is tests/transform/test_placement.py's."""
import json

import pytest

from mace.config import load_deployment
from mace.proto import pb
from mace.report.benchmark_model import benchmark_model
from mace.report.session import open_model
from mace.run import run_model
from mace.ops.gpu.support import gpu_reason
from tests.cli_helpers import cli
from tests.transform.test_placement import convert, dict_subgraphs, placement_of, write_config

GPU_TIMEOUT = 600


def test_rules_split_the_model_and_run_validates(tmp_path):
    """conv1 and conv2..pool on the GPU; LRN and the head on the CPU, though the GPU could run
    the head: the engine keeps the converted placement (5 groups, 4 transfers)."""
    path = write_config(tmp_path, {"runtime": "cpu", "placement": [
        {"ops": "conv1..relu1", "runtime": "gpu"}, {"ops": ["conv2", "pool"], "runtime": "gpu"}]})
    assert cli("convert", f"--config={path}", cwd=tmp_path, timeout=GPU_TIMEOUT).returncode == 0
    report = tmp_path / "run.json"
    done = cli("run", f"--config={path}", "--validate", f"--json={report}", cwd=tmp_path, timeout=GPU_TIMEOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert "placement: 3 of 8 ops on GPU" in out
    assert "placement groups (5): #0 cpu op 0, #1 gpu op 1, #2 cpu op 2, #3 gpu ops 3-4, #4 cpu ops 5-7" in out
    assert "transfers (4): " in out and "r1 gpu->cpu (#1->#2, 2048 B)" in out
    result = json.loads(report.read_text())["models"][0]
    assert result["runtime"] == "cpu+gpu"
    [metric] = result["validation"]
    assert metric["threshold"] == 0.995 and metric["passed"] and metric["cosine"] >= 0.995


@pytest.mark.parametrize("data_type", ["fp16_fp32", "fp32_fp32"])
def test_named_subgraphs_gpu_body_cpu_head(tmp_path, data_type):
    config, graph = convert(tmp_path, write_config(tmp_path, {}, dict_subgraphs(data_type=data_type)))
    model = config.models["net"]
    session = open_model(config, model, tmp_path / "builds")
    on_gpu = {op.name for op in session.engine.graph.net.op if session.engine.gpu.runs(op)}
    assert on_gpu == {op.name for op in graph.net.op if op.device_type == pb.GPU}
    assert session.engine.gpu.data_type == data_type
    result = run_model(config, model, build_dir=tmp_path / "builds", validate=True)
    [metric] = result.metrics
    assert metric.threshold == 0.995 and metric.passed, metric


def test_auto_runs_each_op_where_its_kernel_is(tmp_path):
    path = write_config(tmp_path, {"runtime": "cpu+gpu", "data_type": "fp32_fp32", "placement": "auto"})
    config, graph = convert(tmp_path, path)
    assert placement_of(graph)["lrn"] == "cpu"
    session = open_model(config, config.models["net"], tmp_path / "builds")
    for op in session.engine.graph.net.op:
        assert session.engine.gpu.runs(op) == (op.device_type == pb.GPU), op.name
        if op.device_type == pb.GPU:
            assert gpu_reason(op, graph) is None
    [metric] = run_model(config, config.models["net"], build_dir=tmp_path / "builds", validate=True).metrics
    assert metric.passed and metric.threshold == 0.995


def test_benchmark_times_each_group_and_transfer(tmp_path):
    config, graph = convert(tmp_path, write_config(tmp_path, {}, dict_subgraphs(data_type="fp32_fp32")))
    r = benchmark_model(config, config.models["net"], tmp_path / "builds", rounds=2, save=False)
    assert [g.runtime for g in r.groups] == ["gpu", "cpu", "gpu", "cpu"]
    moves = {(t.tensor, t.src, t.dst) for t in r.transfers}
    assert moves == {("x", "cpu", "gpu"), ("r1", "gpu", "cpu"), ("n1", "cpu", "gpu"), ("r2", "gpu", "cpu")}
    assert all(t.avg > 0 for t in r.transfers) and all(g.avg > 0 for g in r.groups)
    total = sum(o.avg for o in r.run_order)
    assert sum(g.avg for g in r.groups) + sum(t.avg for t in r.transfers) == pytest.approx(total, rel=1e-6)
    assert load_deployment(config.path).models["net"].graph.runtime == "cpu+gpu"
