"""A self-contained HTML report with a timeline (spec/analysis.md §6.3).

No network fetches: the style and script (package data beside this module:
timeline.css, timeline.js) are inlined and a Content-Security-Policy forbids
loading anything else, so the page works from file:// and offline. The
headline numbers are written by Python from ``report.summary()`` (the dict the
JSON holds), so page and JSON cannot disagree; a hang opens the page as a banner
(html_hang.py, from the JSON's ``hang``); the timeline's data is laid out
by html_model.py and only placed, scaled, zoomed and panned by the script.
"""

from __future__ import annotations

import html
import json
from functools import cache
from importlib.resources import files
from typing import Any

from ..wire.layout import UNCERTAINTY_SATURATED
from .html_hang import hang_section
from .html_model import HTML_MAX_COLLECTIVES, HTML_MAX_HOPS, HTML_MAX_SPANS, LEGEND, timeline_model
from .html_text import calendar
from .html_torch import torch_section
from .report import AnalysisReport

__all__ = ["HTML_MAX_COLLECTIVES", "HTML_MAX_HOPS", "HTML_MAX_SPANS", "render_html"]

_LABELS = (
    ("spans", "Spans"),
    ("traces", "Traces"),
    ("hops", "Hops (send → receive)"),
    ("hops_matched", "Hops matched to the sender's span"),
    ("edges", "Known causal edges"),
    ("physics", "Decided by physics"),
    ("lamport", "Decided by Lamport (inversion ruled out)"),
    ("svc", "Decided by SVC"),
    ("derived", "Decided by derived order (program order and matched messages, collectives)"),
    ("undecided", "Undecided (no guess)"),
    ("wrong", "WRONG: confident and contradicting the edge"),
    ("naive_inversions", "Naive inversions (raw timestamps)"),
    ("lying_hosts", "Hosts flagged as lying"),
    ("suspect_hosts", "Hosts suspect (cannot tell from peer)"),
    ("bad_lines", "Input lines skipped (unreadable)"),
    ("bad_spans", "Spans refused (a value breaks a rule)"),
    ("export_dropped_spans", "Spans the exporters dropped before writing"),
    ("collectives", "Collectives (torch, one per group and sequence number)"),
    ("collectives_incomplete", "Collectives a rank never joined"),
    ("p2p", "Point-to-point messages (torch)"),
    ("p2p_matched", "Point-to-point messages with both sides"),
    ("jobs", "Jobs (job ids the spans name)"),
    ("steps", "Training steps (torch step())"),
    ("failed_ops", "torch ops that failed (status ERROR)"),
)
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


@cache
def _asset(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def _fmt(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else html.escape(str(value))


def _summary_rows(summary: dict[str, Any]) -> str:
    out = []
    for key, label in _LABELS:
        value = summary[key]
        cls = ' class="n bad"' if key in ("wrong", "lying_hosts", "export_dropped_spans", "failed_ops") and value \
            else ' class="n"'
        out.append(f'<tr><th>{html.escape(label)}</th><td{cls} data-key="{key}" data-value="{value}">'
                   f"{_fmt(value)}</td></tr>")
    return "\n".join(out)


def _fault_rows(report: AnalysisReport) -> str:
    if not report.faults:
        return '<p id="no-faults">No clock faults: every claimed bound held on every known edge.</p>'
    rows = ['<table id="faults"><tr><th>Host</th><th>Rank</th><th>Verdict</th><th>Kind</th><th>Violations</th>'
            "<th>Edges</th><th>Rate</th><th>Peers</th><th>Max beyond bound (ns)</th><th>Claimed bound (ns)</th></tr>"]
    for f in report.faults:
        rank = "" if f.rank is None else str(f.rank)
        rows.append(
            f'<tr data-host="{html.escape(f.host)}" data-rank="{rank}"><td>{html.escape(f.host)}</td><td>{rank}</td>'
            f"<td>{f.verdict}</td><td>{f.kind}</td>"
            f'<td class="n" data-key="violations">{f.violations:,}</td><td class="n">{f.edges:,}</td>'
            f'<td class="n">{100 * f.rate:.1f}%</td><td class="n">{len(f.peers)}</td>'
            f'<td class="n" data-key="max_excess_ns">{f.max_excess_ns:,}</td>'
            f'<td class="n">{f.claimed_bound_ns:,}</td></tr>'
        )
    rows.append("</table>")
    return "\n".join(rows)


#: A small drawing of each kind of legend swatch, as the timeline draws it ({c}: the entry's colour).
_SWATCHES = {
    "line": '<line x1="2" y1="7" x2="28" y2="7" stroke="{c}" stroke-width="4"/>',
    "arrow": '<line x1="2" y1="7" x2="22" y2="7" stroke="{c}" stroke-width="1.8"/>'
             '<path d="M20,3 L28,7 L20,11 z" fill="{c}"/>',
    "arrow-dashed": '<line x1="2" y1="7" x2="22" y2="7" stroke="{c}" stroke-width="1.8" stroke-dasharray="6 3"/>'
                    '<path d="M20,3 L28,7 L20,11 z" fill="{c}"/>',
    "band": '<rect x="3" y="1" width="16" height="12" fill="{c}" opacity=".16"/>'
            '<path d="M19,1 V13 M3,1 H19 M3,7 H19" stroke="{c}" stroke-width="2" fill="none"/>',
    "marker": '<path d="M9,2 H21 L15,12 z" fill="{c}"/>',
    "fill": '<rect x="2" y="2" width="26" height="10" fill="{c}" stroke="#8aa6c8"/>',
    "whisker": '<path d="M4,7 H26 M4,2 V12 M26,2 V12" stroke="{c}" stroke-width="1.2" fill="none"/>',
    "whisker-dashed": '<path d="M4,7 H26 M4,2 V12 M26,2 V12" stroke="{c}" stroke-width="1.2" fill="none" '
                      'stroke-dasharray="3 2"/>',
}


def _swatch(kind: str, colour: str) -> str:
    if kind in _SWATCHES:
        return f'<svg width="30" height="14" aria-hidden="true">{_SWATCHES[kind].format(c=colour)}</svg>'
    return f'<b style="color:{colour}">Abc</b>'  # a text encoding: a row label, a note


def _legend(keys: list[str]) -> str:
    items = []
    for key in keys:
        kind, colour, words = LEGEND[key]
        items.append(f'<li data-legend="{key}" data-colour="{colour}">{_swatch(kind, colour)}'
                     f"<span>{html.escape(words)}</span></li>")
    return '<ul id="legend">' + "".join(items) + "</ul>"


def _many(n: int, noun: str) -> str:
    return f"1 {noun} has" if n == 1 else f"{n:,} {noun}s have"


def _cut_note(cut: dict[str, Any], max_spans: int) -> str:
    """Say what the timeline leaves out, and how to draw it; the numbers above always cover everything."""
    parts = []
    for what in ("spans", "hops", "collectives"):
        shown, total = cut[what]
        if shown < total:
            parts.append(f"{shown:,} of {total:,} {what}")
    notes = []
    if parts:
        notes.append(f"Timeline shows {', '.join(parts)} (at most {max_spans:,} spans, {HTML_MAX_HOPS:,} "
                     f"hops and {HTML_MAX_COLLECTIVES:,} collectives are drawn, and the analysis keeps "
                     "only as many as its keep limit); the numbers above cover all of them.")
    shown, total = cut["spans"]
    if shown < total:
        notes.append(f'<span id="cut-spans" data-left-out="{total - shown}">{total - shown:,} spans are left out: '
                     f"draw them with <code>tempotrace analyze … --html-max-spans {total} --keep {total}</code> "
                     "(or analyse one job's or one step's file).</span>")
    if cut["undrawn_hops"]:
        notes.append(f"{_many(cut['undrawn_hops'], 'hop')} no TempoTrace reading at one end: not drawn.")
    if cut["undrawn_collectives"]:
        notes.append(f"{_many(cut['undrawn_collectives'], 'collective')} no member span drawn: not drawn.")
    return f'<p id="cut">{" ".join(notes)}</p>' if notes else ""


def _with_heading(torch: str) -> str:
    """The torch section, then a heading for the summary below it (a page without one opens on the summary)."""
    return f"{torch}\n<h2>Edge decisions</h2>" if torch else ""


def _steps_button(view: list[int] | None) -> str:
    """The button back to the training steps (the view the page opened on), when there are steps."""
    return '<button id="tl-steps" title="show the training steps (t)">Steps</button>' if view else ""


def render_html(report: AnalysisReport, max_spans: int | None = None) -> str:
    """The page as one string; ``max_spans``: spans drawn at most (``--html-max-spans``; default
    HTML_MAX_SPANS)."""
    summary = report.summary()
    model = timeline_model(report, max_spans)
    data = {key: model[key] for key in ("rows", "spans", "hops", "collectives", "colours", "open")}
    data["saturated_ns"] = UNCERTAINTY_SATURATED
    # "</script" or "<!--" inside a script element would end or derail it; escaping every "<"
    # as \u003c keeps the JSON identical once parsed.
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")
    origin = model["origin_ns"]
    steps_key = " t (steps)" if model["open"] else ""
    src = html.escape(report.source or "<spans>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<title>TempoTrace analysis: {src}</title><style>{_asset("timeline.css")}</style></head>
<body>
<h1>TempoTrace analysis</h1>
<p>Source: <code id="source">{src}</code></p>
{hang_section(report.hang())}
{_with_heading(torch_section(report))}
<table id="summary">
{_summary_rows(summary)}
</table>
<h2>Clock faults</h2>
{_fault_rows(report)}
<h2>Timeline</h2>
<p id="origin" data-origin-ns="{origin}">Times are since the trace's start, {html.escape(calendar(origin))}
({origin:,} ns since the TAI epoch). Rows: ranks in order, then processes without a rank (a row per host and
clock).</p>
{_legend(model["legend"])}
{_cut_note(model["cut"], model["max_spans"])}
{'' if model["spans"] else '<p id="tl-empty">No spans to draw.</p>'}
<div id="tl-controls" role="toolbar" aria-label="timeline view">
<button id="tl-zoom-out" title="zoom out (-)">−</button><button id="tl-zoom-in" title="zoom in (+)">+</button>
<button id="tl-left" title="earlier (←)">←</button><button id="tl-right" title="later (→)">→</button>
<button id="tl-fit" title="show every span (0)">Fit</button>{_steps_button(model["open"])}
<span class="hint">wheel over the plot: zoom · drag or shift+wheel: pan · keys + − ← → 0{steps_key}
(click the timeline first) · hover for exact values</span></div>
<div id="tl" tabindex="0" aria-label="span timeline">
<svg id="tl-axis" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="time axis"></svg>
<div id="tl-scroll">
<svg id="timeline" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="span timeline"></svg></div>
</div>
<noscript><p>The timeline needs JavaScript; the numbers above do not.</p></noscript>
<script type="application/json" id="tt-data">{payload}</script>
<script>{_asset("timeline.js")}</script>
</body></html>
"""
