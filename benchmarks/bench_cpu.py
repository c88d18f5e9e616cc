#!/usr/bin/env python3
"""CPU latency of our numpy engine next to onnxruntime, on the same inputs and threads.

    python benchmarks/bench_cpu.py                  # full run, writes docs/performance.md
    python benchmarks/bench_cpu.py --quick          # smoke run: two small models, no file
    python benchmarks/bench_cpu.py --models resnet50,squeezenet --variants env,SkylakeX+wino4
    python benchmarks/bench_cpu.py --int8 --variants env   # + the int8 column (both engines quantized)
    python benchmarks/bench_cpu.py --load           # with one busy competing process: median, p99

Models: the nine ONNX "light" architectures that the onnx package ships (their
constant weights swapped for seeded random ones), MobileNet v2 (built by
mace/testing/mobilenet_v2.py) and the bundled digits example. Every engine runs
in a child process of its own (bench_child.py) so that its peak RSS is its own
and the engines never share thread pools; the parent interleaves blocks of
timed runs of all of them, round after round. Our engine may run in several
variants: the BLAS kernels OpenBLAS picks from the environment, or a chosen
OPENBLAS_CORETYPE, with or without Winograd, under a chosen `--cpu_wait_policy`
(`@passive`, `@short`, `@spin`, or `@gomp`: libgomp's own default spin, as before the
policy existed). `--load` starts one competing process spinning on a core for the
whole run and reports each engine's median and p99 run (docs/performance.md, "Under
load"). See benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
# A clean checkout need not be pip-installed: let the children import `mace` from the tree.
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_child import JSON_MARK, child_main  # noqa: E402

LIGHT_MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512")
ALL_MODELS = LIGHT_MODELS + ("mobilenet_v2", "digits")
QUICK_MODELS = ("digits", "squeezenet")
TARGETS = {"resnet50": 1.2, "vgg19": 1.2, "inception_v1": 1.2, "squeezenet": 1.2,
           "densenet121": 1.5, "shufflenet": 1.5, "mobilenet_v2": 1.5, "digits": 1.5}
FOUNDATION = ("resnet50", "squeezenet", "inception_v1", "vgg19")   # issue 2: ratio <= 2.0
# issue 20: our int8 / onnxruntime's int8 (quantize_static, QOperator, per-channel u8s8)
INT8_TARGETS = {"resnet50": 1.0, "squeezenet": 1.0, "inception_v1": 1.0, "vgg19": 1.0,
                "mobilenet_v2": 1.2, "shufflenet": 1.2, "densenet121": 1.2}
ARENA_TARGET = 1.1      # planned arena / live-tensor lower bound
# (timed runs per engine, warm-up runs) per model, sized so a full run of two variants
# stays around ten minutes on 2 cores.
DEFAULT_RUNS = {"digits": (1000, 100), "squeezenet": (150, 10), "shufflenet": (150, 10),
                "mobilenet_v2": (100, 5), "inception_v1": (60, 3), "inception_v2": (60, 3),
                "densenet121": (50, 3), "resnet50": (50, 3), "bvlc_alexnet": (50, 3),
                "zfnet512": (40, 3), "vgg19": (15, 2)}
QUICK_RUNS = (6, 1)
# --load: issue 20's under-load targets, and enough runs per engine for a p99
LOAD_MODELS = ("resnet50", "squeezenet")
LOAD_RUNS = {"squeezenet": (300, 10), "resnet50": (100, 3)}
LOAD_RATIO_TARGET = 1.2     # our median / onnxruntime's median
LOAD_TAIL_TARGET = 2.0      # our p99 run / our median run
# --load measures each variant on its own (beside its own onnxruntime child)
LOAD_VARIANTS = "env@auto,env@passive"
# One competing process: a pure-Python loop keeps one core busy (no threads of its own).
LOAD_CMD = [sys.executable, "-c", "while True: pass"]
DEFAULT_ROUNDS = 5
SETTLE_S = 0.3          # pause between blocks: the previous engine's spinning threads go idle
REL_TOL = 1e-3          # above this max relative error the row is marked as disagreeing
CHILD_TIMEOUT_S = 900
AVX512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}


# ---------------------------------------------------------------- variants of our engine
WAITS = ("auto", "passive", "short", "spin", "gomp")   # --cpu_wait_policy values, and libgomp's own
GOMP_DEFAULT_SPINCOUNT = "300000"   # libgomp's documented default (OMP_WAIT_POLICY unset)


@dataclass
class Variant:
    coretype: str | None      # OPENBLAS_CORETYPE for the child; None: the environment's
    winograd: int = 0
    wait: str | None = None   # @policy: our --cpu_wait_policy; None: the default

    @property
    def label(self) -> str:
        base = "env" if self.coretype is None else self.coretype
        return base + (f"+wino{self.winograd}" if self.winograd else "") + (f"@{self.wait}" if self.wait else "")

    def env(self) -> dict:
        env = dict(os.environ)
        if self.coretype is not None:
            env["OPENBLAS_CORETYPE"] = self.coretype
        if self.wait == "gomp":   # the pool keeps a user's libgomp settings: these are libgomp's defaults
            env.pop("OMP_WAIT_POLICY", None)
            env["GOMP_SPINCOUNT"] = GOMP_DEFAULT_SPINCOUNT
        return env

    def case(self) -> dict:
        return {"winograd": self.winograd,
                "wait_policy": None if self.wait in (None, "gomp") else self.wait}


def parse_variant(text: str) -> Variant:
    text, _, wait = text.strip().partition("@")
    if wait and wait not in WAITS:
        raise ValueError(f"variant '{text}@{wait}': the wait policy must be one of {', '.join(WAITS)}")
    base, _, extra = text.partition("+")
    if extra and extra not in ("wino2", "wino4"):
        raise ValueError(f"variant '{text}': the suffix must be +wino2 or +wino4")
    return Variant(None if base in ("", "env") else base, int(extra[4:]) if extra else 0, wait or None)


def default_variants() -> list:
    """The environment's BLAS kernels, plus OpenBLAS's AVX-512 ones where the environment
    pins other kernels on a CPU that has AVX-512 (numpy's OpenBLAS picks Haswell on Zen 4/5)."""
    variants = [Variant(None)]
    env = os.environ.get("OPENBLAS_CORETYPE", "")
    if env and env.lower() != "skylakex" and AVX512 <= cpu_flags():
        variants.append(Variant("SkylakeX"))
    return variants


def cpu_flags() -> set:
    from mace._blas import cpu_flags as flags
    return flags()


# ---------------------------------------------------------------- children
class Child:
    """One engine process speaking bench_child's line protocol."""

    def __init__(self, engine: str, case: dict, label: str, env=None):
        self.label = label
        folder = Path(case.get("dir") or case["workdir"])
        path = folder / f"{label}_case.json"
        path.write_text(json.dumps({**case, "label": label}))
        self.err = open(folder / f"{label}_stderr.txt", "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", engine, str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True, env=env)
        self.info = self.read()

    def read(self) -> dict:
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        for line in self.proc.stdout:
            if line.startswith(JSON_MARK):
                return json.loads(line[len(JSON_MARK):])
            if time.monotonic() > deadline:
                break
        self.proc.kill()
        self.err.flush()
        tail = Path(self.err.name).read_text().strip().splitlines()[-1:] or ["no output"]
        return {"error": f"child exited {self.proc.wait()}: {tail[0][:300]}"}

    def ask(self, **cmd) -> dict:
        try:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
        except OSError as e:
            return {"error": f"child gone: {e}"}
        return self.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.err.close()


def run_child_once(engine: str, case: dict, label: str) -> dict:
    child = Child(engine, case, label)
    child.close()
    return child.info


# ---------------------------------------------------------------- one model
@dataclass
class Engine:
    label: str                 # "ort" or our variant's label
    child: Child
    times: list = field(default_factory=list)      # all timed runs, ms
    rounds: list = field(default_factory=list)     # median of each round's block, ms
    final: dict = field(default_factory=dict)
    error: str = ""


def measure(name: str, workdir: Path, args, variants: list) -> dict:
    runs, warmup = QUICK_RUNS if args.quick else (LOAD_RUNS if args.load else DEFAULT_RUNS).get(
        name, DEFAULT_RUNS[name])
    runs = args.runs or runs
    row = {"model": name, "runs": runs, "target": TARGETS.get(name), "load_before": load_average()}
    case = run_child_once("build", {"name": name, "workdir": str(workdir)}, f"{name}_build")
    if "error" in case:
        row["error"] = case["error"]
        return row
    case.update(threads=args.threads, warmup=args.warmup if args.warmup is not None else warmup)
    engines = [Engine("ort", Child("ort", case, "ort"))]
    for v in variants:
        engines.append(Engine(v.label, Child("ours", {**case, **v.case()},
                                             f"ours_{v.label.replace('@', '_')}", v.env())))
    int8 = []
    if args.int8:   # both engines quantized from the same model and calibration sample
        int8 = [Engine("ort_int8", Child("ort_int8", case, "ort_int8")),
                Engine("ours_int8", Child("ours", {**case, "quantize": True}, "ours_int8"))]
    try:
        interleave(engines + int8, runs, args.rounds)
        for e in engines:
            e.final = {} if e.error else e.child.ask(finish=True)
            e.error = e.error or e.child.info.get("error") or e.final.get("error", "")
        for e in int8:
            e.final = {} if e.error else e.child.ask(finish=True)
            e.error = e.error or e.child.info.get("error") or e.final.get("error", "")
    finally:
        for e in engines + int8:
            e.child.close()
    row["engines"] = engines
    row["int8"] = int8
    row["load_after"] = load_average()
    return row


def interleave(engines: list, runs: int, rounds: int) -> None:
    """`rounds` blocks of runs per engine, the engine order rotating each round.

    Before each block the parent waits SETTLE_S: an engine that just ran leaves its
    thread pool spinning (OpenBLAS for up to 2^28 cycles, ~0.1 s; onnxruntime briefly),
    which would steal a core from the next engine's first runs. Each block starts
    with one untimed run."""
    for e in engines:
        e.error = e.child.info.get("error", "")
    per_round = max(1, -(-runs // rounds))
    for r in range(rounds):
        order = engines[r % len(engines):] + engines[:r % len(engines)]
        for e in order:
            if e.error:
                continue
            time.sleep(SETTLE_S)
            ans = e.child.ask(runs=per_round, warm=1)
            if "error" in ans:
                e.error = ans["error"]
                continue
            e.times += ans["times_ms"]
            e.rounds.append(statistics.median(ans["times_ms"]))


def load_outputs(final: dict) -> dict:
    with np.load(final["outputs_file"]) as f:
        return {n: f[f"arr_{i}"] for i, n in enumerate(final["names"])}


def max_rel_error(ours: dict, ref: dict):
    """max over outputs of max|ours - ort| / max|ort|; a string when they cannot be compared."""
    worst = 0.0
    for name, want in ref.items():
        got = ours.get(name)
        if got is None:
            return f"output '{name}' missing"
        if got.shape != want.shape:
            return f"output '{name}' shape {list(got.shape)} != {list(want.shape)}"
        if not (np.all(np.isfinite(got)) and np.all(np.isfinite(want))):
            return f"output '{name}' not finite"
        scale = max(float(np.max(np.abs(want))), 1e-30)
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))) / scale)
    return worst


def result_rows(row: dict) -> list:
    """One result per variant of ours: latency ratio, round ratios, error, memory."""
    if "error" in row:
        return [{**row, "variant": "-"}]
    ort, ours = row["engines"][0], row["engines"][1:]
    results = []
    for e in ours:
        r = {k: row[k] for k in ("model", "runs", "target")}
        r.update(variant=e.label, info=e.child.info, final=e.final, ort_final=ort.final)
        errors = [f"{x.label}: {x.error}" for x in (e, ort) if x.error]
        if errors:
            r["error"] = "; ".join(errors)
            results.append(r)
            continue
        r["ours_times"], r["ort_times"] = e.times, ort.times
        r["ours_ms"], r["ort_ms"] = statistics.median(e.times), statistics.median(ort.times)
        r["ratio"] = r["ours_ms"] / r["ort_ms"]
        ratios = [a / b for a, b in zip(e.rounds, ort.rounds)]
        r["round_ratios"] = (min(ratios), max(ratios))
        r["rel_err"] = max_rel_error(load_outputs(e.final), load_outputs(ort.final))
        results.append(r)
    return results


def int8_rows(rows: list) -> list:
    """Per model: our float (the first variant), our int8, onnxruntime's int8 (medians, ms)."""
    out = []
    for row in rows:
        if len(row.get("int8", [])) < 2 or len(row.get("engines", [])) < 2:
            continue
        (ort8, ours8), ours = row["int8"], row["engines"][1]
        err = "; ".join(f"{e.label}: {e.error}" for e in (ours, ort8, ours8) if e.error)
        r = {"model": row["model"], "error": err, "target": INT8_TARGETS.get(row["model"])}
        if not err:
            r.update(float_ms=statistics.median(ours.times), int8_ms=statistics.median(ours8.times),
                     ort8_ms=statistics.median(ort8.times), float_min=min(ours.times),
                     int8_min=min(ours8.times), ort8_min=min(ort8.times))
            r["vs_ort"], r["vs_float"] = r["int8_ms"] / r["ort8_ms"], r["int8_ms"] / r["float_ms"]
            r["tags"] = ours8.child.info.get("kernel_tags", {})
        out.append(r)
    return out


def int8_table(rows: list) -> str:
    head = ("| model | ours float ms | ours int8 ms | onnxruntime int8 ms | ours int8 / ort int8 "
            "| target | ours int8 / ours float (target <= 0.7) | minima: int8/ort8, int8/float "
            "| our int8 nodes: kernels |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in int8_rows(rows):
        if r["error"]:
            lines.append(f"| {r['model']} | FAILED: {' '.join(r['error'].replace('|', '/').split())[:200]} "
                         "| | | | | | | |")
            continue
        tags = ", ".join(f"{k} {v}" for k, v in sorted(r["tags"].items()))
        lines.append("| " + " | ".join([
            r["model"], _ms(r["float_ms"]), _ms(r["int8_ms"]), _ms(r["ort8_ms"]), f"{r['vs_ort']:.2f}",
            f"<= {r['target']:.1f}" if r["target"] else "report only", f"{r['vs_float']:.2f}",
            f"{r['int8_min'] / r['ort8_min']:.2f}, {r['int8_min'] / r['float_min']:.2f}", tags]) + " |")
    return "\n".join(lines)


def status(r: dict) -> str:
    if "error" in r:
        return "FAILED: " + " ".join(r["error"].replace("|", "/").split())[:200]
    if isinstance(r["rel_err"], str):
        return "DISAGREES: " + r["rel_err"]
    if r["rel_err"] > REL_TOL:
        return f"DISAGREES (rel err > {REL_TOL:g})"
    if r["target"] is None:
        return "ok (report only)"
    return "meets target" if r["ratio"] <= r["target"] else "MISSES target"


# ---------------------------------------------------------------- tables
def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _ms(v) -> str:
    """Milliseconds: 2 decimals, 3 significant digits below 1 ms (digits runs in ~0.02 ms)."""
    return "-" if v is None else format(v, ".2f" if v >= 1 else ".3g")


def _mb(n) -> float | None:
    return None if n is None else n / 2**20


def table(results: list) -> str:
    head = ("| model | ours: BLAS kernels | ours ms | onnxruntime ms | ours/ort | per-round ours/ort "
            "| target | status | max rel err | arena MB | lower bound MB | arena/bound | scratch MB "
            "| peak RSS ours MB | peak RSS ort MB | runs |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in results:
        info, err = r.get("info", {}), r.get("rel_err")
        arena, bound = info.get("arena_bytes"), info.get("lower_bound_bytes")
        rr = r.get("round_ratios")
        lines.append("| " + " | ".join([
            r["model"], kernels_label(r), _ms(r.get("ours_ms")), _ms(r.get("ort_ms")),
            _fmt(r.get("ratio"), ".2f"), f"{rr[0]:.2f}-{rr[1]:.2f}" if rr else "-",
            f"<= {r['target']:.1f}" if r["target"] else "report only", status(r),
            err if isinstance(err, str) else _fmt(err, ".1e"),
            _fmt(_mb(arena), ".3g"), _fmt(_mb(bound), ".3g"),
            _fmt(arena / bound if arena and bound else None, ".3f"),
            _fmt(_mb(info.get("scratch_bytes")), ".3g"),
            _fmt(r.get("final", {}).get("peak_rss_mb"), ".0f"),
            _fmt(r.get("ort_final", {}).get("peak_rss_mb"), ".0f"), str(r["runs"])]) + " |")
    return "\n".join(lines)


def kernels_label(r: dict) -> str:
    """The variant as run: which OpenBLAS kernels the child really used, Winograd or not."""
    info = r.get("info", {})
    blas = ", ".join(b.split()[-1] for b in info.get("blas", [])[-1:]) or "?"
    how = "env" if r.get("variant", "").startswith("env") else "OPENBLAS_CORETYPE"
    wino = r.get("variant", "").partition("+")[2]
    pool = ", pool" if info.get("compute_pool") else ""
    return f"{blas} ({how}{pool})" + (f" + {wino}" if wino else "")


def spread_table(results: list) -> str:
    lines = ["| model | ours: BLAS kernels | ours min / p10 / median / p90 ms "
             "| onnxruntime min / p10 / median / p90 ms | ours/ort of the minima |", "|---|---|---|---|---|"]
    for r in results:
        if "ours_ms" not in r:
            continue
        cells = [" / ".join(_ms(v) for v in np.percentile(r[k], [0, 10, 50, 90]))
                 for k in ("ours_times", "ort_times")]
        ratio = min(r["ours_times"]) / min(r["ort_times"])
        lines.append(f"| {r['model']} | {kernels_label(r)} | {cells[0]} | {cells[1]} | {ratio:.2f} |")
    return "\n".join(lines)


def summary(results: list) -> list:
    """Per variant: which targets it meets."""
    out = []
    for label in dict.fromkeys(r.get("variant") for r in results if r.get("variant") != "-"):
        mine = [r for r in results if r.get("variant") == label and r["target"]]
        met = [r["model"] for r in mine if status(r) == "meets target"]
        missed = [f"{r['model']} ({_fmt(r.get('ratio'), '.2f')})" for r in mine if r["model"] not in met]
        example = next((kernels_label(r) for r in mine), label)
        out.append(f"- **{example}**: meets {len(met)} of {len(mine)} latency targets"
                   + (f"; misses {', '.join(missed)}" if missed else ""))
    for label in dict.fromkeys(r.get("variant") for r in results if r.get("variant") != "-"):
        base = [r for r in results if r.get("variant") == label and r["model"] in FOUNDATION]
        if base:
            ok = all("ratio" in r and r["ratio"] <= 2.0 for r in base)
            out.append(f"- **{kernels_label(base[0])}**, foundation issue (<= 2.0 on ResNet-50, "
                       f"SqueezeNet, Inception v1, VGG-19): {'met' if ok else 'not met'} ("
                       + ", ".join(f"{r['model']} {_fmt(r.get('ratio'), '.2f')}" for r in base) + ")")
    plans = {r["model"]: r["info"]["arena_bytes"] / r["info"]["lower_bound_bytes"] for r in results
             if r.get("info", {}).get("lower_bound_bytes")}
    if plans:
        worst = max(plans, key=plans.get)
        out.append(f"- **memory plan**: arena / live-tensor lower bound <= {plans[worst]:.3f} "
                   f"(worst: {worst}; target <= {ARENA_TARGET})")
    return out


# ---------------------------------------------------------------- report
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    try:
        return " / ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "unknown"


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_info() -> list:
    import onnx
    import onnxruntime

    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    return [
        ("date", _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("CPU", cpu_model() + (" (AVX-512)" if AVX512 <= cpu_flags() else "")),
        ("cores", f"{os.cpu_count()} logical, {affinity} usable by this process"),
        ("OS", f"{platform.system()} {platform.release()} {platform.machine()}"),
        ("Python", platform.python_version()), ("numpy", np.__version__),
        ("OPENBLAS_CORETYPE in the environment", os.environ.get("OPENBLAS_CORETYPE") or "unset"),
        ("onnxruntime", onnxruntime.__version__), ("onnx", onnx.__version__),
        ("repository", git_revision()),
    ]


def command_line(args) -> str:
    parts = ["python benchmarks/bench_cpu.py"]
    if getattr(args, "int8", False):
        parts.append("--int8")
    if getattr(args, "load", False):
        parts.append("--load")
        if args.load_phases != list(PHASE_TITLES):
            parts.append(f"--load-phases {','.join(args.load_phases)}")
    for flag in ("models", "variants", "threads", "runs", "warmup", "rounds"):
        value = getattr(args, flag)
        default = {"threads": 2, "rounds": DEFAULT_ROUNDS}.get(flag)
        if value is not None and value != default:
            parts.append(f"--{flag} {value}")
    if args.quick:
        parts.append("--quick")
    return " ".join(parts)


# ---------------------------------------------------------------- under load (--load)
def p99(times: list) -> float:
    return float(np.percentile(times, 99))


def load_status(r: dict) -> str:
    if "ours_ms" not in r:
        return status(r)
    tail = p99(r["ours_times"]) / r["ours_ms"]
    misses = [f"median ratio {r['ratio']:.2f} > {LOAD_RATIO_TARGET}" for _ in [0] if r["ratio"] > LOAD_RATIO_TARGET]
    misses += [f"p99/median {tail:.2f} > {LOAD_TAIL_TARGET}" for _ in [0] if tail > LOAD_TAIL_TARGET]
    return "MISSES: " + "; ".join(misses) if misses else "meets both targets"


def load_table(results: list) -> str:
    head = ("| model | ours: wait policy (as started) | ours median ms | ours p99 ms | ours p99/median "
            "| onnxruntime median ms | onnxruntime p99 ms | onnxruntime p99/median "
            "| ours/ort median | per-round ours/ort | status | runs |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in results:
        if "ours_ms" not in r:
            lines.append(f"| {r['model']} | {r.get('variant', '-')} | | | | | | | | | {load_status(r)} | |")
            continue
        ours_p99, ort_p99 = p99(r["ours_times"]), p99(r["ort_times"])
        rr = r["round_ratios"]
        started = r.get("info", {}).get("wait_policy", "?")
        lines.append("| " + " | ".join([
            r["model"], f"{r['variant']} ({started})", _ms(r["ours_ms"]), _ms(ours_p99),
            f"{ours_p99 / r['ours_ms']:.2f}", _ms(r["ort_ms"]), _ms(ort_p99), f"{ort_p99 / r['ort_ms']:.2f}",
            f"{r['ratio']:.2f}", f"{rr[0]:.2f}-{rr[1]:.2f}", load_status(r), str(r["runs"])]) + " |")
    return "\n".join(lines)


LOAD_MARK = "<!-- load section: benchmarks/bench_cpu.py --load -->"
LOAD_END = "<!-- end of load section -->"


PHASE_TITLES = {"quiet": "Quiet: no competing process of the script's "
                         "(what each wait policy costs when nothing else runs)",
                "loaded": "Loaded: one competing busy process"}


def load_markdown(phases: dict, args, elapsed_s: float) -> str:
    out = [LOAD_MARK, "## Under load: one competing busy process, and the same models quiet", "",
           f"Generated by `{command_line(args)}`; do not edit by hand. The script measures every "
           "model twice: first with nothing of its own competing (*quiet*), then while one other "
           f"process spins on a core (`{' '.join(LOAD_CMD[1:])}`, started and stopped by the "
           "script; *loaded*). Targets (issue 20, benchmarks not tests), loaded: our median / "
           f"onnxruntime's median <= {LOAD_RATIO_TARGET} (ResNet-50, SqueezeNet, float, "
           f"{args.threads} threads) and our p99 run / our median run <= {LOAD_TAIL_TARGET}; quiet: "
           "the same, so that the policy chosen for load costs nothing on a quiet machine.", "",
           *[f"- **{k}**: {v}" for k, v in machine_info()],
           f"- whole run took {elapsed_s:.0f} s", "",
           "Each row is one variant of ours measured on its own beside its own onnxruntime child "
           f"(the two interleaved, {args.rounds} rounds, the order rotating; no other variant's "
           "process alive). *wait policy* is `--cpu_wait_policy` "
           "(mace/util/omp_wait.py): `auto` spins ~100,000 iterations and runs each inference on "
           "the cores other processes leave free, `passive` sleeps at once, `short` spins briefly, `spin` never "
           "sleeps, `gomp` is libgomp's own default (spin ~300,000 iterations, the behaviour before "
           "the policy existed); in brackets what the compute pool really started with. A p99 over "
           "a few hundred runs is the 2nd-4th slowest run. The load average is the machine's: "
           "other users' work shows there (the competing process adds 1).", ""]
    for phase, (results, loads) in phases.items():
        out += [f"### {PHASE_TITLES[phase]}", "",
                f"Load average (1 / 5 / 15 min) before -> after each model: {loads}", "",
                load_table(results), ""]
    return "\n".join(out + [LOAD_END])


NOTES_MARK = "<!-- notes: written by hand or by other scripts; bench_cpu.py keeps them -->"
NOTES_END = "<!-- end of notes -->"


def kept_notes(path) -> str:
    """The hand-written notes (Ray, transformers) between NOTES_MARK and NOTES_END, kept."""
    old = Path(path).read_text() if Path(path).exists() else ""
    if NOTES_MARK not in old or NOTES_END not in old:
        return ""
    return "\n" + old[old.index(NOTES_MARK):old.index(NOTES_END) + len(NOTES_END)] + "\n"


def kept_load_section(path) -> str:
    """The load section of the file, kept when a quiet run rewrites the rest."""
    old = Path(path).read_text() if Path(path).exists() else ""
    if LOAD_MARK not in old or LOAD_END not in old:
        return ""
    return "\n" + old[old.index(LOAD_MARK):old.index(LOAD_END) + len(LOAD_END)] + "\n"


def write_load_section(path, section: str) -> None:
    """Put `section` in place of the file's load section (or before the GPU section, else at the end)."""
    old = Path(path).read_text() if Path(path).exists() else "# CPU performance\n"
    if LOAD_MARK in old and LOAD_END in old:
        new = old[:old.index(LOAD_MARK)] + section + old[old.index(LOAD_END) + len(LOAD_END):]
    elif GPU_MARK in old:
        new = old[:old.index(GPU_MARK)] + section + "\n\n" + old[old.index(GPU_MARK):]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    Path(path).write_text(new)


GPU_MARK = "<!-- GPU section: benchmarks/bench_gpu.py -->"


def kept_gpu_section(path) -> str:
    """bench_gpu.py's section of the file, kept when this script rewrites the rest."""
    old = Path(path).read_text() if Path(path).exists() else ""
    return "\n" + old[old.index(GPU_MARK):] if GPU_MARK in old else ""


def markdown(rows: list, results: list, args, elapsed_s: float) -> str:
    failed = [r for r in results if not status(r).startswith(("ok", "meets", "MISSES"))]
    loads = "; ".join(f"{r['model']} {r['load_before']} -> {r.get('load_after', '?')}" for r in rows)
    out = [
        "# CPU performance: our numpy engine vs onnxruntime", "",
        "Generated by `benchmarks/bench_cpu.py`; do not edit by hand. "
        "Method and caveats: `benchmarks/README.md`.", "",
        "## Machine", "", *[f"- **{k}**: {v}" for k, v in machine_info()], "",
        "## Settings", "",
        f"- threads: {args.threads} (onnxruntime: intra_op_num_threads={args.threads}, "
        f"inter_op_num_threads=1, CPUExecutionProvider; ours: BLAS threads limited to "
        f"{args.threads} by mace.runtime.affinity.limit_threads; a `pool` variant ran on the "
        f"compute pool, {args.threads} numba OpenMP threads with OpenBLAS held at one during runs)",
        "- batch 1, float32; the same input array for both engines; latency = median wall time "
        "of `Engine.run` / `InferenceSession.run` after warm-up runs",
        f"- every engine in its own process; {args.rounds} interleaved rounds per model, the "
        f"engine order rotating each round, {SETTLE_S} s of quiet and one untimed run before "
        "each block (so that the previous engine's spinning thread pool has gone idle); "
        "*per-round ours/ort* is the range of the ratio of the rounds' medians",
        "- *ours: BLAS kernels* is what OpenBLAS reported (threadpoolctl) inside our child: "
        "`(env)` = as the environment chose them, `(OPENBLAS_CORETYPE)` = set by the "
        "benchmark's `--variants` for that child only",
        "- light models and MobileNet v2: random weights (seed 0), input standard normal; "
        "digits: first held-out test image",
        f"- whole run took {elapsed_s:.0f} s; load average (1 / 5 / 15 min) before -> after "
        f"each model: {loads}", "",
        "## Summary", "", *summary(results), "",
        "Variants: the environment's OpenBLAS kernels are what a user of this machine gets by "
        "default; `SkylakeX` is what `mace/_blas.py` picks on an AVX-512 CPU when "
        "OPENBLAS_CORETYPE is not set (set it, or unset it, to get them); `+wino4` is the "
        "`.yml` option `winograd: 4` (opt-in; 3x3 stride-1 convs with enough channels and "
        "tiles, see mace/ops/fast/_winograd.py).", "",
        "## Results", "", table(results), "",
        "Columns: *ours/ort* is the latency ratio (lower is better); *max rel err* is "
        "max|ours - ort| / max|ort| over all outputs, the pre-softmax logits included (a row "
        f"over {REL_TOL:g} is marked as disagreeing); *arena MB* is our memory plan for the "
        "activations, *lower bound MB* the largest total size of simultaneously live tensors "
        f"(no plan can be smaller; target arena/bound <= {ARENA_TARGET}); *scratch MB* the one "
        "region the kernels share for im2col / padding / Winograd buffers, apart from the "
        "arena; *peak RSS* is each engine's own process, loading the .onnx and building the "
        "engine included.", "",
        *(["## int8: ours (`quantize: 1`) vs onnxruntime's quantize_static", "",
            "Both engines quantized from the same ONNX model, calibrated on the same one sample "
            "(the timed input): onnxruntime's `quantize_static` QOperator, per-channel, uint8 "
            "activations x int8 weights; ours `quantize: 1` (uint8 activations, per-channel int8 "
            "weights; the int8:fast kernels, docs/quantization.md). Medians of the same interleaved "
            "rounds as above.", "", int8_table(rows), ""] if getattr(args, "int8", False) else []),
        "### Spread of the timed runs", "",
        "A wide p10..p90 range means other load on the machine disturbed the runs; the "
        "minima are the least disturbed runs and their ratio the least noisy comparison.", "",
        spread_table(results), "",
    ]
    if failed:
        out += ["## Failures", "", *[f"- **{r['model']}** ({r.get('variant')}): {status(r)}"
                                     for r in failed], ""]
    out += ["## How to reproduce", "", f"`{command_line(args)}` from the repository root "
            "(with the project's dependencies installed).", ""]
    return "\n".join(out)


# ---------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2, help="CPU threads for both engines (2)")
    p.add_argument("--runs", type=int, help="timed runs per engine (default: per model)")
    p.add_argument("--warmup", type=int, help="untimed runs first (default: per model)")
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                   help=f"interleaved blocks the runs are split into ({DEFAULT_ROUNDS})")
    p.add_argument("--models", help=f"comma-separated subset of: {','.join(ALL_MODELS)}")
    p.add_argument("--variants", help="our engine's variants, comma-separated: env (the "
                   "environment's BLAS kernels) or an OPENBLAS_CORETYPE name (e.g. SkylakeX, "
                   "Haswell), optionally +wino2 / +wino4, optionally @passive / @short / @spin "
                   "(--cpu_wait_policy) or @gomp (libgomp's own spin); default: env, plus SkylakeX "
                   "where the environment pins other kernels on an AVX-512 CPU")
    p.add_argument("--max-load", type=float, default=None,
                   help="before each model wait (up to --wait s) for the 1-min load average to drop "
                        "below this")
    p.add_argument("--wait", type=float, default=300.0, help="longest wait for --max-load (300 s)")
    p.add_argument("--out", help="markdown file to write (default docs/performance.md; "
                                 "--quick writes none unless given)")
    p.add_argument("--int8", action="store_true",
                   help="also time both engines quantized (onnxruntime's quantize_static QOperator "
                        "per-channel u8s8; ours quantize: 1) on the same calibration sample")
    p.add_argument("--load", action="store_true",
                   help="start one competing process spinning on a core for the whole run and report "
                        "median and p99 per engine (default models: " + ",".join(LOAD_MODELS)
                        + f"; default variants: {LOAD_VARIANTS}); writes only the file's load section")
    p.add_argument("--load-phases", default="quiet,loaded",
                   help="with --load: which phases to run, comma-separated (quiet,loaded)")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: {','.join(QUICK_MODELS)}, {QUICK_RUNS[0]} runs")
    p.add_argument("--child", nargs=2, metavar=("ENGINE", "CASE_JSON"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads < 1 or (args.runs is not None and args.runs < 1) or args.rounds < 1 \
            or (args.warmup is not None and args.warmup < 0):
        p.error("--threads, --runs and --rounds must be >= 1, --warmup >= 0")
    args.load_phases = [x.strip() for x in args.load_phases.split(",") if x.strip()]
    if not args.load_phases or set(args.load_phases) - set(PHASE_TITLES):
        p.error(f"--load-phases {','.join(args.load_phases)}: choose from quiet,loaded")
    return p, args


def selected_models(parser, args) -> list:
    if not args.models:
        return list(QUICK_MODELS if args.quick else LOAD_MODELS if args.load else ALL_MODELS)
    names = [m.strip().removeprefix("light_") for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in ALL_MODELS]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {','.join(ALL_MODELS)}")
    return names


def selected_variants(parser, args) -> list:
    if not args.variants:
        return [parse_variant(v) for v in LOAD_VARIANTS.split(",")] if args.load else default_variants()
    try:
        return [parse_variant(v) for v in args.variants.split(",") if v.strip()]
    except ValueError as e:
        parser.error(str(e))


def run_models(args, models: list, variants: list, verdict=status) -> tuple:
    """Every model measured in turn: (rows, result rows), each model's line printed as it ends."""
    rows, results = [], []
    with tempfile.TemporaryDirectory(prefix="mace-bench-") as tmp:
        for i, name in enumerate(models, 1):
            wait_for_quiet(args.max_load, args.wait)
            t = time.perf_counter()
            print(f"[{i}/{len(models)}] {name}: {len(variants)} variant(s) of ours + onnxruntime ...", flush=True)
            rows.append(measure(name, Path(tmp), args, variants))
            mine = result_rows(rows[-1])
            results += mine
            for r in mine:
                print(f"{name} [{r['variant']}]: {_fmt(r.get('ratio'), '.2f')}x {verdict(r)} "
                      f"({time.perf_counter() - t:.0f} s, load {load_average()})", flush=True)
    return rows, results


def load_main(args, models: list, variants: list, out, start: float) -> int:
    """--load: every model quiet first, then with the competing process; both tables."""
    phases = {}
    for phase in args.load_phases:
        print(f"--load, {phase} phase", flush=True)
        load = start_load() if phase == "loaded" else None
        try:
            # one variant at a time, each beside its own onnxruntime child: a policy's idle
            # threads (spinning, or not) would otherwise speed up or slow down the other's runs
            rows, results = [], []
            for v in variants:
                more_rows, more = run_models(args, models, [v], load_status)
                rows += more_rows
                results += more
        finally:
            if load is not None:
                load.kill()
                load.wait()
        loads = "; ".join(f"{r['model']} {r['load_before']} -> {r.get('load_after', '?')}" for r in rows)
        phases[phase] = (results, loads)
        print("\n" + load_table(results) + "\n", flush=True)
    if out:
        write_load_section(out, load_markdown(phases, args, time.perf_counter() - start))
        print(f"wrote the load section of {out} ({', '.join(phases)} tables)")
    every = [r for results, _ in phases.values() for r in results]
    return 1 if any(status(r).startswith(("FAILED", "DISAGREES")) for r in every) else 0


def start_load() -> subprocess.Popen:
    """The competing process: one core kept busy until the run ends (killed in main's finally)."""
    print(f"--load: started a competing process ({' '.join(LOAD_CMD[1:])}) for the whole run", flush=True)
    return subprocess.Popen(LOAD_CMD, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def wait_for_quiet(max_load, timeout: float) -> None:
    if max_load is None or not hasattr(os, "getloadavg"):
        return
    deadline = time.monotonic() + timeout
    while os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(5)


def main(argv=None) -> int:
    parser, args = parse_args(argv)
    if args.child:
        return child_main(*args.child)
    models, variants = selected_models(parser, args), selected_variants(parser, args)
    if args.quick and args.rounds == DEFAULT_ROUNDS:
        args.rounds = 2
    out = args.out or (None if args.quick else str(REPO / "docs" / "performance.md"))
    if hasattr(os, "getloadavg") and os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
        # Contention matters a lot: BLAS threads that wait on a busy core stall every GEMM.
        print(f"warning: the machine is busy (load average {load_average()}); "
              "timings will be noisy", file=sys.stderr)
    start = time.perf_counter()
    if args.load:
        return load_main(args, models, variants, out, start)
    rows, results = run_models(args, models, variants)
    elapsed = time.perf_counter() - start
    print()
    print(table(results))
    if args.int8:
        print("\n" + int8_table(rows))
    print("\n" + "\n".join(summary(results)))
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(markdown(rows, results, args, elapsed) + kept_notes(out)
                             + kept_load_section(out) + kept_gpu_section(out))
        print(f"\nwrote {out}")
    # Timing misses do not fail the run (they depend on the machine); broken models do.
    return 1 if any(status(r).startswith(("FAILED", "DISAGREES")) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
