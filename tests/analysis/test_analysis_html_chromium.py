"""The HTML timeline as a user sees it (spec/analysis.md §6.3): headless Chromium renders the page
from file://, and the tests read the DOM, sample drawn pixels, and zoom and pan through the page's
own controls (wheel, drag, buttons, keys sent as input events over the DevTools protocol).
Screenshots at 1280x800 and 1920x1080 are written to the test's tmp folder (printed with -s).
Skips with a reason when chromium is not installed (mk/analysis.mk installs it as root)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tempotrace_sdk.analysis import AnalysisReport, analyze_file, write_html

from .chromium_cdp import CHROMIUM, Browser, Page
from .timeline_fixture import LAST_ARRIVER_RANK, ROWS, synthetic_report
from .tracegen import write_trace

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make test installs it as root)")
SIZES = ((1280, 800), (1920, 1080))
TICK = re.compile(r"^\+?-?[\d,]+(\.\d)? (ns|µs|ms|s)$")
#: Legend entries whose swatch colour is the colour drawn (the others explain a shape: arrow, band).
LITERAL = {"physics", "lamport", "svc", "derived", "undecided", "contradiction", "span-stamped", "span-unstamped",
           "whisker", "whisker-saturated", "last-arriver", "row-lying", "row-suspect"}

# What is drawn, read from the live DOM: boxes in CSS px relative to the timeline svg's left edge.
PROBE = """(() => {
  const svg = document.getElementById('timeline'), left = svg.getBoundingClientRect().left;
  const box = e => { const r = e.getBoundingClientRect(); return [r.left - left, r.right - left, r.top, r.bottom]; };
  const shown = e => e.style.display !== 'none';
  const css = (e, p) => getComputedStyle(e)[p];
  return {
    box: ttTimeline.box(), view: ttTimeline.view(), unit: document.getElementById('tl-axis').dataset.unit,
    ticks: [...document.querySelectorAll('#tl-axis .tick text')].map(t => t.textContent),
    rows: [...document.querySelectorAll('.rowlabel')].map(t => [t.firstChild.nodeValue, t.dataset.enc,
      css(t, 'fill')]),
    spans: [...svg.querySelectorAll('g.span')].map(g => ({id: g.dataset.span, row: +g.dataset.row, shown: shown(g),
      label: g.querySelector('text').textContent, enc: g.dataset.enc, box: box(g),
      bar: box(g.querySelector('rect')), text: box(g.querySelector('text')),
      fill: css(g.querySelector('rect'), 'fill'),
      whiskers: [...g.querySelectorAll('path.whisker')].map(w => ({w: w.getBBox().width,
        cx: w.getBBox().x + w.getBBox().width / 2,
        ns: +w.dataset.trueNs, stroke: css(w, 'stroke'), dash: css(w, 'strokeDasharray')}))})),
    hops: [...svg.querySelectorAll('line.hop')].map(l => ({method: l.dataset.method, outcome: l.dataset.outcome,
      kind: l.dataset.kind, enc: l.dataset.enc, shown: shown(l), box: box(l), stroke: css(l, 'stroke'),
      dash: css(l, 'strokeDasharray'), ends: ['x1', 'y1', 'x2', 'y2'].map(a => +l.getAttribute(a))})),
    colls: [...svg.querySelectorAll('g.coll')].map(g => {
      const m = g.querySelector('.last-arriver'), t = g.querySelector('text.missing');
      return {enc: g.dataset.enc, method: g.dataset.method, outcome: g.dataset.outcome, box: box(g),
        stroke: css(g.querySelector('.bracket'), 'stroke'), bracket: g.querySelector('.bracket').getAttribute('d'),
        last: m ? {box: box(m), fill: css(m, 'fill')} : null, missing: t ? t.textContent : null};
    }),
    legend: [...document.querySelectorAll('#legend li')].map(li => [li.dataset.legend, li.dataset.colour]),
    scrollWidth: document.documentElement.scrollWidth, innerWidth: innerWidth,
    svgWidth: +svg.getAttribute('width'), scrollerWidth: document.getElementById('tl-scroll').clientWidth,
  };
})()"""


def _rgb(hex_colour: str) -> str:
    h = hex_colour.lstrip("#")
    return f"rgb({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)})"


def _near(pixels: list[list[tuple[int, int, int]]], hex_colour: str, tolerance: int = 40) -> bool:
    want = tuple(int(hex_colour.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4))
    return any(max(abs(a - b) for a, b in zip(px, want, strict=True)) <= tolerance for row in pixels for px in row)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("timeline-screenshots")
    print(f"\ntimeline screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, AnalysisReport]:
    report = synthetic_report()
    page = tmp_path_factory.mktemp("synthetic") / "timeline.html"
    write_html(report, str(page))
    return page, report


def _open(browser: Browser, page: Path, size: tuple[int, int]) -> Page:
    tab = browser.page(page.as_uri(), *size)
    tab.js("window.scrollTo(0, document.getElementById('tl-controls').offsetTop - 8)")
    return tab


def _close(tab: Page) -> None:
    """Close the tab; the page threw nothing and the browser refused nothing (CSP, file://) meanwhile."""
    errors = tab.errors()
    tab.close()
    assert errors == []


def _inside_at_fit(p: dict[str, Any]) -> None:
    """Nothing drawn leaves the drawing box (gutter to gutter + width), nothing is hidden, no page scrollbar."""
    lo, hi = p["box"]["left"] - 0.5, p["box"]["left"] + p["box"]["width"] + 0.5
    for kind in ("spans", "hops", "colls"):
        for item in p[kind]:
            assert item.get("shown", True), (kind, item)
            assert lo <= item["box"][0] and item["box"][1] <= hi, (kind, item, lo, hi)
    assert p["scrollWidth"] <= p["innerWidth"] and p["svgWidth"] == p["scrollerWidth"]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_synthetic_timeline_draws_every_record(browser: Browser, synthetic: tuple[Path, AnalysisReport],
                                               shots: Path, size: tuple[int, int]) -> None:
    """Axis, labels, row order, legend, arrows per method, collectives with their last arriver, whiskers,
    all inside the drawing width at fit, and the colours on screen where the arrows are."""
    path, report = synthetic
    tab = _open(browser, path, size)
    try:
        tab.screenshot(shots / f"synthetic-{size[0]}x{size[1]}.png")
        p = tab.js(PROBE)
        # Axis: ticks with units, milliseconds for a 30 ms trace.
        assert p["unit"] == "ms" and len(p["ticks"]) >= 5 and all(TICK.match(t) for t in p["ticks"]), p["ticks"]
        assert "0 ms" in p["ticks"]
        # Rows by rank then host, then rank-less rows per host and clock; the liar and the suspect marked.
        assert [r[0].removesuffix(" LYING").removesuffix(" SUSPECT") for r in p["rows"]] == ROWS
        assert p["rows"][ROWS.index("rank 3 · node3")][2] == _rgb("#d00000")
        assert {r[1] for r in p["rows"] if r[0].startswith("ps")} == {"row-suspect"}
        # Every span drawn with a label (cut with … where the bar is short); collective spans by op [group].
        assert len(p["spans"]) == len(report.spans_kept)
        kept = {s["span_id"]: s for s in report.spans_kept}
        for s in p["spans"]:
            rec = kept[s["id"]]
            full = f"{rec['op']} [{rec['group']}]" if rec.get("op") else rec["name"]
            assert s["label"] == full or (s["label"].endswith("…") and full.startswith(s["label"][:-1])) \
                or s["label"] == "", (s, full)
            if s["label"]:  # inside its bar, clear of the start whisker
                assert s["bar"][0] + 4 <= s["text"][0] and s["text"][1] <= s["bar"][1] + 0.5, s
        assert any(s["label"] == "train_step" for s in p["spans"])
        assert any(s["label"].startswith("all_red") for s in p["spans"])
        # Whiskers stay visible at fit (at least 4 px) and carry the true bound.
        whiskers = [w for s in p["spans"] for w in s["whiskers"]]
        assert whiskers and all(w["w"] >= 4 - 1e-6 for w in whiskers)
        assert {w["ns"] for w in whiskers} >= {220, 65535}
        # One arrow per kept hop and p2p record, by method; p2p dashed, hops solid; contradiction red.
        assert Counter(h["method"] for h in p["hops"]) == Counter(h["decision"]["method"] for h in report.hops_kept)
        assert Counter(h["kind"] for h in p["hops"]) == Counter(h.get("kind", "hop") for h in report.hops_kept)
        assert all((h["dash"] != "none") == (h["kind"] == "p2p") for h in p["hops"])
        # Collectives: one mark each, coloured by decision, the last arriver's marker over rank 2's start.
        assert [c["outcome"] for c in p["colls"]] == [c["outcome"] for c in report.collectives_kept]
        assert [c["stroke"] for c in p["colls"]] == [_rgb(x) for x in ("#2a9d3a", "#2a6fdb", "#d00000")]
        rank2 = ROWS.index(f"rank {LAST_ARRIVER_RANK} · node{LAST_ARRIVER_RANK}")
        starts = {s["id"]: s["box"][0] for s in p["spans"] if s["row"] == rank2}
        for c, rec in zip(p["colls"], report.collectives_kept, strict=True):
            last = next(m for m in rec["members"] if m["rank"] == LAST_ARRIVER_RANK)["span_id"]
            assert c["last"] is not None and c["last"]["fill"] == _rgb("#111111")
            mid = (c["last"]["box"][0] + c["last"]["box"][1]) / 2
            whisker_reach = 4  # the span's box starts at its start whisker's left end
            assert abs(mid - (starts[last] + whisker_reach / 2)) <= 3, (mid, starts[last])
        assert [c["missing"] for c in p["colls"]] == [None, "missing rank 3", None]
        # The legend lists exactly what is drawn, each literal colour drawn somewhere.
        drawn: dict[str, set[str]] = {}
        for item in [*p["spans"], *p["hops"], *p["colls"]]:
            for tok in item["enc"].split():
                colours = drawn.setdefault(tok, set())
                colours.update([item.get("stroke", ""), item.get("fill", "")])
                colours.update(w["stroke"] for w in item.get("whiskers", ()))
                if item.get("last"):
                    colours.add(item["last"]["fill"])
        for _, enc, fill in p["rows"]:
            for tok in enc.split():
                drawn.setdefault(tok, set()).add(fill)
        legend = dict(p["legend"])
        assert set(legend) == set(drawn)
        for key, colour in legend.items():
            if key in LITERAL:
                assert _rgb(colour) in drawn[key], (key, colour, drawn[key])
        _inside_at_fit(p)
        # Pixels: the middle of the lamport HTTP hop is blue on screen, the contradiction bracket red.
        hop = next(h for h in p["hops"] if h["method"] == "lamport" and h["kind"] == "hop")
        top = tab.js("document.getElementById('timeline').getBoundingClientRect().top")
        svg_left = tab.js("document.getElementById('timeline').getBoundingClientRect().left")
        x1, y1, x2, y2 = hop["ends"]
        mx, my = svg_left + (x1 + x2) / 2, top + (y1 + y2) / 2
        assert _near(tab.pixels(mx - 2, my - 2, 5, 5), "#2a6fdb")
        assert not _near(tab.pixels(mx - 2, my - 40, 5, 5), "#2a6fdb")  # and not everywhere
        red = p["colls"][2]
        bx = float(red["bracket"][1:].split(",")[0])
        assert _near(tab.pixels(svg_left + bx - 2, (red["box"][2] + red["box"][3]) / 2 - 2, 5, 5), "#d00000")
    finally:
        _close(tab)


def _t_at(p: dict[str, Any], px: float) -> float:
    """The time (ns from the origin) under svg x ``px``."""
    v0, v1 = p["view"]
    return v0 + (px - p["box"]["left"]) / p["box"]["width"] * (v1 - v0)


def test_zoom_and_pan_through_the_page_controls(browser: Browser, synthetic: tuple[Path, AnalysisReport],
                                                shots: Path) -> None:
    """Wheel zooms about the pointer and the axis changes units (ms -> µs -> ns); whiskers then show
    their true width; drag, shift+wheel, buttons and keys pan and zoom; Fit shows every span again."""
    path, _ = synthetic
    tab = _open(browser, path, SIZES[0])
    try:
        fit = tab.js(PROBE)
        left = tab.js("document.getElementById('timeline').getBoundingClientRect().left")
        top = tab.js("document.getElementById('timeline').getBoundingClientRect().top")
        rank2 = ROWS.index("rank 2 · node2")
        target = next(s for s in fit["spans"] if s["row"] == rank2 and s["label"].startswith("all_red"))["id"]
        py = next((s["box"][2] + s["box"][3]) / 2 for s in fit["spans"] if s["id"] == target)
        units, now = [fit["unit"]], fit
        for _ in range(40):
            # Aim at the span's start whisker, at a whole pixel (input events carry whole pixels).
            cx = next(s["whiskers"][0]["cx"] for s in now["spans"] if s["id"] == target)
            px = round(left + cx) - left
            t_before = _t_at(now, px)
            tab.wheel(left + px, py, delta_y=-400)
            now = tab.js(PROBE)
            # About the pointer: the time under it stays where it was.
            assert abs(_t_at(now, px) - t_before) <= 1e-3 * (now["view"][1] - now["view"][0]) / now["box"]["width"]
            if now["unit"] != units[-1]:
                units.append(now["unit"])
                assert all(t.endswith(" " + now["unit"]) for t in now["ticks"]), now["ticks"]
            if now["unit"] == "ns":
                break
        assert units == ["ms", "µs", "ns"], units
        tab.screenshot(shots / "synthetic-zoomed-ns-1280x800.png")
        # Zoomed to ns, the 220 ns whisker is drawn at its true width and the collective's label is whole.
        span = next(s for s in now["spans"] if s["id"] == target)
        k = now["box"]["width"] / (now["view"][1] - now["view"][0])
        start_whisker = span["whiskers"][0]
        assert start_whisker["ns"] == 220 and 2 * 220 * k > 4
        assert abs(start_whisker["w"] - 2 * 220 * k) <= 1.5
        assert span["label"] == "all_reduce [0-3]"
        # Far-away spans are not drawn at this zoom; nothing drawn leaves the box (clipped).
        assert any(not s["shown"] for s in now["spans"])

        def span_ns() -> float:
            v = tab.js("ttTimeline.view()")
            return float(v[1] - v[0])

        # Drag right by 200 px: the view moves 200 px earlier.
        before = tab.js("ttTimeline.view()")
        tab.drag(left + 500, top + 10, left + 700)
        after = tab.js("ttTimeline.view()")
        assert after[0] == pytest.approx(before[0] - 200 * span_ns() / now["box"]["width"], rel=1e-6, abs=1)
        # Shift+wheel pans later.
        tab.send("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": left + 600, "y": top + 10, "deltaX": 0,
                                              "deltaY": 100, "modifiers": 8})
        tab.settle()
        assert tab.js("ttTimeline.view()")[0] > after[0]
        # Buttons: zoom out doubles the view's span, zoom in halves it, about the centre.
        width = span_ns()
        tab.click_selector("#tl-zoom-out")
        assert span_ns() == pytest.approx(2 * width)
        tab.click_selector("#tl-zoom-in")
        assert span_ns() == pytest.approx(width)
        v = tab.js("ttTimeline.view()")
        tab.click_selector("#tl-right")
        assert tab.js("ttTimeline.view()")[0] == pytest.approx(v[0] + width / 4)
        # Keys, once the timeline has focus (a click on it, which does not pan).
        tab.js("window.scrollTo(0, document.getElementById('tl-controls').offsetTop - 8)")
        top = tab.js("document.getElementById('timeline').getBoundingClientRect().top")
        v = tab.js("ttTimeline.view()")
        tab.click(left + 600, top + 10)
        assert tab.js("ttTimeline.view()") == v and tab.js("document.activeElement.id") == "tl"
        tab.key("ArrowLeft", "ArrowLeft", 37)
        assert tab.js("ttTimeline.view()")[0] == pytest.approx(v[0] - width / 4)
        tab.key("-", "Minus", 189)
        assert span_ns() == pytest.approx(2 * width)
        tab.key("0", "Digit0", 48)
        assert tab.js("ttTimeline.view()") == pytest.approx(fit["view"])
        # Zoom in again and press the Fit button: every span is back in view, inside the box.
        tab.wheel(left + 600, py, delta_y=-2000)
        assert span_ns() < (fit["view"][1] - fit["view"][0]) / 4
        tab.click_selector("#tl-fit")
        again = tab.js(PROBE)
        assert again["view"] == pytest.approx(fit["view"]) and again["unit"] == "ms"
        _inside_at_fit(again)
        # A wider window: the drawing grows with it, the view stays, still nothing outside.
        tab.send("Emulation.setDeviceMetricsOverride", {"width": 1920, "height": 1080, "deviceScaleFactor": 1,
                                                        "mobile": False})
        tab.settle()
        wide = tab.js(PROBE)
        assert wide["box"]["width"] > again["box"]["width"] + 500 and wide["view"] == pytest.approx(again["view"])
        _inside_at_fit(wide)
    finally:
        _close(tab)


def test_empty_report_draws_an_empty_timeline(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "empty.html"
    write_html(AnalysisReport(), str(page))
    tab = _open(browser, page, SIZES[0])
    try:
        p = tab.js(PROBE)
        assert p["spans"] == p["hops"] == p["colls"] == p["rows"] == p["legend"] == []
        assert p["ticks"] and p["scrollWidth"] <= p["innerWidth"]
        assert "No spans to draw" in tab.js("document.getElementById('tl-empty').textContent")
    finally:
        _close(tab)


# -- a real trace --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, AnalysisReport]:
    """`tempotrace demo --http` as a user runs it: 4 honest ranks and a liar as separate processes.

    The HTTP imitation, because its hops are what the arrows are checked against here; the torchrun
    job's outputs (report, Perfetto, page) are written and checked in tests/demo."""
    out = tmp_path_factory.mktemp("demo")
    subprocess.run([sys.executable, "-m", "tempotrace_sdk.cli.main", "demo", "--http", "--out", str(out),
                    "--iterations", "3"],
                   check=True, capture_output=True, timeout=300)
    report = analyze_file(str(out / "trace.jsonl"), keep=10_000)
    page = out / "report.html"
    write_html(report, str(page))
    return page, report


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_demo_trace_at_fit(browser: Browser, demo: tuple[Path, AnalysisReport], shots: Path,
                           size: tuple[int, int]) -> None:
    """Every iteration in view (the old page cut off the last), rows rank 0..4, the liar marked, one arrow
    per kept hop coloured by its decision."""
    path, report = demo
    tab = _open(browser, path, size)
    try:
        tab.screenshot(shots / f"demo-{size[0]}x{size[1]}.png")
        p = tab.js(PROBE)
        assert [r[0].split(" · ")[0] for r in p["rows"]] == [f"rank {n}" for n in range(5)]
        lying = {f.rank for f in report.faults if f.verdict == "lying"}
        assert lying and {n for n, r in enumerate(p["rows"]) if r[0].endswith("LYING")} == lying
        steps = [s for s in p["spans"] if report_name(report, s["id"]) == "train_step"]
        assert len(steps) == 5 * 3
        _inside_at_fit(p)
        assert Counter(h["method"] for h in p["hops"]) == Counter(h["decision"]["method"] for h in report.hops_kept)
        assert Counter(h["outcome"] for h in p["hops"])["contradiction"] == sum(
            1 for h in report.hops_kept if h["outcome"] == "contradiction") > 0
        assert all(h["stroke"] == _rgb("#d00000") for h in p["hops"] if h["outcome"] == "contradiction")
        assert p["unit"] == "ms" and all(TICK.match(t) for t in p["ticks"])
    finally:
        _close(tab)


def report_name(report: AnalysisReport, span_id: str) -> str:
    return next(str(s["name"]) for s in report.spans_kept if s["span_id"] == span_id)


# -- the page as --dump-dom gives it: the numbers equal the JSON ---------------------------------------


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, tuple[str, str]] = {}
        self.svg: dict[str, str] = {}
        self._key: tuple[str, str] | None = None
        self.hops: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "td" and "data-key" in a and "data-value" in a:
            self._key = (a["data-key"], a["data-value"])
        if tag == "svg" and a.get("id") == "timeline":
            self.svg = a
        if tag == "line" and "hop" in a.get("class", "").split():
            self.hops.append(a)

    def handle_data(self, data: str) -> None:
        if self._key is not None and self._key[0] not in self.values:
            self.values[self._key[0]] = (self._key[1], data.strip())

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._key = None


def test_rendered_page_matches_the_json(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    clocks = {"c": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp", "w4": "sim:ptp", "w5": "sim:ntp"}
    write_trace(str(trace), clocks)
    report = analyze_file(str(trace), keep=10_000)
    page = tmp_path / "t.html"
    write_html(report, str(page))
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'prof'}",
           "--dump-dom", page.as_uri()]
    dom = _Dom()
    dom.feed(subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout)
    summary = report.to_dict()["summary"]
    assert set(dom.values) == set(summary)
    for key, value in summary.items():
        raw, shown = dom.values[key]
        assert int(raw) == value and int(re.sub(r"[^0-9]", "", shown)) == value, key
    # The script ran: every span and hop was drawn, hops coloured by method, the liar's in red.
    assert int(dom.svg["data-drawn-spans"]) == report.spans
    assert int(dom.svg["data-drawn-hops"]) == report.hops == len(dom.hops)
    outcomes = {h["data-outcome"] for h in dom.hops}
    assert "contradiction" in outcomes and "consistent" in outcomes
    assert {h["data-method"] for h in dom.hops} >= {"physics"}
    assert summary["lying_hosts"] == 1
    assert json.loads(json.dumps(report.to_dict()))["collectives"] == []


# -- a torch job: the page opens on its steps ----------------------------------------------------------


def test_torch_job_opens_on_the_steps_and_draws_every_span(browser: Browser, tmp_path: Path, shots: Path) -> None:
    """§6.3: a job whose clock check ran 5 s before 700 training steps (6,303 spans, more than the old
    5,000 cap): every span is drawn, the page opens on the steps (the clock check out of view), Fit shows the
    clock check, and the Steps button (key t) goes back to the steps."""
    from .torchgen import MS, TorchJob

    job = TorchJob(steps=700, check_ns=5_000 * MS)
    report = analyze_file(job.write(str(tmp_path / "t.jsonl")), keep=20_000)
    page = tmp_path / "job.html"
    write_html(report, str(page))
    tab = _open(browser, page, SIZES[0])
    try:
        tab.screenshot(shots / "torch-job-1280x800.png")
        drawn = tab.js("+document.getElementById('timeline').dataset.drawnSpans")
        assert drawn == report.spans == 3 + 700 * 9 > 5000
        steps = tab.js("ttTimeline.steps()")
        view = tab.js("ttTimeline.view()")
        assert view[0] <= steps[0] and steps[1] <= view[1]  # every step in view...
        assert view[1] - view[0] < 1.1 * (steps[1] - steps[0])  # ...and little else: not the 5 s before
        names = {s["span_id"]: s["name"] for s in report.spans_kept}
        shown = {names[i] for i in tab.js("[...document.querySelectorAll('g.span')]"
                                          ".filter(g => g.style.display !== 'none').map(g => g.dataset.span)")}
        assert "torch.check_clocks" not in shown and "torch.step" in shown
        tab.click_selector("#tl-fit")
        fit = tab.js("ttTimeline.view()")
        assert fit[0] < steps[0] - 4_000 * MS  # the clock check is in the fit
        tab.click_selector("#tl-steps")
        assert tab.js("ttTimeline.view()") == pytest.approx(view)
    finally:
        _close(tab)
