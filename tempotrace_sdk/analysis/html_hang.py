"""The hang banner that opens the HTML report: which rank hung, in which collective (spec/analysis.md §6.3).

The text report's opening lines (text_hang.py, from the JSON's ``hang``), then per wavefront a table of the
ranks that did not get past it: each one's state (pending, failed, never entered, unknown), the time it entered or
its last completed op, and its clock's verdict when the fault ledger named it. Data attributes carry the
JSON's values (``data-verdict``, ``data-group``, ``data-seq``, ``data-rank``, ``data-state``) for tests and
scripts. Strings from the input are escaped by ``html.escape``; the ones a person reads are shown as the text
report shows them (``_terminal_text.shown``), so a bidirectional override in a host name cannot reorder a row.
"""

from __future__ import annotations

import html
from typing import Any

from .._terminal_text import shown
from .text_hang import headline, jobs_named, other_lines, time_text

__all__ = ["hang_section"]


def _e(value: object) -> str:
    return html.escape(str(value))


def _when(t: dict[str, Any]) -> str:
    """The time as the text gives it; a flagged clock is marked beside it by ``_row``."""
    return time_text({**t, "clock_verdict": None}, None, None)


def _row(rank: int, host: str | None, state: str, said: str, verdict: str | None) -> str:
    flag = f' <span class="flag {verdict}">{verdict.upper()} clock</span>' if verdict else ""
    return (f'<tr data-rank="{rank}" data-state="{state}"><td>rank {rank}</td><td>{_e(shown(host or ""))}</td>'
            f"<td>{state.replace('_', ' ')}</td><td>{_e(said)}{flag}</td></tr>")


def _table(group: dict[str, Any]) -> str:
    w = group["wavefront"]
    rows = []
    for state in ("pending", "failed"):
        for m in w[state]["members"]:
            t = m["entered"]
            rows.append(_row(m["rank"], m["host"], state, "entered " + _when(t), t["clock_verdict"]))
    for s in w["never_entered"]["ranks"]:
        last = s["last_completed"]
        if s["spans"] == "none":
            said, verdict = "no spans from this rank in the input", None
        elif last is not None:
            said = f"last {last['event']} {last['op']} #{last['seq']} at {_when(last)}"
            verdict = last["clock_verdict"]
        else:
            said, verdict = "no completed op of the group in the input", None
        rows.append(_row(s["rank"], s["host"], "never_entered", said, verdict))
    for rank in w["unknown"]["ranks"]:
        rows.append(_row(rank, None, "unknown", "the caps left out the spans that say where it is", None))
    more = sum(w[k]["count"] for k in ("pending", "failed", "never_entered", "unknown")) - len(rows)
    tail = f'<tr><td colspan="4">… and {more:,} more ranks (the JSON lists the first 1,024 of each)</td></tr>' \
        if more > 0 else ""
    return (f'<table class="hang-ranks" data-group="{_e(group["group"])}" data-seq="{w["seq"]}">'
            "<tr><th>Rank</th><th>Host</th><th>State</th><th>When</th></tr>" + "".join(rows) + tail + "</table>")


def hang_section(hang: dict[str, Any] | None) -> str:
    """The banner's HTML, or "" when the report has no hang to tell (``hang`` None)."""
    if hang is None:
        return ""
    heads = [g for g in hang["groups"] if g["wavefront"] is not None]
    verdict = heads[0]["wavefront"]["verdict"] if heads else "none"
    parts = [f'<section id="hang" data-verdict="{verdict}">']
    jobs = jobs_named(hang)
    for g in heads:
        w = g["wavefront"]
        parts.append(f'<p class="hang-line {w["verdict"]}" data-verdict="{w["verdict"]}" '
                     f'data-group="{_e(g["group"])}" data-seq="{w["seq"]}" data-op="{_e(w["op"] or "")}">'
                     f"<strong>{_e(headline(g, jobs))}</strong></p>")
        parts.append(_table(g))
    parts += [f'<p class="hang-note">{_e(line.strip())}</p>' for line in other_lines(hang)]
    parts.append("</section>")
    return "\n".join(parts)
