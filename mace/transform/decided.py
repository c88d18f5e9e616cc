"""What a pass returns when it hands a decision back to its caller (see pipeline.py)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Decided:
    value: object          # e.g. the quantize pass's CalibrationReport
    changed: bool = False  # as a plain pass's bool: run it again?
