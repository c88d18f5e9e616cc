"""obfuscate: 1: no original internal name anywhere in the build; inputs/outputs keep theirs."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from mace.ir.model_io import load_net
from tests.codegen.helpers import convert, digits_models, outputs_of, squeezenet_models

WORD = "A-Za-z0-9_"


def _text_of(path) -> str:
    """What a reader of the file sees; a weights module's base64 payload (random letters) left out."""
    text = path.read_bytes().decode("latin-1")
    if path.parent.name == "_weights" and path.name != "__init__.py":
        text = text.split('DATA = """')[0]
    return text


def _leaks(lib, names) -> dict:
    found = {}
    for path in sorted(lib.rglob("*")):
        if not path.is_file() or path.suffix in (".data", ".pyc") or path.name.endswith("_obfuscation_map.json"):
            continue  # .data: raw weights, no names
        text = _text_of(path)
        hits = [n for n in names if re.search(f"(?<![{WORD}]){re.escape(n)}(?![{WORD}])", text)]
        if hits:
            found[str(path.relative_to(lib))] = hits
    return found


@pytest.mark.parametrize("which", ["digits", "squeezenet"])
def test_obfuscated_build_hides_internal_names(tmp_path, which):
    models = digits_models() if which == "digits" else squeezenet_models(tmp_path)
    model = next(iter(models))
    plain_cfg, plain = convert(tmp_path / "plain", which, models, graph="code", data="code")
    config, lib = convert(tmp_path / "obf", which, models, graph="code", data="code", obfuscate=1)
    mapping = json.loads((lib / "model" / f"{model}_obfuscation_map.json").read_text())
    net, plain_net = load_net(lib / "model" / f"{model}.pb"), load_net(plain / "model" / f"{model}.pb")
    io = {i.name for i in plain_net.input_info} | {o.name for o in plain_net.output_info}
    internal = {n for part in mapping.values() for n in part.values()} - io
    assert internal and not _leaks(lib, internal)
    assert {i.name for i in net.input_info} | {o.name for o in net.output_info} == io

    # the map gives every op, tensor and framework op its original name back
    back = {**mapping["tensors"], **{n: n for n in io}}
    for op, orig in zip(net.op, plain_net.op):
        assert mapping["ops"][op.name] == orig.name
        assert [back.get(t, t) for t in op.input] == list(orig.input)
        assert [back[t] for t in op.output] == list(orig.output)
        assert [mapping["framework_ops"][f] for f in op.framework_op] == list(orig.framework_op)
    for name in outputs_of(plain_cfg, plain, model):
        np.testing.assert_array_equal(outputs_of(config, lib, model)[name], outputs_of(plain_cfg, plain, model)[name])


def test_plain_build_leaves_no_stale_map(tmp_path):
    _, lib = convert(tmp_path, "digits", digits_models(), graph="code", data="code", obfuscate=1)
    assert (lib / "model" / "digits_cnn_obfuscation_map.json").exists()
    _, lib = convert(tmp_path, "digits", digits_models(), graph="code", data="file")
    assert not (lib / "model" / "digits_cnn_obfuscation_map.json").exists()
    assert not (lib / "code" / "digits_models" / "_weights" / "digits_cnn.py").exists()
