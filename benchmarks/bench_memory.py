"""Peak memory of `run` (a converted model loaded, the engine built, two runs) against onnxruntime,
and where ours goes: docs/memory.md.

    python benchmarks/bench_memory.py                      # the benchmark models of bench_cpu.py
    python benchmarks/bench_memory.py --models resnet50,squeezenet --out /tmp/memory.md

Each model (bench_models.py: onnx's light architectures with random weights, MobileNet v2, digits)
is converted by `converter.py convert` in its own process (its peak is the convert column), then
ours and onnxruntime each run in a fresh process of their own, reading /proc/self/status at each
stage: VmHWM (peak resident set), and at the end RssAnon (heap: arena, packed weights, numba's
compiled code) and RssFile (mapped files: the weights file, which load_model maps read-only, and
the shared libraries). bench_cpu.py's RSS column converts the .onnx inside the measured process,
so it is convert's peak, not run's. Memory is not timing: this may run on a busy machine.

`--aot` runs ours a second time with the kernels served ahead of time (MACE_AOT=1, one thread:
build the library first, `python tools/converter.py warmup --aot`): its peak, its ratio to
onnxruntime's and whether numba was imported after all.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MODELS = ("digits", "mobilenet_v2", "squeezenet", "shufflenet", "densenet121", "inception_v1", "inception_v2",
          "resnet50", "bvlc_alexnet", "zfnet512", "vgg19")


def status() -> dict:
    """VmHWM, VmRSS, RssAnon, RssFile of this process, in MB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) / 1024
    return out


def child(kind: str, case: dict) -> dict:
    import numpy as np
    x = np.load(case["input"])
    stages = {"start": status()}
    if kind == "ort":
        import onnxruntime as ort
        s = ort.InferenceSession(case["model"], providers=["CPUExecutionProvider"])
        stages["loaded"] = status()
        for _ in range(2):
            s.run(None, {case["input_name"]: x})
        stages["ran"] = status()
        return stages
    from mace.ir.model_io import load_model
    from mace.ops.fast import kernel_cache
    from mace.runtime.engine import Engine
    stages["imported"] = status()
    pb = Path(case["pb"])
    graph = load_model(pb, pb.with_suffix(".data"))
    engine = Engine(graph, options={"num_threads": 1} if kind == "ahead" else None)
    stages["loaded"] = status()
    for _ in range(2):
        engine.run({graph.input_names[0]: x})
    stages["ran"] = status()
    stages["numba"] = "numba" in sys.modules
    if kind == "ahead":   # counting numba's kernels would import it
        return stages
    stages["kernels"] = sum(len(v) for v in kernel_cache.used().values())
    stages["arena_mb"] = engine.plan.arena_size / 2**20
    stages["weights_mb"] = pb.with_suffix(".data").stat().st_size / 2**20
    return stages


def _spawn(*args, env=None) -> dict:
    r = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, timeout=1800, env=env)
    if r.returncode:
        raise RuntimeError((r.stderr.strip().splitlines() or ["failed"])[-1])
    return json.loads(r.stdout.strip().splitlines()[-1])


def deployment(case: dict, work: Path) -> Path:
    """work/deploy.yml converting the case's .onnx for the CPU (tools/gen_kernel_signatures.py
    records the benchmark models from it too)."""
    import onnx
    import yaml
    model = onnx.load(case["model"], load_external_data=False)
    inp = next(i for i in model.graph.input if i.name == case["input_name"])
    shape = ",".join(str(d.dim_value) for d in inp.type.tensor_type.shape.dim)
    outs = [o.name for o in model.graph.output]
    sha = hashlib.sha256(Path(case["model"]).read_bytes()).hexdigest()
    sg = {"input_tensors": case["input_name"], "input_shapes": shape, "input_data_formats": "NCHW",
          "output_tensors": outs, "output_data_formats": ["NONE"] * len(outs)}
    yml = work / "deploy.yml"
    yml.write_text(yaml.safe_dump({"library_name": "mem", "target_abis": ["host"], "model_graph_format": "file",
                                   "model_data_format": "file", "models": {"m": {
                                       "platform": "onnx", "model_file_path": case["model"],
                                       "model_sha256_checksum": sha, "runtime": "cpu", "subgraphs": [sg]}}}))
    return yml


def convert(case: dict, work: Path) -> dict:
    """Convert the case with the CLI; {pb, convert peak MB}."""
    yml = deployment(case, work)
    # the convert's own peak: the child's rusage (ru_maxrss, KB on Linux) read by a wrapper
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
               "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", wrapper, sys.executable, str(ROOT / "tools" / "converter.py"),
                        "convert", "--config", str(yml)], cwd=work, capture_output=True, text=True, timeout=1800)
    code, peak_kb = r.stdout.split()
    if int(code):
        raise RuntimeError(f"convert failed ({code})")
    return {"pb": str(next((work / "builds").rglob("*.pb"))), "convert_mb": int(peak_kb) / 1024}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--out", type=Path, help="write the markdown table here")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--aot", action="store_true",
                   help="also run ours with the kernels served ahead of time (MACE_AOT=1, one thread)")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], json.loads(Path(args.child[1]).read_text()))))
        return 0
    import bench_models
    from rich.progress import track
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in track([m for m in args.models.split(",") if m], description="models"):
            work = Path(tmp) / name
            case = bench_models.build_case(name, Path(tmp) / "cases")
            work.mkdir()
            case.update(convert(case, work))
            spec = work / "case.json"
            spec.write_text(json.dumps(case))
            ours = _spawn("--child", "ours", str(spec), env=dict(os.environ, MACE_AOT="0"))
            ort = _spawn("--child", "ort", str(spec))
            ahead = _spawn("--child", "ahead", str(spec), env=dict(os.environ, MACE_AOT="1")) if args.aot else None
            rows.append((name, case, ours, ort, ahead))
    header = ("model", "weights MB", "ours: peak RSS of run MB", "onnxruntime peak MB", "ours / ort",
              "ours after imports MB", "ours heap (RssAnon) MB", "ours mapped files (RssFile) MB",
              "compiled kernels loaded", "arena MB", "convert peak MB")
    if args.aot:
        header += ("ours ahead (MACE_AOT=1, 1 thread) peak MB", "ahead / ort", "numba imported")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, case, ours, ort, ahead in rows:
        ratio = ours["ran"]["VmHWM"] / ort["ran"]["VmHWM"]
        cells = [name, f"{ours['weights_mb']:.1f}", f"{ours['ran']['VmHWM']:.0f}", f"{ort['ran']['VmHWM']:.0f}",
                 f"{ratio:.2f}", f"{ours['imported']['VmRSS']:.0f}", f"{ours['ran']['RssAnon']:.0f}",
                 f"{ours['ran']['RssFile']:.0f}", str(ours["kernels"]), f"{ours['arena_mb']:.1f}",
                 f"{case['convert_mb']:.0f}"]
        if ahead:
            cells += [f"{ahead['ran']['VmHWM']:.0f}", f"{ahead['ran']['VmHWM'] / ort['ran']['VmHWM']:.2f}",
                      "yes" if ahead["numba"] else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        args.out.write_text(table)
    print(f"measured {len(rows)} models" + (f"; wrote {args.out}" if args.out else ""))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
