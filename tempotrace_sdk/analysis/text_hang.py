"""The hang report's lines, which open the text report: which rank hung, in which collective (spec/analysis.md
§1.4, §6).

Written from the JSON's ``hang`` (hang.py), so text and JSON say the same. Per group with a wavefront one
line that says it plainly (``HANG:``, ``FAILED:``, ``SPANS STOP:`` or ``SPANS MISSING:``), then per suspect
its last got-past op, the ranks' last events in reading order with how each was ordered, the groups a rank
left no span in, the pending spans a rank got past (stale), the point-to-point spans listed, and the dumps
seen. Every time carries its bound, and the fault
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
_PREFIX = {"hang": "HANG", "failed": "FAILED", "spans_stop": "SPANS STOP", "spans_missing": "SPANS MISSING"}
#: Why physics could not order two last events (order.SILENCE_REASONS), in words.
_SILENT = {"no_reading": "a side has no TempoTrace reading", "policy_degrade": "a span's policy verdict was degrade",
           "unknown_quality": "a clock said UNKNOWN", "saturated_bound": "a bound is saturated",
           "overlap": "the bounds overlap", "lying_clock": "a side's clock is LYING (clock faults, below)",
           "suspect_clock": "a side's clock is SUSPECT (clock faults, below)"}


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
    return f"rank {'?' if row['rank'] is None else row['rank']}" + (f" ({shown(host)})" if host else "")


def _they(count: int, one: str, many: str) -> str:
    return one if count == 1 else many


def _what(w: dict[str, Any], group: dict[str, Any], jobs: bool) -> str:
    op = shown(w["op"]) if w["op"] else "collective"
    job = f" in job {shown(group['job_id'] or '(none)')}" + (f" (restart {group['restart']})" if group["restart"]
                                                              else "") if jobs else ""
    return f"{op} #{w['seq']} of group {shown(group['group'])}{job}"


def headline(group: dict[str, Any], jobs: bool) -> str:
    """The line that says a wavefront plainly: HANG, FAILED, SPANS STOP or SPANS MISSING, the collective, who
    is where."""
    w = group["wavefront"]
    what = _what(w, group, jobs)
    parts = _behind(w, what)
    if w["verdict"] == "spans_missing":
        return "SPANS MISSING: " + "; ".join(parts) + _proof_text(w)
    co, qu = w["completed"], w["queued"]
    if qu["count"]:
        parts.append(f"{rank_list(qu['ranks'], qu['count'])} queued it (the call returned; no completion seen)")
    if co["count"]:
        parts.append(f"{rank_list(co['ranks'], co['count'])} completed it")
    line = f"{_PREFIX[w['verdict']]}: " + "; ".join(parts)
    if w["verdict"] == "spans_stop":
        n = w["never_entered"]["count"] + w["unknown"]["count"]
        line += (": no rank waits in it, so " + _they(n, "its later spans are", "their later spans are") +
                 " missing from the input, or " + _they(n, "it", "they") + " stopped outside the group's "
                 "collectives (no hang in it)")
    return line


#: The wavefront's rows in the order the line says them (_behind, then headline).
LINE_ORDER = ("never_entered", "unknown", "pending", "failed", "queued", "completed")


def _all_others_named(w: dict[str, Any], state: str) -> bool:
    """Every rank the line names before ``state``'s row is named in full and no row follows it: ``state``'s
    ranks are then exactly the others."""
    i = LINE_ORDER.index(state)
    said = all(w[s]["count"] == len(w[s]["members"] if "members" in w[s] else w[s]["ranks"]) for s in LINE_ORDER[:i])
    return said and all(w[s]["count"] == 0 for s in LINE_ORDER[i + 1:])


def _behind(w: dict[str, Any], what: str) -> list[str]:
    """Who did not get past the wavefront: never entered, unknown, pending (since when), failed."""
    parts: list[str] = []
    ne = w["never_entered"]
    if ne["count"]:
        named = ne["ranks"]
        if len(named) == 1 and ne["count"] == 1:
            who = _rank(named[0])
            absent = named[0]["spans"] == "none"
        else:
            who, absent = rank_list([r["rank"] for r in named], ne["count"]), False
        parts.append(f"{who} never entered {what}"
                     + (f" (no spans from rank {named[0]['rank']} in the input)" if absent else ""))
    for rows, said in ((w["unknown"], "unknown"), (w["pending"], "pending"), (w["failed"], "failed")):
        if rows["count"]:
            named = rows["ranks"] if said == "unknown" else [m["rank"] for m in rows["members"]]
            ranks = rank_list(named, rows["count"])
            if parts and rows["count"] > len(named) and _all_others_named(w, said):
                ranks = f"the other {rows['count']:,} ranks"  # a wide group: the complement is what matters
            it = "it" if parts else what
            line = f"{ranks} {said} in {it}"
            if said == "unknown":
                line = f"{ranks}: unknown whether {_they(rows['count'], 'it', 'they')} entered {it} (a cap left out " \
                    "the spans that would say)"
            if said == "pending" and w["since"] is not None:
                line += " since " + time_text(w["since"], w["since"]["rank"], w["since"]["host"])
            if said == "failed":
                line += " (status ERROR)"
            parts.append(line)
    return parts


def _proof_text(w: dict[str, Any]) -> str:
    """Why the ranks behind got past the wavefront after all: a completed "all" op at or above it."""
    p = w["proof"]
    co = w["completed"]
    stale = w["pending"]["count"] + w["failed"]["count"]
    if w["claim"] == "all" and co["count"]:
        said = f", yet {rank_list(co['ranks'], co['count'])} completed it: it completes only once every rank joined"
    else:
        said = (f", yet {_rank(p)} completed {shown(p['op'])} #{p['seq']}, which completes only once every rank "
                f"joined it: every rank got past #{w['seq']}")
    if stale:
        return said + (", so the pending or failed spans are stale (written before the op completed) and the "
                       "later spans are missing from the input (not a hang)")
    return said + ", so these spans are missing from the input (not a hang)"


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
    ne = w["never_entered"]
    if ne["count"] > len(out):
        out.append(f"  ... ({ne['count']:,} ranks never entered it; --json: hang.groups[].wavefront.never_entered "
                   "lists the first 1,024)")
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
    line = (f"MISSING RANKS: group {shown(group['group'])} expects {rank_list(none, len(none))}: no spans from "
            f"{'it' if len(none) == 1 else 'them'} in the input; the group's other ranks got past every collective "
            "the input holds")
    if group["left_out_spans"]:
        line += f" (the caps left out {group['left_out_spans']:,} of the group's spans: some may be theirs)"
    return line


def _stale_line(group: dict[str, Any], jobs: bool) -> str | None:
    st = group["stale_pending"]
    if not st["count"]:
        return None
    m = st["members"]
    same = len({(x["op"], x["seq"]) for x in m}) == 1 and st["count"] == len(m)
    first = f"{shown(m[0]['op'])} #{m[0]['seq']}"
    where = first if same else f"collectives (first: {first})"
    job = f" in job {shown(group['job_id'] or '(none)')}" if jobs else ""
    n = st["count"]
    return (f"STALE PENDING: {rank_list([x['rank'] for x in m], n)} pending in {where} of group "
            f"{shown(group['group'])}{job}, yet {_they(n, 'it', 'each')} got past a collective at or above it "
            f"(#{m[0]['got_past']}): a dump taken before {_they(n, 'it', 'they')} went on, or seq numbers that "
            "restarted (uninstrument() then instrument()): a hang there cannot be told from seq numbers "
            "(spec/analysis.md §1.4)")


def _p2p_lines(p2p: dict[str, Any]) -> list[str]:
    out = []
    for m in p2p["listed"][:TEXT_DETAIL]:
        number = "" if m["p2p_seq"] is None else f" #{m['p2p_seq']}"  # (an any-source receive has none yet)
        where = f"[group {shown(m['group'])}] tag {m['tag']}{number}"
        started = time_text(m["started"], m["rank"], m["host"])
        if m["kind"] == "unmatched_send":
            out.append(f"P2P: {_rank(m)} {shown(m['op'])} to rank {m['dst']} {where}, started {started}: no matching "
                       f"receive in the input (send completion: {shown(m['completion'])})")
        else:
            src = "any source" if m["src"] is None else f"rank {m['src']}"
            out.append(f"P2P: {_rank(m)} {shown(m['op'])} from {src} {where} pending since {started}"
                       + (" (ambiguous: torch may have given it another message)" if m["ambiguous"] else ""))
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
        who = f"rank {d['rank']}" if d["rank"] is not None else f"rank ? ({shown(d['host'])})"
        rows.append(f"{who} {shown(d['reason'])}{asked} ({d['ops']:,} ops, {d['pending']:,} pending)")
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
    """The lines after the wavefronts': ranks missing from a group, stale pending spans, point-to-point spans,
    the dumps seen."""
    jobs = jobs_named(hang)
    out = [line for g in hang["groups"] if g["wavefront"] is None for line in [_missing_ranks_line(g)] if line]
    out += [line for g in hang["groups"] for line in [_stale_line(g, jobs)] if line]
    out += _p2p_lines(hang["p2p"])
    dumps = hang["dumps"]
    if not any(g["wavefront"] is not None for g in hang["groups"]) and dumps["total"]:
        stale = any(g["stale_pending"]["count"] for g in hang["groups"])
        if not dumps["pending"] and not stale:
            out.append("no hang found: every rank with spans completed every collective the input holds")
        elif not stale and not hang["p2p"]["pending_recvs"]:
            n = dumps["pending"]
            out.append(f"PENDING SPANS MISSING: the dumps say they wrote {n:,} pending {_they(n, 'op', 'ops')}, yet "
                       "the input holds no collective a rank did not get past: "
                       f"{_they(n, 'its span is', 'their spans are')} missing from the input")
    out += _dump_lines(dumps)
    if hang["dropped"]:
        out.append("  the hang report is partial: its caps left out " + ", ".join(
            f"{n:,} {'dump records' if k == 'overwritten' else 'spans'} ({k})" for k, n in hang["dropped"].items())
            + " (spec/analysis.md §1.4)")
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
