"""What loading refuses: damaged .pb fields (mace/ir/checks.py), files that no longer match the
build manifest (mace/ir/manifest.py), and what Softmax gives for inf/NaN logits."""
from __future__ import annotations

import os

import numpy as np
import pytest

from mace.errors import ModelError
from mace.ir import manifest
from mace.ir.graph import Graph
from mace.ir.model_io import load_model, load_net, save_model
from mace.proto import pb
from mace.runtime.engine import Engine, create_engine


@pytest.fixture
def saved(tmp_path):
    """A one-op model (Conv2D, 1x1, 2 -> 3 channels) saved to tmp_path/m.pb + m.data."""
    net = pb.NetDef()
    info = net.input_info.add(name="x", data_type=pb.DT_FLOAT)
    info.dims.extend([1, 4, 4, 2])
    op = net.op.add(name="conv", type="Conv2D", input=["x", "w"], output=["y"])
    op.output_shape.add(dims=[1, 4, 4, 3])
    op.output_type.append(pb.DT_FLOAT)
    net.output_info.add(name="y").dims.extend([1, 4, 4, 3])
    w = np.arange(6, dtype=np.float32).reshape(3, 2, 1, 1)
    graph = Graph(net=net, consts={"w": w})
    save_model(graph, tmp_path / "m.pb", tmp_path / "m.data")
    return tmp_path / "m.pb", tmp_path / "m.data"


def test_saved_model_loads_and_runs(saved):
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 2)).astype(np.float32)
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = create_engine(*saved).run({"x": x})["y"]
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-5)


def rewrite(pb_path, change):
    net = load_net(pb_path)
    change(net)
    pb_path.write_bytes(net.SerializeToString())


@pytest.mark.parametrize("change, fragment", [
    (lambda n: n.tensors[0].dims.__setitem__(0, -3), "constant 'w' has dims [-3, 2, 1, 1]"),
    (lambda n: n.tensors[0].dims.__setitem__(0, 2**40), "constant 'w' has dims"),
    (lambda n: setattr(n.tensors[0], "offset", 1 << 20), "outside the 64-byte model data"),
    (lambda n: setattr(n.tensors[0], "offset", -64), "outside the 64-byte model data"),
    (lambda n: setattr(n.tensors[0], "data_size", 12), "but data_size 12"),
    (lambda n: setattr(n.tensors[0], "data_type", pb.DT_BFLOAT16), "constant 'w' has data type DT_BFLOAT16"),
    (lambda n: n.input_info[0].dims.__setitem__(1, -1), "input 'x' has dims [1, -1, 4, 2]"),
    (lambda n: n.op[0].output_shape[0].dims.__setitem__(1, 2**35), "op 'conv' (Conv2D) output 'y'"),
    (lambda n: n.op[0].output_type.__setitem__(0, pb.DT_BFLOAT16), "op 'conv' (Conv2D) output 'y' has data type DT_BFLOAT16"),
    (lambda n: n.op[0].input.__setitem__(1, "nowhere"), "reads 'nowhere', which no op makes"),
    (lambda n: setattr(n, "data_size", 128), "expects 128 bytes of model data"),
])
def test_damaged_graph_is_refused_before_allocating(saved, change, fragment):
    rewrite(saved[0], change)
    with pytest.raises(ModelError, match="m.pb") as err:
        load_model(*saved)
    assert fragment in str(err.value)


def quantized_output(scale, zero_point):
    def change(net):
        net.op[0].output_type[0] = pb.DT_UINT8
        net.op[0].quantize_info.add(scale=scale, zero_point=zero_point, minval=0.0, maxval=1.0)
    return change


def quantized_weight(scale, zero_point):
    def change(net):
        t = net.tensors[0]
        t.quantized, t.data_type, t.data_size = True, pb.DT_UINT8, 6
        t.scale, t.zero_point = scale, zero_point
    return change


@pytest.mark.parametrize("change, fragment", [
    (quantized_output(float("nan"), 0), "op 'conv' (Conv2D) output 'y' has quantization scale nan"),
    (quantized_output(0.0, 0), "output 'y' has quantization scale 0:"),
    (quantized_output(-0.5, 0), "output 'y' has quantization scale -0.5"),
    (quantized_output(float("inf"), 0), "output 'y' has quantization scale inf"),
    (quantized_output(1e-40, 0), "quantization scale 9.99995e-41"),   # a float32 denormal
    (quantized_output(0.1, 300), "output 'y' has zero point 300, outside 0..255"),
    (quantized_weight(float("nan"), 0), "constant 'w' has quantization scale nan"),
    (quantized_weight(0.1, -1), "constant 'w' has zero point -1, outside 0..255"),
])
def test_hostile_quantization_parameters_are_refused(saved, change, fragment):
    """A .pb whose quantized tensors carry scales the int8 kernels cannot turn into integer
    multipliers (NaN, 0, negative, infinite, denormal) or zero points outside their type:
    one ModelError naming the tensor, before any kernel is set up. (A scale of 1.3e36 is
    real: a quantized attention-mask constant holding float32's lowest.)"""
    rewrite(saved[0], change)
    with pytest.raises(ModelError, match="m.pb") as err:
        load_model(*saved)
    assert fragment in str(err.value)


def test_unknown_op_type_is_refused(saved):
    rewrite(saved[0], lambda n: setattr(n.op[0], "type", "Conv9D"))
    with pytest.raises(ModelError, match="Conv9D"):
        create_engine(*saved)


def test_arena_beyond_physical_memory_is_refused(saved):
    """Plausible dims (each < 2^31) whose arena no machine here has: refused, not allocated."""
    rewrite(saved[0], lambda n: n.op[0].output_shape[0].dims.__setitem__(0, 2**30))
    graph = load_model(*saved)
    with pytest.raises(ModelError, match="GiB"):
        Engine(graph)


def test_bit_flips_anywhere_in_the_graph_never_escape_as_other_errors(saved):
    """Every single-bit flip of the .pb: loads and runs, or a ModelError (never IndexError...)."""
    raw = saved[0].read_bytes()
    x = np.ones((1, 4, 4, 2), np.float32)
    for bit in range(len(raw) * 8):
        flipped = bytearray(raw)
        flipped[bit // 8] ^= 1 << (bit % 8)
        saved[0].write_bytes(bytes(flipped))
        try:
            create_engine(*saved).run({"x": x})
        except ModelError:
            pass
        except Exception as e:  # noqa: BLE001 - the point of the test
            from mace.errors import MaceError
            assert isinstance(e, MaceError), f"bit {bit}: {type(e).__name__}: {e}"


# ---- the build manifest ------------------------------------------------------------------
def big_build(tmp_path):
    lib = tmp_path / "lib"
    (lib / "model").mkdir(parents=True)
    data = lib / "model" / "m.data"
    data.write_bytes(os.urandom(manifest.HASH_ALWAYS_BELOW + 10))
    (lib / "model" / "m.pb").write_bytes(b"graph")
    path = manifest.write_manifest(lib, "m", {lib / "model" / "m.pb": "graph", data: "data"}, {})
    return path, data


def test_big_file_is_hashed_only_when_its_stat_changes(tmp_path, monkeypatch):
    path, data = big_build(tmp_path)
    hashed = []
    real = manifest.file_sha256
    monkeypatch.setattr(manifest, "file_sha256", lambda p: hashed.append(p.name) or real(p))
    doc = manifest.read_manifest(path, "rerun")
    manifest.verify_files(path, doc, "rerun", manifest.StatCache(path.parent, "m"))
    assert hashed == ["m.pb"]   # the .data's stat is the cached one: not read
    raw = bytearray(data.read_bytes())
    raw[5] ^= 1
    data.write_bytes(bytes(raw))   # same size, rewritten in place: ctime moves
    with pytest.raises(ModelError, match="m.data: contents differ from the build manifest"):
        manifest.verify_files(path, doc, "rerun", manifest.StatCache(path.parent, "m"))


def test_manifest_of_another_format_is_refused(tmp_path):
    path, _ = big_build(tmp_path)
    path.write_text('{"format": "something else", "files": {}}')
    with pytest.raises(ModelError, match="not a build manifest of this version; rerun"):
        manifest.read_manifest(path, "rerun")
    path.write_bytes(b"\xff\xfe{")
    with pytest.raises(ModelError, match="unreadable build manifest"):
        manifest.read_manifest(path, "rerun")


# ---- Softmax on non-finite logits ----------------------------------------------------------
def _softmax_graph(k: int) -> Graph:
    net = pb.NetDef()
    net.input_info.add(name="x", data_type=pb.DT_FLOAT).dims.extend([4, k])
    op = net.op.add(name="sm", type="Softmax", input=["x"], output=["y"])
    op.output_shape.add(dims=[4, k])
    op.output_type.append(pb.DT_FLOAT)
    net.output_info.add(name="y")
    graph = Graph(net=net, consts={})
    graph.specs = {"x": ((4, k), np.dtype(np.float32)), "y": ((4, k), np.dtype(np.float32))}
    return graph


def test_softmax_on_inf_and_nan_logits_matches_numpy():
    inf, nan = np.inf, np.nan
    x = np.array([[1, 2, 3], [inf, 0, 1], [-inf, -inf, -inf], [nan, 1, 2]], np.float32)
    with np.errstate(invalid="ignore"):
        shifted = x - x.max(axis=-1, keepdims=True)
        expected = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    for options in ({}, {"reference_kernels": True}):
        out = Engine(_softmax_graph(3), options=options).run({"x": x})["y"]
        np.testing.assert_allclose(out, expected, rtol=1e-6, equal_nan=True)
    assert np.isnan(out[1:]).all() and np.isfinite(out[0]).all()
