"""The board's run options are declared once (issue 32): what `run` writes for mace_run.pyz is read
back by the runner's own parser into the same record, for every field."""
from __future__ import annotations

from dataclasses import fields

import pytest

from mace.devices.runner import parse_args
from mace.devices.runner_options import RunnerOptions
from mace.devices.target_run import RunOptions, runner_options
from mace.runtime.gpu.options import GpuOptions, gpu_options


def _round_trip(opts: RunnerOptions, gpu: GpuOptions | None = None):
    ns = parse_args(["--model", "m.pb", *opts.to_argv(), *(gpu.to_argv() if gpu else [])])
    return RunnerOptions.from_args(ns), GpuOptions.from_args(ns)


def test_every_runner_field_survives_the_command_line():
    changed = RunnerOptions(round=7, omp_num_threads=3, profile=True, benchmark=True, warmup=4,
                            cpu_affinity_policy=2, restart_round=5, cpu_wait_policy="spin", timeout=12.5,
                            exit_with_parent=True, indexed_outputs=True)
    assert {f.name for f in fields(RunnerOptions)} == {f.name for f in fields(changed)
                                                       if getattr(changed, f.name) != f.default}
    assert _round_trip(changed)[0] == changed
    assert _round_trip(RunnerOptions())[0] == RunnerOptions() and RunnerOptions().to_argv() == []


def test_every_gpu_field_survives_the_command_line(tmp_path):
    gpu = gpu_options("my-lib.v1", "fp16_fp32", True, "/w/-odd dir", tmp_path / "none", ["rk3399"],
                      perf_hint=2, priority_hint=3, cache_name="Board.rk3399")
    assert gpu.opencl_tuning and gpu.gpu_range_check   # target_socs, no tuned file; half storage
    assert {f.name for f in fields(GpuOptions)} == {f.name for f in fields(gpu) if getattr(gpu, f.name) != f.default}
    assert _round_trip(RunnerOptions(), gpu)[1] == gpu
    assert not gpu_options("l", "fp32_fp32", False, "", None, []).gpu_range_check


def test_run_options_become_the_runners():
    host = RunOptions(models=["m"], rounds=3, num_threads=2, cpu_affinity_policy=1, cpu_wait_policy="short",
                      restart_round=2, timeout=30, profile=True)
    runner = runner_options(host)
    assert (runner.round, runner.omp_num_threads, runner.cpu_affinity_policy, runner.cpu_wait_policy,
            runner.restart_round, runner.timeout, runner.profile) == (3, 2, 1, "short", 2, 30.0, True)
    assert runner.exit_with_parent and runner.indexed_outputs and not runner.benchmark
    bench = runner_options(RunOptions(models=["m"], benchmark=True, warmup=3, profile=True, restart_round=4))
    assert bench.benchmark and bench.warmup == 3 and not bench.profile and bench.restart_round == 1
    assert not bench.indexed_outputs


@pytest.mark.parametrize("bad", [["--cpu_affinity_policy=9"], ["--cpu_wait_policy=nap"], ["--gpu_perf_hint=7"]])
def test_the_runner_refuses_what_the_record_does_not_allow(bad):
    with pytest.raises(SystemExit):
        parse_args(["--model", "m.pb", *bad])
