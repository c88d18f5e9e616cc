"""The stylesheet and script inlined into every visual report (the page loads nothing else).

The script draws from the JSON embedded in the page: the graph (SVG, pan with
the mouse, zoom with the wheel or the +/- buttons), the latency bars, the memory
timeline and the offline table. It records script errors in
`document.body.dataset.errors` and the number of drawn nodes in
`document.body.dataset.nodes`, which is what tests read from a headless browser.
"""

CSS = r"""
body { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d2433; background: #f6f7fb; }
header { padding: 12px 20px; background: #1d2433; color: #fff; }
header h1 { font-size: 18px; margin: 0 0 4px 0; }
header .meta { opacity: .8; font-size: 12px; }
section { margin: 16px 20px; background: #fff; border-radius: 6px; box-shadow: 0 1px 3px rgba(0,0,0,.12); padding: 12px 16px; }
section h2 { font-size: 15px; margin: 0 0 8px 0; }
#graph-box { position: relative; height: 620px; border: 1px solid #d8dce6; border-radius: 4px; overflow: hidden; background: #fbfcfe; cursor: grab; }
#graph-box.dragging { cursor: grabbing; }
#graph { width: 100%; height: 100%; display: block; }
.tools { position: absolute; top: 8px; right: 8px; z-index: 2; }
.tools button { font-size: 14px; width: 32px; height: 28px; margin-left: 4px; border: 1px solid #c3c9d6; background: #fff; border-radius: 4px; cursor: pointer; }
.node rect { fill: #e8f0fe; stroke: #4a6fd1; stroke-width: 1.2; }
.node.fused rect { fill: #eef9ef; stroke: #3c9a4a; }
.node.dev-gpu rect { fill: #fdecd6; stroke: #c0701a; stroke-width: 2; }
.node.dev-hexagon rect { fill: #f0e6fb; stroke: #7a45c2; stroke-width: 2; }
.node text { font-size: 11px; fill: #1d2433; }
.node text.type { font-weight: 600; font-size: 12.5px; }
.node text.dim { fill: #5b6476; }
.node:hover rect { stroke-width: 2.5; }
.io rect { fill: #fff4e0; stroke: #d08a19; }
.io text { font-size: 11px; }
.edge { fill: none; stroke: #8a93a6; stroke-width: 1.2; marker-end: url(#arrow); }
.edge-label { font-size: 9.5px; fill: #6b7386; }
#details { font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap; margin-top: 8px; min-height: 1.4em; color: #334; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border-bottom: 1px solid #e3e6ee; padding: 3px 8px; text-align: right; }
th { background: #f0f2f7; position: sticky; top: 0; }
td.l, th.l { text-align: left; }
.bar { fill: #4a6fd1; }
.bar-label { font-size: 10.5px; fill: #1d2433; }
.axis { stroke: #9aa2b4; stroke-width: 1; }
.live { fill: none; stroke: #4a6fd1; stroke-width: 2; }
.tensor { fill: rgba(60,154,74,.35); stroke: #3c9a4a; stroke-width: .6; }
.limit { stroke: #c0392b; stroke-dasharray: 4 3; }
.limit.lb { stroke: #d08a19; }
.muted { color: #6b7386; }
.kv td { text-align: left; border: none; padding: 1px 12px 1px 0; }
"""

JS = r"""
(function () {
  "use strict";
  var errors = [];
  window.addEventListener("error", function (e) {
    errors.push(String(e.message));
    document.body.dataset.errors = errors.join(" | ");
  });
  var SVG = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("model-data").textContent);

  function el(tag, attrs, parent, text) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (text !== undefined) { e.textContent = text; }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function shape(s) { return "[" + (s || []).join(",") + "]"; }
  function fmt(n) {
    if (n === null || n === undefined) { return ""; }
    if (n >= 1e9) { return (n / 1e9).toFixed(2) + "G"; }
    if (n >= 1e6) { return (n / 1e6).toFixed(2) + "M"; }
    if (n >= 1e3) { return (n / 1e3).toFixed(2) + "K"; }
    return String(n);
  }
  function cut(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  // scoped names (a/b/c/conv): the last parts say the most; the full name is in the details
  function tail(s, n) {
    s = String(s).split("/").slice(-2).join("/");
    return s.length > n ? "\u2026" + s.slice(s.length - n + 1) : s;
  }

  // ---- graph ------------------------------------------------------------------
  function drawGraph() {
    var svg = document.getElementById("graph");
    var defs = el("defs", {}, svg);
    var marker = el("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
                               markerHeight: 7, orient: "auto-start-reverse"}, defs);
    el("path", {d: "M 0 0 L 10 5 L 0 10 z", fill: "#8a93a6"}, marker);
    var world = el("g", {id: "world"}, svg);
    var byId = {};
    data.nodes.forEach(function (n) { byId[n.id] = n; });
    var edgeLayer = el("g", {}, world), nodeLayer = el("g", {}, world);
    data.edges.forEach(function (e) {
      var a = byId[e.from], b = byId[e.to];
      if (!a || !b) { return; }
      var x1 = a.x, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y - b.h / 2, my = (y1 + y2) / 2;
      el("path", {"class": "edge", d: "M" + x1 + "," + y1 + " C" + x1 + "," + my + " " + x2 + "," + my +
                  " " + x2 + "," + (y2 - 2)}, edgeLayer);
      el("text", {"class": "edge-label", x: (x1 + x2) / 2 + 4, y: my}, edgeLayer, shape(e.shape));
    });
    var maxMs = 0;
    data.nodes.forEach(function (n) { if (n.ms) { maxMs = Math.max(maxMs, n.ms); } });
    var drawn = 0;
    data.nodes.forEach(function (n) {
      var isOp = n.kind === "op";
      var dev = isOp ? " dev-" + String(n.placement).split(" ")[0].toLowerCase() : "";  // colour by runtime
      var g = el("g", {"class": isOp ? ("node" + (n.fused && n.fused.length > 1 ? " fused" : "") + dev) : "io",
                       transform: "translate(" + (n.x - n.w / 2) + "," + (n.y - n.h / 2) + ")",
                       "data-id": n.id}, nodeLayer);
      var rect = el("rect", {width: n.w, height: n.h, rx: isOp ? 6 : n.h / 2}, g);
      if (isOp && maxMs > 0 && n.ms) {  // latency heat: white -> red
        var t = n.ms / maxMs, gb = Math.round(245 - 110 * t);
        rect.setAttribute("style", "fill: rgb(250," + gb + "," + gb + ")");
      }
      if (isOp) {
        el("text", {"class": "type", x: 8, y: 16}, g, cut(n.type, 24) + "  #" + n.index);
        el("text", {x: 8, y: 31}, g, tail(n.name, 34));
        el("text", {"class": "dim", x: 8, y: 46}, g, "out " + cut(shape(n.shape), 22) + "  on " + n.placement);
        var fw = (n.fused || []).map(function (f) { return String(f).split("/").pop(); });
        var fused = fw.length > 1 ? "fused: " + fw.join(" + ") : "from: " + fw.join(", ");
        el("text", {"class": "dim", x: 8, y: 61}, g, cut(fused, 36));
        if (n.ms) { el("text", {"class": "dim", x: 8, y: 74}, g, n.ms.toFixed(4) + " ms (" + n.percent.toFixed(1) + "%)"); }
        drawn += 1;
      } else {
        el("text", {x: 10, y: 16}, g, (n.kind === "in" ? "input " : "output ") + cut(n.name, 20));
        el("text", {x: 10, y: 30}, g, shape(n.shape) + " " + n.format);
      }
      el("title", {}, g, JSON.stringify(n, null, 1));
      g.addEventListener("click", function () {
        document.getElementById("details").textContent = JSON.stringify(n, null, 1);
      });
    });
    document.body.dataset.nodes = String(drawn);
    panZoom(svg, world);
  }

  function panZoom(svg, world) {
    var box = world.getBBox(), r = svg.getBoundingClientRect();
    var aspect = (r.height || 600) / (r.width || 1000);
    var home = {x: box.x - 20, y: box.y - 20, w: box.width + 40, h: box.height + 40};
    // start readable: the top of the graph at about natural size (a tall graph does not fit)
    var w = Math.max(home.w, Math.min(home.h / aspect, 1100));
    var view = {x: box.x + box.width / 2 - w / 2, y: box.y - 20, w: w, h: w * aspect};
    function apply() { svg.setAttribute("viewBox", [view.x, view.y, view.w, view.h].join(" ")); }
    function zoom(f, cx, cy) {
      cx = cx === undefined ? view.x + view.w / 2 : cx; cy = cy === undefined ? view.y + view.h / 2 : cy;
      view.x = cx - (cx - view.x) * f; view.y = cy - (cy - view.y) * f; view.w *= f; view.h *= f; apply();
    }
    function toWorld(ev) {
      var r = svg.getBoundingClientRect(), s = Math.max(view.w / r.width, view.h / r.height);
      return {x: view.x + (ev.clientX - r.left) * s, y: view.y + (ev.clientY - r.top) * s, s: s};
    }
    svg.setAttribute("preserveAspectRatio", "xMidYMin meet");
    home.w = Math.max(home.w, home.h / aspect); home.h = home.w * aspect;
    home.x = box.x + box.width / 2 - home.w / 2;
    apply();
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault(); var p = toWorld(ev); zoom(ev.deltaY > 0 ? 1.15 : 1 / 1.15, p.x, p.y);
    }, {passive: false});
    var drag = null, boxEl = document.getElementById("graph-box");
    svg.addEventListener("mousedown", function (ev) { drag = {x: ev.clientX, y: ev.clientY}; boxEl.classList.add("dragging"); });
    window.addEventListener("mouseup", function () { drag = null; boxEl.classList.remove("dragging"); });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) { return; }
      var s = toWorld(ev).s;
      view.x -= (ev.clientX - drag.x) * s; view.y -= (ev.clientY - drag.y) * s;
      drag = {x: ev.clientX, y: ev.clientY}; apply();
    });
    document.getElementById("zoom-in").onclick = function () { zoom(1 / 1.25); };
    document.getElementById("zoom-out").onclick = function () { zoom(1.25); };
    document.getElementById("zoom-fit").onclick = function () {
      view.x = home.x; view.y = home.y; view.w = home.w; view.h = home.h; apply();
    };
  }

  // ---- charts -------------------------------------------------------------------
  function drawLatency() {
    var host = document.getElementById("latency");
    var b = data.benchmark;
    if (!b || !b.run_order || !b.run_order.length) {
      host.innerHTML = '<p class="muted">No benchmark data: run <code>converter.py benchmark</code> ' +
        '(or <code>run --benchmark</code>) and visualize again.</p>';
      return;
    }
    var rows = b.run_order, rowH = 18, left = 260, width = 900;
    var maxMs = Math.max.apply(null, rows.map(function (r) { return r.avg; })) || 1;
    var svg = el("svg", {width: width + left + 140, height: rows.length * rowH + 30}, host);
    rows.forEach(function (r, i) {
      var y = 10 + i * rowH, w = Math.max(1, width * r.avg / maxMs);
      el("text", {"class": "bar-label", x: left - 6, y: y + 12, "text-anchor": "end"}, svg,
         "#" + r.index + " " + r.type + " " + tail(r.name, 26));
      el("rect", {"class": "bar", x: left, y: y + 2, width: w, height: rowH - 5}, svg);
      el("text", {"class": "bar-label", x: left + w + 6, y: y + 12}, svg,
         r.avg.toFixed(4) + " ms  " + r.percent.toFixed(1) + "%");
    });
    var s = b.run_with_statistics;
    var p = document.createElement("p");
    p.className = "muted";
    p.textContent = "Mean of " + s.round + " runs with statistics: " + s.avg.toFixed(3) + " ms per run; " +
      "MACs " + fmt(b.macs.total) + ", " + b.macs.avg.toFixed(3) + " GMAC/s.";
    host.appendChild(p);
  }

  function drawMemory() {
    var host = document.getElementById("memory");
    var m = data.memory, steps = Math.max(m.live.length, 1);
    var width = 960, height = 260, left = 70, top = 10, bottom = 30;
    var maxY = Math.max(m.arena, 1);
    var x = function (s) { return left + (s + 1) * width / (steps + 1); };
    var y = function (v) { return top + height - height * v / maxY; };
    var svg = el("svg", {width: left + width + 160, height: top + height + bottom}, host);
    m.tensors.forEach(function (t) {  // each tensor where the plan puts it, while it is alive
      var x1 = x(Math.max(t.first, -1)), x2 = x(Math.min(t.last, steps - 1)) + width / (steps + 1) * 0.9;
      var r = el("rect", {"class": "tensor", x: x1, y: y(t.offset + t.size), width: Math.max(2, x2 - x1),
                          height: Math.max(1, y(t.offset) - y(t.offset + t.size))}, svg);
      el("title", {}, r, t.name + ": " + t.size + " bytes at offset " + t.offset + ", ops " + t.first + ".." + t.last);
    });
    var pts = [];  // a step line: bytes alive while op i runs
    m.live.forEach(function (v, i) { pts.push(x(i) + "," + y(v)); pts.push(x(i + 1) + "," + y(v)); });
    if (pts.length) { el("polyline", {"class": "live", points: pts.join(" ")}, svg); }
    el("line", {"class": "limit", x1: left, x2: left + width, y1: y(m.arena), y2: y(m.arena)}, svg);
    el("text", {"class": "bar-label", x: left + width + 6, y: y(m.arena) + 4}, svg, "arena " + fmt(m.arena) + "B");
    el("line", {"class": "limit lb", x1: left, x2: left + width, y1: y(m.lower_bound), y2: y(m.lower_bound)}, svg);
    el("text", {"class": "bar-label", x: left + width + 6, y: y(m.lower_bound) + 16}, svg,
       "lower bound " + fmt(m.lower_bound) + "B");
    el("line", {"class": "axis", x1: left, x2: left + width, y1: y(0), y2: y(0)}, svg);
    el("line", {"class": "axis", x1: left, x2: left, y1: top, y2: y(0)}, svg);
    el("text", {"class": "bar-label", x: left, y: top + height + 22}, svg,
       "op index (execution order) \u2192   boxes: tensors at their arena offset while alive; line: bytes alive");
    el("text", {"class": "bar-label", x: 4, y: top + 10}, svg, fmt(maxY) + "B");
  }

  function drawTable() {
    var r = data.report;
    var kv = document.getElementById("report-meta");
    var rows = [["Model ID", r.model_id], ["Tool version", r.tool_version], ["Source", r.source],
                ["Inputs", r.inputs.map(function (t) { return t.name + " " + shape(t.shape) + " " + t.data_format; }).join("; ")],
                ["Outputs", r.outputs.map(function (t) { return t.name + " " + shape(t.shape) + " " + t.data_format; }).join("; ")],
                ["Tensor arena", r.arena_bytes + " bytes (lower bound " + r.lower_bound_bytes + ")"],
                ["Totals", fmt(r.total_ops) + " ops, " + fmt(r.total_params) + " params, " + r.total_param_bytes + " bytes"],
                ["Model data", (r.graph_bytes + r.data_bytes) + " bytes"]];
    rows.forEach(function (kvp) {
      var tr = document.createElement("tr");
      kvp.forEach(function (v) { var td = document.createElement("td"); td.textContent = v; tr.appendChild(td); });
      kv.appendChild(tr);
    });
    var body = document.getElementById("report-body");
    r.layers.forEach(function (s) {
      var tr = document.createElement("tr");
      [s.index, s.type, s.name, (s.framework_ops || []).join(", "), shape(s.output_shapes[0]), fmt(s.macs),
       fmt(s.ops), fmt(s.params), (s.param_bytes / 1024).toFixed(2) + " KiB",
       (s.activation_bytes / 1024).toFixed(2) + " KiB"].forEach(function (v, i) {
        var td = document.createElement("td"); td.textContent = v;
        if (i >= 1 && i <= 4) { td.className = "l"; }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  drawGraph();
  drawLatency();
  drawMemory();
  drawTable();
  document.body.dataset.rendered = "yes";
})();
"""
