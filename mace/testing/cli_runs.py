"""The converter CLI run as a user runs it, for the corpus scripts (benchmarks/zoo.py,
benchmarks/tflite_mediapipe.py): a subprocess of tools/converter.py, and the error line it printed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, cwd: Path, timeout: float = 1800):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "converter.py"), *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


def error_line(r, limit: int = 400) -> str:
    """The error line a failed command printed, without the supported-op list."""
    lines = [ln for ln in (r.stderr + r.stdout).strip().splitlines() if ln.strip()]
    line = next((ln for ln in reversed(lines) if ln.startswith("error")), lines[-1] if lines else "")
    return line.split(" Supported: ")[0][:limit]
