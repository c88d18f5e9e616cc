"""Memory planner, .pb/.data files, and the engine's buffer reuse."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from mace import onnx_backend
from mace.errors import ModelError, RuntimeInputError
from mace.ir.model_io import ALIGN, load_model, save_model
from mace.runtime.engine import Engine
from mace.runtime.memory_planner import TensorLife, live_lower_bound, plan_memory


def overlaps(a, b):
    return a.first <= b.last and b.first <= a.last


def test_plan_never_overlaps_live_tensors_and_reuses_dead_ones():
    rng = np.random.default_rng(0)
    lives = []
    for i in range(60):
        first = int(rng.integers(0, 40))
        lives.append(TensorLife(f"t{i}", int(rng.integers(1, 5000)), first, first + int(rng.integers(0, 6))))
    plan = plan_memory(lives)
    spans = {t.name: (plan.offsets[t.name], plan.offsets[t.name] + t.size) for t in lives}
    for a in lives:
        for b in lives:
            if a.name < b.name and overlaps(a, b):
                (a0, a1), (b0, b1) = spans[a.name], spans[b.name]
                assert a1 <= b0 or b1 <= a0, (a, b)
    assert all(o % 64 == 0 for o in plan.offsets.values())
    assert plan.lower_bound <= plan.arena_size < sum(t.size + 64 for t in lives)


def test_lower_bound_of_a_chain_is_two_neighbours():
    lives = [TensorLife(f"t{i}", 1024, i, i + 1) for i in range(10)]
    assert live_lower_bound(lives) == 2048
    assert plan_memory(lives).arena_size == 2048  # a chain needs only ping-pong buffers


def _chain_model(n=6):
    nodes, inits = [], []
    prev = "x"
    for i in range(n):
        w = np.random.default_rng(i).standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        prev = f"r{i}"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_engine_reuses_buffers_and_matches_onnxruntime():
    import onnxruntime as ort
    model = _chain_model()
    x = np.random.default_rng(9).uniform(-1, 1, (1, 8, 16, 16)).astype(np.float32)
    engine = onnx_backend.prepare(model, {"x": x})
    one = 8 * 16 * 16 * 4
    assert engine.plan.arena_size <= 4 * one  # 6 convs, but only a few live buffers
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for _ in range(2):  # a second run must not see stale buffers
        np.testing.assert_allclose(engine.run({"x": x})["r5"], ref, rtol=1e-4, atol=1e-5)


def test_engine_rejects_bad_inputs():
    model = _chain_model(1)
    x = np.zeros((1, 8, 16, 16), np.float32)
    engine = onnx_backend.prepare(model, {"x": x})
    with pytest.raises(RuntimeInputError, match="expected shape"):
        engine.run({"x": np.zeros((1, 8, 16, 15), np.float32)})
    with pytest.raises(RuntimeInputError, match="unknown input"):
        engine.run({"x": x, "y": x})
    with pytest.raises(RuntimeInputError, match="missing input"):
        engine.run({})


def test_model_files_round_trip_aligned_and_memory_mapped(tmp_path):
    model = _chain_model(2)
    x = np.random.default_rng(1).uniform(-1, 1, (1, 8, 16, 16)).astype(np.float32)
    engine = onnx_backend.prepare(model, {"x": x})
    pb, data = tmp_path / "m.pb", tmp_path / "m.data"
    save_model(engine.graph, pb, data)
    loaded = load_model(pb, data)
    for name, value in engine.graph.consts.items():
        got = loaded.consts[name]
        assert isinstance(got.base, np.memmap) or isinstance(got, np.memmap)  # a view, not a copy
        np.testing.assert_array_equal(got, value)
    np.testing.assert_array_equal(Engine(loaded).run({"x": x})["r1"], engine.run({"x": x})["r1"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_offsets_are_aligned_in_the_pb(tmp_path):
    from mace.ir.model_io import load_net
    model = _chain_model(3)
    engine = onnx_backend.prepare(model, {"x": np.zeros((1, 8, 16, 16), np.float32)})
    save_model(engine.graph, tmp_path / "m.pb", tmp_path / "m.data")
    net = load_net(tmp_path / "m.pb")
    assert net.tensors and all(t.offset % ALIGN == 0 for t in net.tensors)
    assert net.data_size == (tmp_path / "m.data").stat().st_size


def test_arena_tensors_and_scratch_start_on_cache_lines():
    """The planner places tensors at multiples of 64 bytes; that means cache lines only if the
    arena itself starts on one (numpy's own buffers start at 16 mod 64)."""
    engine = onnx_backend.prepare(_chain_model(3), {"x": np.zeros((1, 8, 16, 16), np.float32)})
    assert engine.arena.ctypes.data % ALIGN == 0
    assert engine.plan.offsets and all(off % ALIGN == 0 for off in engine.plan.offsets.values())
    assert engine.scratch.ctypes.data % ALIGN == 0


def test_mismatched_data_file_is_refused(tmp_path):
    model = _chain_model(1)
    engine = onnx_backend.prepare(model, {"x": np.zeros((1, 8, 16, 16), np.float32)})
    save_model(engine.graph, tmp_path / "m.pb", tmp_path / "m.data")
    with open(tmp_path / "m.data", "ab") as f:
        f.write(b"extra")
    with pytest.raises(ModelError, match="do not belong together"):
        load_model(tmp_path / "m.pb")
    (tmp_path / "bad.pb").write_bytes(b"\xff\xff garbage")
    with pytest.raises(ModelError, match="not a valid model graph"):
        load_model(tmp_path / "bad.pb")


def test_float64_constants_are_written_as_the_float32_their_tag_says(tmp_path):
    # TF and Caffe hand over float64 weights; the .pb tags them DT_FLOAT, so the .data bytes
    # must be float32 (8-byte values under a 4-byte tag read back as garbage).
    model = _chain_model(1)
    engine = onnx_backend.prepare(model, {"x": np.zeros((1, 8, 16, 16), np.float32)})
    graph = engine.graph
    wide = np.random.default_rng(3).standard_normal((3, 5))  # float64
    graph.consts["wide"] = wide
    save_model(graph, tmp_path / "m.pb", tmp_path / "m.data")
    got = load_model(tmp_path / "m.pb", tmp_path / "m.data").consts["wide"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, wide.astype(np.float32))


def test_scalar_constants_stay_0_d(tmp_path):
    model = _chain_model(1)
    engine = onnx_backend.prepare(model, {"x": np.zeros((1, 8, 16, 16), np.float32)})
    graph = engine.graph
    graph.consts["index"] = np.array(3, np.int64)
    graph.consts["wide_scalar"] = np.array(0.5)  # float64, 0-d
    save_model(graph, tmp_path / "m.pb", tmp_path / "m.data")
    loaded = load_model(tmp_path / "m.pb", tmp_path / "m.data").consts
    assert loaded["index"].shape == () and int(loaded["index"]) == 3
    assert loaded["wide_scalar"].shape == () and loaded["wide_scalar"].dtype == np.float32
