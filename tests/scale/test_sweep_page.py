"""The sweep page's plots, measured in headless Chromium: no label over another, none cut off at
the plot's edge, every point named (issue 37, item 4: "cpu on host" / "cpu on fakepi" were drawn
on top of each other and "gpu on h..." ran off the plot). `label_problems` is shared with the
end-to-end sweep test (tests/devices/test_sweep.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from mace.scale.sweep import SweepRow
from mace.scale.sweep_page import write_page
from tests.report.test_visual import _chromium, browser  # noqa: F401 - the fixture

CSP = "default-src 'none'; style-src 'unsafe-inline'"

# Runs in a copy of the page (the page itself allows no script): every text of each plot and
# every legend entry, measured where the browser drew them.
MEASURE = """<script>
const problems = [];
const overlap = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
const inside = (a, b) => a.left >= b.left - 0.5 && a.right <= b.right + 0.5 && a.top >= b.top - 0.5 && a.bottom <= b.bottom + 0.5;
const boxes = (root, sel, name) => [...root.querySelectorAll(sel)].map(e => ({t: name(e), r: e.getBoundingClientRect(), e}));
let points = 0, named = 0;
for (const fig of document.querySelectorAll('svg.plot')) {
  const box = fig.getBoundingClientRect();
  const texts = boxes(fig, 'text', e => e.textContent);
  const marks = boxes(fig, '.point', e => 'point ' + e.textContent);
  points += marks.length;
  for (const a of texts.concat(marks)) if (!inside(a.r, box)) problems.push('cut at the plot edge: ' + a.t);
  texts.forEach((a, i) => texts.slice(i + 1).forEach(b => { if (overlap(a.r, b.r)) problems.push('overlap: ' + a.t + ' / ' + b.t); }));
  for (const a of texts) for (const m of marks) if (overlap(a.r, m.r)) problems.push('over a point: ' + a.t);
  const legend = fig.parentElement.querySelector('.legend');
  const items = legend ? boxes(legend, 'li', e => e.textContent) : [];
  named += items.length;
  for (const a of items) {
    if (a.e.scrollWidth > a.e.clientWidth + 1 || a.r.right > document.documentElement.clientWidth + 0.5) problems.push('cut: ' + a.t);
    if (overlap(a.r, box)) problems.push('legend over the plot: ' + a.t);
  }
  items.forEach((a, i) => items.slice(i + 1).forEach(b => { if (overlap(a.r, b.r)) problems.push('overlap: ' + a.t + ' / ' + b.t); }));
}
document.body.setAttribute('data-label-problems', JSON.stringify(problems));
document.body.setAttribute('data-points', points);
document.body.setAttribute('data-named', named);
</script>"""


def label_problems(browser: str, page: Path, profile: Path, width: int = 1000) -> tuple:
    """(problems, points drawn, legend entries) of `page` in a `width`-pixel window."""
    text = page.read_text()
    assert CSP in text
    probe = page.with_name(page.stem + ".measured.html")
    probe.write_text(text.replace(CSP, CSP + "; script-src 'unsafe-inline'").replace("</body>", MEASURE + "</body>"))
    r = _chromium(browser, profile, f"--window-size={width},900", "--virtual-time-budget=3000", "--dump-dom",
                  probe.resolve().as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", r.stdout).group(1)
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', body))
    assert "label-problems" in attrs, f"the measuring script did not run: {body}"
    problems = json.loads(attrs["label-problems"].replace("&quot;", '"').replace("&amp;", "&"))
    return problems, int(attrs["points"]), int(attrs["named"])


def _row(runtime, device, latency, accuracy, fallback="") -> SweepRow:
    return SweepRow("a.yml", "mobilenet_v2", runtime, device, latency_ms=latency, init_ms=20.0, cosine=0.9999,
                    passed=True, accuracy=accuracy, fallback=fallback)


def test_plot_labels_neither_overlap_nor_run_off(browser, tmp_path):  # noqa: F811
    """The case of the report: two CPUs of one accuracy and close latencies, the slowest point at
    the right edge, the fastest at the left, with a long board name and a GPU fallback."""
    rows = [_row("cpu", "host", 5.10, 0.9577), _row("cpu", "fakepi", 5.30, 0.9577),
            _row("quantized", "host", 2.05, 0.9533), _row("quantized", "fakepi-rk3399-board-2", 2.10, 0.9533),
            _row("gpu", "host", 9.80, 0.9577), _row("gpu", "fakepi", 5.32, 0.9577, fallback="pyopencl is not installed")]
    page = write_page(rows, tmp_path / "sweep.html")
    for width in (1200, 800, 500):   # legend beside the plot, then below it, then in a narrow window
        problems, points, named = label_problems(browser, page, tmp_path / f"profile{width}", width)
        assert problems == [] and points == named == len(rows), (width, problems, points, named)
    text = page.read_text()
    assert "gpu (ran on CPU) on fakepi" in text and "pyopencl is not installed" in text
