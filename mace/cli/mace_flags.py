"""Every flag MACE's tools/converter.py accepted, per subcommand, and what it means here.

MACE parses with `parse_known_args`, so scripts written for any MACE version pass its flags
freely. This table is the one list of them: the argparse parsers are checked against it
(`install`), `docs/mace_compat.md` is generated from it (`markdown`), and
tests/mace_compat/ walks it row by row. A flag that no MACE version had stays an error
(argparse, exit code 2).

Each row says how the flag is honoured here:
  same       our flag of that name does what MACE's did
  alias      another spelling of one of our flags (`target` names it)
  behaviour  MACE's meaning mapped onto what this release has (`meaning` says how)
  note       accepted, and `note: --flag has no effect here: <meaning>` is printed when given

Versions (MACE's converter.py generations, by the subcommands it had; the flags were read from
several revisions of XiaoMi/mace's tools/converter.py):
  0.8     build / run / benchmark, models described by --build_type proto|code
  0.9+    convert / run / benchmark, --model_graph_format / --model_data_format
  latest  convert / run (benchmark folded into `run --benchmark`, commit c3f3df53)
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

COMMANDS = ("convert", "run", "benchmark", "build")
KINDS = ("same", "alias", "behaviour", "note")


@dataclass(frozen=True)
class MaceFlag:
    flag: str                 # "--layers"
    commands: tuple           # MACE subcommands that accepted it
    versions: str             # V08, UNVERIFIED, LATEST, or a range of them
    kind: str                 # one of KINDS
    meaning: str              # one line: what it does here, or why it has no effect
    value: str = ""           # metavar of its value; "" for a switch
    target: str = ""          # alias: the flag of ours it spells; behaviour: the flag that does it

    def __post_init__(self):
        assert self.kind in KINDS and self.flag.startswith("--") and set(self.commands) <= set(COMMANDS)


V08, MID, LATEST = "0.8", "0.9+", "latest"
ALL_ERAS = "0.8, 0.9+, latest"
OLD_MID = "0.8, 0.9+"
MID_LATEST = "0.9+, latest"
UNVERIFIED = "? (named in issue 23, not found in the MACE sources read)"
CRB = ("convert", "run", "benchmark", "build")
RB = ("run", "benchmark")

FLAGS = (
    # ---- every subcommand -------------------------------------------------------------------
    MaceFlag("--config", CRB, ALL_ERAS, "same", "the deployment .yml", "PATH"),
    MaceFlag("--build_type", ("build", "run", "benchmark"), V08, "behaviour",
             "proto -> model_graph_format and model_data_format file; code -> both code", "proto|code"),
    MaceFlag("--model_graph_format", ("convert", "run", "benchmark"), MID_LATEST, "behaviour",
             "overrides the .yml's model_graph_format (file: .pb; code: a generated Python package)",
             "file|code"),
    MaceFlag("--model_data_format", ("convert", "run", "benchmark"), MID_LATEST, "behaviour",
             "overrides the .yml's model_data_format (code needs model_graph_format code too)", "file|code"),
    MaceFlag("--target_abis", CRB, ALL_ERAS, "behaviour",
             "overrides the .yml's target_abis (comma-separated); run/benchmark use devices of those ABIs",
             "ABIS"),
    MaceFlag("--target_socs", ("convert", "build"), ALL_ERAS, "behaviour",
             "overrides the .yml's target_socs (comma-separated); conversion itself is the same for every SoC",
             "SOCS"),
    MaceFlag("--target_socs", RB, ALL_ERAS, "same",
             "only devices with one of these SoCs; all or random as in MACE", "SOCS"),
    MaceFlag("--debug_mode", ("convert", "run", "benchmark"), MID_LATEST, "note",
             "no native library is compiled, so there are no debug symbols to keep; --verbose shows tracebacks"),
    MaceFlag("--address_sanitizer", ("convert", "run", "benchmark", "build"), ALL_ERAS, "note",
             "no C++ code is compiled here; the runtime is Python and numpy, checked by Python itself"),
    MaceFlag("--devices_to_run", ("convert",), LATEST, "note",
             "convert runs on this machine only; devices are chosen by run and benchmark"),
    MaceFlag("--devices_to_run", RB, LATEST, "alias",
             "run only on these devices: a name from the devices .yml, its address, its `models` name "
             "without spaces, an adb serial, or host (comma-separated)", "NAMES", "--device"),
    MaceFlag("--quantize_stat", ("convert", "run"), MID_LATEST, "same",
             "convert: float model for statistics; run: log tensor ranges over --input_dir"),
    # ---- convert ----------------------------------------------------------------------------
    MaceFlag("--cl_mem_type", ("convert",), MID, "note",
             "the GPU runtime here keeps activations in OpenCL images only (cl_mem_type buffer is not "
             "implemented), so the choice changes nothing", "image|buffer"),
    MaceFlag("--enable_micro", ("convert",), LATEST, "note",
             "there is no MACE-Micro (MCU) backend in this release; the model is converted for the host runtimes"),
    # ---- run and benchmark: threads, affinity, GPU hints -----------------------------------
    MaceFlag("--omp_num_threads", RB, OLD_MID, "same", "CPU threads (BLAS, compute pool)", "N"),
    MaceFlag("--num_threads", ("run",), LATEST, "alias", "CPU threads (BLAS, compute pool)", "N",
             "--omp_num_threads"),
    MaceFlag("--cpu_affinity_policy", RB, ALL_ERAS, "same",
             "pin threads: 0 none, 1 big cores, 2 little cores (default 0 here, MACE 1: "
             "docs/deployment_file.md)", "N"),
    MaceFlag("--gpu_perf_hint", ("run",), ALL_ERAS, "same",
             "OpenCL performance hint where the device has cl_khr_throttle_hints, here and on boards "
             "(default 0 here, MACE 3)", "N"),
    MaceFlag("--gpu_priority_hint", ("run",), ALL_ERAS, "same",
             "OpenCL queue priority where the device has cl_khr_priority_hints, here and on boards "
             "(default 0 here, MACE 3)", "N"),
    MaceFlag("--gpu_perf_hint", ("benchmark",), OLD_MID, "note",
             "benchmark sets the GPU up with the driver's default hints; `run` applies them", "N"),
    MaceFlag("--gpu_priority_hint", ("benchmark",), OLD_MID, "note",
             "benchmark sets the GPU up with the driver's default hints; `run` applies them", "N"),
    MaceFlag("--mace_lib_type", RB, MID_LATEST, "note",
             "no C++ library is linked: every run uses the Python engine (mace_run.pyz on devices)",
             "static|dynamic"),
    MaceFlag("--disable_openmp", RB, MID, "note",
             "OpenMP is not a build option here; set the thread count with --omp_num_threads 1"),
    MaceFlag("--enable_openmp", RB, MID, "note",
             "OpenMP is not a build option here; the compute pool uses it where numba has it"),
    MaceFlag("--device_yml", RB, MID_LATEST, "same", "the devices .yml (default ./devices.yml)", "PATH"),
    # ---- run ---------------------------------------------------------------------------------
    MaceFlag("--round", ("run",), ALL_ERAS, "same", "timed runs after the warm-up", "N"),
    MaceFlag("--validate", ("run",), ALL_ERAS, "same",
             "compare the outputs with the framework (cosine, SQNR, pixel accuracy)"),
    MaceFlag("--layers", ("run",), MID_LATEST, "behaviour",
             "layer-by-layer validation of the mapped layers start:end (python slice, or one index); "
             "CSV in builds/<library>/model/<model>_layers.csv", "START:END"),
    MaceFlag("--caffe_env", ("run",), ALL_ERAS, "note",
             "the Caffe reference is Caffe's forward pass in numpy here; no docker or local Caffe is used",
             "docker|local"),
    MaceFlag("--vlog_level", ("run",), ALL_ERAS, "same", "verbosity (0 results, 1 passes/timings, 2 per op)",
             "N"),
    MaceFlag("--gpu_out_of_range_check", ("run",), ALL_ERAS, "behaviour",
             "after the run, check every node output for NaN/Inf and, with fp16 storage, for values "
             "beyond half's range (+-65504) or mostly below its normal range (GPU ops: counted by the "
             "OpenCL stores before the half conversion); fails the run when one is found"),
    MaceFlag("--check_gpu_out_of_memory", ("run",), UNVERIFIED, "note",
             "GPU memory is allocated through pyopencl, which raises a clear error when it runs out; "
             "nothing to switch on"),
    MaceFlag("--restart_round", ("run",), ALL_ERAS, "behaviour",
             "create the engine and run --round times, that many times over (here and on boards); "
             "each init time is noted", "N"),
    MaceFlag("--report", ("run",), ALL_ERAS, "same",
             "print the execution report and write MACE's report.csv (model_name, device_name, soc, "
             "abi, runtime, init, warmup, run_avg, tuned)"),
    MaceFlag("--report_dir", ("run",), ALL_ERAS, "behaviour",
             "where --report writes report.csv, appending, for timed runs (--round > 0) as MACE "
             "(default builds/<library>/; MACE's empty default meant /report.csv)", "DIR"),
    MaceFlag("--runtime_failure_ratio", ("run",), ALL_ERAS, "note",
             "MACE used it to inject mock runtime failures into its fallback path; nothing here fails on "
             "purpose", "RATIO"),
    MaceFlag("--example", ("run",), ALL_ERAS, "same", "run as an application would, print top-5 per output"),
    MaceFlag("--input_dir", ("run",), MID_LATEST, "same",
             "inputs from DIR: <name>.npy, MACE's raw model_input_<name> files, or <name>.jpg/.png "
             "for an input with image_preprocess", "DIR"),
    MaceFlag("--output_dir", ("run",), MID_LATEST, "same",
             "outputs to DIR as .npy, or MACE's raw model_out_<name> files with --output_format raw "
             "(host and board runs)", "DIR"),
    MaceFlag("--cl_binary_to_code", ("run",), MID_LATEST, "note",
             "there is no C++ library to embed OpenCL binaries in; they stay files under "
             "builds/<library>/opencl/ that run loads (for a board: pushes, and pulls back when it rebuilt them)"),
    MaceFlag("--benchmark", ("run",), LATEST, "same", "MACE's per-op benchmark tables"),
    MaceFlag("--fake_warmup", ("run",), LATEST, "note",
             "the warm-up run here is a real run on the real inputs, timed and reported apart"),
    MaceFlag("--disable_tuning", ("run",), MID_LATEST, "behaviour",
             "no OpenCL work-group tuning, even where target_socs would start it (no tuned file yet), "
             "here and on boards"),
    MaceFlag("--opencl_cache_reuse_policy", ("run",), LATEST, "note",
             "compiled OpenCL programs are cached per device (a board's as <model>.<soc>, as MACE names "
             "them) and reused only on that device and driver",
             "N"),
    MaceFlag("--accelerator_cache_policy", ("run",), LATEST, "note",
             "there is no APU/HTP runtime in this release to cache for", "N"),
    MaceFlag("--accelerator_binary_file", ("run",), LATEST, "note",
             "there is no APU/HTP runtime in this release to load a cache for", "FILE"),
    MaceFlag("--accelerator_storage_file", ("run",), LATEST, "note",
             "there is no APU/HTP runtime in this release to store a cache for", "FILE"),
    MaceFlag("--apu_boost_hint", ("run",), LATEST, "note", "there is no APU runtime in this release", "N"),
    MaceFlag("--apu_preference_hint", ("run",), LATEST, "note", "there is no APU runtime in this release",
             "N"),
    MaceFlag("--use_system_libhexagon_nn", ("run",), LATEST, "note",
             "runtime dsp runs through a DspBackend (default the Hexagon simulator), not libhexagon_nn"),
    # ---- benchmark ---------------------------------------------------------------------------
    MaceFlag("--max_num_runs", ("benchmark",), MID, "behaviour",
             "the number of runs without and with statistics (as --round)", "N", "--round"),
    MaceFlag("--max_seconds", ("benchmark",), MID, "behaviour",
             "stop each timed phase once it has run this long (at least one run)", "S"),
    # ---- build (0.8) ---------------------------------------------------------------------------
    MaceFlag("--tuning", ("build",), "0.8? (named in issue 23; the 0.8 parser read has --disable_tuning)", "note",
             "build does not run models here; GPU tuning happens at `run --tuning` (or `run` with "
             "target_socs), whose file build then ships"),
    MaceFlag("--disable_tuning", ("build",), V08, "note",
             "build never tunes here, so there is nothing to switch off"),
    MaceFlag("--disable_openmp", ("build",), V08, "note",
             "the runner is Python, not compiled with or without OpenMP"),
)


def rows(command: str) -> list:
    """The table's rows for one of our subcommands, in table order."""
    return [f for f in FLAGS if command in f.commands]


def _dest(flag: str) -> str:
    return "mace_" + flag.lstrip("-")


def install(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the `note` flags of `command` to its parser and check that every other MACE flag of
    the table is one the parser already has (a missing one is our bug, caught by any test)."""
    have = {s for a in parser._actions for s in a.option_strings}
    group = parser.add_argument_group("MACE flags accepted for compatibility (docs/mace_compat.md)")
    for f in rows(command):
        if f.kind != "note":
            if f.flag not in have:
                raise RuntimeError(f"{command}: MACE flag {f.flag} ({f.kind}) is not in the parser")
            continue
        help_text = f"no effect here: {f.meaning}"
        if f.value:
            group.add_argument(f.flag, dest=_dest(f.flag), metavar=f.value.upper().replace("|", "_"),
                               default=argparse.SUPPRESS, help=help_text)
        else:
            group.add_argument(f.flag, dest=_dest(f.flag), action="store_true",
                               default=argparse.SUPPRESS, help=help_text)


def notes_given(args, command: str) -> list:
    """`--flag has no effect here: ...` for every note flag present on the command line."""
    return [f"{f.flag} has no effect here: {f.meaning}" for f in rows(command)
            if f.kind == "note" and hasattr(args, _dest(f.flag))]


# ---- docs/mace_compat.md ------------------------------------------------------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def flag_tables() -> list:
    lines = []
    for command in COMMANDS:
        lines += [f"### {command}", "", "| MACE flag | MACE versions | here | what it does here |",
                  "|---|---|---|---|"]
        for f in rows(command):
            flag = f"`{f.flag}`" + (f" `{_cell(f.value)}`" if f.value else "")
            here = {"alias": f"alias of `{f.target}`", "note": "no effect (note)"}.get(f.kind, f.kind)
            lines.append(f"| {flag} | {f.versions} | {here} | {_cell(f.meaning)} |")
        lines.append("")
    return lines
