"""A hint is the command that fixes the problem: each `run `...`` an error or note prints is run
here exactly as printed (through the shell, from the directory the user was in), and the
command the user first ran then works. The deployment file and build folder have a space and a
quote in their names, so a hint that does not quote what it pastes fails here.
(Device hints: tests/devices/test_hints.py.)"""
from __future__ import annotations

import shlex
import sys

import pytest

from mace.cli import run_cmd
from mace.cli.main import build_parser, main
from mace.config import load_deployment
from mace.errors import ConfigError
from mace.report.session import open_model
from mace.validate.layers import validate_layers
from tests.cli_helpers import cli, digits_model, hint_commands, run_hint, workdir, write_deployment

CONFIG, BUILD = "my deploy's.yml", "out dir"


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr
    return r


def refused(r, *needles):
    assert r.returncode == 1, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    for n in needles:
        assert n in r.stderr, f"{n!r} not in:\n{r.stderr}"
    return r.stderr


@pytest.fixture
def work(tmp_path):
    work = workdir(tmp_path)
    write_deployment(work / CONFIG, {"digits_cnn": digits_model()})
    return work


def _cli(work, command, *args):
    return cli(command, f"--config={CONFIG}", f"--build_dir={BUILD}", *args, cwd=work)


def test_run_before_convert_the_hint_converts(work):
    err = refused(_cli(work, "run"), "has not been converted")
    assert shlex.split(hint_commands(err)[0])[-3:] == ["convert", f"--config={CONFIG}", f"--build_dir={BUILD}"]
    ok(run_hint(err, cwd=work))
    ok(_cli(work, "run"))


def test_a_stale_build_the_hint_converts_again(work):
    ok(_cli(work, "convert"))
    write_deployment(work / CONFIG, {"digits_cnn": digits_model(input_ranges="-2,2")})  # a build key changed
    err = refused(_cli(work, "run"), "stale", "re-run `")
    ok(run_hint(err, cwd=work))
    ok(_cli(work, "run"))


def test_quantize_stat_on_a_quantized_build_the_hint_converts_float(work):
    write_deployment(work / CONFIG, {"digits_cnn": digits_model(quantize=1)})
    ok(_cli(work, "convert"))
    err = refused(_cli(work, "run", "--quantize_stat", "--input_dir=digits/inputs"), "is quantized")
    assert "--quantize_stat" in shlex.split(hint_commands(err)[0])
    ok(run_hint(err, cwd=work))
    r = ok(_cli(work, "run", "--quantize_stat", "--input_dir=digits/inputs"))
    # and the next step it names reduces that log to a range file
    ok(run_hint(r.stdout, cwd=work))
    assert "@@" in (work / BUILD / "digits/quantize_stat/digits_cnn_overall_range.txt").read_text()


def test_visualize_without_benchmark_data_the_hint_benchmarks(work):
    ok(_cli(work, "convert"))
    r = ok(_cli(work, "visualize"))
    assert "no benchmark data yet" in r.stdout
    ok(run_hint(r.stdout, cwd=work))
    assert "no benchmark data yet" not in ok(_cli(work, "visualize")).stdout


def test_layer_validation_without_check_tensors_the_hint_checks_every_layer(work, monkeypatch):
    ok(_cli(work, "convert"))
    monkeypatch.chdir(work)
    config = load_deployment(CONFIG)
    session = open_model(config, config.models["digits_cnn"], BUILD)
    with pytest.raises(ConfigError, match="no check_tensors") as e:
        validate_layers(session, all_layers=False)
    r = ok(run_hint(str(e.value), cwd=work))
    assert "digits_cnn" in r.stdout and "layer" in r.stdout.lower()


def test_an_internal_error_names_the_same_command_with_verbose(work, monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("a bug")

    monkeypatch.chdir(work)
    monkeypatch.setattr(run_cmd, "main", broken)
    argv = ["run", f"--config={CONFIG}", f"--build_dir={BUILD}"]
    assert main(argv) == 3
    err = capsys.readouterr().err
    words = shlex.split(hint_commands(err)[0])
    assert words[-4:] == [*argv, "--verbose"]
    assert words[0] in ("python", "python3", sys.executable) and words[1].endswith("converter.py")
    assert build_parser().parse_args(words[2:]).verbose
