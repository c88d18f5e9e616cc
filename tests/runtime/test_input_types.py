"""The Python API takes an input of another dtype only when converting it loses nothing: a float
array of whole numbers for token ids is converted, 2.5 or a value past the type's range is
refused naming the input (numpy's cast used to truncate or wrap it silently; issue 37, item 7).
Float inputs take any real array, as before (float64 inputs are what most callers pass)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from mace.errors import RuntimeInputError
from mace.runtime import create_engine
from tests.cli_helpers import cli, sha256, write_deployment
from tests.ops.onnx_encoder import bert_encoder, token_batch


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """The BERT-style encoder (int64 input_ids and attention_mask), converted by the CLI."""
    work = tmp_path_factory.mktemp("encoder")
    model, outputs = bert_encoder(opset=14, layers=1)
    onnx.save(model, str(work / "encoder.onnx"))
    entry = {"platform": "onnx", "model_file_path": "encoder.onnx", "model_sha256_checksum": sha256(work / "encoder.onnx"),
             "runtime": "cpu", "subgraphs": [{
                 "input_tensors": ["input_ids", "attention_mask"], "input_shapes": ["2,8", "2,8"],
                 "input_data_types": "int64", "input_data_formats": "NONE", "output_tensors": outputs,
                 "output_shapes": ["2,8,32", "2,32", "2,32"], "output_data_formats": "NONE"}]}
    write_deployment(work / "enc.yml", {"enc": entry}, library="enc")
    r = cli("convert", "--config=enc.yml", "--build_dir=out", cwd=work, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return create_engine(work / "out/enc/model/enc.pb")


def test_whole_float_token_ids_are_converted_exactly(encoder):
    ids, mask = token_batch(batch=2, seq=8)
    want = encoder.run({"input_ids": ids, "attention_mask": mask})
    for kind in (np.float32, np.float64, np.int32):
        got = encoder.run({"input_ids": ids.astype(kind), "attention_mask": mask.astype(kind)})
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("bad,says", [(2.5, "not whole numbers (e.g. 2.5)"), (np.nan, "not whole numbers"),
                                      (2.0 ** 63, "outside its range")])
def test_a_lossy_conversion_is_refused_naming_the_input(encoder, bad, says):
    ids, mask = token_batch(batch=2, seq=8)
    ids = ids.astype(np.float64)
    ids[1, 3] = bad
    with pytest.raises(RuntimeInputError, match=r"input tensor 'input_ids' is int64") as e:
        encoder.run({"input_ids": ids, "attention_mask": mask})
    assert says in str(e.value)


def test_int32_input_takes_whole_floats_and_refuses_the_rest(tmp_path):
    """An int32 input (Gather indices), as a TF or hand-written ONNX model has one."""
    table = helper.make_tensor("table", TensorProto.FLOAT, [5, 2], list(range(10)))
    graph = helper.make_graph([helper.make_node("Gather", ["table", "idx"], ["y"])], "g",
                              [helper.make_tensor_value_info("idx", TensorProto.INT32, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])], [table])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8),
              str(tmp_path / "g.onnx"))
    entry = {"platform": "onnx", "model_file_path": "g.onnx", "model_sha256_checksum": sha256(tmp_path / "g.onnx"),
             "runtime": "cpu", "subgraphs": [{"input_tensors": "idx", "input_shapes": "3", "input_data_types": "int32",
                                              "input_data_formats": "NONE", "output_tensors": "y",
                                              "output_shapes": "3,2", "output_data_formats": "NONE"}]}
    write_deployment(tmp_path / "g.yml", {"g": entry}, library="g")
    r = cli("convert", "--config=g.yml", "--build_dir=out", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    engine = create_engine(tmp_path / "out/g/model/g.pb")
    assert engine.input_specs()["idx"][1] == np.int32
    want = engine.run({"idx": np.array([4, 0, 2], np.int32)})["y"]
    np.testing.assert_array_equal(want, [[8, 9], [0, 1], [4, 5]])
    np.testing.assert_array_equal(engine.run({"idx": np.array([4.0, 0.0, 2.0], np.float32)})["y"], want)
    np.testing.assert_array_equal(engine.run({"idx": np.array([4, 0, 2], np.int64)})["y"], want)
    with pytest.raises(RuntimeInputError, match=r"input tensor 'idx' is int32: got float32 values that are not "
                                                r"whole numbers \(e.g. 0.5\)"):
        engine.run({"idx": np.array([4.0, 0.5, 2.0], np.float32)})
    with pytest.raises(RuntimeInputError, match=r"input tensor 'idx' is int32: got int64 values outside its range"):
        engine.run({"idx": np.array([4, 2 ** 32, 2], np.int64)})
