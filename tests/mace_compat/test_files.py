"""MACE-style deployment and device files (files/) read as MACE reads them."""
from __future__ import annotations

from pathlib import Path

import pytest

from mace.config import load_deployment
from mace.devices.device_yml import load_device_yml
from mace.devices.discovery import _by_name
from mace.errors import ConfigError
from mace.validate.reference import backend_note

FILES = Path(__file__).parent / "files"


def test_every_schema_key_is_known():
    config = load_deployment(FILES / "all_keys.yml")   # every key known; quantize_schema unread (quantize: 0)
    assert config.warnings == ["models.digits_cnn.quantize_schema: given, but quantize is 0: ignored"]
    sg = config.models["digits_cnn"].graph
    assert sg.accuracy_validation_script == "examples/digits/accuracy_validator.py"  # list unwrapped
    assert sg.input_aliases == ["picture"] and sg.validation_threshold["HEXAGON"] == 0.98
    assert config.target_abis == ["armeabi-v7a", "arm64-v8a", "host"]


def test_comma_strings_and_08_keys():
    config = load_deployment(FILES / "comma_strings_v08.yml")
    assert config.warnings == []
    assert (config.model_graph_format, config.model_data_format) == ("file", "file")
    assert config.origin["model_graph_format"] == "build_type"
    assert config.target_abis == ["host"] and config.target_socs == ["msm8998"]
    sg = config.models["two_inputs"].graph
    assert sg.input_tensors == ["a", "b"] and sg.input_shapes == [[1, 8, 8, 1], [1, 8, 8, 1]]
    assert sg.input_ranges == [[-1.0, 1.0], [-1.0, 1.0]]   # one value for every input


def test_build_type_code(tmp_path):
    text = (FILES / "comma_strings_v08.yml").read_text().replace("build_type: proto", "build_type: code")
    (tmp_path / "d.yml").write_text(text.replace("embed_model_data: 0", "embed_model_data: 1"))
    config = load_deployment(tmp_path / "d.yml")
    assert (config.model_graph_format, config.model_data_format) == ("code", "code")


def test_dict_subgraphs():
    model = load_deployment(FILES / "dict_subgraphs.yml").models["split"]
    assert [sg.name for sg in model.subgraphs] == ["head", "tail"]
    assert model.graph.input_tensors == ["image"] and model.graph.output_tensors == ["prob"]


def test_absent_runtime_is_named_with_the_nearest():
    config = load_deployment(FILES / "hta_runtime.yml")
    assert any("no HTA runtime" in w and "nearest is dsp" in w for w in config.warnings), config.warnings


def test_device_keys_of_mace_do_not_warn_and_names_match():
    devices, warnings = load_device_yml(FILES / "devices.yml")
    assert warnings == []
    by = {d.name: d for d in devices}
    assert _by_name(devices, ["10.0.0.7"]) == [by["nanopi"]]                  # address
    assert _by_name(devices, ["FriendlyElecNanopiM4"]) == [by["nanopi"]]      # models without spaces
    assert _by_name(devices, ["RaspberryPi4"]) == [by["raspberry"]]
    with pytest.raises(ConfigError, match="no such device"):
        _by_name(devices, ["Raspberry"])


@pytest.mark.parametrize("platform,backend,fragment", [
    ("onnx", "onnxruntime", None), ("onnx", "tensorflow", "onnx-tf"), ("onnx", "pytorch", "PyTorch"),
    ("onnx", "kaldi", "no kaldi reference"), ("caffe", "tensorflow", "ONNX models only"),
    ("keras", "tensorflow", None), ("tensorflow", "tensorflow", None)])
def test_backend_is_never_dropped_silently(platform, backend, fragment):
    note = backend_note(platform, backend)
    assert (note is None) if fragment is None else fragment in note
