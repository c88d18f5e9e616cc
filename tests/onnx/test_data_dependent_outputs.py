"""Outputs whose length depends on the data (NonMaxSuppression, NonZero, TopK of a computed k):
planned at a static upper bound, cut to the length each run found, against onnxruntime; what
reads such a tensor across its rows is refused naming the op."""
from __future__ import annotations

import hashlib

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from mace.config import load_deployment
from mace.convert import convert_deployment
from mace.errors import ModelError
from mace.onnx_backend import prepare
from mace.runtime.engine import create_engine
from mace.testing.variable_shape_models import detector
from mace.validate.metrics import compare

ort = pytest.importorskip("onnxruntime")


def _const(name, value, dtype):
    return numpy_helper.from_array(np.array(value, dtype), name)


def nms_model(boxes=20, classes=2, center=0, score_threshold=0.3, limit=15, head=True, batch=1):
    """NMS, and the kept boxes gathered by its box column (a detection head's usual tail)."""
    inits = [_const("limit", [limit], np.int64), _const("iou", [0.4], np.float32),
             _const("two", 2, np.int64), _const("zero", 0, np.int64)]
    score = ""
    if score_threshold is not None:
        inits.append(_const("score", [score_threshold], np.float32))
        score = "score"
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "limit", "iou", score], ["selected"],
                              center_point_box=center)]
    outputs = [helper.make_tensor_value_info("selected", TensorProto.INT64, ["n", 3])]
    if head:
        nodes += [helper.make_node("Gather", ["selected", "two"], ["box_index"], axis=1),
                  helper.make_node("Gather", ["boxes", "zero"], ["boxes0"], axis=0),
                  helper.make_node("Gather", ["boxes0", "box_index"], ["picked"], axis=0)]
        outputs.append(helper.make_tensor_value_info("picked", TensorProto.FLOAT, ["n", 4]))
    graph = helper.make_graph(nodes, "nms", [
        helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [batch, "N", 4]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [batch, classes, "N"])], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def detections(rng, batch, boxes, classes):
    """Boxes in clusters (so suppression has work to do) and scores."""
    centres = rng.uniform(0.2, 0.8, (batch, boxes, 2))
    centres[:, boxes // 2:] = centres[:, :boxes - boxes // 2] + rng.normal(0, 0.02, centres[:, boxes // 2:].shape)
    sizes = rng.uniform(0.1, 0.3, (batch, boxes, 2))
    corner = np.concatenate([centres - sizes / 2, centres + sizes / 2], axis=-1)[..., [1, 0, 3, 2]]
    return corner.astype(np.float32), rng.uniform(0, 1, (batch, classes, boxes)).astype(np.float32)


def run_both(model, feeds: dict, engine=None):
    engine = engine or prepare(model, feeds)
    ours = engine.run(feeds)
    names = [o.name for o in model.graph.output]
    ref = dict(zip(names, ort.InferenceSession(model.SerializeToString()).run(None, feeds)))
    for name in names:
        assert ours[name].shape == ref[name].shape, name
        np.testing.assert_array_equal(ours[name], ref[name])
    return engine, ours


@pytest.mark.parametrize("center, score_threshold, batch, classes", [
    (0, 0.3, 1, 2), (0, None, 1, 1), (1, 0.5, 1, 3), (0, 0.2, 2, 2)])
def test_nms_keeps_what_onnxruntime_keeps(center, score_threshold, batch, classes):
    rng = np.random.default_rng(classes + batch)
    model = nms_model(center=center, score_threshold=score_threshold, classes=classes, batch=batch,
                      head=batch == 1)
    boxes, scores = detections(rng, batch, 20, classes)
    if center:   # [x_center, y_center, width, height]
        y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
        boxes = np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], axis=-1).astype(np.float32)
    engine, ours = run_both(model, {"boxes": boxes, "scores": scores})
    bound = batch * classes * 15
    assert engine.output_specs()["selected"][0] == (bound, 3)     # planned at the upper bound
    assert 0 < len(ours["selected"]) < bound
    lengths = {len(ours["selected"])}
    for seed in range(3):   # the same engine, other data: other lengths
        boxes, scores = detections(np.random.default_rng(seed), batch, 20, classes)
        _, out = run_both(model, {"boxes": boxes, "scores": scores}, engine)
        lengths.add(len(out["selected"]))
    assert len(lengths) > 1


def test_nonzero_and_topk_of_a_computed_k():
    inits = [_const("zero_f", [0.0], np.float32), _const("one", [1], np.int64), _const("flat", [-1], np.int64)]
    nodes = [helper.make_node("Greater", ["x", "zero_f"], ["positive"]),
             helper.make_node("NonZero", ["positive"], ["where"]),
             helper.make_node("Cast", ["positive"], ["positive_i"], to=TensorProto.INT64),
             helper.make_node("ReduceSum", ["positive_i"], ["count"], keepdims=0),
             helper.make_node("Reshape", ["count", "one"], ["k"]),
             helper.make_node("Reshape", ["x", "flat"], ["x_flat"]),
             helper.make_node("TopK", ["x_flat", "k"], ["values", "indices"], axis=-1),
             helper.make_node("Neg", ["values"], ["negated"])]
    graph = helper.make_graph(nodes, "nz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])], [
        helper.make_tensor_value_info("where", TensorProto.INT64, [2, "n"]),
        helper.make_tensor_value_info("negated", TensorProto.FLOAT, ["k"]),
        helper.make_tensor_value_info("indices", TensorProto.INT64, ["k"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    engine, ours = run_both(model, {"x": x})
    assert engine.output_specs()["where"][0] == (2, 12) and ours["where"].shape == (2, int((x > 0).sum()))
    _, empty = run_both(model, {"x": -np.ones((3, 4), np.float32)}, engine)
    assert empty["where"].shape == (2, 0) and empty["indices"].shape == (0,)


def test_a_reader_across_the_rows_is_refused_naming_it():
    model = nms_model(head=False)
    model.graph.node.append(helper.make_node("ReduceMax", ["selected"], ["most"], keepdims=0, name="summary"))
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("most", TensorProto.INT64, []))
    boxes, scores = detections(np.random.default_rng(0), 1, 20, 2)
    with pytest.raises(ModelError, match=r"op 'summary' \(Reduce\) reads 'selected', whose length along axis 0 "
                                         r"depends on the data"):
        prepare(model, {"boxes": boxes, "scores": scores})


def test_nms_over_a_variable_number_of_boxes_with_validation(tmp_path):
    """The deployment-file path: boxes 8..64 declared variable, the bound follows N."""
    path = tmp_path / "nms.onnx"
    onnx.save(nms_model(), path)
    sg = {"input_tensors": "boxes,scores", "input_shapes": ["1,8..64,4", "1,2,8..64"],
          "input_data_formats": "NONE", "output_tensors": "selected,picked", "output_data_formats": "NONE"}
    entry = {"platform": "onnx", "model_file_path": str(path), "subgraphs": [sg], "runtime": "cpu",
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest()}
    (tmp_path / "nms.yml").write_text(yaml.safe_dump({"library_name": "nms", "models": {"nms": entry}}))
    result = convert_deployment(load_deployment(tmp_path / "nms.yml"), build_dir=tmp_path / "builds")[0]
    engine = create_engine(result.pb_path)
    for n in (8, 64, 20):
        boxes, scores = detections(np.random.default_rng(n), 1, n, 2)
        run_both(nms_model(), {"boxes": boxes, "scores": scores}, engine)
        assert engine.output_specs()["selected"][0] == (2 * min(15, n), 3)


@pytest.mark.parametrize("obfuscate", [0, 1])
def test_a_detector_at_two_image_sizes(tmp_path, obfuscate):
    """Conv heads, NonMaxSuppression over every cell, kept boxes gathered: converted once with
    H and W variable, run at 32x32 and 48x40 against onnxruntime (the NMS bound follows the cells;
    obfuscate: 1 renames the length tensor the outputs are cut to)."""
    model = detector()
    path = tmp_path / "det.onnx"
    onnx.save(model, path)
    sg = {"input_tensors": "x", "input_shapes": "1,3,32..64,32..64", "input_data_formats": "NCHW",
          "output_tensors": "selected,picked", "output_data_formats": "NONE"}
    entry = {"platform": "onnx", "model_file_path": str(path), "subgraphs": [sg], "runtime": "cpu",
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest(), "obfuscate": obfuscate}
    (tmp_path / "det.yml").write_text(yaml.safe_dump({"library_name": "det", "models": {"det": entry}}))
    result = convert_deployment(load_deployment(tmp_path / "det.yml"), build_dir=tmp_path / "builds")[0]
    assert not any("stays" in n for n in result.notes), result.notes
    engine, session = create_engine(result.pb_path), ort.InferenceSession(str(path))
    for h, w in ((32, 32), (48, 40), (32, 32)):
        x = np.random.default_rng(h * w).standard_normal((1, 3, h, w)).astype(np.float32)
        ours = engine.run({"x": x})
        selected, picked = session.run(None, {"x": x})
        np.testing.assert_array_equal(ours["selected"], selected)
        np.testing.assert_allclose(ours["picked"], picked, atol=1e-6)
        assert 0 < len(selected) < engine.output_specs()["selected"][0][0] == 3 * 10
    assert engine.resize_stats == {"planned": 1, "reused": 1}


def multiclass_nms3_model(boxes=20, classes=2, keep_top_k=5):
    """The tail Paddle2ONNX writes for PaddleDetection's multiclass_nms3 (rapid-table-det's
    PP-YOLOE, tests/zoo/test_zoo_detection_nms.py): NMS, the kept rows' scores gathered, the
    best min(keep_top_k, n) by a TopK whose k comes from the Shape of those rows, class, score and
    box side by side, and the count from the Shape of the result. As the exporter writes it: a
    Squeeze after the Cast that reads it, and a stale rank-1 value_info on a rank-2 Gather."""
    c = lambda name, value, dtype=np.int64: _const(name, value, dtype)   # noqa: E731
    inits = [c("limit", [20]), c("iou", [0.4], np.float32), c("score", [0.3], np.float32),
             c("one", [1]), c("two", [2]), c("zero", [0]), c("n_boxes", [boxes]), c("flat", [-1]),
             c("top", [keep_top_k]), c("row", [1, -1, 1])]
    node = helper.make_node
    nodes = [node("NonMaxSuppression", ["boxes", "scores", "limit", "iou", "score"], ["selected"]),
             node("Gather", ["selected", "one"], ["cls"], axis=1),
             node("Gather", ["selected", "two"], ["box"], axis=1),
             node("Mul", ["cls", "n_boxes"], ["cls_offset"]),
             node("Add", ["cls_offset", "box"], ["flat_index2"]),
             node("Reshape", ["flat_index2", "flat"], ["flat_index"]),
             node("Reshape", ["scores", "flat"], ["scores_flat"]),
             node("Gather", ["scores_flat", "flat_index"], ["kept"], axis=0),
             node("Shape", ["kept"], ["kept_shape"]),
             node("Slice", ["kept_shape", "zero", "one", "zero"], ["n"]),
             node("Concat", ["n", "top"], ["n_and_top"], axis=0),
             node("ReduceMin", ["n_and_top"], ["k"], axes=[0], keepdims=1),
             node("TopK", ["kept", "k"], ["best", "best_index"]),
             node("Gather", ["cls", "best_index"], ["best_cls"], axis=0),
             node("Gather", ["box", "best_index"], ["best_box"], axis=0),
             node("Reshape", ["best", "row"], ["best_row"]),
             node("Cast", ["best_cls_squeezed"], ["best_cls_f"], to=TensorProto.FLOAT),
             node("Gather", ["boxes", "best_box_squeezed"], ["best_boxes"], axis=1),
             node("Reshape", ["best_cls_f", "row"], ["best_cls_row"]),
             node("Concat", ["best_cls_row", "best_row", "best_boxes"], ["table"], axis=2),
             node("Squeeze", ["table", "zero"], ["detections"]),
             node("Shape", ["detections"], ["detections_shape"]),
             node("Slice", ["detections_shape", "zero", "one", "zero"], ["count64"]),
             node("Cast", ["count64"], ["count"], to=TensorProto.INT32),
             node("Squeeze", ["best_cls", "one"], ["best_cls_squeezed"]),   # after its reader
             node("Squeeze", ["best_box", "one"], ["best_box_squeezed"])]
    graph = helper.make_graph(nodes, "multiclass_nms3", [
        helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, boxes, 4]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, classes, boxes])], [
        helper.make_tensor_value_info("detections", TensorProto.FLOAT, ["k", 6]),
        helper.make_tensor_value_info("count", TensorProto.INT32, [1])], inits,
        value_info=[helper.make_tensor_value_info("best_cls", TensorProto.INT64, ["k"])])   # stale: rank 2
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])


def test_paddle_multiclass_nms3_tail_keeps_the_best_rows_it_found():
    """k = min(keep_top_k, rows NMS kept), read from a Shape of those rows at run time (not the
    bound folded at convert); the TopK ranks only the kept rows, the rows it picks carry its own
    length through Gathers, a Concat and a Squeeze, and the count is the Shape of the result:
    many rows (k = 5), two, none, against onnxruntime."""
    model = multiclass_nms3_model()
    boxes, scores = detections(np.random.default_rng(3), 1, 20, 2)
    engine = None
    for scale, count in ((1.0, 5), (0.32, 2), (0.1, 0)):
        scaled = (scores * scale).astype(np.float32)
        if count == 2:   # two boxes, far apart, over the threshold
            scaled = np.full_like(scores, 0.1)
            scaled[0, 0, 3], scaled[0, 1, 12] = 0.9, 0.6
        engine, ours = run_both(model, {"boxes": boxes, "scores": scaled}, engine)
        assert ours["count"].tolist() == [count] and ours["detections"].shape == (count, 6)


def test_validation_takes_outputs_both_left_empty():
    """`run --validate` on an input where neither side keeps a box: equal, not an error; one side
    empty is a shape mismatch, named."""
    m = compare("detections", np.zeros((0, 6), np.float32), np.zeros((0, 6), np.float32), 0.999)
    assert m.passed and m.cosine == 1.0 and m.max_abs_error == 0.0
    with pytest.raises(ValueError, match=r"shape \[0, 6\] does not match the framework's \[2, 6\]"):
        compare("detections", np.ones((2, 6), np.float32), np.zeros((0, 6), np.float32), 0.999)


def test_a_validation_that_compared_nothing_fails_and_inputs_that_keep_rows_pass(tmp_path):
    """Through the CLI: NonZero of x > 0.5 on `run --validate`'s random input in [-1, 0] keeps
    nothing on either side, so nothing was compared: exit 1, saying so; the same run over an
    --input_dir whose input keeps rows compares them and passes."""
    from tests.cli_helpers import cli
    graph = helper.make_graph(
        [helper.make_node("Greater", ["x", "half"], ["mask"]), helper.make_node("NonZero", ["mask"], ["idx"])],
        "nz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [2, "n"])], [_const("half", 0.5, np.float32)])
    path = tmp_path / "nz.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    sg = {"input_tensors": "x", "input_shapes": "1,8", "input_ranges": "-1,0", "input_data_formats": "NONE",
          "output_tensors": "idx", "output_data_formats": "NONE"}
    entry = {"platform": "onnx", "model_file_path": str(path), "subgraphs": [sg], "runtime": "cpu",
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest()}
    (tmp_path / "nz.yml").write_text(yaml.safe_dump({"library_name": "nz", "models": {"nz": entry}}))
    args = ("--config=nz.yml", "--build_dir=out")
    assert cli("convert", *args, cwd=tmp_path).returncode == 0
    r = cli("run", *args, "--validate", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "nothing was compared: every output ('idx') is empty in both runs" in r.stderr
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "x.npy", np.array([[0, 1, 0, 1, 1, 0, 0, 1]], np.float32))
    r = cli("run", *args, "--validate", "--input_dir=in", cwd=tmp_path)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr
