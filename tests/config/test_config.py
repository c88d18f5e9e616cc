"""load_deployment: MACE's deployment .yml schema, normalised, defaulted and checked."""
from __future__ import annotations

import re
import textwrap

import pytest

from mace.config import load_deployment
from mace.config.yaml_io import load_yaml
from mace.errors import ConfigError

CHECKSUM = "a" * 64


def deployment(model_extra: str = "", subgraph_extra: str = "", top_extra: str = "", *,
               subgraph: str | None = None, name: str = "mobilenet") -> str:
    """A minimal valid deployment file; the *_extra blocks are added at each level."""
    subgraph = subgraph if subgraph is not None else textwrap.dedent("""\
        - input_tensors: input
          input_shapes: 1,224,224,3
          output_tensors: prob
          output_shapes: 1,1001
        """)
    text = textwrap.dedent("""\
        library_name: mobile
        target_abis: [host]
        model_graph_format: file
        model_data_format: file
        """) + textwrap.dedent(top_extra) + textwrap.dedent(f"""\
        models:
          {name}:
            platform: onnx
            model_file_path: models/mobilenet.onnx
            model_sha256_checksum: {CHECKSUM}
        """)
    text += textwrap.indent(textwrap.dedent(model_extra), " " * 4)
    text += "    subgraphs:\n" + textwrap.indent(textwrap.dedent(subgraph), " " * 6)
    text += textwrap.indent(textwrap.dedent(subgraph_extra), " " * 8)
    return text


@pytest.fixture
def load(tmp_path):
    def _load(text: str, name: str = "deploy.yml"):
        path = tmp_path / name
        path.write_text(text)
        return load_deployment(path)
    return _load


def error_of(load, text: str, name: str = "deploy.yml") -> str:
    with pytest.raises(ConfigError) as info:
        load(text, name)
    return str(info.value)


def subgraph(**keys) -> str:
    """The subgraph list item with `keys` set (None removes a key)."""
    lines = {"input_tensors": "input", "input_shapes": "1,224,224,3", "output_tensors": "prob",
             "output_shapes": "1,1001"}
    lines.update(keys)
    items = [f"{k}: {v}" for k, v in lines.items() if v is not None]
    return "- " + "\n  ".join(items) + "\n"


def sg0(config, model="mobilenet"):
    return config.models[model].subgraphs[0]


# ---- the baseline ------------------------------------------------------------
def test_minimal_file_loads_with_defaults(load):
    config = load(deployment())
    assert config.library_name == "mobile"
    assert config.target_abis == ["host"]
    model = config.models["mobilenet"]
    assert model.platform == "onnx"
    assert model.model_file_path == "models/mobilenet.onnx"
    assert model.model_sha256_checksum == CHECKSUM
    sg = sg0(config)
    assert sg.name == "default_graph"
    assert sg.key_path == "models.mobilenet.subgraphs[0]"
    assert sg.input_tensors == ["input"]
    assert sg.input_shapes == [[1, 224, 224, 3]]
    assert sg.output_tensors == ["prob"]
    assert sg.output_shapes == [[1, 1001]]
    assert sg.input_data_formats == ["NHWC"]
    assert sg.output_data_formats == ["NHWC"]
    assert sg.input_data_types == ["float32"]
    assert sg.output_data_types == ["float32"]
    assert sg.input_ranges == [[-1.0, 1.0]]
    assert sg.runtime == "cpu"
    assert sg.data_type == "fp32_fp32"
    assert sg.winograd == 0 and sg.quantize == 0 and sg.obfuscate == 0
    assert sg.validation_inputs_data == [] and sg.validation_outputs_data == []
    assert config.warnings == []
    assert config.base_dir == config.path.parent


def test_tensor_specs_built_from_the_subgraph(load):
    sg = sg0(load(deployment(subgraph_extra="input_ranges: 0,255\n")))
    (inp,) = sg.inputs
    assert (inp.name, inp.shape, inp.data_format, inp.dtype, inp.value_range) == \
        ("input", (1, 224, 224, 3), "NHWC", "float32", (0.0, 255.0))
    (out,) = sg.outputs
    assert (out.name, out.shape, out.data_format) == ("prob", (1, 1001), "NHWC")


# ---- comma strings and lists ---------------------------------------------------
def test_comma_string_form_of_several_tensors(load):
    sg = sg0(load(deployment(subgraph=textwrap.dedent("""\
        - input_tensors: a, b
          input_shapes:
            - 1,8,8,3
            - 1, 4
          input_data_formats: NHWC,NONE
          input_ranges:
            - -1,1
            - 0,255
          output_tensors: x,y
          output_shapes: ["1,10", "1,2"]
          output_data_formats: NONE
        """))))
    assert sg.input_tensors == ["a", "b"]
    assert sg.input_shapes == [[1, 8, 8, 3], [1, 4]]
    assert sg.input_data_formats == ["NHWC", "NONE"]
    assert sg.input_ranges == [[-1.0, 1.0], [0.0, 255.0]]
    assert sg.output_tensors == ["x", "y"]
    assert sg.output_shapes == [[1, 10], [1, 2]]
    assert sg.output_data_formats == ["NONE", "NONE"]


def test_list_form_of_several_tensors(load):
    sg = sg0(load(deployment(subgraph=textwrap.dedent("""\
        - input_tensors: [a, b]
          input_shapes: [[1, 8, 8, 3], [1, 4]]
          input_data_formats: [NHWC, NONE]
          input_ranges: [[-1, 1], [0, 255]]
          output_tensors: [x]
          output_shapes: [1, 10]
          output_data_formats: [NONE]
        """))))
    assert sg.input_tensors == ["a", "b"]
    assert sg.input_shapes == [[1, 8, 8, 3], [1, 4]]
    assert sg.input_ranges == [[-1.0, 1.0], [0.0, 255.0]]
    assert sg.output_tensors == ["x"]
    assert sg.output_shapes == [[1, 10]]


def test_one_range_as_a_two_number_list(load):
    assert sg0(load(deployment(subgraph_extra="input_ranges: [0, 1]\n"))).input_ranges == [[0.0, 1.0]]


def test_spaces_in_shapes_are_stripped(load):
    assert sg0(load(deployment(subgraph=textwrap.dedent("""\
        - input_tensors: input
          input_shapes: " 1, 224 ,224, 3 "
          output_tensors: prob
        """)))).input_shapes == [[1, 224, 224, 3]]


def test_one_value_is_broadcast_to_every_tensor(load):
    sg = sg0(load(deployment(subgraph=subgraph(
        input_tensors="a,b,c", input_shapes='["1,8,8,3", "1,8,8,3", "1,8,8,3"]',
        input_data_formats="NCHW", input_data_types="int32", input_ranges="0,10",
        output_tensors="x,y", output_shapes=None, output_data_formats="NONE",
        output_data_types="float16"))))
    assert sg.input_data_formats == ["NCHW"] * 3
    assert sg.input_data_types == ["int32"] * 3
    assert sg.input_ranges == [[0.0, 10.0]] * 3
    assert sg.output_data_formats == ["NONE"] * 2
    assert sg.output_data_types == ["float16"] * 2
    assert [t.dtype for t in sg.inputs] == ["int32"] * 3


def test_model_level_input_data_types_broadcast_into_subgraphs(load):
    sg = sg0(load(deployment(model_extra="input_data_types: uint8\n", subgraph=textwrap.dedent("""\
        - input_tensors: a,b
          input_shapes: ["1,8,8,3", "1,8,8,3"]
          output_tensors: x
        """))))
    assert sg.input_data_types == ["uint8", "uint8"]
    assert sg.origin["input_data_types"] == "model"


@pytest.mark.parametrize("key, value, message", [
    ("input_data_formats", "NHWC,NHWC", "has 2 entries but there are 1 input tensors"),
    ("input_data_types", "float32,int32", "has 2 entries but there are 1 input tensors"),
    ("input_ranges", '["0,1", "0,2"]', "has 2 entries but there are 1 input tensors"),
    ("output_data_formats", "NONE,NONE", "has 2 entries but there are 1 output tensors"),
    ("output_shapes", '["1,10", "1,2"]', "has 2 entries but there are 1 output tensors"),
])
def test_count_mismatch_names_the_key_path(load, key, value, message):
    msg = error_of(load, deployment(subgraph=subgraph(**{key: value})))
    assert f"deploy.yml: models.mobilenet.subgraphs[0].{key}:" in msg
    assert message in msg


def test_input_shapes_count_mismatch(load):
    msg = error_of(load, deployment(subgraph=textwrap.dedent("""\
        - input_tensors: a,b
          input_shapes: 1,8,8,3
          output_tensors: x
        """)))
    assert "models.mobilenet.subgraphs[0].input_shapes" in msg
    assert "1 shape(s) for 2 input tensor(s)" in msg


@pytest.mark.parametrize("key, value", [
    ("output_shapes", "1,10"),                 # one shape is not every output's shape
    ("validation_inputs_data", "a.npy"),        # one file is not every input's data
    ("input_aliases", "alias"),                 # aliases are names: never broadcast
])
def test_per_tensor_lists_are_not_broadcast(load, key, value):
    two = textwrap.dedent("""\
        - input_tensors: a,b
          input_shapes: ["1,8,8,3", "1,8,8,3"]
          output_tensors: x,y
        """)
    msg = error_of(load, deployment(subgraph=two, subgraph_extra=f"{key}: {value}\n"))
    assert f"models.mobilenet.subgraphs[0].{key}" in msg
    assert "has 1 entries but there are 2" in msg


def test_bad_shape_message_names_file_and_key_path(load, tmp_path):
    msg = error_of(load, deployment(subgraph=subgraph(input_shapes="1,224,x")), name="mobile.yml")
    assert msg == (f'{tmp_path / "mobile.yml"}: models.mobilenet.subgraphs[0].input_shapes: '
                   'expected comma-separated integers, got "1,224,x"')


@pytest.mark.parametrize("key, value, fragment", [
    ("input_shapes", "1,-2", "dimensions must be >= 0"),
    ("input_ranges", "1,0", "min must be below max"),
    ("input_ranges", "a,b", 'expected "min,max"'),
    ("input_data_formats", "NHCW", "expected one of NONE, NHWC, NCHW, OIHW"),
    ("input_data_types", "float64", "expected one of"),
    ("runtime", "tpu", "expected one of cpu, gpu, dsp"),
    ("winograd", "3", "expected one of 0, 2, 4"),
    ("quantize", "2", "expected 0 or 1"),
    ("obfuscate", "maybe", "expected an integer"),
    ("cl_mem_type", "texture", "expected one of image, buffer"),
    ("order", "first", "expected an integer"),
    ("input_tensors", "[a, [b]]", "expected a single value"),
    ("input_tensors", "'a,,b'", "empty name"),
])
def test_bad_values_name_the_key(load, key, value, fragment):
    msg = error_of(load, deployment(subgraph=subgraph(**{key: value})))
    assert f"deploy.yml: models.mobilenet.subgraphs[0].{key}: " in msg
    assert fragment in msg


def test_nhwc_needs_a_4d_shape(load):
    msg = error_of(load, deployment(subgraph=textwrap.dedent("""\
        - input_tensors: input
          input_shapes: 1,10
          input_data_formats: NHWC
          output_tensors: prob
        """)))
    assert "subgraphs[0].input_data_formats" in msg and "'input'" in msg and "use NONE" in msg


# ---- ${VAR} and ON/OFF -------------------------------------------------------------
def test_environment_variables_are_substituted(load, monkeypatch):
    monkeypatch.setenv("MACE_TEST_MODEL_DIR", "/data/models")
    monkeypatch.setenv("MACE_TEST_LIB", "envlib")
    config = load(deployment().replace("library_name: mobile", "library_name: ${MACE_TEST_LIB}")
                  .replace("models/mobilenet.onnx", "${MACE_TEST_MODEL_DIR}/mobilenet.onnx"))
    assert config.library_name == "envlib"
    assert config.models["mobilenet"].model_file_path == "/data/models/mobilenet.onnx"
    assert config.env_used == {"MACE_TEST_LIB": "envlib", "MACE_TEST_MODEL_DIR": "/data/models"}


def test_unset_environment_variable_names_file_and_line(load, monkeypatch):
    monkeypatch.delenv("MACE_TEST_UNSET", raising=False)
    text = deployment().replace("models/mobilenet.onnx", "${MACE_TEST_UNSET}/m.onnx")
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "MACE_TEST_UNSET" in s)
    msg = error_of(load, text)
    assert msg.endswith(f"deploy.yml:{line}: environment variable ${{MACE_TEST_UNSET}} is not set")


def test_variables_in_comments_are_not_substituted(load, monkeypatch):
    monkeypatch.delenv("MACE_TEST_UNSET", raising=False)
    monkeypatch.setenv("MACE_TEST_LIB", "envlib")
    text = "# export ${MACE_TEST_UNSET} before converting\n" + deployment().replace(
        "library_name: mobile", "library_name: ${MACE_TEST_LIB}  # or ${MACE_TEST_UNSET}").replace(
        "platform: onnx", 'platform: "onnx"  # "${MACE_TEST_UNSET}"')
    config = load(text)
    assert config.library_name == "envlib"
    assert config.env_used == {"MACE_TEST_LIB": "envlib"}


def test_variable_after_a_hash_in_a_quoted_value_is_substituted(load, monkeypatch):
    monkeypatch.setenv("MACE_TEST_FRAG", "v2")
    config = load(deployment().replace("models/mobilenet.onnx", '"http://host/m.onnx #${MACE_TEST_FRAG}"'))
    assert config.models["mobilenet"].model_file_path == "http://host/m.onnx #v2"


def test_on_off_stay_strings_true_false_are_booleans(tmp_path):
    path = tmp_path / "flags.yml"
    path.write_text("a: ON\nb: OFF\nc: on\nd: off\ne: yes\nf: no\ng: true\nh: False\n")
    data, used = load_yaml(path)
    assert data == {"a": "ON", "b": "OFF", "c": "on", "d": "off", "e": "yes", "f": "no",
                    "g": True, "h": False}
    assert used == {}


def test_on_off_in_a_deployment_value_is_a_string(load):
    config = load(deployment(model_extra="quantize_schema: ON\nbackend: OFF\n"))
    assert config.models["mobilenet"].quantize_schema == "ON"
    assert config.models["mobilenet"].backend == "OFF"


def test_flags_accept_yaml_booleans(load):
    model = load(deployment(model_extra="obfuscate: true\nquantize: false\n")).models["mobilenet"]
    assert model.obfuscate == 1 and model.quantize == 0


# ---- defaults per runtime and thresholds ---------------------------------------------
@pytest.mark.parametrize("runtime, data_type, threshold", [
    ("cpu", "fp32_fp32", 0.999),
    ("gpu", "fp16_fp32", 0.995),
    ("dsp", "uint8", 0.98),
    ("hexagon", "uint8", 0.98),
    ("cpu+gpu", "fp16_fp32", 0.995),
    ("cpu_gpu", "fp16_fp32", 0.995),
    ("CPU", "fp32_fp32", 0.999),
])
def test_defaults_per_runtime(load, runtime, data_type, threshold):
    config = load(deployment(model_extra=f"runtime: {runtime}\n"))
    model, sg = config.models["mobilenet"], sg0(config)
    assert sg.runtime == {"hexagon": "dsp", "cpu_gpu": "cpu+gpu", "CPU": "cpu"}.get(runtime, runtime)
    assert model.data_type == data_type
    assert sg.data_type == data_type
    assert sg.origin["data_type"] == f"default for {sg.runtime}"
    assert sg.threshold() == threshold


def test_default_runtime_is_cpu(load):
    config = load(deployment())
    assert config.models["mobilenet"].origin["runtime"] == "default"
    assert sg0(config).runtime == "cpu"
    assert sg0(config).origin["runtime"] == "default"


def test_subgraph_runtime_gets_its_own_default_data_type(load):
    """A subgraph on another runtime than its model must not inherit the model's default."""
    config = load(deployment(subgraph_extra="runtime: dsp\n"))
    assert config.models["mobilenet"].data_type == "fp32_fp32"
    sg = sg0(config)
    assert sg.runtime == "dsp" and sg.data_type == "uint8"
    assert sg.origin["data_type"] == "default for dsp"
    config = load(deployment(subgraph_extra="runtime: gpu\n"))
    assert sg0(config).data_type == "fp16_fp32"


def test_explicit_data_type_checked_against_runtime(load):
    assert sg0(load(deployment(model_extra="runtime: gpu\ndata_type: fp32_fp32\n"))).data_type == "fp32_fp32"
    msg = error_of(load, deployment(model_extra="runtime: dsp\ndata_type: fp32_fp32\n"))
    assert "deploy.yml: models.mobilenet.data_type: 'fp32_fp32' is not valid for runtime dsp" in msg
    assert "uint8" in msg
    msg = error_of(load, deployment(subgraph_extra="data_type: uint8\n"))
    assert "models.mobilenet.subgraphs[0].data_type: 'uint8' is not valid for runtime cpu" in msg


def test_validation_threshold_dsp_maps_to_hexagon(load):
    config = load(deployment(model_extra="runtime: dsp\nvalidation_threshold: {DSP: 0.9}\n"))
    assert config.models["mobilenet"].validation_threshold == {"HEXAGON": 0.9}
    assert sg0(config).threshold() == 0.9


def test_validation_threshold_overrides_one_runtime_only(load):
    config = load(deployment(model_extra="validation_threshold: {CPU: 0.9, gpu: 0.5}\n"))
    assert sg0(config).validation_threshold == {"CPU": 0.9, "GPU": 0.5}
    assert sg0(config).threshold() == 0.9
    config = load(deployment(model_extra="runtime: gpu\nvalidation_threshold: {CPU: 0.9}\n"))
    assert sg0(config).threshold() == 0.995


def test_quantize_threshold_for_cpu_and_gpu_only(load):
    assert sg0(load(deployment(model_extra="quantize: 1\n"))).threshold() == 0.98
    assert sg0(load(deployment(
        model_extra="quantize_large_weights: 1\nvalidation_threshold: {QUANTIZE: 0.95}\n"))).threshold() == 0.95
    # a DSP model is quantized by nature: its own (HEXAGON) threshold applies
    assert sg0(load(deployment(
        model_extra="runtime: dsp\nquantize: 1\nvalidation_threshold: {DSP: 0.9, QUANTIZE: 0.5}\n"
    ))).threshold() == 0.9


@pytest.mark.parametrize("value, fragment", [
    ("{CPU: 1.5}", "expected a value in (0, 1]"),
    ("{CPU: 0}", "expected a value in (0, 1]"),
    ("{CPU: -0.1}", "expected a value in (0, 1]"),
    ("{CPU: high}", "expected a number"),
    ("{TPU: 0.9}", "unknown runtime 'TPU'"),
    ("0.99", "expected a mapping"),
])
def test_bad_validation_thresholds_rejected(load, value, fragment):
    msg = error_of(load, deployment(model_extra=f"validation_threshold: {value}\n"))
    assert "models.mobilenet.validation_threshold" in msg
    assert fragment in msg


def test_threshold_of_exactly_one_is_allowed(load):
    assert sg0(load(deployment(model_extra="validation_threshold: {CPU: 1.0}\n"))).threshold() == 1.0


# ---- inheritance and origins -----------------------------------------------------------
def test_subgraph_keys_override_model_keys_with_origins(load):
    config = load(deployment(
        model_extra="runtime: cpu\nwinograd: 4\ninput_ranges: 0,1\nvalidation_threshold: {CPU: 0.99}\n",
        subgraph_extra="winograd: 2\n"))
    model, sg = config.models["mobilenet"], sg0(config)
    assert model.winograd == 4 and model.origin["winograd"] == "file"
    assert sg.winograd == 2 and sg.origin["winograd"] == "file"
    assert sg.runtime == "cpu" and sg.origin["runtime"] == "model"
    assert sg.input_ranges == [[0.0, 1.0]] and sg.origin["input_ranges"] == "model"
    assert sg.validation_threshold == {"CPU": 0.99} and sg.origin["validation_threshold"] == "model"
    assert sg.quantize == 0 and sg.origin["quantize"] == "default"
    assert sg.input_tensors == ["input"] and sg.origin["input_tensors"] == "file"
    assert sg.output_data_formats == ["NHWC"] and sg.origin["output_data_formats"] == "default"
    assert config.origin["library_name"] == "file"
    assert config.origin["target_socs"] == "default"


def test_dict_form_of_subgraphs_named_and_ordered(load):
    config = load(deployment(subgraph=textwrap.dedent("""\
        tail:
          input_tensors: feat
          input_shapes: 1,7,7,32
          output_tensors: prob
          runtime: cpu
          order: 1
        head:
          input_tensors: input
          input_shapes: 1,224,224,3
          output_tensors: feat
          runtime: gpu
          order: 0
        """)))
    sgs = config.models["mobilenet"].subgraphs
    assert [s.name for s in sgs] == ["head", "tail"]
    assert [s.order for s in sgs] == [0, 1]
    assert [s.runtime for s in sgs] == ["gpu", "cpu"]
    assert [s.data_type for s in sgs] == ["fp16_fp32", "fp32_fp32"]
    assert [s.key_path for s in sgs] == ["models.mobilenet.subgraphs.head",
                                         "models.mobilenet.subgraphs.tail"]


def test_subgraph_errors_in_dict_form_name_the_subgraph(load):
    msg = error_of(load, deployment(subgraph=textwrap.dedent("""\
        head:
          input_tensors: input
          input_shapes: 1,224,x
          output_tensors: prob
        """)))
    assert "models.mobilenet.subgraphs.head.input_shapes" in msg


@pytest.mark.parametrize("subgraphs, fragment", [
    ("[]\n", "at least one subgraph"),
    ("{}\n", "at least one subgraph"),
    ("just_a_string\n", "expected a list of subgraphs"),
    ("[not_a_mapping]\n", "expected a mapping of subgraph keys"),
])
def test_bad_subgraphs_container(load, subgraphs, fragment):
    text = deployment(subgraph="").replace("    subgraphs:\n", "    subgraphs: " + subgraphs)
    msg = error_of(load, text)
    assert "models.mobilenet.subgraphs" in msg and fragment in msg


# ---- unknown / missing keys ------------------------------------------------------------
def test_unknown_keys_warn_with_did_you_mean(load):
    config = load(deployment(top_extra="target_soc: [sdm845]\n", model_extra="runtme: cpu\n",
                             subgraph_extra="input_shape: 1,2\nfoo_bar_baz: 1\n"))
    w = config.warnings
    assert "target_soc: unknown key, ignored (did you mean 'target_socs'?)" in w
    assert "models.mobilenet.runtme: unknown key, ignored (did you mean 'runtime'?)" in w
    assert ("models.mobilenet.subgraphs[0].input_shape: unknown key, ignored "
            "(did you mean 'input_shapes'?)") in w
    assert "models.mobilenet.subgraphs[0].foo_bar_baz: unknown key, ignored" in w
    assert len(w) == 4


@pytest.mark.parametrize("remove, key_path", [
    ("    platform: onnx\n", "models.mobilenet.platform"),
    ("    model_sha256_checksum: " + CHECKSUM + "\n", "models.mobilenet.model_sha256_checksum"),
    ("    model_file_path: models/mobilenet.onnx\n", "models.mobilenet.model_file_path"),
    ("        output_tensors: prob\n", "models.mobilenet.subgraphs[0].output_tensors"),
])
def test_missing_required_key(load, remove, key_path):
    text = deployment()
    assert remove in text
    msg = error_of(load, text.replace(remove, ""))
    assert f"deploy.yml: {key_path}: required key is missing" in msg


def test_missing_required_key_points_at_a_misspelling(load):
    msg = error_of(load, deployment().replace("platform:", "platfrom:"))
    assert "platform: required key is missing" in msg
    assert "platfrom" in msg


@pytest.mark.parametrize("line, key_path", [
    ("models:\n", "models"),
])
def test_required_keys_without_a_value(load, line, key_path):
    text = deployment()
    if key_path == "models":
        text = text[:text.index("models:")] + line
    else:
        text = text.replace("library_name: mobile\n", line)
    msg = error_of(load, text)
    assert f"deploy.yml: {key_path}:" in msg


def test_empty_required_tensor_list(load):
    msg = error_of(load, deployment(subgraph=textwrap.dedent("""\
        - input_tensors:
          input_shapes: 1,2
          output_tensors: prob
        """)))
    assert "models.mobilenet.subgraphs[0].input_tensors" in msg


def test_weight_file_needs_its_checksum(load):
    msg = error_of(load, deployment(model_extra="weight_file_path: w.caffemodel\n"))
    assert "models.mobilenet.weight_sha256_checksum: required when weight_file_path is set" in msg


def test_checksums_are_lower_cased(load):
    config = load(deployment().replace(CHECKSUM, CHECKSUM.upper()))
    assert config.models["mobilenet"].model_sha256_checksum == CHECKSUM


@pytest.mark.parametrize("name", ["-model", ".hidden", "a..b", "my model", "a/b", "m$(x)", "x" * 129])
def test_unsafe_model_names_rejected(load, name):
    msg = error_of(load, deployment(name=f"'{name}'"))
    assert f"models.{name}" in msg and ("not a safe file name" in msg or "too long" in msg)


def test_valid_model_names(load):
    # MACE's zoo: mobilenet-v1-quantize-retrain, squeezenet_v1_1, ...; keywords are mangled for code
    for name in ("_m", "mobilenet_v2", "Model1", "mobilenet-v1-quantize-retrain", "v1.1", "1model", "class"):
        assert list(load(deployment(name=f"'{name}'")).models) == [name]


def test_model_names_whose_identifiers_collide_are_refused(load):
    text = deployment()
    model = text[text.index("  mobilenet:"):]
    msg = error_of(load, text.replace("  mobilenet:", "  mobile-net:") + model.replace("  mobilenet:", "  mobile_net:"))
    assert "'mobile-net' and 'mobile_net'" in msg and "mobile_net" in msg


def test_graph_file_with_data_code_rejected(load):
    msg = error_of(load, deployment().replace("model_data_format: file", "model_data_format: code"))
    assert "deploy.yml: model_data_format:" in msg and "model_graph_format: code" in msg
    config = load(deployment().replace("model_graph_format: file", "model_graph_format: code")
                  .replace("model_data_format: file", "model_data_format: code"))
    assert config.model_graph_format == "code" and config.model_data_format == "code"


def test_formats_default_to_file(load):
    text = deployment().replace("model_graph_format: file\n", "").replace("model_data_format: file\n", "")
    config = load(text)
    assert config.model_graph_format == "file" and config.model_data_format == "file"
    assert config.origin["model_graph_format"] == "default"


@pytest.mark.parametrize("name", ["../escape", "a/b", "-flag", ".hidden", "a..b", "a b",
                                  """'x\"\"\"+str(open("pwned","w"))+\"\"\"'""", "'L$(touch$IFS''x'')'",
                                  "x" * 129])
def test_unsafe_library_names_are_refused(load, name):
    # it names a folder here and on a board (in a remote shell's command line); code uses its identifier
    msg = error_of(load, deployment().replace("library_name: mobile", f"library_name: {name}"))
    assert "deploy.yml: library_name: " in msg
    assert "not a safe file name" in msg or "too long" in msg


@pytest.mark.parametrize("name, ident", [("mobile", "mobile"), ("_lib", "_lib"), ("Lib2", "Lib2"),
                                         ("my-lib", "my_lib"), ("lib.v2", "lib_v2"), ("1lib", "_1lib"),
                                         ("class", "class_"), ("import", "import_"), ("x" * 128, "x" * 128)])
def test_valid_library_names(load, name, ident):
    from mace.config.files import package_name

    config = load(deployment().replace("library_name: mobile", f"library_name: {name}"))
    assert config.library_name == name and package_name(name) == ident + "_models"
    assert (ident + "_models").isidentifier()


def test_without_library_name_the_only_model_names_the_library(load):
    for text in (deployment().replace("library_name: mobile\n", ""),
                 deployment().replace("library_name: mobile\n", "library_name:\n")):   # no value: not given
        config = load(text)
        assert config.library_name == "mobilenet" and config.origin["library_name"] == "the only model's name"


def test_without_library_name_several_models_take_the_file_name(load):
    text = deployment().replace("library_name: mobile\n", "")
    model = text[text.index("  mobilenet:"):]
    config = load(text + model.replace("  mobilenet:", "  second:"), name="my-models.yml")
    assert config.library_name == "my-models" and config.origin["library_name"] == "the file's name"
    msg = error_of(load, text + model.replace("  mobilenet:", "  second:"), name="bad name.yml")
    assert "library_name: not given, and the file's name cannot stand for it" in msg


@pytest.mark.parametrize("models, fragment", [
    ("{}", "non-empty mapping"),
    ("[a, b]", "non-empty mapping"),
])
def test_models_must_be_a_mapping(load, models, fragment):
    text = deployment()
    text = text[:text.index("models:")] + f"models: {models}\n"
    assert fragment in error_of(load, text)


def test_model_must_be_a_mapping(load):
    text = deployment()
    text = text[:text.index("models:")] + "models:\n  mobilenet: 3\n"
    assert "models.mobilenet: expected a mapping of model keys" in error_of(load, text)


# ---- YAML-level errors -----------------------------------------------------------------
def test_invalid_yaml_reports_file_line_column(load):
    msg = error_of(load, "library_name: x\nmodels:\n  m: [1, 2\n  n: 3\n", name="broken.yml")
    m = re.search(r"broken\.yml:(\d+):(\d+): invalid YAML", msg)
    assert m, msg
    assert int(m.group(1)) >= 3


def test_duplicate_key_reports_position(load):
    text = deployment(subgraph_extra="input_shapes: 1,2,3,4\n")
    line = len(text.splitlines())
    msg = error_of(load, text, name="dup.yml")
    assert f"dup.yml:{line}:9: invalid YAML: duplicate key 'input_shapes'" in msg


def test_anchors_and_merge_keys_still_work(load):
    text = deployment(name="first") + "  second:\n    <<: *model\n    runtime: cpu\n"
    text = text.replace("  first:\n", "  first: &model\n")
    config = load(text)
    assert list(config.models) == ["first", "second"]
    assert config.models["second"].model_file_path == "models/mobilenet.onnx"
    assert sg0(config, "second").input_shapes == [[1, 224, 224, 3]]


def test_tab_indentation_reports_position(load):
    msg = error_of(load, "library_name: x\nmodels:\n\tm: 1\n", name="tabs.yml")
    assert "tabs.yml:3:1: invalid YAML" in msg


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "", "# only a comment\n", "42\n"])
def test_top_level_must_be_a_mapping(load, text):
    msg = error_of(load, text, name="top.yml")
    assert "top.yml: expected a mapping of keys at the top level" in msg


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yml: file not found"):
        load_deployment(tmp_path / "nope.yml")


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_deployment(tmp_path)


def test_binary_file_is_a_config_error(tmp_path):
    path = tmp_path / "bin.yml"
    path.write_bytes(b"\xff\xfe\x00\x81garbage\x00")
    with pytest.raises(ConfigError, match="bin.yml"):
        load_deployment(path)


# ---- keys for later features are parsed and carried --------------------------------
def test_every_later_feature_key_is_parsed_and_carried(load):
    config = load(deployment(
        top_extra="target_socs: SDM845, MT6771\napu_version_with_no_device: 3\n",
        model_extra=textwrap.dedent("""\
            runtime: gpu
            data_type: fp16_fp16
            limit_opencl_kernel_time: 1
            opencl_queue_window_size: 16
            nnlib_graph_mode: 2
            obfuscate: 1
            winograd: 4
            quantize_large_weights: 1
            quantize_range_file: ranges.txt
            quantize_schema: int8
            quantize_stat: 1
            change_concat_ranges: 1
            cl_mem_type: buffer
            graph_optimize_options: [fold_batchnorm, fuse_activation]
            backend: tensorflow
            accuracy_validation_script: acc.py
            validation_outputs_data: [out.npy]
            check_tensors: conv1, conv2
            check_shapes: ["1,112,112,32", "1,56,56,64"]
            docker_image_tag: lastest
            dockerfile_path: docker/Dockerfile
            dockerfile_sha256_checksum: abc
            accelerator_api: qnn
            dsp_backend: nnlib
            micro: {backend: cmsis}
            weight_file_path: w.caffemodel
            weight_sha256_checksum: BEEF
            """),
        subgraph_extra=textwrap.dedent("""\
            input_aliases: in0
            output_aliases: out0
            validation_inputs_data: in.npy
            quantize: 0
            order: 3
            """)))
    assert config.target_socs == ["sdm845", "mt6771"]
    assert config.apu_version_with_no_device == "3"
    model = config.models["mobilenet"]
    sg = sg0(config)
    for level in (model, sg):
        assert level.runtime == "gpu" and level.data_type == "fp16_fp16"
        assert level.limit_opencl_kernel_time == 1
        assert level.opencl_queue_window_size == 16
        assert level.nnlib_graph_mode == 2
        assert level.obfuscate == 1
        assert level.winograd == 4
        assert level.quantize_large_weights == 1
        assert level.quantize_range_file == "ranges.txt"
        assert level.quantize_schema == "int8"
        assert level.quantize_stat == 1
        assert level.change_concat_ranges == 1
        assert level.cl_mem_type == "buffer"
        assert level.graph_optimize_options == ["fold_batchnorm", "fuse_activation"]
        assert level.backend == "tensorflow"
        assert level.accuracy_validation_script == "acc.py"
        assert level.validation_outputs_data == ["out.npy"]
        assert level.check_tensors == ["conv1", "conv2"]
        assert level.check_shapes == [[1, 112, 112, 32], [1, 56, 56, 64]]
        assert level.docker_image_tag == "lastest"
        assert level.dockerfile_path == "docker/Dockerfile"
        assert level.dockerfile_sha256_checksum == "abc"
        assert level.accelerator_api == "qnn"
        assert level.dsp_backend == "nnlib"
        assert level.micro == {"backend": "cmsis"}
    assert model.weight_file_path == "w.caffemodel"
    assert model.weight_sha256_checksum == "beef"
    assert sg.quantize == 0 and model.quantize == 0
    assert sg.input_aliases == ["in0"] and sg.output_aliases == ["out0"]
    assert sg.validation_inputs_data == ["in.npy"]
    assert sg.order == 3
    # every key known; the two that nothing reads in this model say so (issue 38)
    assert config.warnings == ["models.mobilenet.dsp_backend: given, but no op of this model runs on the DSP "
                               "(runtime gpu): ignored",
                               "models.mobilenet.quantize_schema: given, but quantize is 0: ignored"]


def test_unknown_attribute_raises_attribute_error(load):
    sg = sg0(load(deployment()))
    with pytest.raises(AttributeError):
        sg.no_such_key  # noqa: B018


def test_new_keys_that_nothing_reads_are_warned_about(tmp_path):
    """Issue 38: dsp_backend on a cpu model, quantize_schema without quantize and an
    original_model_file_path without a backend that runs it were taken silently."""
    from tests.cli_helpers import cli, digits_model, workdir, write_deployment
    work = workdir(tmp_path)
    write_deployment(work / "odd.yml", {"digits_cnn": digits_model(
        dsp_backend="hexagon_sim", quantize_schema="int8", original_model_file_path="digits/digits_cnn.onnx")})
    r = cli("config", "--config=odd.yml", cwd=work, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert "models.digits_cnn.dsp_backend: given, but no op of this model runs on the DSP (runtime cpu): " \
           "ignored" in out, out
    assert "models.digits_cnn.quantize_schema: given, but quantize is 0: ignored" in out, out
    assert "original_model_file_path digits/digits_cnn.onnx is not used: backend is onnxruntime" in out, out
    # calibration and mixed precision of a float model; the original's names without the original
    model = digits_model(quantize_calibration_data="digits/inputs", quantize_target_cosine=0.99,
                         quantize_range_file="r.txt", original_model_sha256_checksum="ab" * 32)
    model["subgraphs"][0]["original_output_tensors"] = ["prob"]
    write_deployment(work / "float.yml", {"digits_cnn": model})
    r = cli("config", "--config=float.yml", cwd=work, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    for key in ("quantize_calibration_data", "quantize_target_cosine"):
        assert f".{key}: given, but quantize is 0: ignored" in out, out
    assert "quantize_range_file: given" not in out   # MACE's key: MACE ignores it in a float model too
    assert "models.digits_cnn.original_model_sha256_checksum: given, but no original_model_file_path: " \
           "ignored" in out, out
    assert ".original_output_tensors: given, but no original_model_file_path: ignored" in out, out
    write_deployment(work / "fine.yml", {"digits_cnn": digits_model(quantize=1, quantize_schema="int8",
                                                                    quantize_calibration_data="digits/inputs",
                                                                    quantize_target_cosine=0.99)})
    r = cli("config", "--config=fine.yml", cwd=work, timeout=60)
    assert r.returncode == 0 and "ignored" not in r.stdout + r.stderr, r.stdout + r.stderr
