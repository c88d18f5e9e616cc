"""Peak memory over the real-model corpus: `run`'s process against the model's own framework's.

    python benchmarks/zoo_memory.py                                # every corpus row
    python benchmarks/zoo_memory.py --models mtcnn_pnet,minilm_l3_paraphrase --out /tmp/m.md

Each row is converted as benchmarks/zoo_speed.py does it; then ours and the framework each load
the model in a fresh process of their own and run it twice on the row's validation input (one
thread), and the process reads /proc/self/status: VmHWM, the peak resident set, and for ours
also RssAnon (heap: arena, packed weights, numba's compiled code) and RssFile (mapped files: the
weights file load_model maps, the shared libraries). "After imports" is ours before the model is
read (numpy, numba, our modules); the framework's imports (TensorFlow's are most of its peak)
count in its peak as ours count in ours: what a user's process pays. Memory is not timing: this
may run on a busy machine. docs/memory.md shows the table.

    python tools/converter.py warmup --aot && python benchmarks/zoo_memory.py --aot

`--aot` measures ours a second time with the kernels served ahead of time (MACE_AOT=1, the
library `warmup --aot` builds; mace/ops/fast/_aot.py): columns "ours ahead", its ratio, and
whether numba was imported after all (a loop the library lacks); the summary line is then that
ratio's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import zoo_speed  # noqa: E402

LIMIT = 1.3   # issue 33 item 8: ours at most 1.3x the framework's peak


def status() -> dict:
    """VmHWM, RssAnon, RssFile of this process, in MB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) / 1024
    return out


def child(spec: dict) -> dict:
    import numpy as np
    inputs = {k: np.load(v) for k, v in spec["inputs"].items()}
    if spec["side"] == "theirs":
        framework, run = zoo_speed.framework_runner(spec["model"], Path(spec["path"]), inputs, 1)
        run(), run()
        return {"framework": framework, **status()}
    from threadpoolctl import threadpool_limits
    threadpool_limits(1)
    from mace.ir.model_io import load_model
    from mace.ops.fast import _aot, kernel_cache
    from mace.runtime.engine import Engine
    imported = status()["VmHWM"]
    pb = Path(spec["pb"])
    engine = Engine(load_model(pb, pb.with_suffix(".data")), options={"num_threads": 1})
    engine.run(inputs), engine.run(inputs)
    kernel_cache.served_ahead()   # as a run's note: what numba supplied goes to seen_signatures.txt
    lib = _aot.loaded()
    missed = sorted({attr for m in (lib.modules.values() if lib else ()) for attr, _ in m.fallbacks})
    return {"imported": imported, **status(), "numba": "numba" in sys.modules, "missed": missed}


def measure(prepared: dict, side: str) -> dict:
    spec = {"side": "ours" if side == "ahead" else side, **prepared}
    env = dict(os.environ, MACE_AOT="1" if side == "ahead" else "0")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        r = subprocess.run([sys.executable, __file__, "--child", f.name], capture_output=True, text=True,
                           timeout=900, env=env)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 900 s"}
    finally:
        Path(f.name).unlink()
    if r.returncode:
        return {"error": ((r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])[:120]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def table(models: list, results: dict, ahead: bool = False) -> tuple:
    header = ["model", "framework", "ours peak MB", "framework peak MB", "ours / framework",
              "ours after imports MB", "ours heap (RssAnon) MB", "ours mapped (RssFile) MB"]
    if ahead:
        header += ["ours ahead peak MB", "ahead / framework", "numba imported"]
    rows, ratios = [], []
    for m in models:
        r = results.get(m["name"], {})
        ours, theirs, served = r.get("ours", r), r.get("theirs", r), r.get("ahead", {})
        failed = [x["error"] for x in (ours, theirs, served) if "error" in x]
        if failed or not ours or (ahead and not served):
            rows.append([m["name"], theirs.get("framework", ""), (failed or ["not run"])[0]]
                        + [""] * (len(header) - 3))
            continue
        ratio = ours["VmHWM"] / theirs["VmHWM"]
        rows.append([m["name"], theirs["framework"], f"{ours['VmHWM']:.0f}", f"{theirs['VmHWM']:.0f}",
                     f"{ratio:.2f}x", f"{ours['imported']:.0f}", f"{ours['RssAnon']:.0f}", f"{ours['RssFile']:.0f}"])
        if ahead:
            ratio = served["VmHWM"] / theirs["VmHWM"]
            missed = ", ".join(served.get("missed", [])[:3])
            rows[-1] += [f"{served['VmHWM']:.0f}", f"{ratio:.2f}x",
                         f"yes ({missed})" if served["numba"] and missed else "yes" if served["numba"] else "no"]
        ratios.append((ratio, m["name"]))
    if not ratios:
        return header, rows, ["no row was measured"]
    worst = max(ratios)
    return header, rows, [f"{len(ratios)} rows{' (ours served ahead of time)' if ahead else ''}: "
                          f"geomean {zoo_speed.geomean([x for x, _ in ratios]):.2f}x, "
                          f"worst {worst[0]:.2f}x ({worst[1]}), {sum(x > LIMIT for x, _ in ratios)} above "
                          f"{LIMIT}x, {sum(x <= 1.0 for x, _ in ratios)} at or below 1.0x"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    zoo_speed.corpus_args(p)
    p.add_argument("--aot", action="store_true",
                   help="also measure ours with the kernels served ahead of time (MACE_AOT=1; build the "
                        "library first: python tools/converter.py warmup --aot)")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(Path(args.child).read_text()))))
        return 0
    manifest, models = zoo_speed.selected_rows(p, args.models)
    console = Console(width=max(Console().width, 160))
    if args.aot:
        from mace.ops.fast import _aot
        if not all(path.is_file() for path in _aot.paths()):
            console.print(f"error: --aot: no library for this machine and these kernels in {_aot.folder()}; "
                          f"`{_aot.AOT_HINT}` builds it")
            return 1
    sides = ("ours", "theirs", "ahead") if args.aot else ("ours", "theirs")
    results = zoo_speed.each_prepared(models, manifest, args.cache, console,
                                      lambda prepared: {side: measure(prepared, side) for side in sides})
    zoo_speed.show(console, f"peak RSS, ours / framework, {len(models)} corpus rows",
                   *table(models, results, args.aot), args.out)
    measured = sum(1 for r in results.values() if all(side in r and "error" not in r[side] for side in sides))
    console.print(f"measured {measured} of {len(models)} rows")
    return 0 if measured else 1   # a run that measured nothing has not passed


if __name__ == "__main__":
    sys.exit(main())
