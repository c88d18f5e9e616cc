"""Console views of layer-by-layer validation and divergence search (shared by run and debug)."""
from __future__ import annotations

import math

from rich.markup import escape
from rich.table import Table


def _num(x, fmt: str = ".6f") -> str:
    if x is None:
        return ""
    return "inf" if x == math.inf else "-inf" if x == -math.inf else format(x, fmt)


MAX_ROWS = 50
SHOWN_NAMES = 8


def _rows_to_show(v) -> list:
    """All checks for a small model; for a big one the first failure's neighbourhood."""
    if len(v.checks) <= MAX_ROWS:
        return v.checks
    first = v.first_failure
    if first is None:
        return []
    at = v.checks.index(first)
    return v.checks[max(at - 5, 0):at + 15]


def _names(names: list) -> str:
    more = f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
    return ", ".join(names[:SHOWN_NAMES]) + more


def print_layers(console, v) -> None:
    """The per-layer table; the first failing layer is highlighted and explained below it."""
    first = v.first_failure
    rows = _rows_to_show(v)
    if rows:
        table = Table(title=f"Layers of {v.model} on {v.runtime} vs {v.against} (threshold {v.threshold})")
        for col in ("#", "op", "type", "tensor", "framework ops", "cosine", "SQNR(dB)", "max_abs_err", "result"):
            table.add_column(col, overflow="ellipsis", no_wrap=col in ("op", "tensor", "framework ops"),
                             max_width=40)
        for c in rows:
            mark = "[bold red]FIRST FAIL[/bold red]" if c is first else "[green]PASS[/green]" if c.passed \
                else "[red]FAIL[/red]"
            fw = c.framework_ops[0] + (f" +{len(c.framework_ops) - 1}" if len(c.framework_ops) > 1 else "") \
                if c.framework_ops else ""
            table.add_row(str(c.index), escape(c.op), c.type, escape(c.tensor), escape(fw), _num(c.cosine),
                          _num(c.sqnr_db, ".2f"), _num(c.max_abs_error, ".3g"), mark,
                          style="bold red" if c is first else None)
        console.print(table)
    if rows and len(rows) < len(v.checks):
        console.print(f"{len(v.checks) - len(rows)} more rows in the CSV")
    if v.fused_away:
        console.print(f"{len(v.fused_away)} framework tensors fused away (no tensor to compare): "
                      f"{escape(_names(v.fused_away))}")
    if v.folded:
        console.print(f"folded into constants: {escape(_names(v.folded))}")
    for t, why in v.skipped:
        console.print(f"[yellow]skipped[/yellow] {escape(t)}: {escape(why)}")
    if v.csv_path:
        console.print(f"per-layer results written to {escape(str(v.csv_path))}")
    if not v.checks:   # a check of nothing has not passed
        console.print(f"[bold red]No tensor compared:[/bold red] {escape(v.why_nothing())}")
    elif first is None:
        console.print(f"[green]All {len(v.checks)} mapped tensors within the threshold[/green]")
    else:
        console.print("[bold red]First failing layer:[/bold red] " + escape(describe(first)))


def describe(c) -> str:
    """One sentence naming the node, the framework ops behind it and the numbers there."""
    fw = f" (framework ops {', '.join(c.framework_ops)})" if c.framework_ops else ""
    text = (f"node #{c.index} '{c.op}' ({c.type}){fw}, tensor '{c.tensor}': cosine {_num(c.cosine)}, "
            f"SQNR {_num(c.sqnr_db, '.2f')} dB, max abs error {_num(c.max_abs_error, '.3g')}")
    if c.op_is_wrong is True:
        text += (f"; run alone on correct inputs it still fails (cosine {_num(c.isolated_cosine)}): "
                 f"this op is wrong")
    elif c.op_is_wrong is False:
        text += (f"; run alone on correct inputs it passes (cosine {_num(c.isolated_cosine)}): "
                 f"the error comes from earlier layers")
    return text


def print_findings(console, report) -> None:
    for f in report.findings:
        head = f"{report.model}: {f.runtime} vs {f.against}"
        if f.skipped:
            console.print(f"[yellow]{escape(head)}: skipped[/yellow] - {escape(f.skipped)}")
        elif not f.validation.checks:
            console.print(f"[bold red]{escape(head)}: no tensor compared[/bold red] - "
                          f"{escape(f.validation.why_nothing())}")
        elif f.first is None:
            console.print(f"[green]{escape(head)}: no divergence[/green] "
                          f"({len(f.validation.checks)} tensors compared)")
        else:
            console.print(f"[bold red]{escape(head)}: first divergence at[/bold red] {escape(describe(f.first))}")
        for note in f.range_notes:
            console.print(f"[yellow]{escape(head)}:[/yellow] {escape(note)}")
