"""One test per MACE flag per subcommand, driven by mace/cli/mace_flags.FLAGS: the flag is
accepted by that subcommand's parser, and a `note` flag yields its note, an `alias` sets the flag
it spells, a `same`/`behaviour` flag lands in the namespace the command reads. Behaviour is
checked end to end in test_behaviour.py."""
from __future__ import annotations

import argparse

import pytest

from mace.cli import mace_flags
from mace.cli.main import build_parser

ROWS = [(command, f) for command in mace_flags.COMMANDS for f in mace_flags.rows(command)]
VALUES = {"file|code": "code", "proto|code": "code", "image|buffer": "buffer", "static|dynamic": "static",
          "docker|local": "local", "N": "2", "S": "0.5", "RATIO": "0.1", "START:END": "0:2",
          "ABIS": "host", "SOCS": "rk3399", "NAMES": "host", "DIR": "somewhere", "PATH": "x.yml",
          "FILE": "f.bin"}


def _argv(command: str, f) -> list:
    argv = [command, "--config=deploy.yml"]
    if f.flag == "--config":
        return argv
    return argv + ([f.flag, VALUES[f.value]] if f.value else [f.flag])


def _dest(parser, command: str, flag: str) -> str:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return next(a.dest for a in sub._actions if flag in a.option_strings)


@pytest.mark.parametrize("command,f", ROWS, ids=[f"{c}{f.flag}" for c, f in ROWS])
def test_mace_flag(command, f):
    parser = build_parser()
    args = parser.parse_args(_argv(command, f))      # accepted: no SystemExit(2)
    notes = mace_flags.notes_given(args, command)
    if f.kind == "note":
        assert notes == [f"{f.flag} has no effect here: {f.meaning}"]
        return
    assert notes == []
    if f.flag == "--config":
        assert args.config == "deploy.yml"
        return
    if f.kind == "alias":
        assert _dest(parser, command, f.flag) == _dest(parser, command, f.target)
    value = getattr(args, _dest(parser, command, f.flag))
    expected = VALUES[f.value] if f.value else True
    if isinstance(value, list):       # repeatable flags (--device)
        value = value[-1]
    assert str(value) == str(expected) or value == type(value)(expected)


@pytest.mark.parametrize("command", mace_flags.COMMANDS)
def test_flag_nobody_had_is_an_error(command, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([command, "--config=deploy.yml", "--no_such_mace_flag"])
    assert e.value.code == 2
    assert "--no_such_mace_flag" in capsys.readouterr().err


def test_table_is_checked_against_the_parsers():
    """A behaviour/same/alias row whose flag the parser lacks stops the CLI from building."""
    p = argparse.ArgumentParser()
    p.add_argument("--config")
    with pytest.raises(RuntimeError, match="is not in the parser"):
        mace_flags.install(p, "run")


def test_every_mace_subcommand_flag_set_is_complete():
    """Flags of MACE's latest `run` parser (tools/converter.py at HEAD) are all in the table."""
    latest_run = """--devices_to_run --config --model_graph_format --model_data_format --target_abis
    --target_socs --debug_mode --address_sanitizer --quantize_stat --mace_lib_type --num_threads
    --cpu_affinity_policy --gpu_perf_hint --gpu_priority_hint --device_yml --disable_tuning --round
    --opencl_cache_reuse_policy --validate --layers --caffe_env --vlog_level --gpu_out_of_range_check
    --restart_round --report --report_dir --runtime_failure_ratio --input_dir --output_dir
    --cl_binary_to_code --benchmark --fake_warmup --accelerator_cache_policy --accelerator_binary_file
    --accelerator_storage_file --apu_boost_hint --apu_preference_hint --use_system_libhexagon_nn""".split()
    have = {f.flag for f in mace_flags.rows("run")}
    assert set(latest_run) <= have, set(latest_run) - have
