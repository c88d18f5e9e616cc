"""Tensor names -> .npy file names for --input_dir / --output_dir."""
import pytest

from mace.errors import ConfigError
from mace.config.files import file_names, safe_name


def test_safe_name_rule():
    assert safe_name("scope/out:0") == "scope_out_0"
    assert safe_name("a\\b") == "a_b"


def test_two_tensors_sharing_a_file_name_is_an_error():
    assert file_names(["x", "y:0"], "input") == {"x": "x.npy", "y:0": "y_0.npy"}
    with pytest.raises(ConfigError, match="'a/b' and 'a:b' would both"):
        file_names(["a/b", "a:b"], "output")
