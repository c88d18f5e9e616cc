"""Trained TFLite models from MediaPipe's wheel, through the CLI, against LiteRT.

MediaPipe's 0.10 wheels (PyPI) carry the face, hand, pose, iris and selfie
models as .tflite files. This script takes them from a wheel (`--wheel`, or
`pip download --no-deps mediapipe==0.10.14` into `--cache`; about 35 MB, which
is why it is a corpus script and not a CI test), writes one deployment file per
model (its inputs and outputs as the FlatBuffer declares them) and runs

    converter.py convert --config M.yml
    converter.py run --config M.yml --validate --json ...

for each runtime asked for. It prints per model the worst output cosine against
LiteRT and the threshold (CPU 0.999, GPU 0.995), or the converter's error
(unsupported and custom ops are listed by the converter). Exit status 1 when a
model that converts fails its threshold.

    python benchmarks/tflite_mediapipe.py [--runtimes cpu,gpu] [--wheel PATH] [--models face,hand]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mace.testing.cli_runs import cli, error_line  # noqa: E402
from mace.frontends.tflite.model_file import read_model  # noqa: E402

WHEEL = "mediapipe==0.10.14"
THRESHOLDS = {"cpu": 0.999, "gpu": 0.995}


def fetch_wheel(cache: Path) -> Path:
    found = sorted(cache.glob("mediapipe-0.10.14-*.whl"))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        WHEEL, "-d", str(cache)], check=True)
        found = sorted(cache.glob("mediapipe-0.10.14-*.whl"))
    return found[0]


def extract(wheel: Path, into: Path, wanted: list) -> list:
    paths = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            stem = Path(name).stem
            if name.endswith(".tflite") and (not wanted or any(w in stem for w in wanted)):
                target = into / Path(name).name
                target.write_bytes(z.read(name))
                paths.append(target)
    return paths


def deployment(path: Path, runtime: str, work: Path) -> Path:
    model = read_model(path)
    ins, outs = [model.tensors[i] for i in model.inputs], [model.tensors[i] for i in model.outputs]
    sg = {"input_tensors": [t.name for t in ins],
          "input_shapes": [",".join(map(str, t.shape)) for t in ins],
          "input_data_formats": ["NHWC" if len(t.shape) == 4 else "NONE" for t in ins],
          "input_ranges": ["0,1"] * len(ins),
          "output_tensors": [t.name for t in outs],
          "output_data_formats": ["NONE"] * len(outs)}
    entry = {"platform": "tflite", "model_file_path": str(path),
             "model_sha256_checksum": hashlib.sha256(path.read_bytes()).hexdigest(),
             "runtime": runtime, "subgraphs": [sg]}
    yml = work / f"{path.stem}_{runtime}.yml"
    yml.write_text(yaml.safe_dump({"library_name": f"{path.stem}_{runtime}", "target_abis": ["host"],
                                   "model_graph_format": "file", "model_data_format": "file",
                                   "models": {"m": entry}}, sort_keys=False))
    return yml


def check(path: Path, runtime: str, work: Path) -> dict:
    yml = deployment(path, runtime, work)
    r = cli("convert", "--config", yml, cwd=work)
    if r.returncode:
        return {"status": "refused", "detail": error_line(r)}
    report = work / f"{path.stem}_{runtime}.json"
    r = cli("run", "--config", yml, "--validate", "--json", report, cwd=work)
    if not report.exists():
        return {"status": "error", "detail": error_line(r)}
    rows = json.loads(report.read_text())["models"][0].get("validation", [])
    worst = min(v["cosine"] for v in rows)
    return {"status": "pass" if worst >= THRESHOLDS[runtime] else "FAIL", "cosine": worst,
            "outputs": len(rows)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wheel", type=Path, help="a mediapipe 0.10.x wheel (default: download 0.10.14)")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pymace" / "mediapipe")
    p.add_argument("--runtimes", default="cpu", help="comma-separated: cpu, gpu")
    p.add_argument("--models", default="", help="comma-separated name parts (default: all)")
    args = p.parse_args(argv)
    console = Console(width=max(Console().width, 160))
    wheel = args.wheel or fetch_wheel(args.cache)
    runtimes = [r for r in args.runtimes.split(",") if r]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        models = extract(wheel, work, [m for m in args.models.split(",") if m])
        with Progress(console=console) as progress:
            task = progress.add_task("MediaPipe models", total=len(models) * len(runtimes))
            for path in models:
                for runtime in runtimes:
                    progress.update(task, description=f"{path.stem} ({runtime})")
                    results.append((path.stem, runtime, check(path, runtime, work)))
                    progress.advance(task)
    table = Table(title=f"MediaPipe models from {wheel.name} against LiteRT")
    for col in ("model", "runtime", "result", "worst cosine", "detail"):
        table.add_column(col)
    for name, runtime, r in results:
        cos = f"{r['cosine']:.6f}" if "cosine" in r else ""
        table.add_row(name, runtime, r["status"], cos, r.get("detail", f"{r.get('outputs', 0)} outputs"))
    console.print(table)
    passed = sum(r["status"] == "pass" for _, _, r in results)
    console.print(f"{passed} of {len(results)} model runs within their threshold; "
                  f"{sum(r['status'] == 'refused' for _, _, r in results)} refused at convert")
    return 1 if any(r["status"] in ("FAIL", "error") for _, _, r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
