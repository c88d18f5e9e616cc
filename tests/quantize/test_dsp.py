"""runtime: dsp — DspBackend plugins, the Hexagon simulator and its cost model, through the CLI.

The digits example is converted once (module fixture) twice over: `digits_dsp` with runtime dsp
and `digits_q8` with runtime cpu + quantize: 1, in one library. CLI calls run in this process
(mace.cli.main.main, cwd = the work dir) so a test can put the plugin folder on sys.path.
The plugin (tests/quantize/dsp_plugin) is only reachable through its dist-info entry point.
"""
from __future__ import annotations

import copy
import importlib.metadata
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from mace.cli.main import main as cli_main
from mace.config import load_deployment
from mace.errors import ConfigError
from mace.ir.model_io import load_model
from mace.quantize.calibrate import collect_ranges
from mace.run import run_deployment
from mace.runtime.dsp import ENTRY_POINT_GROUP, DspEngine, backend_class, backend_names
from mace.runtime.engine import Engine
from mace.transform.passes.quantize import quantize_graph
from mace.validate.metrics import cosine
from tests.cli_helpers import cli, digits_model, save_onnx, write_deployment, workdir
from tests.ops.ir_graph import make_graph

PLUGIN_DIR = Path(__file__).parent / "dsp_plugin"
PLUGIN_MODULE = "pymace_test_dsp"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A work dir with builds/digits/ holding digits_dsp (runtime dsp) and digits_q8 (cpu, quantize 1)."""
    work = workdir(tmp_path_factory.mktemp("dsp"))
    write_deployment(work / "deploy.yml", {"digits_dsp": digits_model(runtime="dsp"),
                                           "digits_q8": digits_model(runtime="cpu", quantize=1)})
    r = cli("convert", "--config=deploy.yml", cwd=work)
    assert r.returncode == 0, r.stderr
    return work


@pytest.fixture
def in_work(work, monkeypatch):
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def plugin(monkeypatch):
    """The plugin folder on sys.path (its dist-info makes the entry point visible); returns the
    plugin module once something has loaded it. The module is forgotten afterwards."""
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    yield lambda: sys.modules[PLUGIN_MODULE]
    sys.modules.pop(PLUGIN_MODULE, None)


def run_cli(capsys, *args):
    """(exit code, stdout, stderr) of `converter.py ARGS` run in this process."""
    code = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


# ---- the plug ----------------------------------------------------------------------------------

def test_plugin_is_found_only_through_its_entry_point(plugin):
    sys.modules.pop(PLUGIN_MODULE, None)
    names = {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert names["test_recorder"].value == "pymace_test_dsp:RecordingBackend"
    assert names["test_recorder"].dist.name == "pymace-test-dsp"
    assert PLUGIN_MODULE not in sys.modules          # nothing imported it by name so far
    assert "test_recorder" in backend_names()
    cls = backend_class("test_recorder")
    assert cls.__name__ == "RecordingBackend"
    assert Path(sys.modules[cls.__module__].__file__).parent == PLUGIN_DIR


def test_without_the_dist_info_the_plugin_is_unknown():
    assert PLUGIN_MODULE not in sys.modules
    assert "test_recorder" not in backend_names()
    with pytest.raises(ConfigError, match="unknown DSP backend 'test_recorder'; available: hexagon_sim"):
        backend_class("test_recorder")


def test_entry_point_that_is_not_a_backend_is_refused_by_name(plugin):
    with pytest.raises(ConfigError, match=r"'not_a_backend' \(pymace_test_dsp:NotABackend from "
                                          r"pymace-test-dsp\) is not a mace.runtime.dsp.DspBackend"):
        backend_class("not_a_backend")


def test_flag_selects_the_plugin_and_it_gets_every_call(in_work, plugin, capsys):
    code, out, _ = run_cli(capsys, "run", "--config=deploy.yml", "--model_name=digits_dsp",
                           "--dsp_backend=test_recorder", "--round=2", "--output_dir=out_plugin")
    assert code == 0
    assert "runtime dsp: backend test_recorder (test plugin: records its calls)" in out
    calls = [c[0] for c in plugin().CALLS]
    assert calls == ["load"] + ["set_inputs", "execute", "get_outputs"] * 3   # warm-up + 2 rounds
    # the plugin runs the same kernels: same bytes as the simulator
    code, _, _ = run_cli(capsys, "run", "--config=deploy.yml", "--model_name=digits_dsp", "--round=0",
                         "--output_dir=out_sim")
    assert code == 0
    assert (in_work / "out_plugin/prob.npy").read_bytes() == (in_work / "out_sim/prob.npy").read_bytes()


def test_yml_key_selects_the_backend_and_the_flag_overrides_it(in_work, plugin, capsys):
    write_deployment(in_work / "plugin.yml",
                     {"digits_dsp": digits_model(runtime="dsp", dsp_backend="test_recorder")})
    code, out, _ = run_cli(capsys, "run", "--config=plugin.yml", "--round=0")
    assert code == 0 and "backend test_recorder" in out
    assert [c[0] for c in plugin().CALLS][-1] == "get_outputs"
    plugin().CALLS.clear()
    code, out, _ = run_cli(capsys, "run", "--config=plugin.yml", "--round=0", "--dsp_backend=hexagon_sim")
    assert code == 0 and "backend hexagon_sim (Hexagon simulator" in out
    assert plugin().CALLS == []


def test_unknown_backend_is_one_error_listing_the_available_ones(in_work, plugin, capsys):
    code, out, err = run_cli(capsys, "run", "--config=deploy.yml", "--model_name=digits_dsp",
                             "--dsp_backend=nope")
    assert code != 0
    assert err.strip().splitlines() == [
        "error: --dsp_backend: unknown DSP backend 'nope'; available: hexagon_sim, not_a_backend, "
        "test_recorder (more through the entry point group pymace.dsp_backends, docs/dsp.md)"]
    write_deployment(in_work / "bad_backend.yml",
                     {"digits_dsp": digits_model(runtime="dsp", dsp_backend="nope")})
    code, _, err = run_cli(capsys, "benchmark", "--config=bad_backend.yml", "--round=1")
    assert code != 0 and "Traceback" not in err
    assert "bad_backend.yml: models.digits_dsp.subgraphs[0].dsp_backend: unknown DSP backend 'nope'" in err


# ---- bit-exactness ----------------------------------------------------------------------------

def test_dsp_simulator_is_byte_identical_to_cpu_int8_and_to_itself(in_work):
    config = load_deployment("deploy.yml")
    rng = np.random.default_rng(5)
    (in_work / "rand").mkdir(exist_ok=True)
    np.save(in_work / "rand/image.npy", rng.uniform(-1, 1, (1, 8, 8, 1)).astype(np.float32))
    for input_dir in (None, in_work / "rand"):   # the validation image, then a random one
        dsp1, q8 = run_deployment(config, ["digits_dsp", "digits_q8"], input_dir=input_dir, rounds=0)
        dsp2, = run_deployment(config, ["digits_dsp"], input_dir=input_dir, rounds=0)
        assert dsp1.outputs["prob"].tobytes() == dsp2.outputs["prob"].tobytes()
        assert dsp1.outputs["prob"].tobytes() == q8.outputs["prob"].tobytes()
        assert dsp1.outputs["prob"].argmax() == q8.outputs["prob"].argmax()
    # both really ran the int8 kernels: the CPU model picks them first, the DSP has nothing else
    pb = in_work / "builds/digits/model/digits_q8.pb"
    assert {n.op.type: n.tag for n in Engine(load_model(pb)).nodes}["Conv2D"].startswith("int8")


def test_hand_built_graph_dsp_matches_cpu_int8_and_float():
    """Conv+RELU, depthwise, add, max pool, concat, softmax quantized for the DSP."""
    rng = np.random.default_rng(0)
    rand = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)   # noqa: E731
    ops = [("Conv2D", ["x", "w", "b"], ["c"], {"padding": "SAME", "activation": "RELU"}),
           ("DepthwiseConv2d", ["c", "dw"], ["d"], {"padding": "SAME"}),
           ("Eltwise", ["c", "d"], ["e"], {"type": "SUM"}),
           ("Pooling", ["e"], ["p"], {"pooling_type": "MAX", "kernels": [2, 2], "strides": [2, 2]}),
           ("Concat", ["p", "p"], ["q"], {"axis": 3}),
           ("Softmax", ["q"], ["y"], {"axis": -1})]
    graph = make_graph((1, 8, 8, 3), ops, {"w": rand(4, 3, 3, 3), "b": rand(4), "dw": rand(4, 1, 3, 3)})
    x = rand(1, 8, 8, 3)
    ref = Engine(copy.deepcopy(graph)).run({"x": x})["y"]
    ranges = collect_ranges(copy.deepcopy(graph), [{"x": x}])
    quantize_graph(graph, {"quantize": True, "quantize_ranges": ranges, "runtime": "dsp"})
    dsp = DspEngine(graph)
    assert {n.tag for n in dsp.nodes} <= {"int8", "int8:fast"}   # the fast int8 kernels first
    out = dsp.run({"x": x})["y"]
    reference = DspEngine(graph, options={"reference_kernels": True})
    assert {n.tag for n in reference.nodes} == {"int8"}
    assert out.tobytes() == reference.run({"x": x})["y"].tobytes()
    assert out.tobytes() == Engine(graph).run({"x": x})["y"].tobytes()
    assert out.tobytes() == DspEngine(graph).run({"x": x})["y"].tobytes()
    assert cosine(ref, out) > 0.98 and np.abs(ref - out).max() < 4 / 255   # softmax step 1/255


# ---- convert refusal, validation, benchmark ---------------------------------------------------

def test_convert_refuses_ops_without_int8_kernels(tmp_path):
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.ones(4, np.float32), "s"),
             numpy_helper.from_array(np.zeros(4, np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("LRN", ["c"], ["l"], name="lrn", size=3),
             helper.make_node("InstanceNormalization", ["l", "s", "b"], ["y"], name="inorm")]
    sha = save_onnx(tmp_path / "m.onnx", nodes, [("x", [1, 3, 6, 6])], [("y", [1, 4, 6, 6])], inits)
    sg = {"input_tensors": "x", "input_shapes": "1,3,6,6", "input_data_formats": "NCHW",
          "output_tensors": "y", "output_data_formats": "NCHW"}
    write_deployment(tmp_path / "m.yml", {"m": {"platform": "onnx", "model_file_path": "m.onnx",
                                                "model_sha256_checksum": sha, "subgraphs": [sg],
                                                "runtime": "dsp"}}, library="m")
    r = cli("convert", "--config=m.yml", cwd=tmp_path)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0] == ("error: m.yml: models.m.subgraphs[0]: runtime dsp: the DSP cannot run 2 op(s) "
                        "(no quantized form):")
    assert [ln.split(" (")[1].split(")")[0] for ln in lines[1:]] == ["LocalResponseNorm", "InstanceNorm"]
    assert not (tmp_path / "builds/m/model/m.pb").exists()


def test_validate_on_dsp_uses_the_hexagon_threshold(in_work, capsys):
    code, out, _ = run_cli(capsys, "run", "--config=deploy.yml", "--model_name=digits_dsp", "--validate",
                           "--round=1", "--vlog_level=2", "--json=v.json")
    assert code == 0 and "Similarity test passed" in out
    m, = json.loads((in_work / "v.json").read_text())["models"][0]["validation"]
    assert m["threshold"] == 0.98 and m["passed"] and m["cosine"] > 0.98
    # observers see every node of the simulator: the per-op profile lists the int8 kernels
    assert re.search(r"│ 1 │ \S+\s+│ Conv2D\s+│ int8(:fast)?\s+│", out)


def conv1_cycles_by_hand() -> int:
    """digits' first conv, 1 -> 8 channels, 3x3, pad 1 on 8x8 (examples/digits/make_model.py)."""
    macs = 8 * 8 * 8 * (3 * 3 * 1)                  # output values x taps per value
    moved = (8 * 8 * 1) + (8 * 1 * 3 * 3) + 8 * 4 + (8 * 8 * 8)   # uint8 in, int8 w, int32 bias, uint8 out
    return -(-macs // 128) + -(-moved // 64) + 1000


def dsp_table_rows(out: str) -> dict:
    """name -> cells of the 'DSP Estimated Cycles by Run Order' table."""
    section = out.split("DSP Estimated Cycles by Run Order", 1)[1]
    rows = {}
    for line in section.splitlines()[4:]:   # the rest of the title line, rule, header, rule
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[-1] or cells[0]] = cells
    return rows


def test_benchmark_prints_estimated_cycles_per_op(in_work, capsys):
    code, out, _ = run_cli(capsys, "benchmark", "--config=deploy.yml", "--model_name=digits_dsp",
                           "--round=2", "--json=b.json")
    assert code == 0
    rows = dsp_table_rows(out)
    assert int(rows["conv1"][1].replace(",", "")) == conv1_cycles_by_hand() == 1047
    assert rows["conv1"][0] == "Conv2D" and rows["conv1"][6] == "4,608"
    assert float(rows["conv1"][8]) > 0                      # host time of the simulation beside it
    ops = [r for name, r in rows.items() if name != "total"]
    assert len(ops) == 7                                    # every node of the quantized graph
    assert int(rows["total"][1].replace(",", "")) == sum(int(r[1].replace(",", "")) for r in ops)
    est = json.loads((in_work / "b.json").read_text())["models"][0]["estimated"]
    assert {e["name"]: e["cycles"] for e in est}["conv1"] == 1047
    # the CPU int8 model has no DSP table
    code, out, _ = run_cli(capsys, "benchmark", "--config=deploy.yml", "--model_name=digits_q8", "--round=1")
    assert code == 0 and "DSP Estimated Cycles" not in out


def test_benchmark_shows_the_plugins_own_cycles(in_work, plugin, capsys):
    code, out, _ = run_cli(capsys, "benchmark", "--config=deploy.yml", "--model_name=digits_dsp",
                           "--round=1", "--dsp_backend=test_recorder")
    assert code == 0
    rows = dsp_table_rows(out)
    assert rows["conv1"][1] == "42" and rows["total"][1] == str(42 * 7)
