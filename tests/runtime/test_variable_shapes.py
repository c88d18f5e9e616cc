"""Variable input dimensions (input_shapes: -1..8,...): convert records them, the engine resizes
(shapes inferred again, the arena planned and kernels bound once per shape), every shape checked
against onnxruntime; what cannot follow is refused naming the input, dimension or op."""
from __future__ import annotations

import hashlib

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from mace.config import load_deployment
from mace.config.deployment import shape_range_notes
from mace.convert import convert_deployment
from mace.errors import ConfigError, ModelError, RuntimeInputError
from mace.ir.dtypes import from_numpy
from mace.ir.graph import Graph
from mace.ir.shape_ranges import record_shape_ranges, shape_pins, shape_ranges
from mace.runtime.engine import Engine, create_engine
from mace.testing.onnx_models import data_input, randomized
from mace.testing.variable_shape_models import classifier, encoder, with_symbolic_batch
from mace.transform.shape_inference import infer_shapes

ort = pytest.importorskip("onnxruntime")


def deployment(tmp, name, model, shape, fmt="NONE", input_name="x", **keys):
    path = tmp / f"{name}.onnx"
    onnx.save(model, path)
    sg = {"input_tensors": input_name, "input_shapes": shape, "input_data_formats": fmt,
          "output_tensors": model.graph.output[0].name, "output_data_formats": "NONE"}
    entry = {"platform": "onnx", "model_file_path": str(path), "runtime": "cpu",
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest(), "subgraphs": [sg], **keys}
    yml = tmp / f"{name}.yml"
    yml.write_text(yaml.safe_dump({"library_name": name, "models": {name: entry}}))
    return yml


def convert(tmp, name, model, shape, fmt="NONE", **keys):
    config = load_deployment(deployment(tmp, name, model, shape, fmt, **keys))
    result = convert_deployment(config, build_dir=tmp / "builds")[0]
    return result, tmp / f"{name}.onnx"


def compare(engine, onnx_path, shapes, seed=0, atol=1e-4, input_name="x"):
    """Run every shape in turn through the engine and onnxruntime; returns the planned arena bytes."""
    session = ort.InferenceSession(str(onnx_path))
    arenas = []
    for shape in shapes:
        x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        (ours,) = engine.run({input_name: x}).values()
        (ref,) = session.run(None, {input_name: x})
        assert ours.shape == ref.shape
        np.testing.assert_allclose(ours, ref, atol=atol, rtol=1e-3)
        arenas.append(engine.plan.arena_size)
    return arenas


@pytest.fixture(scope="module")
def classifier_build(tmp_path_factory):
    return convert(tmp_path_factory.mktemp("cls"), "cls", classifier(), "-1..4,3,16,16", "NCHW")


@pytest.fixture(scope="module")
def encoder_build(tmp_path_factory):
    return convert(tmp_path_factory.mktemp("enc"), "enc", encoder(), "1,8..64,32")


# ---- deployment file ---------------------------------------------------------
def test_ranges_parse_to_the_converted_value_and_show_in_config(tmp_path):
    config = load_deployment(deployment(tmp_path, "m", classifier(), "-1..8,3,16,16", "NCHW"))
    sg = config.models["m"].graph
    assert list(sg.input_shapes[0]) == [1, 3, 16, 16]          # what every reader sees: MACE's meaning
    assert sg.inputs[0].dim_ranges == {0: (1, 8)}
    assert shape_range_notes(sg) == ["models.m.subgraphs[0].input_shapes: input 'x' dimension 0 varies "
                                     "1..8 (converted at 1)"]
    plain = load_deployment(deployment(tmp_path, "p", classifier(), "2,3,16,16", "NCHW")).models["p"].graph
    assert plain.inputs[0].dim_ranges == {} and shape_range_notes(plain) == []


@pytest.mark.parametrize("shape, converted, ranges", [
    ("-1,3,16,16", [1, 3, 16, 16], {0: (1, None)}),          # the framework's own symbolic dim
    ("2..,3,16,16", [2, 3, 16, 16], {0: (2, None)}),
    ("..8,3,16,16", [1, 3, 16, 16], {0: (1, 8)}),
    ("[1..2, 3, 16, 16]", [1, 3, 16, 16], {0: (1, 2)}),    # a YAML list
])
def test_range_spellings(tmp_path, shape, converted, ranges):
    if shape.startswith("["):
        shape = yaml.safe_load(shape)
    sg = load_deployment(deployment(tmp_path, "m", classifier(), shape, "NCHW")).models["m"].graph
    assert list(sg.input_shapes[0]) == converted and sg.inputs[0].dim_ranges == ranges


@pytest.mark.parametrize("shape, message", [
    ("4..2,3,16,16", "expected low..high with 1 <= low <= high"),
    ("1..x,3,16,16", "expected an integer"),
    ("0..4,3,16,16", "1 <= low"),
])
def test_bad_ranges_name_the_key(tmp_path, shape, message):
    with pytest.raises(ConfigError, match=rf"input_shapes: .*{message}"):
        load_deployment(deployment(tmp_path, "m", classifier(), shape, "NCHW"))


def test_ranges_only_on_inputs_and_not_on_dsp(tmp_path):
    with pytest.raises(ConfigError, match="dsp runtime runs the converted shapes only"):
        load_deployment(deployment(tmp_path, "m", classifier(), "1..4,3,16,16", "NCHW", runtime="dsp"))
    yml = deployment(tmp_path, "o", classifier(), "1..4,3,16,16", "NCHW")
    doc = yaml.safe_load(yml.read_text())
    doc["models"]["o"]["subgraphs"][0]["output_shapes"] = "1..4,10"
    yml.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="output_shapes: a range is only allowed in input_shapes"):
        load_deployment(yml)


def test_a_range_on_a_dimension_the_model_fixes_is_refused(tmp_path):
    with pytest.raises(ModelError, match=r"input tensor 'x': dimension 2 is declared variable \(16..32\) "
                                         r"but the model fixes it at 16"):
        convert(tmp_path, "m", classifier(), "1,3,16..32,16", "NCHW")


# ---- engine -------------------------------------------------------------------
def test_classifier_at_batch_1_and_4_against_onnxruntime(classifier_build):
    result, onnx_path = classifier_build
    assert any("dimension 0 varies 1..4" in n for n in result.notes)
    engine = create_engine(result.pb_path)
    assert shape_ranges(engine.graph.net) == {"x": {0: (1, 4)}} and shape_pins(engine.graph.net) == {}
    arenas = compare(engine, onnx_path, [(1, 3, 16, 16), (4, 3, 16, 16), (1, 3, 16, 16), (4, 3, 16, 16)])
    assert arenas[1] > arenas[0] and arenas[2:] == arenas[:2]   # planned per shape, then reused
    assert engine.resize_stats == {"planned": 1, "reused": 2}
    assert engine.output_specs()["prob"][0] == (4, 10)


def test_resize_keeps_kernels_and_plans_per_shape(classifier_build):
    engine = create_engine(classifier_build[0].pb_path)
    first = engine.plan.arena_size
    engine.resize({"x": (3, 3, 16, 16)})
    assert engine.input_specs()["x"][0] == (3, 3, 16, 16)
    assert engine.plan.arena_size > first and engine.plan.lower_bound <= engine.plan.arena_size
    engine.resize({"x": (3, 3, 16, 16)})   # the same shape: nothing to do
    assert engine.resize_stats == {"planned": 1, "reused": 0}


def test_reference_and_quantized_kernels_resize(tmp_path, classifier_build):
    result, onnx_path = classifier_build
    reference = create_engine(result.pb_path, options={"reference_kernels": True})
    compare(reference, onnx_path, [(2, 3, 16, 16), (1, 3, 16, 16)])
    sample = tmp_path / "x.npy"   # calibration at the converted shape
    np.save(sample, np.random.default_rng(7).uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32))
    quantized, _ = convert(tmp_path, "q", classifier(), "-1..4,3,16,16", "NCHW", quantize=1,
                           validation_inputs_data=[str(sample)])
    engine = create_engine(quantized.pb_path)
    assert engine.quantized and any(n.tag.startswith("int8") for n in engine.nodes)
    session = ort.InferenceSession(str(onnx_path))
    for batch in (1, 4):
        x = np.random.default_rng(batch).uniform(-1, 1, (batch, 3, 16, 16)).astype(np.float32)
        (ours,) = engine.run({"x": x}).values()
        (ref,) = session.run(None, {"x": x})
        cosine = float((ours * ref).sum() / np.linalg.norm(ours) / np.linalg.norm(ref))
        assert ours.shape == (batch, 10) and cosine > 0.98
        assert any(n.tag.startswith("int8") for n in engine.nodes)


def test_encoder_at_sequence_lengths_8_16_64_against_onnxruntime(encoder_build):
    result, onnx_path = encoder_build
    assert any("dimension 1 varies 8..64" in n for n in result.notes)
    engine = create_engine(result.pb_path)
    arenas = compare(engine, onnx_path, [(1, 8, 32), (1, 16, 32), (1, 64, 32), (1, 8, 32), (1, 64, 32)])
    assert arenas[0] < arenas[1] < arenas[2] and arenas[3:] == [arenas[0], arenas[2]]
    assert engine.resize_stats == {"planned": 2, "reused": 2}


def test_out_of_range_and_fixed_dimensions_are_refused(classifier_build):
    engine = create_engine(classifier_build[0].pb_path)
    with pytest.raises(RuntimeInputError, match=r"input tensor 'x' dimension 0: 5 is outside its range 1..4"):
        engine.run({"x": np.zeros((5, 3, 16, 16), np.float32)})
    with pytest.raises(RuntimeInputError, match=r"input tensor 'x' dimension 2 is fixed at 16 in this model"):
        engine.resize({"x": (1, 3, 32, 16)})
    with pytest.raises(RuntimeInputError, match=r"expected 4 dimensions"):
        engine.resize({"x": (1, 3, 16)})
    assert engine.input_specs()["x"][0] == (1, 3, 16, 16)   # a refused resize changes nothing


def test_a_model_without_ranges_keeps_its_shapes(tmp_path):
    result, _ = convert(tmp_path, "fixed", classifier(), "1,3,16,16", "NCHW")
    engine = create_engine(result.pb_path)
    with pytest.raises(RuntimeInputError, match=r"expected shape \[1, 3, 16, 16\], got \[2, 3, 16, 16\]"):
        engine.run({"x": np.zeros((2, 3, 16, 16), np.float32)})
    with pytest.raises(RuntimeInputError, match="dimension 0 is fixed at 1 in this model"):
        engine.resize({"x": (2, 3, 16, 16)})


def test_a_position_table_sliced_to_the_length_follows_it(tmp_path):
    """pos[:S] folds to a constant at each length; convert finds it is the longest probe's prefix
    and cuts that table at run time (PrefixSlice)."""
    result, onnx_path = convert(tmp_path, "pos", encoder(positions=True), "1,8..64,32")
    assert any("dimension 1 varies 8..64" in n for n in result.notes), result.notes
    engine = create_engine(result.pb_path)
    assert any(n.op.type == "PrefixSlice" for n in engine.nodes)
    compare(engine, onnx_path, [(1, 8, 32), (1, 16, 32), (1, 64, 32)])


def test_token_ids_and_mask_share_one_length(tmp_path):
    """Two inputs declared with the same range move together in convert's probes and at run time."""
    model = encoder(mask=True)
    path = tmp_path / "masked.onnx"
    onnx.save(model, path)
    sg = {"input_tensors": "x,mask", "input_shapes": ["1,8..64,32", "1,8..64"], "input_data_formats": "NONE",
          "input_data_types": "float32,int64", "output_tensors": "y", "output_data_formats": "NONE"}
    entry = {"platform": "onnx", "model_file_path": str(path), "subgraphs": [sg], "runtime": "cpu",
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest()}
    (tmp_path / "m.yml").write_text(yaml.safe_dump({"library_name": "m", "models": {"m": entry}}))
    result = convert_deployment(load_deployment(tmp_path / "m.yml"), build_dir=tmp_path / "builds")[0]
    assert not any("stays" in n for n in result.notes), result.notes
    engine, session = create_engine(result.pb_path), ort.InferenceSession(str(path))
    for n in (8, 16, 64):
        x = np.random.default_rng(n).standard_normal((1, n, 32)).astype(np.float32)
        mask = np.ones((1, n), np.int64)
        mask[0, n // 2:] = 0
        (ref,) = session.run(None, {"x": x, "mask": mask})
        np.testing.assert_allclose(engine.run({"x": x, "mask": mask})["y"], ref, atol=1e-4, rtol=1e-3)
    with pytest.raises(RuntimeInputError, match=r"do not fit together: .*usually move together"):
        engine.run({"x": np.zeros((1, 16, 32), np.float32), "mask": np.ones((1, 17), np.int64)})


def test_a_shape_folded_into_a_constant_pins_the_dimension_naming_the_op(tmp_path):
    result, onnx_path = convert(tmp_path, "scaled", encoder(length_scale=True), "1,8..64,32")
    assert any("dimension 1 stays 8" in n and "scale_by_length" in n for n in result.notes), result.notes
    engine = create_engine(result.pb_path)
    compare(engine, onnx_path, [(1, 8, 32)])   # the converted shape still runs
    with pytest.raises(RuntimeInputError, match=r"input tensor 'x' dimension 1 stays 8 in the converted "
                                                r"model: op 'scale_by_length' \(Eltwise\) reads constant"):
        engine.run({"x": np.zeros((1, 16, 32), np.float32)})


def test_runtimes_that_keep_the_converted_shapes_say_so(classifier_build):
    engine = create_engine(classifier_build[0].pb_path)
    engine.device = "dsp"   # the DSP simulator's engine: its graphs keep the converted shapes
    with pytest.raises(RuntimeInputError, match="the dsp runtime runs the shapes the model was converted at only"):
        engine.resize({"x": (2, 3, 16, 16)})


def test_a_real_architecture_at_batch_1_and_4(tmp_path):
    """onnx's light SqueezeNet (random weights), its batch made symbolic, against onnxruntime."""
    model = with_symbolic_batch(randomized("squeezenet"))
    name, shape = data_input(model)
    result, onnx_path = convert(tmp_path, "squeezenet", model, "1..4," + ",".join(map(str, shape[1:])),
                                "NCHW", input_name=name)
    engine = create_engine(result.pb_path)
    arenas = compare(engine, onnx_path, [[1] + shape[1:], [4] + shape[1:]], atol=1e-3, input_name=name)
    assert arenas[1] > arenas[0]


def test_a_batch_the_framework_graph_fixes_is_pinned_at_its_reshape(tmp_path):
    """onnx's light ResNet-50 reshapes to a literal (1, 2048): batch 2 fails in the framework too,
    so convert records the range as pinned by that node."""
    model = with_symbolic_batch(randomized("resnet50"))
    name, shape = data_input(model)
    result, _ = convert(tmp_path, "resnet50", model, "1..4," + ",".join(map(str, shape[1:])), "NCHW",
                        input_name=name)
    engine = create_engine(result.pb_path)
    with pytest.raises(RuntimeInputError, match=rf"input tensor '{name}' dimension 0 stays 1 in the converted "
                                                r"model: converting fails there: .*node 'n173' \(Reshape\)"):
        engine.resize({name: [2] + shape[1:]})


def test_the_shapes_kept_are_bounded_least_recently_used_first(classifier_build):
    engine = create_engine(classifier_build[0].pb_path, options={"shape_cache": 2})
    for batch in (2, 3, 4, 3):
        engine.resize({"x": (batch, 3, 16, 16)})
    assert engine.resize_stats == {"planned": 3, "reused": 1}   # 3 was kept, 1 and 2 dropped
    engine.resize({"x": (1, 3, 16, 16)})
    assert engine.resize_stats == {"planned": 4, "reused": 1}
    assert len(engine.__dict__["_shape_states"]) == 2


def test_the_offline_report_plans_the_ends_of_each_range(encoder_build):
    result, _ = encoder_build
    ((shapes, arena, bound),) = result.report.shape_arenas   # 8 is the converted end
    assert shapes == {"x": (1, 64, 32)} and arena == bound > result.report.arena_bytes
    text = result.pb_path.with_name("enc_report.txt").read_text()
    assert f"x (1, 64, 32): {arena} (lower bound {bound}; 0.0% above it)" in text


def test_state_kept_between_runs_carries_across_shapes():
    """A streaming model's variables (ReadVariable / AssignVariable) go on counting when the
    batch changes, and reset_state resets them for every shape."""
    g = Graph()
    info = g.net.input_info.add(name="x", data_type=from_numpy(np.float32))
    info.dims.extend([1, 3])
    g.add_const("initial", np.zeros(3, np.float32))
    g.add_const("one", np.ones(3, np.float32))
    g.add_op("ReadVariable", [], ["state"], variable="counter", shape=[3], dtype="float32")
    g.add_op("Eltwise", ["x", "state"], ["y"], type="SUM")
    g.add_op("Eltwise", ["state", "one"], ["next"], type="SUM")
    g.add_op("AssignVariable", ["next", "initial", "state"], [], variable="counter")
    g.net.output_info.add(name="y")
    infer_shapes(g)
    record_shape_ranges(g.net, {"x": {0: (1, 4)}}, {})
    engine = Engine(g)
    seen = [engine.run({"x": np.zeros((b, 3), np.float32)})["y"][:, 0].tolist() for b in (1, 2, 1)]
    assert seen == [[0.0], [1.0, 1.0], [2.0]]
    engine.reset_state()
    assert engine.run({"x": np.zeros((2, 3), np.float32)})["y"][:, 0].tolist() == [0.0, 0.0]


def test_an_obfuscated_model_does_not_name_the_op_that_pins(tmp_path):
    result, _ = convert(tmp_path, "scaled", encoder(length_scale=True), "1,8..64,32", obfuscate=1)
    assert any("scale_by_length" in n for n in result.notes)   # the user who converts sees the name
    engine = create_engine(result.pb_path)
    assert "scale_by_length" not in str(shape_pins(engine.graph.net))
    with pytest.raises(RuntimeInputError, match=r"dimension 1 stays 8 .*op names hidden: obfuscate: 1"):
        engine.resize({"x": (1, 16, 32)})


def test_slices_counted_from_the_end_follow_the_length(tmp_path):
    """x[:, -1] written literally and x[:, :S - 1] computed from Shape: both resolve to numbers at
    each length when converted, and both come back as bounds from the end of the axis."""
    def ints(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    nodes = [helper.make_node("Slice", ["x", "minus_one", "past_end", "one"], ["last"]),
             helper.make_node("Shape", ["x"], ["dims"]),
             helper.make_node("Gather", ["dims", "one"], ["length"], axis=0),
             helper.make_node("Sub", ["length", "one"], ["length_1"]),
             helper.make_node("Slice", ["x", "zero", "length_1", "one"], ["head"], name="all_but_last")]
    graph = helper.make_graph(nodes, "slices", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "S", 4])],
                              [helper.make_tensor_value_info("last", TensorProto.FLOAT, [1, 1, 4]),
                               helper.make_tensor_value_info("head", TensorProto.FLOAT, [1, "T", 4])],
                              [ints("minus_one", [-1]), ints("past_end", [2**62]), ints("one", [1]), ints("zero", [0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "slices.onnx"
    onnx.save(model, path)
    sg = {"input_tensors": "x", "input_shapes": "1,8..64,4", "input_data_formats": "NONE",
          "output_tensors": "last,head", "output_data_formats": "NONE"}
    entry = {"platform": "onnx", "model_file_path": str(path), "subgraphs": [sg],
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest()}
    (tmp_path / "s.yml").write_text(yaml.safe_dump({"library_name": "s", "models": {"s": entry}}))
    result = convert_deployment(load_deployment(tmp_path / "s.yml"), build_dir=tmp_path / "builds")[0]
    assert not any("stays" in n for n in result.notes), result.notes
    engine, session = create_engine(result.pb_path), ort.InferenceSession(str(path))
    for n in (8, 20, 64):
        x = np.random.default_rng(n).standard_normal((1, n, 4)).astype(np.float32)
        ours, (last, head) = engine.run({"x": x}), session.run(None, {"x": x})
        np.testing.assert_array_equal(ours["last"], last)
        np.testing.assert_array_equal(ours["head"], head)


def test_an_upsampling_sized_from_its_input_follows_the_image(tmp_path):
    """Resize to Shape(x)[2:] * 2 (how exporters write a 2x upsample): folded to sizes at each
    image size, it comes back as input x scale; the probes step 16 -> 32 on the image's grid."""
    def ints(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    nodes = [helper.make_node("Shape", ["x"], ["dims"]),
             helper.make_node("Slice", ["dims", "two", "four"], ["hw"]),
             helper.make_node("Mul", ["hw", "twice"], ["hw2"]),
             helper.make_node("Slice", ["dims", "zero", "two"], ["nc"]),
             helper.make_node("Concat", ["nc", "hw2"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest")]
    graph = helper.make_graph(nodes, "up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "H2", "W2"])],
                              [ints("two", [2]), ints("four", [4]), ints("zero", [0]), ints("twice", [2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    result, path = convert(tmp_path, "up", model, "1,3,16..64,16..64", "NCHW")
    assert not any("stays" in n for n in result.notes), result.notes
    engine, session = create_engine(result.pb_path), ort.InferenceSession(str(path))
    for h, w in ((16, 16), (48, 32), (64, 64)):
        x = np.random.default_rng(h).standard_normal((1, 3, h, w)).astype(np.float32)
        np.testing.assert_array_equal(engine.run({"x": x})["y"], session.run(None, {"x": x})[0])


def test_a_quantized_table_says_why_it_cannot_follow(tmp_path):
    """A position table the quantize pass stored as integers cannot be cut to other lengths the
    way the float one is: the pin says so."""
    sample = tmp_path / "x.npy"
    np.save(sample, np.random.default_rng(0).standard_normal((1, 8, 32)).astype(np.float32))
    result, _ = convert(tmp_path, "q", encoder(positions=True), "1,8..64,32", quantize=1,
                        validation_inputs_data=[str(sample)])
    assert any("dimension 1 stays 8" in n and "(quantized)" in n for n in result.notes), result.notes
