"""JSON for report data: dataclasses become dicts, inf/nan become null, numpy scalars numbers."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path


def plain(value):
    """`value` with dataclasses, tuples, paths and numpy scalars turned into JSON types."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return plain(value.item())
    return value


def dumps(value, indent: int | None = 1) -> str:
    return json.dumps(plain(value), indent=indent, allow_nan=False)
