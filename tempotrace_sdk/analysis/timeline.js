/* The HTML timeline's script (spec/analysis.md §6.3), inlined into the page by html.py.
   Python has laid everything out (html_model.py: rows, lanes, ns from the origin, colour keys,
   tooltips, the legend); this script places it for the current view, draws the time axis, and
   zooms and pans: wheel over the plot, drag, shift+wheel, the buttons and the keyboard. */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var d = JSON.parse(document.getElementById("tt-data").textContent);
  var C = d.colours, SAT = d.saturated_ns;
  var tl = document.getElementById("tl"), axis = document.getElementById("tl-axis");
  var scroll = document.getElementById("tl-scroll"), svg = document.getElementById("timeline");
  // Lane and bar heights, axis height, the smallest whisker half-width drawn, the margin a fit
  // leaves at each side, the right padding, the narrowest view (ns), wheel sensitivity.
  var LANE = 16, BAR = 12, ROW_PAD = 8, AXIS_H = 38, MIN_HALF = 2, EDGE = 10, RIGHT = 8, MIN_VIEW = 20;
  var WHEEL_ZOOM = 0.0015, TICK_PX = 110, FAR = 4000;

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    parent.appendChild(e);
    return e;
  }
  function tip(parent, text) { el("title", {}, parent).textContent = text; }

  // Rows: each a stack of lanes.
  var rowTop = [], y = 6;
  d.rows.forEach(function (r) { rowTop.push(y); y += r.lanes * LANE + ROW_PAD; });
  var height = Math.max(y, 40);
  function laneMid(row, lane) { return rowTop[row] + lane * LANE + LANE / 2; }
  svg.setAttribute("height", height);
  axis.setAttribute("height", AXIS_H);

  var defs = el("defs", {}, svg);
  var clipRect = el("rect", {y: -2, height: height + 4}, el("clipPath", {id: "tl-clip"}, defs));
  var heads = {};
  function arrowhead(k) {  // one marker per colour key in use
    if (!heads[k]) {
      var m = el("marker", {id: "tl-arrow-" + k, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
                            markerHeight: 7, orient: "auto", markerUnits: "userSpaceOnUse"}, defs);
      el("path", {d: "M0,1 L10,5 L0,9 z", fill: C[k]}, m);
      heads[k] = "url(#tl-arrow-" + k + ")";
    }
    return heads[k];
  }
  var gutterG = el("g", {"class": "gutter"}, svg), grid = el("g", {"class": "grid"}, svg);
  var plot = el("g", {"clip-path": "url(#tl-clip)"}, svg);
  var spanG = el("g", {"class": "spans"}, plot), collG = el("g", {"class": "colls"}, plot);
  var hopG = el("g", {"class": "hops"}, plot);
  var ticks = el("g", {"class": "ticks"}, axis);
  var caption = el("text", {"class": "caption", x: 6, y: 14}, axis);
  var unitText = el("text", {"class": "caption", x: 6, y: 30}, axis);

  var seps = d.rows.map(function (r, i) {
    var yl = rowTop[i] + r.lanes * LANE + ROW_PAD / 2;
    return el("line", {"class": "rowsep", x1: 0, y1: yl, y2: yl}, gutterG);
  });
  var labels = d.rows.map(function (r, i) {
    var t = el("text", {x: 6, y: rowTop[i] + 12, "class": r.verdict ? "rowlabel " + r.verdict : "rowlabel",
                        "data-enc": r.enc,
                        "data-row": i, "data-host": r.host, "data-rank": r.rank === null ? "" : r.rank}, gutterG);
    t.appendChild(document.createTextNode(r.label + (r.verdict ? " " + r.verdict.toUpperCase() : "")));
    tip(t, r.label + (r.clock ? " · clock " + r.clock : "") + (r.verdict ? " · clock " + r.verdict : ""));
    return t;
  });
  var widest = 0;
  labels.forEach(function (t) { widest = Math.max(widest, t.getComputedTextLength()); });
  var gutter = Math.round(Math.min(260, Math.max(110, widest + 16)));
  labels.forEach(function (t) {  // a label longer than the gutter is cut (its tooltip has it whole)
    var words = t.firstChild;
    while (t.getComputedTextLength() > gutter - 10 && words.nodeValue.length > 4) {
      words.nodeValue = words.nodeValue.slice(0, -2) + "…";
    }
  });
  // Label widths from each character's width, measured once (one layout per distinct character):
  // a label is cut to what fits its bar without measuring every label on every redraw.
  var ruler = el("text", {x: -999, y: -999, "aria-hidden": "true"}, svg), charW = {};
  function widthOf(ch) {
    if (!(ch in charW)) { ruler.textContent = ch + ch + ch + ch; charW[ch] = ruler.getComputedTextLength() / 4; }
    return charW[ch];
  }
  function fitText(label, room) {
    var w = 0, i = 0, dots = widthOf("…");
    for (; i < label.length; i++) {
      w += widthOf(label[i]);
      if (w > room) break;
    }
    if (i === label.length) return label;
    for (w = dots, i = 0; i < label.length && w + widthOf(label[i]) <= room; i++) w += widthOf(label[i]);
    return i >= 2 ? label.slice(0, i) + "…" : "";
  }

  var lo = Infinity, hi = -Infinity;
  function grow(a, b) { lo = Math.min(lo, a); hi = Math.max(hi, b); }
  var spans = d.spans.map(function (s) {
    var unstamped = s.enc.indexOf("span-unstamped") >= 0;
    var g = el("g", {"class": unstamped ? "span unstamped" : "span", "data-span": s.id, "data-enc": s.enc, "data-row": s.row}, spanG);
    var top = laneMid(s.row, s.lane) - BAR / 2;
    var o = {s: s, g: g, mid: top + BAR / 2, shown: null, hidden: false, w: [],
             rect: el("rect", {y: top, height: BAR, fill: C[unstamped ? "span-unstamped" : "span-stamped"]}, g),
             text: el("text", {y: top + 10}, g)};
    [[s.s, s.su], [s.e, s.eu]].forEach(function (p) {
      if (p[1] === null) return;
      o.w.push({t: p[0], u: p[1], path: el("path", {"class": p[1] >= SAT ? "whisker sat" : "whisker",
                                                    "data-true-ns": p[1]}, g)});
    });
    grow(s.s - (s.su || 0), s.e + (s.eu || 0));
    tip(g, s.tip);
    return o;
  });
  var hops = d.hops.map(function (h) {
    var l = el("line", {"class": "hop " + h.kind, stroke: C[h.c], "marker-end": arrowhead(h.c),
                        "data-enc": h.enc, "data-method": h.method, "data-outcome": h.outcome, "data-kind": h.kind},
               hopG);
    grow(Math.min(h.a[2], h.b[2]), Math.max(h.a[2], h.b[2]));
    tip(l, h.tip);
    return {h: h, l: l, ya: laneMid(h.a[0], h.a[1]), yb: laneMid(h.b[0], h.b[1])};
  });
  var colls = d.collectives.map(function (c) {
    var g = el("g", {"class": "coll", "data-enc": c.enc, "data-method": c.method, "data-outcome": c.outcome}, collG);
    var ys = c.members.map(function (m) { return laneMid(m[0], m[1]); });
    var top = Math.min.apply(null, ys) - BAR / 2 - 2, bottom = Math.max.apply(null, ys) + BAR / 2 + 2;
    var o = {c: c, g: g, ys: ys, top: top, bottom: bottom,
             band: el("rect", {"class": "band", y: top, height: bottom - top, fill: C[c.c]}, g),
             bracket: el("path", {"class": "bracket", stroke: C[c.c]}, g)};
    if (c.last) o.mark = el("path", {"class": "last-arriver", "data-row": c.last[0]}, g);
    if (c.missing.length) {
      o.text = el("text", {"class": "missing", y: top - 3}, g);
      o.text.textContent = "missing rank" + (c.missing.length > 1 ? "s " : " ") + c.missing.join(", ");
    }
    grow(c.t0, c.t1);
    tip(g, c.tip);
    return o;
  });
  if (!isFinite(lo)) { lo = 0; hi = 1; }
  svg.setAttribute("data-drawn-spans", spans.length);
  svg.setAttribute("data-drawn-hops", hops.length);
  svg.setAttribute("data-drawn-collectives", colls.length);

  // The view: [v0, v1] ns from the origin across the drawing width W, right of the gutter.
  var v0 = 0, v1 = 1, W = 100, pending = false, unitNow = "";
  function x(t) { return gutter + (t - v0) * W / (v1 - v0); }
  function clampX(px) { return Math.max(gutter - FAR, Math.min(gutter + W + FAR, px)); }

  function placeSpan(o, k) {
    var s = o.s, x0 = x(s.s), x1 = x(s.e), reach = 0;
    o.w.forEach(function (w) { reach = Math.max(reach, MIN_HALF, w.u * k); });
    if (x1 + reach < gutter || x0 - reach > gutter + W) {
      if (!o.hidden) { o.g.style.display = "none"; o.hidden = true; }
      return;
    }
    if (o.hidden) { o.g.style.display = ""; o.hidden = false; }
    var a = clampX(x0), b = clampX(x1);
    o.rect.setAttribute("x", a);
    o.rect.setAttribute("width", Math.max(1, b - a));
    // The label starts clear of the start whisker and stays in view while the bar does.
    var left = Math.max(a, gutter), room = Math.min(b, gutter + W) - left - 10;
    var text = room > 12 ? fitText(s.label, room) : "";
    if (text !== o.shown) { o.text.textContent = text; o.shown = text; }
    if (text) o.text.setAttribute("x", left + 6);
    o.w.forEach(function (w) {  // never thinner than 2 * MIN_HALF px; the true bound is in data-true-ns
      var c = x(w.t), half = Math.max(MIN_HALF, w.u * k), p = clampX(c - half), q = clampX(c + half), m = o.mid;
      w.path.setAttribute("d", "M" + p + "," + m + "H" + q + "M" + p + "," + (m - 4) + "V" + (m + 4) +
                               "M" + q + "," + (m - 4) + "V" + (m + 4));
    });
  }

  // The end (px, py) of the segment to (qx, qy), moved along it to within FAR px of the drawing box.
  function cutAt(px, py, qx, qy) {
    var c = clampX(px);
    return c === px || qx === px ? [c, py] : [c, py + (qy - py) * (c - px) / (qx - px)];
  }
  function placeHop(o) {
    var xa = x(o.h.a[2]), xb = x(o.h.b[2]);
    var off = (xa < gutter && xb < gutter) || (xa > gutter + W && xb > gutter + W);
    o.l.style.display = off ? "none" : "";
    if (off) return;
    var a = cutAt(xa, o.ya, xb, o.yb), b = cutAt(xb, o.yb, xa, o.ya);
    o.l.setAttribute("x1", a[0]); o.l.setAttribute("y1", a[1]);
    o.l.setAttribute("x2", b[0]); o.l.setAttribute("y2", b[1]);
  }

  function placeColl(o) {
    var c = o.c, xa = x(c.t0), xl = x(c.t1);
    var off = xl < gutter - 8 || xa > gutter + W + 8;
    o.g.style.display = off ? "none" : "";
    if (off) return;
    var a = clampX(xa), b = clampX(xl);
    o.band.setAttribute("x", a);
    o.band.setAttribute("width", Math.max(2, b - a));
    var path = "M" + b + "," + o.top + "V" + o.bottom;
    c.members.forEach(function (m, i) {  // each member's start joined to the bracket along the bar's top edge
      var xm = clampX(x(m[2])), ym = o.ys[i] - BAR / 2 - 1;
      path += "M" + xm + "," + ym + "H" + b + "M" + xm + "," + ym + "V" + (ym + BAR + 2);
    });
    o.bracket.setAttribute("d", path);
    if (o.mark) {
      var ym = laneMid(c.last[0], c.last[1]) - BAR / 2 - 1;
      o.mark.setAttribute("d", "M" + (b - 5) + "," + (ym - 7) + "H" + (b + 5) + "L" + b + "," + ym + "z");
    }
    if (o.text) {
      var right = b + 4 + o.text.getComputedTextLength() > gutter + W;
      o.text.setAttribute("x", right ? b - 4 : b + 4);
      o.text.setAttribute("text-anchor", right ? "end" : "start");
    }
  }

  var UNITS = [[1e9, "s"], [1e6, "ms"], [1e3, "µs"], [1, "ns"]];
  function nice(raw) {
    var p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function number(v, dec) {
    return v.toLocaleString("en-US", {minimumFractionDigits: dec, maximumFractionDigits: dec});
  }
  function drawAxis() {
    while (ticks.firstChild) ticks.removeChild(ticks.firstChild);
    while (grid.firstChild) grid.removeChild(grid.firstChild);
    var step = Math.max(1, nice((v1 - v0) / Math.max(2, W / TICK_PX)));
    // The unit the step asks for (a tenth of it at least: 0.2 ms rather than 200 µs), one decimal at most.
    var unit = UNITS.filter(function (u) { return step >= u[0] / 10; })[0] || UNITS[3];
    var dec = Math.max(0, Math.ceil(-Math.log10(step / unit[0]) - 1e-9));
    // Labels would need more than 5 digits before the point: count from a round base instead.
    var big = step * 1000, base = Math.max(Math.abs(v0), Math.abs(v1)) / unit[0] >= 1e5 ? Math.floor(v0 / big) * big : 0;
    for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      var px = x(t);
      if (px < gutter || px > gutter + W) continue;
      var g = el("g", {"class": "tick", "data-ns": t}, ticks);
      el("line", {x1: px, x2: px, y1: AXIS_H - 7, y2: AXIS_H, stroke: "#666"}, g);
      el("text", {x: px, y: AXIS_H - 11, "text-anchor": "middle"}, g).textContent =
        (base ? "+" : "") + number((t - base) / unit[0] + 0, dec) + " " + unit[1];
      el("line", {x1: px, x2: px, y1: 0, y2: height}, grid);
    }
    caption.textContent = base ? "since start, from +" + number(base / 1e6, 6) + " ms:" : "since trace start:";
    unitText.textContent = "1 tick = " + number(step / unit[0], dec) + " " + unit[1];
    axis.setAttribute("data-unit", unit[1]);
    unitNow = unit[1];
  }

  function layout() {
    pending = false;
    var k = W / (v1 - v0);
    spans.forEach(function (o) { placeSpan(o, k); });
    colls.forEach(placeColl);
    hops.forEach(placeHop);
    drawAxis();
    svg.setAttribute("data-view-start", v0);
    svg.setAttribute("data-view-end", v1);
  }
  function schedule() {
    if (!pending) { pending = true; requestAnimationFrame(layout); }
  }
  function size() {
    var total = Math.max(gutter + 120, scroll.clientWidth);
    W = total - gutter - RIGHT;
    svg.setAttribute("width", total);
    axis.setAttribute("width", total);
    clipRect.setAttribute("x", gutter);
    clipRect.setAttribute("width", W);
    seps.forEach(function (l) { l.setAttribute("x2", total); });
  }
  function setView(a, b) {
    var widest = Math.max(MIN_VIEW * 10, (hi - lo) * 50), span = Math.min(widest, Math.max(MIN_VIEW, b - a));
    var mid = Math.min(hi + span / 2, Math.max(lo - span / 2, (a + b) / 2));  // never pan clear of the trace
    v0 = mid - span / 2;
    v1 = mid + span / 2;
    schedule();
  }
  function show(a, b) {  // [a, b] across the drawing width, with a margin each side
    var perPx = Math.max(b - a, MIN_VIEW) / Math.max(1, W - 2 * EDGE);
    v0 = a - EDGE * perPx;
    v1 = v0 + perPx * W;
    schedule();
  }
  function fit() { show(lo, hi); }
  // The training steps (Python found them: torch.step spans), else everything: a job's clock check runs
  // seconds before its first step, and a fit would squeeze the steps into a few pixels.
  function steps() { if (d.open) show(d.open[0], d.open[1]); else fit(); }
  function zoomAt(factor, px) {
    var f = (Math.max(gutter, Math.min(gutter + W, px)) - gutter) / W, at = v0 + f * (v1 - v0);
    var span = (v1 - v0) * factor;
    setView(at - f * span, at + (1 - f) * span);
  }
  function panPx(dx) {
    var dt = dx * (v1 - v0) / W;
    setView(v0 + dt, v1 + dt);
  }
  var centre = function () { return gutter + W / 2; };
  var actions = {
    "tl-zoom-in": function () { zoomAt(0.5, centre()); }, "tl-zoom-out": function () { zoomAt(2, centre()); },
    "tl-left": function () { panPx(-W / 4); }, "tl-right": function () { panPx(W / 4); }, "tl-fit": fit,
    "tl-steps": steps
  };
  Object.keys(actions).forEach(function (id) {
    var button = document.getElementById(id);  // no Steps button without steps
    if (button) button.addEventListener("click", actions[id]);
  });
  var keys = {"+": "tl-zoom-in", "=": "tl-zoom-in", "w": "tl-zoom-in", "-": "tl-zoom-out", "_": "tl-zoom-out",
              "s": "tl-zoom-out", "ArrowLeft": "tl-left", "a": "tl-left", "ArrowRight": "tl-right", "d": "tl-right",
              "0": "tl-fit", "f": "tl-fit", "t": "tl-steps"};
  tl.addEventListener("keydown", function (e) {
    var id = keys[e.key];
    if (!id || e.ctrlKey || e.metaKey || e.altKey) return;
    e.preventDefault();
    actions[id]();
  });
  tl.addEventListener("wheel", function (e) {
    var px = e.clientX - svg.getBoundingClientRect().left, scale = e.deltaMode === 1 ? 16 : 1;
    var dx = e.deltaX * scale, dy = e.deltaY * scale;
    if (e.shiftKey && !dx) { dx = dy; dy = 0; }
    if (px < gutter && !dx) return;  // over the row labels: scroll the rows as usual
    e.preventDefault();
    if (Math.abs(dx) > Math.abs(dy)) panPx(dx); else zoomAt(Math.exp(dy * WHEEL_ZOOM), px);
  }, {passive: false});
  var drag = null;
  scroll.addEventListener("pointerdown", function (e) {
    if (e.button !== 0) return;
    drag = e.clientX;
    scroll.setPointerCapture(e.pointerId);
    scroll.classList.add("dragging");
    tl.focus({preventScroll: true});
  });
  scroll.addEventListener("pointermove", function (e) {
    if (drag === null) return;
    panPx(drag - e.clientX);
    drag = e.clientX;
  });
  function endDrag() { drag = null; scroll.classList.remove("dragging"); }
  scroll.addEventListener("pointerup", endDrag);
  scroll.addEventListener("pointercancel", endDrag);
  window.addEventListener("resize", function () { var a = v0, b = v1; size(); setView(a, b); });

  size();
  steps();
  layout();  // drawn before the load event: a DOM dump or a screenshot sees the opening view
  // For tests and the curious: the view in ns from the origin, the drawing box, the axis unit.
  window.ttTimeline = {
    view: function () { return [v0, v1]; },
    extent: function () { return [lo, hi]; },
    steps: function () { return d.open; },
    box: function () { return {left: gutter, width: W, height: height}; },
    unit: function () { return unitNow; }
  };
})();
