"""Issue 18 items 6 and 7 through the CLI: each bad input gets one clear error and exit 1,
never `internal error` (exit 3), never a hang, and garbage is no longer accepted."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cli.test_cli_errors import fails
from tests.cli_helpers import cli, digits_model, sha256, small_model_entry, workdir, write_deployment


@pytest.fixture
def work(tmp_path):
    return workdir(tmp_path)


@pytest.fixture
def built(work):
    r = cli("convert", "--config=deploy.yml", "--build_dir=out", cwd=work)
    assert r.returncode == 0, r.stderr
    return work


def convert(work, models: dict, *extra, name="bad.yml", library="digits"):
    write_deployment(work / name, models, library=library)
    return cli("convert", f"--config={name}", "--build_dir=out", *extra, cwd=work)


def unchecked_onnx(path, nodes, inputs, outputs, initializers=(), opset=13):
    """An ONNX file written without onnx.checker: what a careless exporter could produce."""
    from onnx import TensorProto, helper, save

    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    save(model, str(path))
    return sha256(path)


def onnx_entry(work, nodes, inputs, outputs, initializers=(), opset=13, fmt="NONE"):
    path = work / "m.onnx"
    checksum = unchecked_onnx(path, nodes, inputs, outputs, initializers, opset)
    return small_model_entry(path, checksum, ",".join(n for n, _ in inputs),
                             ":".join(",".join(map(str, s)) for _, s in inputs),
                             ",".join(n for n, _ in outputs), fmt=fmt)


# ---- the deployment file -------------------------------------------------------------------
def test_deeply_nested_yaml(work):
    (work / "deep.yml").write_text("library_name: " + "[" * 20000 + "]" * 20000 + "\n")
    fails(cli("config", "--config=deep.yml", cwd=work, timeout=60), "deep.yml", "nested too deeply",
          code=1)


def test_nul_byte_in_a_path(work):
    fails(convert(work, {"digits_cnn": digits_model(model_file_path="digits/a\0b.onnx")}),
          "models.digits_cnn.model_file_path", "NUL", code=1)


def test_very_long_names(work):
    long = "t" * 100_000
    fails(convert(work, {"digits_cnn": digits_model(model_file_path=f"digits/{long}.onnx")}),
          "models.digits_cnn.model_file_path", "too long", code=1)
    fails(convert(work, {"digits_cnn": digits_model(output_tensors=long)}), "output_tensors", code=1)


def test_huge_output_shape(work):
    fails(convert(work, {"digits_cnn": digits_model(output_shapes=f"1,{10**30}")}),
          "models.digits_cnn.subgraphs[0].output_shapes", code=1)


def test_binary_quantize_range_file(work):
    (work / "ranges.txt").write_bytes(bytes(range(256)) * 4)
    fails(convert(work, {"digits_cnn": digits_model(quantize=1, quantize_range_file="ranges.txt")}),
          "ranges.txt", "not a text file", code=1)


# ---- ONNX models onnxruntime refuses -------------------------------------------------------
def _softmax(axis):
    from onnx import helper
    return [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=axis)]


def _conv(**attrs):
    from onnx import helper, numpy_helper
    w = numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", **attrs)
    return [node], [w]


def test_onnx_softmax_axis_out_of_range(work):
    fails(convert(work, {"m": onnx_entry(work, _softmax(99), [("x", [1, 10])], [("y", [1, 10])])}),
          "m.onnx", "sm", code=1)


@pytest.mark.parametrize("attrs, fragment", [
    ({"kernel_shape": [0, 0]}, "conv1"),
    ({"kernel_shape": [3, 3], "auto_pad": "SIDEWAYS"}, "conv1"),
    ({"kernel_shape": [3, 3], "group": 0}, "conv1"),
    ({"kernel_shape": [3, 3], "group": 3}, "conv1"),
    ({"kernel_shape": [3, 3], "group": -1}, "conv1"),
])
def test_onnx_conv_attributes_onnxruntime_refuses(work, attrs, fragment):
    nodes, inits = _conv(**attrs)
    entry = onnx_entry(work, nodes, [("x", [1, 4, 8, 8])], [("y", [1, 4, 6, 6])], inits, fmt="NCHW")
    fails(convert(work, {"m": entry}), fragment, code=1)


def test_onnx_opset_from_the_future(work):
    fails(convert(work, {"m": onnx_entry(work, _softmax(-1), [("x", [1, 10])], [("y", [1, 10])],
                                         opset=999)}), "m.onnx", "999", code=1)


def test_onnx_initializer_dims_disagree_with_its_data(work):
    from onnx import helper
    from onnx import TensorProto
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4, 3, 3])
    w.float_data.extend([1.0] * 10)   # 144 declared
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", kernel_shape=[3, 3])]
    entry = onnx_entry(work, nodes, [("x", [1, 4, 8, 8])], [("y", [1, 4, 6, 6])], [w], fmt="NCHW")
    fails(convert(work, {"m": entry}), "m.onnx", "initializer 'w'", code=1)


@pytest.mark.parametrize("data_type", [0, 999])
def test_onnx_initializer_of_no_data_type(work, data_type):
    """Issue 38: onnx's shape inference raised a bare ValueError (internal error, exit 3)."""
    from onnx import TensorProto, helper

    init = helper.make_tensor("w", TensorProto.FLOAT, [4], [1, 2, 3, 4])
    init.data_type = data_type
    entry = onnx_entry(work, [helper.make_node("Add", ["x", "w"], ["y"])], [("x", [4])], [("y", [4])], [init])
    fails(convert(work, {"m": entry}), f"initializer 'w' has data type {data_type}, which is no ONNX tensor type",
          code=1)


# ---- .npy inputs -------------------------------------------------------------------------
def _bad_npy(path, kind):
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "npz":
        np.savez(open(path, "wb"), a=np.zeros((1, 8, 8, 1), np.float32))
    elif kind == "structured":
        np.save(path, np.zeros((1, 8, 8, 1), dtype=[("a", "f4"), ("b", "i4")]))
    elif kind == "huge_header":
        header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 8, 8, 1), }"
        header += b" " * (200_000 - len(header)) + b"\n"
        path.write_bytes(b"\x93NUMPY\x02\x00" + len(header).to_bytes(4, "little") + header + bytes(256))
    elif kind == "claims_6.4e13_elements":   # numpy would allocate 256 TB before reading
        header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (64000000000000,), }"
        header += b" " * (118 - len(header)) + b"\n"
        path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(256))
    else:
        values = {"str": np.full((1, 8, 8, 1), "a"), "bytes": np.full((1, 8, 8, 1), b"a"),
                  "datetime": np.full((1, 8, 8, 1), np.datetime64("2020-01-01")),
                  "complex": np.full((1, 8, 8, 1), 1 + 2j)}[kind]
        np.save(path, values)


@pytest.mark.parametrize("kind", ["empty", "npz", "structured", "huge_header", "str", "bytes",
                                  "datetime", "complex", "claims_6.4e13_elements"])
def test_bad_npy_input(built, kind):
    (built / "in").mkdir()
    _bad_npy(built / "in" / "image.npy", kind)
    fails(cli("run", "--config=deploy.yml", "--build_dir=out", "--input_dir=in", cwd=built),
          "image.npy", code=1)


def test_output_dir_is_a_file(built):
    (built / "taken").write_text("x")
    fails(cli("run", "--config=deploy.yml", "--build_dir=out", "--output_dir=taken", cwd=built),
          "--output_dir", "taken", "not a folder", code=1)


def test_npy_header_claiming_more_than_the_file_holds(built):
    """Issue 38: the header's 6.4e13 elements were allocated (MemoryError, exit 3) before a read."""
    (built / "in").mkdir()
    _bad_npy(built / "in" / "image.npy", "claims_6.4e13_elements")
    fails(cli("run", "--config=deploy.yml", "--build_dir=out", "--input_dir=in", cwd=built),
          "image.npy is not a readable .npy file", "header says shape [64000000000000] float32 "
          "(256000000000000 bytes), but 256 bytes follow it", code=1)


def test_output_dir_that_cannot_be_made(built):
    """Issue 38: `--output_dir /proc/x` failed after the run with an internal error."""
    fails(cli("run", "--config=deploy.yml", "--build_dir=out", "--output_dir=/proc/x", cwd=built),
          "--output_dir /proc/x: cannot create the folder", code=1)


@pytest.mark.parametrize("value", ["nan", "1e308", "-1", "inf"])
def test_device_timeout_out_of_range(built, value):
    r = cli("run", "--config=deploy.yml", "--build_dir=out", "--device_yml=none.yml",
            f"--device_timeout={value}", cwd=built)
    assert r.returncode == 2 and "--device_timeout" in r.stderr, r.stderr   # a usage error
    assert "Traceback" not in r.stderr


def test_negative_dim_in_the_ir_is_refused(built):
    from mace.ir.model_io import load_net
    pb_path = built / "out" / "digits" / "model" / "digits_cnn.pb"
    net = load_net(pb_path)
    net.input_info[0].dims[1] = -8
    pb_path.write_bytes(net.SerializeToString())
    # the manifest notices first; a .pb damaged where no manifest watches is refused by its checks
    fails(cli("run", "--config=deploy.yml", "--build_dir=out", cwd=built), "digits_cnn.pb", code=1)
    (built / "out" / "digits" / "model" / "digits_cnn.manifest.json").unlink()
    from mace.errors import ModelError
    from mace.ir.model_io import load_model
    with pytest.raises(ModelError, match=r"input 'image' has dims \[1, -8, 8, 1\]"):
        load_model(pb_path)
