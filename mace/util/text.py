"""Plain-text rendering shared by the reports: Plumerai-style tables and number formats."""
from __future__ import annotations


def si(n: float) -> str:
    """205634 -> '205.63K' (Plumerai's #ops / #params style; M and G for big models)."""
    for div, unit in ((1e9, "G"), (1e6, "M")):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return f"{n / 1e3:.2f}K"


def kib(n: float) -> str:
    return f"{n / 1024:.2f} KiB"


def spaced(n: int) -> str:
    """4521 -> '4 521' (the execution report's digit groups)."""
    return f"{int(n):,}".replace(",", " ")


def table(headers: list, rows: list, right: set | None = None) -> list:
    """Markdown-like table lines: `| a | b |`, a `|---|` rule under the header.

    Columns listed in `right` (indices) are right-aligned; the rest left-aligned."""
    right = set(range(len(headers))) if right is None else right
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(str(h))] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values):
        parts = [v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))]
        return "| " + " | ".join(parts) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return [line([str(h) for h in headers]), rule] + [line(r) for r in cells]


def banner(title: str) -> list:
    bar = "=" * (len(title) + 2)
    return [bar, f" {title}", bar]
