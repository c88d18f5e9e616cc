"""MACE's `run --report` CSV: one row per model and device, written to <report_dir>/report.csv.

Columns as MACE's DeviceWrapper.report_run_statistics wrote them:
model_name,device_name,soc,abi,runtime,init(ms),warmup(ms),run_avg(ms),tuned
(runtime in MACE's device-type spelling, CPU / GPU / HEXAGON; `tuned` says whether OpenCL tuning
ran for the numbers). Rows of earlier runs are kept: MACE appended to the file too.
"""
from __future__ import annotations

import csv
from pathlib import Path

from mace.ir.runtimes import RUNTIMES

HEADER = ["model_name", "device_name", "soc", "abi", "runtime", "init(ms)", "warmup(ms)", "run_avg(ms)",
          "tuned"]
DEVICE_TYPES = {n: r.label for n, r in RUNTIMES.items()}   # MACE's labels (mace/ir/runtimes.py)


def row(r) -> list:
    info = r.device_info or {}
    tuned = any("tuned now" in n for n in r.notes)
    return [r.model, r.device, info.get("soc", ""), info.get("abi", "host"),
            DEVICE_TYPES.get(r.runtime, r.runtime.upper()), f"{r.timing.init_ms:.3f}",
            f"{r.timing.warmup_ms:.3f}", f"{r.timing.avg_ms:.3f}", str(tuned)]


def write_report_csv(directory, results) -> Path:
    """Append one row per ModelRunResult to DIR/report.csv (the header once)."""
    path = Path(directory) / "report.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(HEADER)
        w.writerows(row(r) for r in results)
    return path
