"""open_engine: the one way every host command loads a built model (run, reports, debug)."""
from __future__ import annotations

import numpy as np
import pytest

from mace.report.session import open_model
from mace.runtime import backends
from mace.runtime.open import open_engine
from mace.run import run_model
from tests.codegen.helpers import convert, digits_models


def test_run_and_reports_load_the_same_engine(tmp_path):
    config, _ = convert(tmp_path, "digits", digits_models())
    model = config.models["digits_cnn"]
    opened = open_engine(config, model, tmp_path / "builds")
    session = open_model(config, model, tmp_path / "builds")
    run = run_model(config, model, tmp_path / "builds", rounds=0)
    ours = opened.engine.run(session.inputs)
    for name, value in run.outputs.items():
        np.testing.assert_array_equal(ours[name], value)
        np.testing.assert_array_equal(session.engine.run(session.inputs)[name], value)
    assert opened.pb_path.name == "digits_cnn.pb" and opened.init_ms > 0


def test_code_format_builds_load_through_the_generated_package_everywhere(tmp_path, monkeypatch):
    """report/session used to load the .pb even for model_graph_format: code; both now go through
    the backend table, which loads the generated package."""
    config, _ = convert(tmp_path, "digits", digits_models(), graph="code")
    model = config.models["digits_cnn"]
    calls = []
    real = backends.create_engine_from_package

    def spy(package, name, *args, **kwargs):
        calls.append((package.name, name))
        return real(package, name, *args, **kwargs)

    monkeypatch.setattr(backends, "create_engine_from_package", spy)
    session = open_model(config, model, tmp_path / "builds")
    run = run_model(config, model, tmp_path / "builds", rounds=0)
    assert calls == [("digits_models", "digits_cnn")] * 2
    got = session.engine.run(session.inputs)
    for name, value in run.outputs.items():
        np.testing.assert_array_equal(got[name], value)


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="no runtime backend 'npu'.*cpu, gpu, dsp, cpu\\+gpu"):
        backends.load("npu", "m.pb", "m.data", backends.Request())


def test_missing_build_says_which_command_makes_it(tmp_path):
    config, _ = convert(tmp_path, "digits", digits_models())
    with pytest.raises(Exception, match=r"has not been converted .*converter.py build --config="):
        open_engine(config, config.models["digits_cnn"], tmp_path / "elsewhere", command="build")
