"""MACE-style text tables (dashed rules, `|`-separated, right-aligned) for benchmark output."""
from __future__ import annotations


def mace_table(title: str, headers: list, rows: list) -> list:
    """Lines of a titled table the way MACE's statistics.cc prints one."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values):
        return "| " + " | ".join(v.rjust(w) for v, w in zip(values, widths)) + " |"

    rule = "-" * (sum(widths) + 3 * len(widths) + 1)
    out = [rule, title.center(len(rule)).rstrip(), rule, line(headers), rule]
    out += [line(r) for r in cells]
    out.append(rule)
    return out


def ms(x: float) -> str:
    return f"{x:.3f}"


def shape(values) -> str:
    return "[" + ",".join(str(v) for v in values) + "]" if values else ""


def grouped(n: int) -> str:
    return f"{int(n):,}"
