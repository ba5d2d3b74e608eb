"""The hang report's lines, which open the text report: which rank hung, in which collective (spec/analysis.md
§1.4, §6).

Written from the JSON's ``hang`` (hang.py), so text and JSON say the same. Per group with a wavefront one
line that says it plainly (``HANG:``, ``FAILED:`` or ``SPANS MISSING:``), then per suspect its last
completed op, the ranks' last events in reading order with how each was ordered, the groups a rank left no
span in, the point-to-point spans listed, and the dumps seen. Every time carries its bound, and the fault
ledger's verdict where it named the clock that read it. Strings from the input (host, op, group, reason)
are shown through ``_terminal_text.shown``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from .._terminal_text import shown
from .html_text import bound_text
from .text_torch import duration

__all__ = ["TEXT_NAMED", "hang_lines", "headline", "jobs_named", "other_lines", "rank_list", "time_text"]

#: Ranks named in a line before "... (N in all)"; suspects, events, messages and dumps shown in detail.
TEXT_NAMED = 8
TEXT_DETAIL = 8

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_PREFIX = {"hang": "HANG", "failed": "FAILED", "spans_missing": "SPANS MISSING"}
#: Why physics could not order two last events (order.SILENCE_REASONS), in words.
_SILENT = {"no_reading": "a side has no TempoTrace reading", "policy_degrade": "a span's policy verdict was degrade",
           "unknown_quality": "a clock said UNKNOWN", "saturated_bound": "a bound is saturated",
           "overlap": "the bounds overlap"}


def rank_list(ranks: list[int], count: int) -> str:
    """"rank 2" / "ranks 0, 1, 3" / "ranks 0-1023" (runs of consecutive ranks), cut after TEXT_NAMED items."""
    runs: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        runs.append(str(ranks[i]) if j - i < 2 else f"{ranks[i]}-{ranks[j]}")
        if j - i == 1:
            runs.append(str(ranks[j]))
        i = j + 1
    text = ", ".join(runs[:TEXT_NAMED]) + (" ..." if len(runs) > TEXT_NAMED or count > len(ranks) else "")
    more = f" ({count:,} in all)" if count > len(ranks) or len(runs) > TEXT_NAMED else ""
    return ("rank " if count == 1 else "ranks ") + text + more


def time_text(t: dict[str, Any], rank: int | None, host: str | None) -> str:
    """An instant: UTC time of day to the µs, its bound, and the clock's verdict where the ledger gave one."""
    s, frac = divmod(t["utc_ns"], 1_000_000_000)
    when = (_EPOCH + timedelta(seconds=s)).strftime("%H:%M:%S") + f".{frac // 1000:06d} UTC"
    if t["uncertainty_ns"] is None:
        when += " (OpenTelemetry time, no bound)"
    elif t["quality"] == "UNKNOWN":  # no synchronisation: whatever bound it wrote, it claimed none
        when += " (clock UNKNOWN: no bound)"
    else:
        when += " " + bound_text(t["uncertainty_ns"])
    verdict = t.get("clock_verdict")
    if verdict:
        who = f"rank {rank}'s clock" if rank is not None else "the clock"
        when += (f" [{who} ({shown(host or '?')}) is {verdict.upper()} (clock faults, below): this time cannot be "
                 "trusted]")
    return when


def _rank(row: dict[str, Any]) -> str:
    host = row.get("host")
    return f"rank {row['rank']}" + (f" ({shown(host)})" if host else "")


def _what(w: dict[str, Any], group: dict[str, Any], jobs: bool) -> str:
    op = shown(w["op"]) if w["op"] else "collective"
    job = f" in job {shown(group['job_id'] or '(none)')}" + (f" (restart {group['restart']})" if group["restart"]
                                                              else "") if jobs else ""
    return f"{op} #{w['seq']} of group {shown(group['group'])}{job}"


def headline(group: dict[str, Any], jobs: bool) -> str:
    """The line that says a wavefront plainly: HANG, FAILED or SPANS MISSING, the collective, who is where."""
    w = group["wavefront"]
    what = _what(w, group, jobs)
    ne, pe, fa, co = w["never_entered"], w["pending"], w["failed"], w["completed"]
    if w["verdict"] == "spans_missing":
        return (f"SPANS MISSING: {rank_list([r['rank'] for r in ne['ranks']], ne['count'])} never entered {what}, "
                f"yet {rank_list(co['ranks'], co['count'])} completed it: it completes only once every rank joined, "
                "so these spans are missing from the input (not a hang)")
    parts = []
    if ne["count"]:
        named = ne["ranks"]
        if len(named) == 1:
            who = _rank(named[0])
            absent = named[0]["spans"] == "none"
        else:
            who, absent = rank_list([r["rank"] for r in named], ne["count"]), False
        parts.append(f"{who} never entered {what}"
                     + (f" (no spans from rank {named[0]['rank']} in the input)" if absent else ""))
    for rows, said in ((pe, "pending"), (fa, "failed")):
        if rows["count"]:
            ranks = rank_list([m["rank"] for m in rows["members"]], rows["count"])
            it = "in it" if parts else f"in {what}"
            line = f"{ranks} {said} {it}"
            if said == "pending" and w["since"] is not None:
                line += " since " + time_text(w["since"], w["since"]["rank"], w["since"]["host"])
            if said == "failed":
                line += " (status ERROR)"
            parts.append(line)
    if co["count"]:
        parts.append(f"{rank_list(co['ranks'], co['count'])} completed it")
    return f"{_PREFIX[w['verdict']]}: " + "; ".join(parts)


def _suspect_lines(w: dict[str, Any], group: dict[str, Any]) -> list[str]:
    out = []
    for row in w["never_entered"]["ranks"][:TEXT_DETAIL]:
        last = row["last_completed"]
        if row["spans"] == "none":
            said = f"no spans from rank {row['rank']} in the input"
        elif last is not None:
            what, at = f"{shown(last['op'])} #{last['seq']}", time_text(last, row["rank"], row["host"])
            said = f"last completed {what} at {at}" if last["event"] == "completed" else \
                f"last got past {what} ({shown(last['completion'])}: no completion seen), entered at {at}"
        elif row["spans"] == "elsewhere":
            said = f"no span in group {shown(group['group'])} (it left spans elsewhere in the input)"
        else:
            said = "no completed op of the group in the input"
        if row["entered_later"] is not None:
            said += f"; it entered #{row['entered_later']} instead: its collectives do not follow the others'"
        if row["overwritten"]:
            said += (f"; its ring overwrote {row['overwritten']:,} ops unexported: its history before them is "
                     "incomplete" + (" (its last completed op is unknown)" if last is None else ""))
        out.append(f"  {_rank(row) if row['spans'] != 'none' else 'rank ' + str(row['rank'])}: {said}")
    return out


def _order_lines(w: dict[str, Any]) -> list[str]:
    events = w["order"]
    if len(events) < 2:
        return []
    out = ["  last events in reading order (ordered as edges are: physics only where the bounds are disjoint, "
           "else cannot tell):"]
    for e in events[:TEXT_DETAIL]:
        at = time_text(e, e["rank"], e["host"])
        head = f"{_rank(e)} {e['event']} {shown(e['op'])} #{e['seq']} at {at}"
        d = e["after_previous"]
        if d is None:
            out.append(f"    {head}")
        elif d["method"] == "physics":
            later = "later" if d["relation"] == "before" else "EARLIER"
            bound = "one host clock: {} beyond the relative bound" if d.get("basis") == "clock_domain" else \
                "{} beyond the bounds"
            out.append(f"    then {head}: {later} by physics ({bound.format(duration(d['gap_ns']))})")
        elif d["method"] == "undecided":
            out.append(f"    then {head}: cannot tell ({_SILENT.get(d.get('why', ''), 'the stamps do not say')})")
        else:
            out.append(f"    then {head}: {d['relation']} by {d['method']}")
    if w["order_total"] > len(events[:TEXT_DETAIL]):
        out.append(f"    ... ({w['order_total']:,} ranks' last events; --json: hang.groups[].wavefront.order)")
    return out


def _missing_ranks_line(group: dict[str, Any]) -> str | None:
    none = group["no_spans_in_input"]
    if not none or group["wavefront"] is not None:
        return None
    return (f"MISSING RANKS: group {shown(group['group'])} expects {rank_list(none, len(none))}: no spans from "
            f"{'it' if len(none) == 1 else 'them'} in the input; the group's other ranks completed every collective "
            "the input holds")


def _p2p_lines(p2p: dict[str, Any]) -> list[str]:
    out = []
    for m in p2p["listed"][:TEXT_DETAIL]:
        where = f"[group {shown(m['group'])}] tag {m['tag']} #{m['p2p_seq']}"
        started = time_text(m["started"], m["rank"], m["host"])
        if m["kind"] == "unmatched_send":
            out.append(f"P2P: {_rank(m)} {shown(m['op'])} to rank {m['dst']} {where}, started {started}: no matching "
                       f"receive in the input (send completion: {shown(m['completion'])})")
        else:
            src = "any source" if m["src"] is None else f"rank {m['src']}"
            out.append(f"P2P: {_rank(m)} {shown(m['op'])} from {src} {where} pending since {started}")
    listed = p2p["unmatched_sends"] + p2p["pending_recvs"]
    if listed > len(p2p["listed"][:TEXT_DETAIL]):
        out.append(f"  ... ({p2p['unmatched_sends']:,} unmatched sends, {p2p['pending_recvs']:,} pending receives; "
                   "--json: hang.p2p lists the first 1,024)")
    return out


def _dump_lines(dumps: dict[str, Any]) -> list[str]:
    if not dumps["total"]:
        return []
    rows = []
    for d in dumps["listed"][:TEXT_DETAIL]:
        asked = f" asked by rank {d['requested_by']}" if d["requested_by"] is not None else ""
        rows.append(f"rank {d['rank']} {shown(d['reason'])}{asked} ({d['ops']:,} ops, {d['pending']:,} pending)")
    more = " ..." if dumps["total"] > len(rows) else ""
    out = [f"  dumps seen: {dumps['total']:,}: " + ", ".join(rows) + more]
    over = dumps["overwritten"]
    if len(over) == 1:
        out.append(f"  rank {over[0]['rank']}'s ring overwrote {over[0]['ops']:,} ops unexported: its history before "
                   "them is incomplete (a last completed op may be unknown)")
    elif over:
        named = ", ".join(f"rank {o['rank']}: {o['ops']:,}" for o in over[:TEXT_NAMED])
        out.append(f"  rings overwrote ops unexported ({named}{' ...' if len(over) > TEXT_NAMED else ''}): their "
                   "histories before them are incomplete (a last completed op may be unknown)")
    return out


def jobs_named(hang: dict[str, Any]) -> bool:
    """Whether lines name each group's job: only where the groups belong to several."""
    return len({(g["job_id"], g["restart"]) for g in hang["groups"]}) > 1


def other_lines(hang: dict[str, Any]) -> list[str]:
    """The lines after the wavefronts': ranks missing from a group, point-to-point spans, the dumps seen."""
    out = [line for g in hang["groups"] if g["wavefront"] is None for line in [_missing_ranks_line(g)] if line]
    out += _p2p_lines(hang["p2p"])
    if not any(g["wavefront"] is not None for g in hang["groups"]) and hang["dumps"]["total"]:
        out.append("no hang found: every rank with spans completed every collective the input holds")
    out += _dump_lines(hang["dumps"])
    if hang["dropped"]:
        out.append("  the hang report is partial: its caps left out " + ", ".join(
            f"{n:,} {k}" for k, n in hang["dropped"].items()) + " (spec/analysis.md §1.4)")
    return out


def hang_lines(hang: dict[str, Any] | None) -> list[str]:
    """The lines that open the text report; none when ``hang`` is None (nothing to say)."""
    if hang is None:
        return []
    out: list[str] = []
    jobs = jobs_named(hang)
    for group in hang["groups"]:
        w = group["wavefront"]
        if w is not None:
            out.append(headline(group, jobs))
            out += _suspect_lines(w, group)
            out += _order_lines(w)
    return out + other_lines(hang)
