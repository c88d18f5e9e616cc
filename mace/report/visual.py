"""The data behind the visual report: graph layout, charts and the offline table, as plain dicts.

The layout is a layered drawing computed here (not in the page), so the HTML
and the Graphviz file show the same graph: each op sits one layer below the
deepest op it reads from, and ops in a layer are ordered by where their
producers are (one barycenter pass keeps most edges short and uncrossed).
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from mace.report.memory import memory_timeline
from mace.report.offline import md5_of

NODE_W, NODE_H, GAP_X, GAP_Y = 230, 78, 40, 60
IO_W, IO_H = 170, 40


def _layers(graph) -> dict:
    """op index -> layer; graph inputs are layer 0, so ops start at 1."""
    depth = {name: 0 for name in graph.input_names}
    layer = {}
    for i, op in enumerate(graph.net.op):
        d = 1 + max((depth.get(t, 0) for t in op.input if t not in graph.consts), default=0)
        layer[i] = d
        for t in op.output:
            depth[t] = d
    return layer


def _place(rows: dict, width_of) -> dict:
    """rows: layer -> [keys] (ordered); returns key -> (x, y) centred on x = 0."""
    pos = {}
    for layer, keys in sorted(rows.items()):
        widths = [width_of(k) for k in keys]
        total = sum(widths) + GAP_X * (len(keys) - 1)
        x = -total / 2
        for k, w in zip(keys, widths):
            pos[k] = (x + w / 2, layer * (NODE_H + GAP_Y))
            x += w + GAP_X
    return pos


def layout(graph) -> tuple:
    """(nodes, edges) as dicts; node ids are 'op:<index>', 'in:<name>', 'out:<name>'."""
    ops = graph.net.op
    layer = _layers(graph)
    producer = {t: f"op:{i}" for i, op in enumerate(ops) for t in op.output}
    for name in graph.input_names:
        producer[name] = f"in:{name}"
    last = max(layer.values(), default=0) + 1
    rows = {0: [f"in:{n}" for n in graph.input_names]}
    for i in range(len(ops)):
        rows.setdefault(layer[i], []).append(f"op:{i}")
    rows[last] = [f"out:{n}" for n in graph.output_names]
    parents = {f"op:{i}": [producer[t] for t in op.input if t in producer] for i, op in enumerate(ops)}
    parents.update({f"out:{n}": [producer[n]] for n in graph.output_names if n in producer})
    pos = {}
    for lay in sorted(rows):
        if pos:  # order by the mean x of the parents already placed
            rows[lay].sort(key=lambda k: sum(pos[p][0] for p in parents.get(k, []) if p in pos)
                           / max(len([p for p in parents.get(k, []) if p in pos]), 1))
        pos.update(_place({lay: rows[lay]}, lambda k: NODE_W if k.startswith("op:") else IO_W))
    edges = []
    for i, op in enumerate(ops):
        for t in op.input:
            if t in producer:
                edges.append({"from": producer[t], "to": f"op:{i}", "tensor": t,
                              "shape": list(graph.specs[t][0]) if t in graph.specs else []})
    for n in graph.output_names:
        if n in producer:
            edges.append({"from": producer[n], "to": f"out:{n}", "tensor": n,
                          "shape": list(graph.specs[n][0]) if n in graph.specs else []})
    return pos, edges


def visual_data(graph, offline, benchmark: dict | None = None, library: str = "") -> dict:
    """Everything the page draws, as JSON-ready dicts."""
    pos, edges = layout(graph)
    timing = {o["index"]: o for o in (benchmark or {}).get("run_order", [])}
    nodes = []
    for s in offline.layers:
        x, y = pos[f"op:{s.index}"]
        t = timing.get(s.index, {})
        nodes.append({"id": f"op:{s.index}", "kind": "op", "index": s.index, "type": s.type, "name": s.name,
                      "shape": s.output_shapes[0] if s.output_shapes else [],
                      "placement": s.device + (f" ({t['kernel']})" if t.get("kernel") else ""),
                      "fused": s.framework_ops, "macs": s.macs, "ops": s.ops, "params": s.params,
                      "x": x, "y": y, "w": NODE_W, "h": NODE_H,
                      "ms": t.get("avg"), "percent": t.get("percent")})
    for kind, tensors in (("in", offline.inputs), ("out", offline.outputs)):
        for t in tensors:
            x, y = pos[f"{kind}:{t.name}"]
            nodes.append({"id": f"{kind}:{t.name}", "kind": kind, "name": t.name, "shape": t.shape,
                          "format": t.data_format, "x": x, "y": y, "w": IO_W, "h": IO_H})
    timeline = memory_timeline(graph)
    report = asdict(offline)
    return {
        "library": library, "model": offline.model, "nodes": nodes, "edges": edges,
        "report": report,
        "memory": {"arena": timeline.plan.arena_size, "lower_bound": timeline.plan.lower_bound,
                   "live": timeline.live_bytes,
                   "tensors": [{"name": t.name, "first": t.first, "last": t.last, "size": t.size,
                                "offset": timeline.plan.offsets.get(t.name, 0)} for t in timeline.lives]},
        "benchmark": benchmark,
    }


def load_benchmark(path: Path, pb_path: Path) -> dict | None:
    """The JSON `benchmark` saved next to the model, if it was measured on this very .pb."""
    path = Path(path)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return data if data.get("pb_md5") == md5_of(pb_path) else None
