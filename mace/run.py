"""`run`: execute converted models, time them, and validate against the original framework.

Inputs come from `--input_dir DIR/<name>.npy`, else the subgraph's
validation_inputs_data, else seeded uniform random values in input_ranges
(mace/config/files.py, which also names the files: docs/cli.md).
"""
from __future__ import annotations

import statistics
from pathlib import Path

from mace.config.deployment import DeploymentConfig, ModelConfig, with_input_shapes
from mace.config.files import input_sequence, make_inputs, models_of, write_outputs
from mace.errors import ConfigError
from mace.runtime.affinity import pin_threads, thread_limit, wait_notes, wait_options
from mace.runtime.engine import CHAIN_AFTER_RUNS
from mace.runtime.gpu.deploy import range_check_notes
from mace.runtime.open import open_engine
from mace.runtime.profiler import OpProfiler
from mace.runtime.run_options import RunOptions
from mace.runtime.results import ModelRunResult, Timing, timed
from mace.transform.placement.groups import describe as describe_placement
from mace.validate.outputs import validate_outputs
from mace.validate.original import reference_for


def run_model(config: DeploymentConfig, model: ModelConfig, build_dir=None, opts: RunOptions | None = None,
              **fields) -> ModelRunResult:
    """Run (and validate) one model on this machine as `opts` says (mace/runtime/run_options.py;
    or its fields as keywords). `input_shapes` ({input: dims}, `run --input_shape`): run and
    validate at these shapes instead of the converted ones (docs/deployment_file.md)."""
    opts = opts or RunOptions(build_dir=build_dir, **fields)
    build_dir = opts.build_dir
    sg = model.graph
    notes = []
    shapes = {n: d for n, d in (opts.input_shapes or {}).items() if n in sg.input_tensors}
    if shapes:   # random inputs at these shapes (or --input_dir's files), the reference at them too
        sg = with_input_shapes(sg, shapes)
        notes.append("input shape(s) " + ", ".join(f"{n}={','.join(map(str, d))}" for n, d in shapes.items())
                     + " (--input_shape)")
    with thread_limit(opts.num_threads):
        if opts.cpu_affinity_policy and not pin_threads(opts.cpu_affinity_policy, opts.num_threads):
            notes.append(f"cpu_affinity_policy {opts.cpu_affinity_policy}: this OS does not let us pin threads")
        restarts = max(int(opts.restart_round), 1)
        inits = []
        options = wait_options(opts.cpu_wait_policy)
        if opts.rounds + 1 >= CHAIN_AFTER_RUNS and sg.runtime == "cpu":
            # rounds that would chain a small model's steps (after its 16th run) chain them after
            # the warm-up run instead (the compile or cache load counted there, not in one timed
            # round): the rounds time the steady state. Fewer rounds never chain, as before.
            options = {**(options or {}), "chain_after_runs": 1}
        for restart in range(restarts):  # MACE's --restart_round: a fresh engine each time
            opened = open_engine(config, model, build_dir, tuning=opts.tuning, gpu_perf_hint=opts.gpu_perf_hint,
                                 gpu_priority_hint=opts.gpu_priority_hint, auto_tuning=opts.auto_tuning,
                                 options=options)
            engine = opened.engine
            inits.append(opened.init_ms)
            if restart == 0:
                notes += wait_notes(engine) + opened.notes + describe_placement(engine.graph)
                if opts.profile:   # --vlog_level 2: the nodes a preferred kernel declined, and why
                    notes += [f"kernel fallback: {line}" for line in getattr(engine, "kernel_fallbacks", list)()]
                fallback = opened.fallback
                inputs, source = make_inputs(config, sg, opts.input_dir, opts.seed, build_dir)
            outputs, warmup_ms = timed(lambda: engine.run(inputs))
            if restart == 0:   # what fp16 storage clamped or flushed in that run, and the fix
                notes += range_check_notes(engine)
            timing = Timing(opened.init_ms, warmup_ms)
            profiler = OpProfiler() if opts.profile and restart == restarts - 1 else None
            if profiler:
                engine.observers.append(profiler)
            if opts.rounds > 0:
                times = [timed(lambda: engine.run(inputs))[1] for _ in range(opts.rounds)]
                timing = Timing(opened.init_ms, warmup_ms, opts.rounds, statistics.fmean(times),
                                statistics.median(times), min(times), max(times), statistics.pstdev(times))
        if restarts > 1:
            notes.append(f"restart_round {restarts}: engine created {restarts} times, init(ms) "
                         + ", ".join(f"{t:.3f}" for t in inits) + "; the table shows the last")
    result = ModelRunResult(model.name, sg.runtime, source, timing, outputs, notes=notes,
                            op_stats=profiler.stats() if profiler else [], fallback=fallback)
    if opts.output_dir:
        write_outputs(opts.output_dir, outputs, opts.output_format)
    if opts.validate:
        use_files = source == "validation_inputs_data" and bool(sg.validation_outputs_data)
        reference = None if use_files else reference_for(config, model, sg, build_dir)
        if reference and reference.note:
            result.notes.append(reference.note)   # the framework is the reference: say which one, as asked
        given = input_sequence(sg, opts.input_dir)   # --input_dir's sub-folders: a stream's steps
        steps = None if use_files else _state_sequence(engine, config, sg, inputs, opts.seed, build_dir, given)
        if steps and given:
            result.notes.append(f"stateful model: validated over the {len(steps)} runs of the sequence in "
                                f"{opts.input_dir} from its initial state")
        elif steps:
            result.notes.append(f"stateful model: validated over {len(steps)} runs from its initial state "
                                f"(the first on the run's inputs, then seeds {opts.seed + 1}..{opts.seed + len(steps) - 1})")
        elif given and len(given) > 1:
            result.notes.append(f"{opts.input_dir} holds a sequence of {len(given)} runs; the model keeps no "
                                f"state between runs, so only the first was run and validated")
        result.metrics = validate_outputs(config, model, sg, inputs, outputs, opts.num_threads, build_dir,
                                          use_files=source == "validation_inputs_data", reference=reference,
                                          steps=steps)
    return result


STATE_STEPS = 8   # runs a stateful (streaming) model is validated over: its state must carry


def _state_sequence(engine, config, sg, inputs: dict, seed: int, build_dir, given: list | None = None) -> list | None:
    """[(inputs, outputs)] of a model with variables run from its initial state over `given` (the
    steps of a sequence in --input_dir), else STATE_STEPS times (the run's inputs, then seeded
    random ones); None for a model without state. The engine is reset before and after."""
    variables = getattr(engine, "variables", None)
    if variables is None or not variables.initial:
        return None
    engine.reset_state()
    sequence = given or [inputs] + [make_inputs(config, sg, None, seed + k, build_dir)[0]
                                    for k in range(1, STATE_STEPS)]
    steps = [(x, engine.run(x)) for x in sequence]
    engine.reset_state()
    return steps


def run_deployment(config: DeploymentConfig, models=None, opts: RunOptions | None = None, **fields) -> list:
    """run_model over `models` (default: every model), as `opts` (or its fields) say."""
    opts = opts or RunOptions(**fields)
    out = opts.output_dir
    if out and Path(out).exists() and not Path(out).is_dir():   # before minutes of running
        raise ConfigError(f"--output_dir {out}: not a folder (a file of that name exists)")
    if out:   # made now, not after the run: /proc/x, a read-only place, a missing permission
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"--output_dir {out}: cannot create the folder ({e.strerror})") from None
    chosen = models_of(config, models)
    named = set(opts.input_shapes or {})
    missing = sorted(named - {t for m in chosen for t in m.graph.input_tensors})
    if missing:
        raise ConfigError(f"--input_shape {missing[0]}: no model run here has that input (their inputs: "
                          f"{', '.join(sorted({t for m in chosen for t in m.graph.input_tensors}))})")
    return [run_model(config, m, opts=opts) for m in chosen]
