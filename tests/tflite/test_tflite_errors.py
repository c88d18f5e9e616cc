"""What the TFLite frontend refuses, each refusal naming the file, op or tensor at fault."""
import numpy as np
import pytest

from mace.errors import ModelError, UnsupportedOpError
from mace.frontends import convert
from mace.config.specs import ModelSpec, TensorSpec
from mace.frontends.tflite.model_file import read_model
from tests.cli_helpers import cli, sha256, write_deployment
from tests.tflite.tfl_case import tf, to_tflite


def spec(path, inputs=(("x0", (1, 4, 4, 2)),), outputs=None):
    outputs = outputs or [read_model(path).tensors[i].name for i in read_model(path).outputs]
    return ModelSpec(path, [TensorSpec(n, s, "NHWC") for n, s in inputs],
                     [TensorSpec(o, None, "NONE") for o in outputs])


@pytest.fixture(scope="module")
def cumsum_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("tfl_err") / "cumsum.tflite"
    return to_tflite(lambda x: tf.math.cumsum(tf.nn.relu(x), axis=1) + tf.math.cumsum(x, axis=2),
                     [(1, 4, 4, 2)], path)


def as_custom_op(src, dst):
    """`src` with its CUMSUM op code turned into an (unnamed) custom op, patched in place."""
    import tflite

    buf = bytearray(src.read_bytes())
    model = tflite.Model.GetRootAsModel(buf, 0)
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        if code.BuiltinCode() == tflite.BuiltinOperator.CUMSUM:
            for field, size in ((4, 1), (10, 4)):   # deprecated_builtin_code (int8), builtin_code (int32)
                o = code._tab.Offset(field)
                if o:
                    buf[code._tab.Pos + o:code._tab.Pos + o + size] = \
                        int(tflite.BuiltinOperator.CUSTOM).to_bytes(size, "little")
    dst.write_bytes(bytes(buf))
    return dst


def test_unsupported_builtins_are_listed_with_the_supported_ones(cumsum_model):
    with pytest.raises(UnsupportedOpError) as e:
        convert("tflite", spec(cumsum_model))
    msg = str(e.value)
    assert str(cumsum_model) in msg and "unsupported TFLite op(s): CUMSUM (op " in msg
    assert "Supported: " in msg and "CONV_2D" in msg and "RELU" in msg


def test_custom_op_is_named(cumsum_model, tmp_path):
    path = as_custom_op(cumsum_model, tmp_path / "custom.tflite")
    assert "CUSTOM" in {op.type for op in read_model(path).ops}
    with pytest.raises(UnsupportedOpError, match=r"custom op \(unnamed\) \(op .*Supported: "):
        convert("tflite", spec(path))


def test_not_a_flatbuffer(tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelError, match=r"model.tflite: not a TFLite FlatBuffer"):
        read_model(path)


def test_truncated_flatbuffer(cumsum_model, tmp_path):
    path = tmp_path / "cut.tflite"
    path.write_bytes(cumsum_model.read_bytes()[:200])
    with pytest.raises(ModelError, match=r"cut.tflite: cannot read the TFLite FlatBuffer"):
        read_model(path)


def test_wrong_input_name_lists_the_inputs(cumsum_model):
    with pytest.raises(ModelError, match=r"input tensor 'image' is not in the model; its inputs are \['x0'\]"):
        convert("tflite", spec(cumsum_model, inputs=(("image", (1, 4, 4, 2)),)))


def test_wrong_input_shape(cumsum_model):
    with pytest.raises(ModelError, match=r"input tensor 'x0': shape \[1, 4, 4, 3\].*declares \[1, 4, 4, 2\]"):
        convert("tflite", spec(cumsum_model, inputs=(("x0", (1, 4, 4, 3)),)))


def test_wrong_output_name(cumsum_model):
    with pytest.raises(ModelError, match=r"output tensor 'prob' is not computed by the model"):
        convert("tflite", spec(cumsum_model, outputs=["prob"]))


def test_cli_reports_unsupported_ops_without_traceback(cumsum_model, tmp_path):
    out = [read_model(cumsum_model).tensors[i].name for i in read_model(cumsum_model).outputs][0]
    model = {"platform": "tflite", "model_file_path": str(cumsum_model),
             "model_sha256_checksum": sha256(cumsum_model), "runtime": "cpu",
             "subgraphs": [{"input_tensors": "x0", "input_shapes": "1,4,4,2", "output_tensors": out,
                            "output_data_formats": "NONE"}]}
    yml = write_deployment(tmp_path / "deploy.yml", {"m": model}, library="tfl")
    r = cli("convert", "--config", yml, cwd=tmp_path)
    assert r.returncode != 0
    assert "CUMSUM" in r.stderr + r.stdout and "Traceback" not in r.stderr
    assert not (tmp_path / "builds" / "tfl" / "model" / "m.pb").exists()


def test_integer_inputs_of_another_type_are_refused(tmp_path):
    """int8 inputs are taken as int8 (the integers) or float32 (the reals): uint8 names the choices."""
    import numpy as np

    conv = tf.lite.TFLiteConverter.from_concrete_functions([tf.function(lambda x: tf.nn.relu(x) * 2.0)
                                                           .get_concrete_function(
                                                               tf.TensorSpec((1, 4, 4, 2), tf.float32, name="x0"))])
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = conv.inference_output_type = tf.int8
    conv.representative_dataset = lambda: ([np.full((1, 4, 4, 2), v, np.float32)] for v in (-1.0, 1.0))
    path = tmp_path / "int8_io.tflite"
    path.write_bytes(conv.convert())
    model = read_model(path)
    name = model.tensors[model.inputs[0]].name
    with pytest.raises(ModelError, match=rf"input tensor '{name}' is quantized INT8 \(scale .*, zero point "
                                         rf"-?\d+\); input_data_types may be int8 \(the integers\) or float32 "
                                         rf"\(the real values\), not uint8"):
        convert("tflite", ModelSpec(path, [TensorSpec(name, (1, 4, 4, 2), "NHWC", dtype="uint8")],
                                    [TensorSpec(model.tensors[model.outputs[0]].name, None, "NONE")]))


def _patched(src, dst, edit):
    """`src` with `edit(buf, model)` applied to its bytes in place (no offsets move)."""
    import tflite

    buf = bytearray(src.read_bytes())
    edit(buf, tflite.Model.GetRootAsModel(buf, 0))
    dst.write_bytes(bytes(buf))
    return dst


def _set_int32(buf, table, field: int, j: int, value: int):
    """Element j of the int32 vector in `field` of a FlatBuffer table (flatbuffers' own offsets)."""
    at = table._tab.Vector(table._tab.Offset(field)) + 4 * j
    buf[at:at + 4] = value.to_bytes(4, "little", signed=True)


@pytest.mark.parametrize("where, value", [("op_input", 999), ("op_input", -7), ("op_output", 10**6),
                                          ("graph_output", -1), ("opcode", 77)])
def test_indices_out_of_range_are_refused(cumsum_model, tmp_path, where, value):
    """Issue 38: indices past the tensor list were an internal error (IndexError) or, negative,
    wrapped around to other tensors."""
    def edit(buf, model):
        sg = model.Subgraphs(0)
        op = sg.Operators(0)
        if where == "op_input":
            _set_int32(buf, op, 6, 0, value)          # Operator.inputs
        elif where == "op_output":
            _set_int32(buf, op, 8, 0, value)          # Operator.outputs
        elif where == "graph_output":
            _set_int32(buf, sg, 8, 0, value)          # SubGraph.outputs
        else:   # Operator.opcode_index (uint32), of an op whose index is not the default 0 (not stored)
            op = next(o for o in map(sg.Operators, range(sg.OperatorsLength())) if o._tab.Offset(4))
            at = op._tab.Pos + op._tab.Offset(4)
            buf[at:at + 4] = value.to_bytes(4, "little")

    path = _patched(cumsum_model, tmp_path / "bad.tflite", edit)
    with pytest.raises(ModelError, match=r"bad.tflite: .*(name tensor|names operator code) .*damaged or hand-edited"):
        read_model(path)


@pytest.fixture(scope="module")
def per_channel_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("tfl_pc") / "conv_int8.tflite"
    w = tf.constant(np.random.default_rng(0).normal(size=(3, 3, 2, 4)).astype(np.float32))
    return to_tflite(lambda x: tf.nn.conv2d(x, w, 1, "SAME"), [(1, 4, 4, 2)], path, mode="int8")


def test_per_channel_counts_that_do_not_match_are_refused(per_channel_model, tmp_path):
    """Issue 38: a per-channel scale vector shorter than the channel count, or a quantized_dimension
    out of range, reached the kernels (reshape errors, wrong values)."""
    import tflite

    model = tflite.Model.GetRootAsModel(per_channel_model.read_bytes(), 0)
    sg = model.Subgraphs(0)
    index = next(i for i in range(sg.TensorsLength())
                 if sg.Tensors(i).Quantization() and sg.Tensors(i).Quantization().ScaleLength() > 1)

    def fewer_scales(buf, model):
        q = model.Subgraphs(0).Tensors(index).Quantization()
        at = q._tab.Vector(q._tab.Offset(8)) - 4     # QuantizationParameters.scale: its length
        buf[at:at + 4] = (q.ScaleLength() - 1).to_bytes(4, "little")

    path = _patched(per_channel_model, tmp_path / "few.tflite", fewer_scales)
    with pytest.raises(ModelError, match=r"few.tflite: tensor '.*' \[.*\]: \d+ scales for \d+ channels"):
        read_model(path)
    # quantized_dimension 0 is the default, which converters do not store: checked on the record
    from mace.frontends.tflite.model_file import TflTensor, _check_quantization
    t = TflTensor(0, "w", (4, 3, 3, 2), "INT8", None, np.ones(4, np.float32), np.zeros(4, np.int64), 9)
    with pytest.raises(ModelError, match=r"m.tflite: tensor 'w' \[4, 3, 3, 2\]: quantized_dimension 9 is out of range"):
        _check_quantization("m.tflite", t)
    t.quantized_dimension, t.zero_point = 0, np.zeros(3, np.int64)
    with pytest.raises(ModelError, match=r"3 zero points for 4 scales"):
        _check_quantization("m.tflite", t)


@pytest.mark.parametrize("scale, zero_point, needle", [(0.0, None, "quantization scale [0.0]"),
                                                       (-0.5, None, "quantization scale [-0.5]"),
                                                       (1e-45, None, "quantization scale"),
                                                       (float("nan"), None, "quantization scale [nan]"),
                                                       (None, 300, "zero point [300], outside -128..127")])
def test_degenerate_activation_quantization_is_refused(per_channel_model, tmp_path, scale, zero_point, needle):
    """Issue 38: an int8 activation of scale 0, negative or denormal, or a zero point outside its
    type, made LiteRT segfault inside our process during --validate; refused when the file is read."""
    import struct

    import tflite

    model = tflite.Model.GetRootAsModel(per_channel_model.read_bytes(), 0)
    sg = model.Subgraphs(0)

    def int8_activation(t) -> bool:   # no constant data, one scale and one zero point
        q = t.Quantization()
        return (t.Type() == tflite.TensorType.INT8 and (t.Buffer() == 0 or model.Buffers(t.Buffer()).DataLength() == 0)
                and q is not None and q.ScaleLength() == 1 and q.ZeroPointLength() == 1)

    index = next(i for i in range(sg.TensorsLength()) if int8_activation(sg.Tensors(i)))

    def edit(buf, model):
        q = model.Subgraphs(0).Tensors(index).Quantization()
        if scale is not None:   # QuantizationParameters.scale (float32 vector, field 8)
            at = q._tab.Vector(q._tab.Offset(8))
            buf[at:at + 4] = struct.pack("<f", scale)
        if zero_point is not None:   # .zero_point (int64 vector, field 10)
            at = q._tab.Vector(q._tab.Offset(10))
            buf[at:at + 8] = struct.pack("<q", zero_point)

    path = _patched(per_channel_model, tmp_path / "q.tflite", edit)
    with pytest.raises(ModelError, match=r"q.tflite: tensor '.*'") as e:
        read_model(path)
    assert needle in str(e.value), str(e.value)


def test_litert_refusing_the_model_is_named_as_litert_s_refusal(per_channel_model, tmp_path):
    """Issue 38: an op version LiteRT lacks failed while making its interpreter, outside the
    handler that names LiteRT: an internal error."""
    pytest.importorskip("ai_edge_litert", reason="LiteRT is the reference")
    from mace.validate.reference import run_litert

    def edit(buf, model):
        code = next(c for c in map(model.OperatorCodes, range(model.OperatorCodesLength())) if c._tab.Offset(8))
        at = code._tab.Pos + code._tab.Offset(8)      # OperatorCode.version (int32)
        buf[at:at + 4] = (99).to_bytes(4, "little")

    path = _patched(per_channel_model, tmp_path / "v99.tflite", edit)
    model = read_model(path)   # our reader does not care about op versions
    name = model.tensors[model.inputs[0]].name
    with pytest.raises(ModelError, match=r"v99.tflite: LiteRT refuses the reference model: .*99"):
        run_litert(path, {name: np.zeros((1, 4, 4, 2), np.float32)}, [model.tensors[model.outputs[0]].name])


def test_an_input_dimension_of_0_is_refused_at_convert(tmp_path):
    """Issue 38: a model input of dimension 0 (deployment file agreeing) converted into a model that
    runs nothing and exits 0; LiteRT refuses it only when a kernel prepares (conv: dims->data[1] > 0)."""
    src = to_tflite(lambda x: tf.nn.relu(x) * 2.0, [(1, 4, 4, 2)], tmp_path / "relu.tflite")

    def edit(buf, model):
        sg = model.Subgraphs(0)
        t = sg.Tensors(sg.Inputs(0))
        for field in (4, 16):   # Tensor.shape, Tensor.shape_signature
            if t._tab.Offset(field):
                _set_int32(buf, t, field, 1, 0)

    path = _patched(src, tmp_path / "dim0.tflite", edit)
    model = read_model(path)
    out = model.tensors[model.outputs[0]].name
    yml = write_deployment(tmp_path / "deploy.yml", {"m": {
        "platform": "tflite", "model_file_path": str(path), "model_sha256_checksum": sha256(path), "runtime": "cpu",
        "subgraphs": [{"input_tensors": "x0", "input_shapes": "1,0,4,2", "output_tensors": out}]}}, library="tfl")
    r = cli("convert", "--config", yml, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "dim0.tflite: input tensor 'x0': shape [1, 0, 4, 2] has a dimension 0" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "builds/tfl/model/m.pb").exists()
    # the size given where the model says 0: LiteRT resizes and runs it, so do we
    convert("tflite", spec(path))


def test_a_subgraph_count_past_the_file_is_refused_at_once(cumsum_model, tmp_path):
    """Found by the tflite fuzz target: a damaged subgraphs length (2^30) made read_model try
    every one of them (unreadable subgraphs are reported later, so each failure was swallowed)."""
    def edit(buf, model):
        at = model._tab.Vector(model._tab.Offset(8)) - 4   # Model.subgraphs: the vector's length
        buf[at:at + 4] = (1 << 30).to_bytes(4, "little")

    path = _patched(cumsum_model, tmp_path / "many.tflite", edit)
    with pytest.raises(ModelError, match=r"many.tflite: the file claims 1073741824 subgraphs, more than its"):
        read_model(path)
