"""Limits users may override through the environment (docs/reliability.md lists each)."""
from __future__ import annotations

import math
import os


def positive_env(env: str, default: float, kind=float, unit: str = "") -> float:
    """`env`'s value as a finite number above 0, else `default` when unset; ValueError naming the
    variable for anything else (a typo must not turn a limit off)."""
    raw = os.environ.get(env, "").strip()
    try:
        value = kind(raw) if raw else default
    except ValueError:
        value = -1
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{env}={raw!r}: expected a positive number{' of ' + unit if unit else ''}")
    return value
