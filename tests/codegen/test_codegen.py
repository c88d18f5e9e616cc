"""model_graph_format: code: same outputs as the file model, same bytes every time, readable."""
from __future__ import annotations

import numpy as np
import pytest

from mace.config.files import code_dir, package_name
from mace.runtime.from_code import load_package
from tests.codegen.helpers import convert, digits_models, outputs_of, squeezenet_models


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


@pytest.mark.parametrize("data", ["code", "file"])
def test_digits_code_matches_file(tmp_path, data):
    ref = outputs_of(*convert(tmp_path / "file", "digits", digits_models()), "digits_cnn")
    config, lib = convert(tmp_path / "code", "digits", digits_models(), graph="code", data=data)
    _same(ref, outputs_of(config, lib, "digits_cnn"))
    pkg = code_dir(lib, "digits")
    assert (pkg / "_weights" / "digits_cnn.py").exists() == (data == "code")
    assert load_package(pkg).MODELS == ["digits_cnn"]


def test_squeezenet_code_matches_file(tmp_path):
    models = squeezenet_models(tmp_path)
    ref = outputs_of(*convert(tmp_path / "file", "squeeze", models), "squeezenet")
    config, lib = convert(tmp_path / "code", "squeeze", models, graph="code", data="code")
    _same(ref, outputs_of(config, lib, "squeezenet"))


def test_generating_twice_gives_the_same_bytes(tmp_path):
    def snapshot(lib):
        return {p.relative_to(lib): p.read_bytes() for p in sorted(lib.rglob("*"))
                if p.is_file() and "__pycache__" not in p.parts
                and not p.name.endswith(".stat_cache.json")}   # inodes and times: not the build

    _, lib = convert(tmp_path / "a", "digits", digits_models(), graph="code", data="code", obfuscate=1)
    first = snapshot(lib)
    _, lib2 = convert(tmp_path / "b", "digits", digits_models(), graph="code", data="code", obfuscate=1)
    assert snapshot(lib2) == first     # another folder: no paths leak into the output
    convert(tmp_path / "a", "digits", digits_models(), graph="code", data="code", obfuscate=1)
    assert snapshot(lib) == first


def test_generated_graph_is_readable_code(tmp_path):
    _, lib = convert(tmp_path, "digits", digits_models(), graph="code", data="code")
    text = (code_dir(lib, "digits") / "digits_cnn.py").read_text()
    assert "pb.OperatorDef(" in text and "type='Conv2D'" in text and "name='strides', ints=[1, 1]" in text
    assert "pickle" not in text and "b64decode" not in text   # the graph is code, not a blob
    init = (code_dir(lib, "digits") / "__init__.py").read_text()
    assert "def create_engine_from_code(" in init and "'digits_cnn'," in init


def test_unknown_model_and_package_name(tmp_path):
    config, lib = convert(tmp_path, "my_lib_v2", digits_models(), graph="code", data="file")
    pkg = load_package(code_dir(lib, config.library_name))
    assert package_name("my_lib_v2") == "my_lib_v2_models" and pkg.MODELS == ["digits_cnn"]
    assert pkg.LIBRARY == "my_lib_v2"
    with pytest.raises(ValueError, match="no model named 'nope'"):
        pkg.create_engine_from_code("nope")
