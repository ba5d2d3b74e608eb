"""What the HTML timeline draws, laid out in Python (spec/analysis.md §6.3).

The page's script only places and scales what this module decides: the rows
(ranked clocks by rank then host, then processes without a rank, one row per
host and clock), each span's lane in its row, every time as integer ns from
the trace's origin, the colour key of each hop, p2p message and collective,
the tooltips, and the legend entries: exactly the encodings something on the
page uses. Times leave Python relative to the origin because TAI ns since 1970
(about 1.8e18) are beyond a JavaScript number's exact integers (2^53): parsed
in the browser they would be rounded to 256 ns, larger than the bounds drawn.

Records come from ``report.spans_kept``, ``hops_kept`` (``kind`` "hop" or
"p2p"; none is a hop) and ``collectives_kept``, keyed as CONTRACT-collectives
fixes; a span the analysis read without a TempoTrace stamp has OpenTelemetry
(UTC) times, put on the TAI axis with the leap-second table.
"""

from __future__ import annotations

import re
from typing import Any

from ..clocks.leapseconds import utc_to_tai_ns
from ..wire.layout import UNCERTAINTY_SATURATED
from .html_text import bound_text, fault_verdicts, hop_tip, relative, span_tip
from .report import AnalysisReport
from .stepparent import STEP_SPAN

__all__ = ["COLOURS", "HTML_MAX_COLLECTIVES", "HTML_MAX_HOPS", "HTML_MAX_SPANS", "LEGEND", "timeline_model"]

#: Spans drawn by default: what the analysis keeps for drawing by default (analyzer.DEFAULT_KEEP). The page
#: draws only what is in view, so 20,000 bars still zoom smoothly; ``--html-max-spans`` draws more or fewer,
#: and the page says how many it left out and how to see them.
HTML_MAX_SPANS = 20_000
HTML_MAX_HOPS = 5000
HTML_MAX_COLLECTIVES = 2000
#: Concurrent spans of one row beyond this many lanes share the lane that frees first (they overlap).
MAX_LANES = 16

#: How a hop, p2p message or collective was decided (CONTRACT-collectives §4; contradiction wins).
COLOURS = {"physics": "#2a9d3a", "lamport": "#2a6fdb", "svc": "#8e44ad", "derived": "#0f8b8d",
           "undecided": "#999999", "contradiction": "#d00000"}
SPAN_FILL = {"span-stamped": "#cfe3f7", "span-unstamped": "#e4e4e4"}
INK = "#333333"
VERDICT_COLOURS = {"row-lying": "#d00000", "row-suspect": "#c06000"}

#: Every encoding the page can use: key -> (swatch, colour, explanation). The page lists those it uses.
LEGEND: dict[str, tuple[str, str, str]] = {
    "physics": ("line", COLOURS["physics"], "decided by physics: the claimed bounds are disjoint"),
    "lamport": ("line", COLOURS["lamport"], "decided by Lamport counters (physics could not)"),
    "svc": ("line", COLOURS["svc"], "decided by the SVC sketch"),
    "derived": ("line", COLOURS["derived"], "derived from the trace: each rank's program order and the matched "
                                            "messages and collectives (no counter compared across ranks)"),
    "undecided": ("line", COLOURS["undecided"], "undecided: the stamps do not say, no guess"),
    "contradiction": ("line", COLOURS["contradiction"], "contradiction: a clock broke its claimed bound (or, "
                                                        "derived, the trace's structure leads round a cycle)"),
    "kind-hop": ("arrow", INK, "HTTP/gRPC hop, send → receive (solid arrow, coloured as above)"),
    "kind-p2p": ("arrow-dashed", INK, "torch point-to-point message, send → receive end (dashed arrow)"),
    "collective": ("band", INK, "collective: band from the first member's start to the last arriver's, "
                                "bracket joining the members, coloured by how 'all start before any ends' "
                                "was decided"),
    "last-arriver": ("marker", "#111111", "last arriver of a collective (latest start)"),
    "collective-incomplete": ("text", INK, "collective with expected ranks missing (named on the page)"),
    "span-stamped": ("fill", SPAN_FILL["span-stamped"], "span with TempoTrace stamps (TAI)"),
    "span-unstamped": ("fill", SPAN_FILL["span-unstamped"],
                       "span without a stamp: OpenTelemetry times (UTC → TAI), no bound"),
    "whisker": ("whisker", INK, "claimed ± bound at start and end (at least 4 px wide; hover a span for "
                                "the value)"),
    "whisker-saturated": ("whisker-dashed", INK, f"bound saturated (≥ {UNCERTAINTY_SATURATED:,} ns): "
                                                 "at least this wide"),
    "row-lying": ("text", VERDICT_COLOURS["row-lying"], "clock flagged as lying (see Clock faults)"),
    "row-suspect": ("text", VERDICT_COLOURS["row-suspect"], "clock suspect: cannot be told from its peer"),
}

RowKey = tuple[int, int, tuple[Any, ...], str]
Place = tuple[int, int, int]  # row, lane, ns from the origin


def _natural(host: str) -> tuple[Any, ...]:
    """node2 before node10: digit runs compare as numbers."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", host) if p)


def row_key(host: str, rank: int | None, clock: str) -> RowKey:
    """Ranked clocks first, by rank then host; then processes without a rank, one row per host and clock."""
    return (0, rank, _natural(host), "") if rank is not None else (1, 0, _natural(host), clock)


def span_times(s: dict[str, Any]) -> tuple[int, int, bool]:
    """(start, end) in TAI ns and whether the end is a TempoTrace reading.

    keep_span writes OpenTelemetry (UTC) times where a stamp is missing: the start when ``stamped`` is
    false, the end when the span had no end stamp (no end bound) or an end without a reading. The last
    case carries a bound but is UTC: it is the reading that lies nearer the start once put on TAI (the
    two differ by the leap-second offset, 37 s today; a noisy clock may stamp an end a little before
    its start, so "end before start" alone says nothing).
    """
    stamped = bool(s["stamped"])
    start = s["start_ptp_ns"] if stamped else utc_to_tai_ns(s["start_ptp_ns"])
    end = s["end_ptp_ns"]
    if not stamped or s["end_uncertainty_ns"] is None:
        return start, utc_to_tai_ns(end), False
    as_utc = utc_to_tai_ns(end)
    if abs(as_utc - start) < abs(end - start):
        return start, as_utc, False
    return start, end, True


class _Rows:
    """Rows by key, each with its spans' intervals for lane packing."""

    def __init__(self) -> None:
        self.keys: dict[RowKey, dict[str, Any]] = {}
        self.rankless: dict[str, list[RowKey]] = {}  # host -> its rows without a rank, in the order made

    def add(self, host: str, rank: int | None, clock: str) -> RowKey:
        key = row_key(host, rank, clock)
        if key not in self.keys:
            self.keys[key] = {"host": host, "rank": rank, "clock": clock, "spans": []}
            if rank is None:
                self.rankless.setdefault(host, []).append(key)
        return key

    def find(self, host: str, rank: int | None) -> RowKey:
        """The row of a hop endpoint whose span is not drawn: its rank's, else the host's first row
        without a rank, else a new one."""
        if rank is None and host in self.rankless:
            return min(self.rankless[host])
        return self.add(host, rank, "")

    def layout(self) -> tuple[list[RowKey], dict[RowKey, int], dict[int, int], list[int]]:
        """Rows in order, each key's number, each span's lane (by span index), each row's lane count."""
        order = sorted(self.keys)
        lane_of: dict[int, int] = {}
        lanes: list[int] = []
        for k in order:
            packed, n = _pack(self.keys[k]["spans"])
            lane_of.update(packed)
            lanes.append(n)
        return order, {k: n for n, k in enumerate(order)}, lane_of, lanes


def _pack(intervals: list[tuple[int, int, int]]) -> tuple[dict[int, int], int]:
    """Lane of each (start, end, index): first lane free by the start, a child below its parent."""
    lanes: list[int] = []  # end of the last span in each lane
    out: dict[int, int] = {}
    for start, end, i in sorted(intervals, key=lambda t: (t[0], -t[1], t[2])):
        lane = next((n for n, last in enumerate(lanes) if last <= start), None)
        if lane is None and len(lanes) < MAX_LANES:
            lane = len(lanes)
            lanes.append(end)
        else:
            if lane is None:
                lane = min(range(len(lanes)), key=lanes.__getitem__)
            lanes[lane] = max(lanes[lane], end)
        out[i] = lane
    return out, max(1, len(lanes))


def colour_key(record: dict[str, Any]) -> str:
    """The legend key of a decided record: contradiction wins, else the deciding method."""
    if record.get("outcome") == "contradiction":
        return "contradiction"
    method = str(record["decision"]["method"])
    return method if method in COLOURS else "undecided"


def timeline_model(report: AnalysisReport, max_spans: int | None = None) -> dict[str, Any]:
    """The data the page embeds: rows, spans, hops, collectives, legend keys, origin, the view the page opens
    on and what was cut; at most ``max_spans`` spans (default HTML_MAX_SPANS)."""
    if max_spans is None:
        max_spans = HTML_MAX_SPANS
    spans = report.spans_kept[:max_spans]
    hops = report.hops_kept[:HTML_MAX_HOPS]
    colls = report.collectives_kept[:HTML_MAX_COLLECTIVES]
    rows = _Rows()
    times = [span_times(s) for s in spans]
    row_of = [rows.add(s["host"], s["rank"], s.get("clock") or "") for s in spans]
    for i, k in enumerate(row_of):
        rows.keys[k]["spans"].append((times[i][0], times[i][1], i))
    by_id = {s["span_id"]: i for i, s in enumerate(spans)}
    for h in hops:  # endpoints without a drawn span still need their row before rows are numbered
        for side in ("send", "recv"):
            if h[f"{side}_span"] not in by_id:
                rows.find(h[f"{side}_host"], h[f"{side}_rank"])
    order, number, lane_of, lanes = rows.layout()
    starts = [t[0] for t in times] + [h["send_ptp_ns"] for h in hops if h["send_ptp_ns"] is not None]
    origin = min(starts, default=0)

    verdicts = fault_verdicts(report)
    row_out = [_row(rows.keys[k], lanes[n], verdicts, rows) for n, k in enumerate(order)]
    span_out = []
    for i, s in enumerate(spans):
        start, end, end_stamped = times[i]
        row = row_out[number[row_of[i]]]
        span_out.append(_span(s, number[row_of[i]], lane_of[i], start - origin, end - origin, end_stamped,
                              row["label"]))

    def place(span_id: str, host: str, rank: int | None, t: int | None) -> Place | None:
        if t is None:
            return None
        i = by_id.get(span_id)
        if i is not None:
            return (number[row_of[i]], lane_of[i], t - origin)
        return (number[rows.find(host, rank)], 0, t - origin)

    hop_out, undrawn_hops = [], 0
    for h in hops:
        a = place(h["send_span"], h["send_host"], h["send_rank"], h["send_ptp_ns"])
        b = place(h["recv_span"], h["recv_host"], h["recv_rank"], h["recv_ptp_ns"])
        if a is None or b is None:
            undrawn_hops += 1
            continue
        kind = "p2p" if h.get("kind") == "p2p" else "hop"
        key = colour_key(h)
        hop_out.append({"a": a, "b": b, "kind": kind, "c": key, "enc": f"{key} kind-{kind}",
                        "method": h["decision"]["method"], "outcome": h["outcome"], "tip": hop_tip(h, kind, origin)})

    coll_out, undrawn_colls = [], 0
    for c in colls:
        drawn = _collective(c, by_id, spans, times, row_of, lane_of, number, origin)
        if drawn is None:
            undrawn_colls += 1
        else:
            coll_out.append(drawn)

    used = {tok for item in (*span_out, *hop_out, *coll_out, *row_out) for tok in item["enc"].split()}
    return {
        "origin_ns": origin,
        "open": _steps_view(spans, times, origin),
        "rows": row_out,
        "spans": span_out,
        "hops": hop_out,
        "collectives": coll_out,
        "colours": {k: v[1] for k, v in LEGEND.items()},
        "legend": [k for k in LEGEND if k in used],
        "max_spans": max_spans,
        "cut": {"spans": (len(spans), report.spans), "hops": (len(hops), report.hops),
                "collectives": (len(colls), len(report.collectives_kept)),
                "undrawn_hops": undrawn_hops, "undrawn_collectives": undrawn_colls},
    }


def _steps_view(spans: list[dict[str, Any]], times: list[tuple[int, int, bool]], origin: int) -> list[int] | None:
    """[first, last] ns from the origin of the drawn training steps (``torch.step`` spans, with their bounds):
    the view the page opens on, rather than the whole trace, whose clock check ran seconds before them.
    None without step spans (the page opens on everything)."""
    lo = hi = None
    for s, (start, end, _) in zip(spans, times, strict=True):
        if s["name"] != STEP_SPAN:
            continue
        a = start - (s["start_uncertainty_ns"] or 0) - origin
        b = end + (s["end_uncertainty_ns"] or 0) - origin
        lo = a if lo is None else min(lo, a)
        hi = b if hi is None else max(hi, b)
    return None if lo is None or hi is None else [lo, hi]


def _row(row: dict[str, Any], lanes: int, verdicts: dict[tuple[str, int | None], str], rows: _Rows) -> dict[str, Any]:
    host, rank, clock = row["host"], row["rank"], row["clock"]
    if rank is not None:
        label = f"rank {rank} · {host}"
    else:  # the clock names the row only where the host has several
        label = f"{host} · {clock or 'no clock'}" if len(rows.rankless[host]) > 1 else host
    verdict = verdicts.get((host, rank))
    return {"label": label, "host": host, "rank": rank, "clock": clock, "lanes": lanes, "verdict": verdict,
            "enc": f"row-{verdict}" if verdict else ""}


def _span(s: dict[str, Any], row: int, lane: int, start: int, end: int, end_stamped: bool,
          where: str) -> dict[str, Any]:
    su = s["start_uncertainty_ns"] if s["stamped"] else None
    eu = s["end_uncertainty_ns"] if end_stamped else None
    bounds = [u for u in (su, eu) if u is not None]
    enc = ["span-stamped" if s["stamped"] else "span-unstamped"]
    if any(u < UNCERTAINTY_SATURATED for u in bounds):
        enc.append("whisker")
    if any(u >= UNCERTAINTY_SATURATED for u in bounds):
        enc.append("whisker-saturated")
    op, group = s.get("op"), s.get("group")
    label = f"{op} [{group}]" if op and group else (op or s["name"])
    return {"id": s["span_id"], "row": row, "lane": lane, "s": start, "e": end, "su": su, "eu": eu,
            "name": s["name"], "label": label, "enc": " ".join(enc), "tip": span_tip(s, where, start, end, su, eu)}


def _collective(c: dict[str, Any], by_id: dict[str, int], spans: list[dict[str, Any]],
                times: list[tuple[int, int, bool]], row_of: list[RowKey], lane_of: dict[int, int],
                number: dict[RowKey, int], origin: int) -> dict[str, Any] | None:
    """A collective's marks: each drawn member's start, the last arriver's, the band between."""
    members: list[Place] = []
    last: Place | None = None
    want = c.get("last_arriver") or {}
    for m in c["members"]:
        i = by_id.get(m["span_id"])
        if i is None:
            continue
        p = (number[row_of[i]], lane_of[i], times[i][0] - origin)
        members.append(p)
        if want and m["rank"] == want.get("rank") and m["host"] == want.get("host"):
            last = p
    if not members:
        return None
    key = colour_key(c)
    enc = [key, "collective"]
    if last is not None:
        enc.append("last-arriver")
    missing = list(c.get("missing_ranks") or [])
    if missing:
        enc.append("collective-incomplete")
    first = min(p[2] for p in members)
    end = last[2] if last is not None else max(p[2] for p in members)
    arrived = f"last arriver rank {want.get('rank')} ({want.get('host')}) at {relative(end)}" if last else \
        "last arriver not drawn"
    tip = (f"{c['op']} group {c['group']} seq {c['seq']}: {len(c['members'])} of {len(c['ranks'])} ranks"
           f"{'' if not missing else ', missing ranks ' + ', '.join(map(str, missing))}\n"
           f"{arrived}; first start {relative(first)}, skew {bound_text(end - first, bare=True)}\n"
           f"every start before every end: {c['outcome']} by {c['decision']['method']}")
    return {"members": members, "last": last, "t0": first, "t1": end, "c": key, "enc": " ".join(enc),
            "method": c["decision"]["method"], "outcome": c["outcome"], "missing": missing,
            "label": f"{c['op']} [{c['group']}] #{c['seq']}", "tip": tip}
