"""One RunOptions (mace/runtime/run_options.py) from the flags to this machine's run and to the
board's runner: declared once, so a misspelt option is an error and both sides read the same."""
from __future__ import annotations

import pytest

from mace.cli._run_options import run_options
from mace.cli.main import build_parser
from mace.config import load_deployment
from mace.devices.target_run import runner_options
from mace.run import run_model
from mace.runtime.run_options import RunOptions
from tests.cli_helpers import workdir
from tests.codegen.helpers import convert, digits_models


def test_the_run_flags_make_one_options_object_for_host_and_board(tmp_path):
    work = workdir(tmp_path)
    args = build_parser().parse_args(["run", f"--config={work / 'deploy.yml'}", "--round=3", "--omp_num_threads=2",
                                      "--cpu_wait_policy=short", "--restart_round=2", "--seed=7", "--validate",
                                      "--tuning", "--gpu_perf_hint=3", "--device_timeout=40", "--vlog_level=2"])
    config = load_deployment(args.config)
    opts = run_options(args, config, input_shapes={"image": (1, 8, 8, 1)})
    assert (opts.rounds, opts.num_threads, opts.cpu_wait_policy, opts.restart_round, opts.seed) == (3, 2, "short", 2, 7)
    assert opts.validate and opts.tuning and opts.gpu_perf_hint == 3 and opts.profile and opts.timeout == 40.0
    assert opts.models == ["digits_cnn"] and opts.input_shapes == {"image": (1, 8, 8, 1)}
    argv = runner_options(opts).to_argv()   # what the board's runner is told, from the same object
    assert {"--round=3", "--omp_num_threads=2", "--cpu_wait_policy=short", "--restart_round=2", "--profile",
            "--timeout=40.0"} <= set(argv), argv
    with pytest.raises(Exception):   # frozen: a run cannot change its options half way
        opts.rounds = 5


def test_a_misspelt_option_is_an_error_not_an_ignored_keyword(tmp_path):
    work = workdir(tmp_path)
    config = load_deployment(work / "deploy.yml")
    with pytest.raises(TypeError, match="round"):
        run_model(config, config.models["digits_cnn"], work / "builds", round=3)
    assert RunOptions().models == [] and RunOptions().num_threads == -1


def test_timed_rounds_start_after_a_small_models_chaining(tmp_path, monkeypatch):
    """With rounds enough to chain a small CPU model (its 16th run), its steps are chained after
    the warm-up run (engine option chain_after_runs 1): the chain's compile or cache load is in
    warmup(ms), not in one timed round (the digits model's max(ms) read 6.7 ms against a 7 us
    median at --round=100). Fewer rounds keep the default: nothing is chained for them."""
    import mace.run as run_module

    seen = []
    real = run_module.open_engine

    def spy(*args, **kwargs):
        opened = real(*args, **kwargs)
        seen.append((kwargs.get("options"), opened.engine))
        return opened
    monkeypatch.setattr(run_module, "open_engine", spy)
    config, _ = convert(tmp_path, "digits", digits_models())
    builds = tmp_path / "builds"
    run_model(config, config.models["digits_cnn"], builds, rounds=20)
    (options, engine), = seen
    assert options["chain_after_runs"] == 1
    assert engine._chain_in is None and any(type(c).__name__ == "Chain" for c in engine._program)
    seen.clear()
    run_model(config, config.models["digits_cnn"], builds, rounds=3)
    (options, engine), = seen   # rounds that would never chain: nothing compiled for them
    assert not (options or {}).get("chain_after_runs")
    assert not any(type(c).__name__ == "Chain" for c in engine._program)
