"""The sweep as one self-contained HTML page: the table, and per model a latency-vs-accuracy
plot (inline SVG drawn here: no script, nothing fetched, a CSP that forbids fetching)."""
from __future__ import annotations

from html import escape
from pathlib import Path

W, H, PAD = 520, 300, 48
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if value < 10 else f"{value:.1f}"
    return escape(str(value))


def _table(rows: list) -> str:
    head = ("model", "runtime", "device", "latency (ms)", "init (ms)", "cosine", "validation", "accuracy", "error")
    body = []
    for r in rows:
        check = "-" if r.passed is None else ("PASS" if r.passed else "FAIL")
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in (
            escape(r.model), escape(r.runtime), escape(r.device), _cell(r.latency_ms), _cell(r.init_ms),
            _cell(r.cosine), check, _cell(r.accuracy), escape(r.error))) + "</tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(body) + "</tbody></table>")


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or max(abs(hi), 1e-9) * 0.1
    lo, hi = lo - span * 0.1, hi + span * 0.1
    return lambda v: a + (v - lo) / (hi - lo) * (b - a)


def _plot(model: str, rows: list) -> str:
    points = [r for r in rows if r.latency_ms is not None and r.accuracy is not None]
    title = f"<h3>{escape(model)}: latency vs accuracy</h3>"
    if not points:
        return title + "<p class='none'>no point: no accuracy_validation_script, or no run succeeded</p>"
    lat, acc = [r.latency_ms for r in points], [r.accuracy for r in points]
    x, y = _scale(min(lat), max(lat), PAD, W - 12), _scale(min(acc), max(acc), H - PAD, 12)
    runtimes = sorted({r.runtime for r in points})
    parts = [f'<svg class="plot" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img">',
             f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 8}" y2="{H - PAD}" stroke="#333"/>',
             f'<line x1="{PAD}" y1="8" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>',
             f'<text x="{W // 2}" y="{H - 10}" text-anchor="middle">latency (ms)</text>',
             f'<text x="14" y="{H // 2}" transform="rotate(-90 14 {H // 2})" text-anchor="middle">accuracy</text>',
             f'<text x="{PAD}" y="{H - PAD + 16}" text-anchor="middle">{min(lat):.3g}</text>',
             f'<text x="{W - 30}" y="{H - PAD + 16}" text-anchor="middle">{max(lat):.3g}</text>',
             f'<text x="{PAD - 4}" y="{H - PAD - 4}" text-anchor="end">{min(acc):.4g}</text>',
             f'<text x="{PAD - 4}" y="20" text-anchor="end">{max(acc):.4g}</text>']
    for r in points:
        color = COLORS[runtimes.index(r.runtime) % len(COLORS)]
        label = f"{r.runtime} on {r.device}"
        parts.append(f'<circle class="point" cx="{x(r.latency_ms):.1f}" cy="{y(r.accuracy):.1f}" r="6" '
                     f'fill="{color}"><title>{escape(label)}: {r.latency_ms:.3f} ms, {r.accuracy:.4f}</title></circle>')
        parts.append(f'<text x="{x(r.latency_ms) + 8:.1f}" y="{y(r.accuracy) - 8:.1f}">{escape(label)}</text>')
    return title + "".join(parts) + "</svg>"


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
</style></head>
<body data-rows="{len(rows)}" data-plots="{len(models)}">
<header>pymace sweep: {len(rows)} runs, {len(models)} model(s)</header>
<main><h2>Runs</h2>{_table(rows)}<h2>Latency vs accuracy</h2>{plots}</main>
</body></html>
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path
