"""Visual report: one self-contained HTML page per model, and a Graphviz file.

The page inlines its data (JSON), stylesheet and script and loads nothing from
the network: graph (op type, output shape, placement, fused framework ops; pan
and zoom), per-layer latency bars and the memory timeline (latency needs a
saved benchmark), and the offline report table.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from mace.config.files import converted_paths
from mace.ir.model_io import load_model
from mace.report.html_assets import CSS, JS
from mace.report.offline import offline_report, source_model
from mace.report.visual import layout, load_benchmark, visual_data
from mace.util.jsonutil import dumps

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
<header><h1>{title}</h1><div class="meta">{meta}</div></header>
<section><h2>Graph</h2>
<div id="graph-box"><div class="tools"><button id="zoom-in" title="zoom in">+</button>
<button id="zoom-out" title="zoom out">&minus;</button><button id="zoom-fit" title="fit">&#8634;</button></div>
<svg id="graph" xmlns="http://www.w3.org/2000/svg"></svg></div>
<div id="details" class="muted">Drag to pan, wheel to zoom, click a node for its details.</div></section>
<section><h2>Latency per layer</h2><div id="latency"></div></section>
<section><h2>Memory timeline</h2><div id="memory"></div></section>
<section><h2>Offline report</h2><table class="kv"><tbody id="report-meta"></tbody></table>
<table><thead><tr><th>#</th><th class="l">type</th><th class="l">name</th><th class="l">framework ops</th>
<th class="l">output shape</th><th>MACs</th><th>#ops</th><th>#params</th><th>param size</th><th>activations</th>
</tr></thead><tbody id="report-body"></tbody></table></section>
<script type="application/json" id="model-data">{data}</script>
<script>{js}</script>
</body>
</html>
"""


DEVICE_FILL = {"GPU": "#fdecd6", "HEXAGON": "#f0e6fb"}   # CPU keeps the default blue


@dataclass
class VisualFiles:
    model: str
    html_path: Path
    dot_path: Path | None
    nodes: int              # ops drawn
    has_benchmark: bool


def _json_for_script(data: dict) -> str:
    text = dumps(data, indent=None)
    # inside <script>, "</script" or "<!--" would end the element early; "<" only occurs in strings
    return text.replace("<", "\\u003c")


def render_html(graph, offline, benchmark: dict | None = None, library: str = "") -> str:
    data = visual_data(graph, offline, benchmark, library)
    meta = (f"library {html.escape(library)} &middot; {len(offline.layers)} ops &middot; "
            f"model ID {html.escape(offline.model_id)} &middot; pymace {html.escape(offline.tool_version)}"
            + (f" &middot; {html.escape(offline.placement[0])} (CPU blue, GPU orange, DSP violet)"
               if offline.placement else ""))
    return PAGE.format(title=html.escape(f"Model {offline.model}"), meta=meta, css=CSS, js=JS,
                       data=_json_for_script(data))


def _dot_id(s: str) -> str:
    """A quoted Graphviz ID; newlines become line breaks of the label."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(graph, offline) -> str:
    """Graphviz digraph: a box per op (type, name, output shape, placement, fused framework ops)."""
    _, edges = layout(graph)
    lines = [f"digraph {_dot_id(offline.model)} {{", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fillcolor="#e8f0fe", fontname="Helvetica", '
             'fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, color="#8a93a6"];']
    for kind, tensors in (("in", offline.inputs), ("out", offline.outputs)):
        for t in tensors:
            label = f"{'input' if kind == 'in' else 'output'} {t.name}\n{t.shape} {t.data_format}"
            lines.append(f'  {_dot_id(f"{kind}:{t.name}")} [shape=ellipse, fillcolor="#fff4e0", '
                         f'label={_dot_id(label)}];')
    for s in offline.layers:
        fused = f"\nfused: {' + '.join(s.framework_ops)}" if len(s.framework_ops) > 1 else ""
        shape = s.output_shapes[0] if s.output_shapes else []
        label = f"{s.type} #{s.index}\n{s.name}\nout {shape} on {s.device}{fused}"
        colour = DEVICE_FILL.get(s.device)   # placement: one colour per runtime
        fill = f', fillcolor="{colour}"' if colour else ""
        lines.append(f"  {_dot_id(f'op:{s.index}')} [label={_dot_id(label)}{fill}];")
    for e in edges:
        lines.append(f"  {_dot_id(e['from'])} -> {_dot_id(e['to'])} [label={_dot_id(str(e['shape']))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def visualize_model(config, model, build_dir=None, out_dir=None, dot: bool = False) -> VisualFiles:
    """Write <model>_index.html (and <model>.dot) for a converted model of a deployment file,
    into builds/<library>/model/ unless `out_dir` is given."""

    pb_path, data_path = converted_paths(config, model, build_dir)
    graph = load_model(pb_path, data_path)
    offline = offline_report(graph, source_model(config, model, build_dir), pb_path, data_path, model.name)
    benchmark = load_benchmark(pb_path.with_name(f"{model.name}_benchmark.json"), pb_path)
    target = Path(out_dir) if out_dir else pb_path.parent
    target.mkdir(parents=True, exist_ok=True)
    html_path = target / f"{model.name}_index.html"
    html_path.write_text(render_html(graph, offline, benchmark, config.library_name), encoding="utf-8")
    dot_path = None
    if dot:
        dot_path = target / f"{model.name}.dot"
        dot_path.write_text(render_dot(graph, offline))
    return VisualFiles(model.name, html_path, dot_path, len(offline.layers), benchmark is not None)
