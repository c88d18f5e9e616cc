"""Op placement (docs/placement.md): the .yml keys, resolving them per op, auto placement,
groups and transfers, and a mixed dsp/cpu model validated against onnxruntime.

The GPU cases (a mixed cpu/gpu model run on PoCL) are in tests/gpu/test_mixed_groups.py; here
placement decisions for the GPU are checked without running it (they only read the kernel
registry). The model: Conv-Relu-LRN-Conv-Relu-MaxPool-Flatten-Gemm-Softmax; LRN has neither a
GPU nor a quantized kernel, so it is the op that cannot go to gpu or dsp.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from mace.config import load_deployment
from mace.config.schema import parse_placement
from mace.convert import convert_deployment
from mace.errors import ConfigError, ModelError
from mace.ir.model_io import load_model
from mace.proto import pb
from mace.run import run_model
from mace.runtime.engine import Engine
from mace.ops.gpu.support import gpu_reason
from mace.transform.placement.groups import groups, transfers
from mace.transform.passes.quantize import quantize_plan
from tests.cli_helpers import cli, save_onnx

OP_NAMES = ["conv1", "relu1", "lrn", "conv2", "relu2", "pool", "flat", "fc", "softmax"]


def mixed_model(path: Path) -> str:
    """The test model (NCHW x [1,3,8,8] -> y [1,10]); returns its sha256."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
    node = helper.make_node
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             node("Relu", ["c1"], ["r1"], name="relu1"),
             node("LRN", ["r1"], ["n1"], name="lrn", size=3),
             node("Conv", ["n1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             node("Relu", ["c2"], ["r2"], name="relu2"),
             node("MaxPool", ["r2"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p"], ["f"], name="flat"),
             node("Gemm", ["f", "wf", "bf"], ["logits"], name="fc", transB=1),
             node("Softmax", ["logits"], ["y"], name="softmax")]
    inits = [w("w1", 8, 3, 3, 3), w("b1", 8), w("w2", 8, 8, 3, 3), w("b2", 8), w("wf", 10, 128), w("bf", 10)]
    return save_onnx(path, nodes, [("x", [1, 3, 8, 8])], [("y", [1, 10])], inits)


IN = {"input_tensors": "x", "input_shapes": "1,3,8,8", "input_data_formats": "NCHW"}
OUT = {"output_tensors": "y", "output_shapes": "1,10", "output_data_formats": "NONE"}


def write_config(tmp: Path, model_keys: dict, subgraphs=None, library: str = "mixed") -> Path:
    """A deployment file for the test model in `tmp` (absolute paths); returns its path."""
    onnx_path = tmp / "mixed.onnx"
    checksum = mixed_model(onnx_path) if not onnx_path.exists() else None
    from tests.cli_helpers import sha256
    model = {"platform": "onnx", "model_file_path": str(onnx_path),
             "model_sha256_checksum": checksum or sha256(onnx_path),
             "subgraphs": subgraphs or [{**IN, **OUT}], **model_keys}
    path = tmp / f"{library}.yml"
    path.write_text(yaml.safe_dump({"library_name": library, "target_abis": ["host"],
                                    "models": {"net": model}}, sort_keys=False))
    return path


def calibration(tmp: Path) -> str:
    folder = tmp / "calib"
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(1)
    for i in range(6):
        np.save(folder / f"s{i}.npy", rng.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32))
    return str(folder)


def convert(tmp: Path, path: Path):
    """(config, converted graph) of model 'net'."""
    config = load_deployment(path)
    result = convert_deployment(config, build_dir=tmp / "builds")[0]
    return config, load_model(result.pb_path, result.data_path)


def placement_of(graph) -> dict:
    """framework op name -> runtime of the IR op it became (or was fused into)."""
    names = {pb.CPU: "cpu", pb.GPU: "gpu", pb.HEXAGON: "dsp"}
    return {fw: names[op.device_type] for op in graph.net.op for fw in op.framework_op}


# ---- the keys -----------------------------------------------------------------------
def test_placement_key_forms():
    rules = parse_placement([{"ops": "conv1..pool", "runtime": "gpu"},
                             {"ops": ["softmax", 3, "2:5", ":4", "-2:"], "runtime": "CPU"},
                             {"ops": "..lrn", "runtime": "hexagon"}])
    assert rules[0] == {"ops": [("range", "conv1", "pool")], "runtime": "gpu"}
    assert rules[1]["ops"] == [("name", "softmax"), ("index", 3), ("slice", 2, 5), ("slice", None, 4),
                               ("slice", -2, None)]
    assert rules[2] == {"ops": [("range", None, "lrn")], "runtime": "dsp"}
    assert parse_placement("Auto") == "auto"


@pytest.mark.parametrize("value, message", [
    ([{"ops": "conv1", "runtime": "npu"}], "entry 0: expected one of cpu, gpu, dsp"),
    ([{"ops": "conv1"}], "entry 0: expected exactly the keys ops and runtime"),
    ([{"ops": "..", "runtime": "gpu"}], "name at least one end"),
    ([{"ops": [], "runtime": "gpu"}], "ops: empty list"),
    ("gpu", "expected 'auto' or a list"),
])
def test_placement_key_errors(value, message):
    with pytest.raises(ValueError, match=message):
        parse_placement(value)


def test_slices_stay_strings_in_yaml(tmp_path):
    """YAML 1.1 reads `3:5` as the base-60 integer 185; the loader keeps it a slice."""
    path = write_config(tmp_path, {"runtime": "cpu", "placement": [{"ops": "PLACEHOLDER", "runtime": "gpu"}]})
    path.write_text(path.read_text().replace("PLACEHOLDER", "3:5").replace("'3:5'", "3:5"))
    assert "ops: 3:5" in path.read_text()
    sg = load_deployment(path).models["net"].subgraphs[0]
    assert sg.placement[0]["ops"] == [("slice", 3, 5)]


def test_config_error_names_the_key(tmp_path):
    path = write_config(tmp_path, {"placement": [{"ops": "conv1", "runtime": "tpu"}]})
    with pytest.raises(ConfigError, match=r"models\.net\.placement: entry 0: expected one of cpu, gpu, dsp"):
        load_deployment(path)


def dict_subgraphs(body_runtime="gpu", head_runtime="cpu", **body_extra):
    return {"head": {"input_tensors": "r2", "input_shapes": "1,8,8,8", **OUT, "runtime": head_runtime,
                     "order": 1},
            "body": {**IN, "output_tensors": "r2", "output_shapes": "1,8,8,8", "runtime": body_runtime,
                     "order": 0, **body_extra}}


def test_named_subgraphs_join_into_one_graph(tmp_path):
    model = load_deployment(write_config(tmp_path, {}, dict_subgraphs(data_type="fp32_fp32"))).models["net"]
    assert [sg.name for sg in model.subgraphs] == ["body", "head"]    # by order
    whole = model.graph
    assert whole.input_tensors == ["x"] and whole.output_tensors == ["y"]
    assert whole.input_shapes == [[1, 3, 8, 8]] and whole.output_shapes == [[1, 10]]
    assert whole.runtime == "cpu+gpu" and whole.data_type == "fp32_fp32"
    assert whole.threshold() == 0.995            # the least precise runtime: GPU
    model = load_deployment(write_config(tmp_path, {}, dict_subgraphs("dsp", "cpu"))).models["net"]
    assert model.graph.runtime == "cpu" and model.graph.quantize == 1
    assert model.graph.threshold() == 0.98       # quantized dsp ops: QUANTIZE


def test_one_subgraph_with_placement_widens_its_runtime(tmp_path):
    path = write_config(tmp_path, {"runtime": "cpu", "placement": [{"ops": "conv1", "runtime": "gpu"}]})
    model = load_deployment(path).models["net"]
    assert model.subgraphs[0].runtime == "cpu" and model.graph.runtime == "cpu+gpu"
    assert model.graph.threshold() == 0.995
    plain = load_deployment(write_config(tmp_path, {"runtime": "cpu"}, library="plain")).models["net"]
    assert plain.graph is plain.subgraphs[0]


def test_subgraph_order_conflict_is_an_error(tmp_path):
    sgs = dict_subgraphs()
    sgs["head"]["order"], sgs["body"]["order"] = 0, 1
    with pytest.raises(ConfigError, match=r"models\.net\.subgraphs\.head\.input_tensors: 'r2' comes from "
                                          r"subgraph 'body', which runs later"):
        load_deployment(write_config(tmp_path, {}, sgs))


# ---- resolving per op ------------------------------------------------------------------
def test_rules_place_ops_and_later_rules_win(tmp_path):
    path = write_config(tmp_path, {"runtime": "cpu", "placement": [
        {"ops": "conv1..pool", "runtime": "gpu"},      # a range by framework op names
        {"ops": ["lrn"], "runtime": "cpu"},            # overrides the range for one op
        {"ops": "-1:", "runtime": "gpu"}]})            # a slice of the converted op list: the last op
    config, graph = convert(tmp_path, path)
    where = placement_of(graph)
    assert where == {"conv1": "gpu", "relu1": "gpu", "lrn": "cpu", "conv2": "gpu", "relu2": "gpu",
                     "pool": "gpu", "flat": "cpu", "fc": "cpu", "softmax": "gpu"}
    assert "device_type: GPU" in (tmp_path / "builds/mixed/model/net.pb_txt").read_text()
    assert [(g.runtime, g.first, g.last) for g in groups(graph)] == \
        [("cpu", 0, 0), ("gpu", 1, 1), ("cpu", 2, 2), ("gpu", 3, 4), ("cpu", 5, 6), ("gpu", 7, 7)]
    report = (tmp_path / "builds/mixed/model/net_report.txt").read_text()
    assert "Placement: 6 groups on cpu, gpu, 6 transfers" in report
    from mace.report.html import visualize_model
    files = visualize_model(config, config.models["net"], tmp_path / "builds", dot=True)
    gpu_ops = sum(op.device_type == pb.GPU for op in graph.net.op)
    assert files.dot_path.read_text().count('fillcolor="#fdecd6"') == gpu_ops == 4   # GPU ops orange
    assert "Placement: 6 groups on cpu, gpu" in files.html_path.read_text()


def test_rule_naming_an_op_its_runtime_cannot_run_is_an_error(tmp_path):
    path = write_config(tmp_path, {"runtime": "cpu", "placement": [{"ops": "conv1..conv2", "runtime": "gpu"}]})
    with pytest.raises(ModelError, match=r"models\.net\.placement\[0\]: gpu cannot run op 'lrn' "
                                         r"\(LocalResponseNorm\): no GPU kernel"):
        convert(tmp_path, path)


def test_rule_naming_no_op_is_an_error(tmp_path):
    path = write_config(tmp_path, {"placement": [{"ops": "conv9", "runtime": "gpu"}]})
    with pytest.raises(ModelError, match=r"models\.net\.placement\[0\]: no op is named 'conv9'"):
        convert(tmp_path, path)
    path = write_config(tmp_path, {"placement": [{"ops": "40:50", "runtime": "gpu"}]})
    with pytest.raises(ModelError, match="slice '40:50' selects no op"):
        convert(tmp_path, path)


def test_named_subgraphs_split_at_their_tensors(tmp_path):
    """body (gpu: LRN falls back to the CPU, as cpu+gpu does) covers x..r2; head (cpu) r2..y.
    The tensor between them keeps its name."""
    _, graph = convert(tmp_path, write_config(tmp_path, {}, dict_subgraphs(data_type="fp32_fp32")))
    where = placement_of(graph)
    assert [where[n] for n in OP_NAMES] == ["gpu", "gpu", "cpu", "gpu", "gpu", "cpu", "cpu", "cpu", "cpu"]
    assert graph.output_names == ["y"]
    crossing = [(m.tensor, m.src, m.dst) for m in transfers(graph)]
    assert ("r2", "gpu", "cpu") in crossing and ("x", "cpu", "gpu") in crossing


# ---- auto --------------------------------------------------------------------------------
def test_auto_never_places_an_op_where_it_has_no_kernel(tmp_path):
    path = write_config(tmp_path, {"runtime": "cpu+gpu", "placement": "auto"})
    _, graph = convert(tmp_path, path)
    for op in graph.net.op:
        if op.device_type == pb.GPU:
            assert gpu_reason(op, graph) is None, op.name
    assert placement_of(graph)["lrn"] == "cpu" and placement_of(graph)["conv2"] == "gpu"
    path = write_config(tmp_path, {"runtime": "dsp", "placement": "auto",
                                   "quantize_calibration_data": calibration(tmp_path)}, library="autodsp")
    _, graph = convert(tmp_path, path)
    dsp = [op for op in graph.net.op if op.device_type == pb.HEXAGON]
    assert dsp and placement_of(graph)["lrn"] == "cpu"
    assert all(op.quantize_info for op in dsp)                     # every dsp op was quantized
    float_ops = [op for op in graph.net.op if op.device_type == pb.CPU and op.type not in ("Quantize", "Dequantize")]
    assert float_ops and not any(op.quantize_info for op in float_ops)


def test_auto_without_a_runtime_for_an_op_is_an_error(tmp_path):
    path = write_config(tmp_path, {"runtime": "gpu", "placement": "auto", "placement_preference": ["gpu"]})
    with pytest.raises(ModelError, match=r"models\.net\.placement_preference \(auto\): no runtime of "
                                         r"placement_preference \['gpu'\] can run 1 op\(s\):\n  op 'lrn' "
                                         r"\(LocalResponseNorm\): gpu: no GPU kernel"):
        convert(tmp_path, path)


def _chain(heavy: bool):
    """x -> Relu -> LRN (cpu only) -> mid -> LRN (cpu only) -> y; mid is a Relu or a wide conv."""
    from tests.gpu.gpu_case import chain_graph
    rng = np.random.default_rng(2)
    c = 64
    mid = ("Conv2D", ["a", "w", "b"], ["m"], {"strides": [1, 1], "padding": "SAME", "dilations": [1, 1]}) \
        if heavy else ("Activation", ["a"], ["m"], {"activation": "RELU"})
    steps = [("Activation", ["x"], ["r"], {"activation": "RELU"}),
             ("LocalResponseNorm", ["r"], ["a"], {"depth_radius": 1, "bias": 1.0, "alpha": 1e-4, "beta": 0.75}),
             mid,
             ("LocalResponseNorm", ["m"], ["y"], {"depth_radius": 1, "bias": 1.0, "alpha": 1e-4, "beta": 0.75})]
    consts = {"w": rng.standard_normal((c, c, 3, 3)).astype(np.float32), "b": np.zeros(c, np.float32)}
    return chain_graph(steps, {"x": np.zeros((1, 16, 16, c), np.float32)}, consts if heavy else None)


@pytest.mark.parametrize("heavy, mid", [(False, "cpu"), (True, "gpu")])
def test_auto_weighs_transfers_against_work(heavy, mid):
    """Between two CPU-only ops, a light op stays on the CPU (two transfers cost more than
    running it there); a heavy convolution still goes to the GPU. The first Relu reads the
    model input on the host and feeds a CPU op: it stays too."""
    from mace.transform.placement.plan import PlacementPlan, Part, place_plan
    graph = _chain(heavy)
    plan = PlacementPlan("test", "test", [Part("g", "g", "cpu+gpu", ["x"], ["y"], "auto", ["gpu", "cpu"])], [])
    place_plan(graph, plan)
    got = [pb.DeviceType.Name(op.device_type).lower() for op in graph.net.op]
    assert got == ["cpu", "cpu", mid, "cpu"]


# ---- dsp / cpu ---------------------------------------------------------------------------
def test_mixed_dsp_cpu_model_validates_at_the_quantized_threshold(tmp_path):
    """The body on the DSP (int8 kernels), LRN and the classifier head float on the CPU; the
    engine inserts no more than the Quantize/Dequantize at each group edge."""
    path = write_config(tmp_path, {"runtime": "dsp", "quantize_calibration_data": calibration(tmp_path),
                                   "placement": [{"ops": ["lrn"], "runtime": "cpu"},
                                                 {"ops": "flat..", "runtime": "cpu"}]})
    config, graph = convert(tmp_path, path)
    where = placement_of(graph)
    assert [where[n] for n in OP_NAMES] == ["dsp", "dsp", "cpu", "dsp", "dsp", "dsp", "cpu", "cpu", "cpu"]
    assert set(quantize_plan(graph).values()) != {None}
    edges = [(m.src, m.dst) for m in transfers(graph)]
    assert edges == [("cpu", "dsp"), ("dsp", "cpu"), ("cpu", "dsp"), ("dsp", "cpu")]
    engine = Engine(graph)
    tags = {n.op.name: n.tag for n in engine.nodes}
    assert {tags[op.name] for op in graph.net.op if op.device_type == pb.HEXAGON} <= {"int8", "int8:fast"}
    assert tags["lrn"] not in ("int8", "int8:fast") and tags["fc"] not in ("int8", "int8:fast")
    result = run_model(config, config.models["net"], build_dir=tmp_path / "builds", validate=True)
    [metric] = result.metrics
    assert metric.threshold == 0.98 and metric.passed and metric.cosine > 0.98
    assert any(n.startswith("placement groups (5): #0 cpu op 0, #1 dsp") for n in result.notes)


def test_benchmark_times_groups_and_transfers(tmp_path):
    from mace.report.benchmark_model import benchmark_model
    path = write_config(tmp_path, {"runtime": "dsp", "quantize_calibration_data": calibration(tmp_path),
                                   "placement": [{"ops": "lrn..", "runtime": "cpu"}]})
    config, graph = convert(tmp_path, path)
    r = benchmark_model(config, config.models["net"], tmp_path / "builds", rounds=2, save=False)
    assert [(g.runtime, g.first, g.last) for g in r.groups] == [(g.runtime, g.first, g.last) for g in groups(graph)]
    assert len(r.transfers) == 2 and all(t.avg > 0 for t in r.transfers)   # the Quantize / Dequantize ops
    total = sum(o.avg for o in r.run_order)
    assert sum(g.avg for g in r.groups) + sum(t.avg for t in r.transfers) == pytest.approx(total, rel=1e-6)
    # the dsp group's ops (and only they) get the simulator's estimated cycles
    from mace.runtime.dsp.cost_model import CostModel
    dsp = [(i, op) for i, op in enumerate(graph.net.op) if op.device_type == pb.HEXAGON]
    assert [c.name for c in r.estimated] == [op.name for _, op in dsp]
    assert [c.cycles for c in r.estimated] == [CostModel().estimate(i, op, graph).cycles for i, op in dsp]


def test_cli_refuses_quantized_groups_beside_gpu(tmp_path):
    path = write_config(tmp_path, {"runtime": "dsp", "placement": [{"ops": "flat..", "runtime": "gpu"}]})
    done = cli("convert", f"--config={path}", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "models.net: placement on dsp, gpu: quantized groups (dsp, quantize: 1) combine with cpu " \
           "groups only" in done.stderr


def test_dsp_subgraph_ops_must_have_a_quantized_kernel(tmp_path):
    """Unlike gpu, a dsp subgraph has no CPU fallback: LRN in the dsp body stops the convert."""
    path = write_config(tmp_path, {"quantize_calibration_data": calibration(tmp_path)}, dict_subgraphs("dsp"))
    with pytest.raises(ModelError, match=r"models\.net\.subgraphs\.body\.runtime: dsp cannot run op 'lrn' "
                                         r"\(LocalResponseNorm\): no quantized kernel"):
        convert(tmp_path, path)


def test_named_dsp_body_and_cpu_head_validate(tmp_path):
    sgs = {"body": {**IN, "output_tensors": "r1", "output_shapes": "1,8,8,8", "runtime": "dsp", "order": 0},
           "head": {"input_tensors": "r1", "input_shapes": "1,8,8,8", **OUT, "runtime": "cpu", "order": 1}}
    config, graph = convert(tmp_path, write_config(tmp_path, {"quantize_calibration_data": calibration(tmp_path)},
                                                   sgs))
    where = placement_of(graph)
    assert [where[n] for n in OP_NAMES] == ["dsp", "dsp"] + ["cpu"] * 7
    [metric] = run_model(config, config.models["net"], build_dir=tmp_path / "builds", validate=True).metrics
    assert metric.threshold == 0.98 and metric.passed
