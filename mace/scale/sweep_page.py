"""The sweep as one self-contained HTML page: the table, and per model a latency-vs-accuracy
plot (inline SVG drawn here: no script, nothing fetched, a CSP that forbids fetching).

A point's marker has its runtime's colour and its device's shape; its name ("gpu on board") is
in the legend beside the plot, laid out by the browser as text, never drawn at the point: two
points of one accuracy and close latencies (the same model on two CPUs) put their names on top
of each other, and a name at the right edge ran off the plot ("gpu on h..."). Inside the SVG
only the axis titles and the four range values are drawn, each where nothing else is.
"""
from __future__ import annotations

from html import escape
from pathlib import Path

W, H = 520, 300
LEFT, BOTTOM, TOP, RIGHT = 64, 48, 14, 14     # plot margins: the y values left, the x values below
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
SHAPES = ("circle", "square", "triangle", "diamond")


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if value < 10 else f"{value:.1f}"
    return escape(str(value))


def _table(rows: list) -> str:
    head = ("model", "runtime", "device", "latency (ms)", "init (ms)", "cosine", "validation", "accuracy",
            "fallback", "error")
    body = []
    for r in rows:
        check = "-" if r.passed is None else ("PASS" if r.passed else "FAIL")
        runtime = f"{r.runtime} (ran on CPU)" if r.fallback else r.runtime
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in (
            escape(r.model), escape(runtime), escape(r.device), _cell(r.latency_ms), _cell(r.init_ms),
            _cell(r.cosine), check, _cell(r.accuracy), escape(r.fallback), escape(r.error))) + "</tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(body) + "</tbody></table>")


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or max(abs(hi), 1e-9) * 0.1
    lo, hi = lo - span * 0.1, hi + span * 0.1
    return lambda v: a + (v - lo) / (hi - lo) * (b - a)


def _marker(shape: str, cx: float, cy: float, color: str, cls: str, title: str = "") -> str:
    """One point's marker: `shape` around (cx, cy), about 12 px across."""
    tip = f"<title>{escape(title)}</title>" if title else ""
    attrs = f'class="{cls}" fill="{color}" stroke="#222" stroke-width="0.6"'
    if shape == "square":
        return f'<rect {attrs} x="{cx - 5:.1f}" y="{cy - 5:.1f}" width="10" height="10">{tip}</rect>'
    if shape == "triangle":
        d = f"M{cx:.1f},{cy - 7:.1f} L{cx + 6:.1f},{cy + 5:.1f} L{cx - 6:.1f},{cy + 5:.1f} Z"
        return f'<path {attrs} d="{d}">{tip}</path>'
    if shape == "diamond":
        d = f"M{cx:.1f},{cy - 7:.1f} L{cx + 7:.1f},{cy:.1f} L{cx:.1f},{cy + 7:.1f} L{cx - 7:.1f},{cy:.1f} Z"
        return f'<path {attrs} d="{d}">{tip}</path>'
    return f'<circle {attrs} cx="{cx:.1f}" cy="{cy:.1f}" r="6">{tip}</circle>'


def label(r) -> str:
    """A point's name: `gpu on board`, or `gpu (ran on CPU) on board` after a fallback."""
    return f"{r.runtime}{' (ran on CPU)' if r.fallback else ''} on {r.device}"


def _plot(model: str, rows: list) -> str:
    points = [r for r in rows if r.latency_ms is not None and r.accuracy is not None]
    title = f"<h3>{escape(model)}: latency vs accuracy</h3>"
    if not points:
        return title + "<p class='none'>no point: no accuracy_validation_script, or no run succeeded</p>"
    lat, acc = [r.latency_ms for r in points], [r.accuracy for r in points]
    x0, x1, y0, y1 = LEFT, W - RIGHT, H - BOTTOM, TOP
    x, y = _scale(min(lat), max(lat), x0 + 8, x1 - 8), _scale(min(acc), max(acc), y0 - 8, y1 + 8)
    runtimes = sorted({r.runtime for r in points})
    devices = list(dict.fromkeys(r.device for r in points))
    parts = [f'<svg class="plot" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img">',
             f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/>',
             f'<line x1="{x0}" y1="{y1}" x2="{x0}" y2="{y0}" stroke="#333"/>',
             f'<text x="{(x0 + x1) // 2}" y="{H - 8}" text-anchor="middle">latency (ms)</text>',
             f'<text x="14" y="{(y0 + y1) // 2}" transform="rotate(-90 14 {(y0 + y1) // 2})" '
             f'text-anchor="middle">accuracy</text>',
             f'<text x="{x0}" y="{y0 + 16}" text-anchor="start">{min(lat):.3g}</text>',
             f'<text x="{x1}" y="{y0 + 16}" text-anchor="end">{max(lat):.3g}</text>',
             f'<text x="{x0 - 6}" y="{y0}" text-anchor="end">{min(acc):.4g}</text>',
             f'<text x="{x0 - 6}" y="{y1 + 10}" text-anchor="end">{max(acc):.4g}</text>']
    legend = []
    for r in points:
        color = COLORS[runtimes.index(r.runtime) % len(COLORS)]
        shape = SHAPES[devices.index(r.device) % len(SHAPES)]
        text = f"{label(r)}: {r.latency_ms:.3f} ms, accuracy {r.accuracy:.4f}"
        parts.append(_marker(shape, x(r.latency_ms), y(r.accuracy), color, "point", text))
        legend.append(f'<li><svg class="swatch" width="16" height="16" viewBox="0 0 16 16">'
                      f'{_marker(shape, 8, 8.5, color, "mark")}</svg>{escape(text)}</li>')
    return (title + '<div class="figure">' + "".join(parts) + "</svg>"
            + '<ul class="legend">' + "".join(legend) + "</ul></div>")


def write_page(rows: list, path) -> Path:
    path = Path(path)
    models = list(dict.fromkeys(r.model for r in rows))
    plots = "".join(_plot(m, [r for r in rows if r.model == m]) for m in models)
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>pymace sweep</title>
<style>
body {{ font: 14px sans-serif; margin: 0; }}
header {{ background: #222; color: #eee; padding: 12px 20px; font-size: 18px; }}
main {{ padding: 12px 20px; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #bbb; padding: 3px 8px; text-align: right; }}
th {{ background: #eee; }} svg text {{ font-size: 11px; }}
.figure {{ display: flex; flex-wrap: wrap; gap: 8px 24px; align-items: flex-start; }}
.plot {{ flex: none; }}
.legend {{ list-style: none; margin: 0; padding: 0; min-width: 0; flex: 1 1 240px; }}
.legend li {{ display: flex; align-items: center; gap: 6px; margin: 4px 0; overflow-wrap: anywhere; }}
.swatch {{ flex: none; }}
</style></head>
<body data-rows="{len(rows)}" data-plots="{len(models)}">
<header>pymace sweep: {len(rows)} runs, {len(models)} model(s)</header>
<main><h2>Runs</h2>{_table(rows)}<h2>Latency vs accuracy</h2>{plots}</main>
</body></html>
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path
