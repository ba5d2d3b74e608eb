"""The hang report: per process group, the wavefront -- which rank hung, in which collective
(spec/analysis.md §1.4; the JSON's ``hang``, §6.1).

Decided from the facts hangfacts.py gathered (merged across partitions by merge.py), per (job, group):

- each rank with spans in the group has a *next* collective: the one after its last completed op, or, with
  none completed, its lowest span's; the lowest of them is the **wavefront** when a rank got past it (it
  ran) or some rank has a span in it; otherwise every rank with spans completed every collective it shows;
- each expected rank is then *completed* (it got past it), *pending* in it, *failed* in it (``error``) or
  *never entered* it: a suspect, with its last completed op, the ops its ring overwrote, or no spans;
- the verdict: ``spans_missing`` when a rank completed it and its claim is "every start precedes every end"
  (then every rank joined it: the missing spans are lost, not hung); else ``hang`` when a rank is pending
  in it or never entered it; else ``failed``;
- *since*: the latest start reading among the pending ranks, with its bound;
- the ranks' last events around it (a pending rank's entry, a failed rank's failure, a suspect's last
  completion) in reading order, each decided against the one before by ``order.decide``: physics where the
  bounds are disjoint (one host's readings by their clock domain, clockdomain.py), else "cannot tell". Two
  ranks' Lamport counters are compared only through a recorded merge (§1.3) and none joins these events
  (a merge comes with a completion), so their counters are left out; SVC likewise;
- every time names the verdict the fault ledger gave its clock (§4), when it gave one.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..clocks.leapseconds import tai_to_utc_ns, utc_to_tai_ns
from .claims import ALL, NOT_COMPLETED, SHAPES
from .clockdomain import relative_gap
from .events import KIND_END, KIND_START, NO_STAMP, Event, JobKey, SpanRecord, Stamp
from .faults import HostFault
from .groupkey import parse_key
from .hangfacts import PENDING, GroupFacts, HangFacts, RankFacts, seq_of
from .order import Decision, Method, decide, physics_silence
from .topology import Topology, parse_topology

__all__ = ["MAX_NAMED", "MAX_ORDER", "hang_report"]

#: Ranks named per list of a wavefront (completed, pending, failed, never entered); the counts cover all.
MAX_NAMED = 1024
#: Last events ordered per wavefront: the suspects' first, then the failed ranks', then the latest entries.
MAX_ORDER = 64
_VERDICT_ORDER = {"hang": 0, "failed": 1, "spans_missing": 2}

Verdicts = dict[tuple[str, "int | None"], str]
#: A rank's span in the report: its global rank (the group key's, where the span names none) and the span.
Member = tuple[int, SpanRecord]


def hang_report(facts: HangFacts, topology: dict[str, Any] | None, faults: list[HostFault]) -> dict[str, Any] | None:
    """The JSON's ``hang`` (spec/analysis.md §6.1): None when the input holds no wavefront, no rank missing from
    a group, no dump record and no listed point-to-point span."""
    verdicts: Verdicts = {}
    for f in faults:
        if verdicts.get((f.host, f.rank)) != "lying":
            verdicts[(f.host, f.rank)] = f.verdict
    topo = parse_topology(topology) if topology else Topology()
    groups = []
    for (job, group), g in facts.groups.items():
        row = _group(job, group, g, facts, topo, verdicts)
        if row is not None:
            groups.append(row)
    groups.sort(key=lambda r: (_VERDICT_ORDER.get(r["wavefront"]["verdict"], 3) if r["wavefront"] else 3,
                               r["job_id"] or "", r["restart"], r["group"]))
    if not groups and not facts.dumps_total and not facts.messages:
        return None
    return {"groups": groups, "dumps": _dumps(facts, verdicts), "p2p": _p2p(facts, verdicts),
            "dropped": dict(sorted((k, n) for k, n in facts.dropped.items() if n))}


# -- one group ----------------------------------------------------------------------------------------------
def _next(facts: RankFacts) -> int:
    return seq_of(facts.done) + 1 if facts.done is not None else seq_of(facts.open[0])


def _group(job: JobKey | None, group: str, g: GroupFacts, facts: HangFacts, topo: Topology,
           verdicts: Verdicts) -> dict[str, Any] | None:
    key = parse_key(group)
    ranks = g.ranks
    absent = key.size - len(ranks)
    wave = _wavefront_seq(ranks)
    if wave is None and not absent:
        return None
    no_spans = _first_absent(key.ranks(), ranks, MAX_NAMED) if absent else []
    return {
        "job_id": job[0] if job else None, "restart": job[1] if job else 0, "group": group, "size": key.size,
        "ranks_with_spans": len(ranks),
        "no_spans_in_group": {"count": absent, "ranks": no_spans},
        "no_spans_in_input": [r for r in no_spans if r not in facts.seen],
        "wavefront": None if wave is None else _wavefront(wave, key.ranks(), g, facts, topo, verdicts),
    }


def _wavefront_seq(ranks: dict[int, RankFacts]) -> int | None:
    if not ranks:
        return None
    low = min(_next(f) for f in ranks.values())
    if any(f.done is not None and seq_of(f.done) >= low for f in ranks.values()):
        return low  # a rank got past it: it ran
    entered = [seq_of(f.open[0]) for f in ranks.values() if f.open]  # every open span lies at low or above
    return min(entered) if entered else None


def _first_absent(expected: Any, ranks: dict[int, RankFacts], limit: int) -> list[int]:
    out = []
    for r in expected:
        if r not in ranks:
            out.append(r)
            if len(out) >= limit:
                break
    return out


def _wavefront(seq: int, expected: Any, g: GroupFacts, facts: HangFacts, topo: Topology,
               verdicts: Verdicts) -> dict[str, Any]:
    completed: list[int] = []
    pending: list[Member] = []
    failed: list[Member] = []
    suspects: list[tuple[int, RankFacts | None]] = []
    counts = dict.fromkeys(("completed", "pending", "failed", "never_entered"), 0)
    for r in expected:
        f = g.ranks.get(r)
        if f is not None and f.done is not None and seq_of(f.done) >= seq:
            counts["completed"] += 1
            if len(completed) < MAX_NAMED:
                completed.append(r)
        elif f is not None and f.open and seq_of(f.open[0]) == seq:
            s = f.open[0]
            stuck = pending if s.torch is not None and s.torch.completion == PENDING else failed
            counts["pending" if stuck is pending else "failed"] += 1
            if len(stuck) < MAX_NAMED:
                stuck.append((r, s))
        else:
            counts["never_entered"] += 1
            if len(suspects) < MAX_NAMED:
                suspects.append((r, f))
    ops = sorted({s.torch.op for _, s in (*pending, *failed) if s.torch is not None} |
                 {f.done.torch.op for f in g.ranks.values() if f.done is not None and f.done.torch is not None
                  and seq_of(f.done) == seq})
    op = ops[0] if ops else g.ops.get(seq)
    shape = SHAPES.get(op) if op is not None else None
    if counts["completed"] and shape == ALL:
        verdict = "spans_missing"
    elif counts["pending"] or counts["never_entered"]:
        verdict = "hang"
    else:
        verdict = "failed"
    since = max(pending, key=lambda m: (_reading(m[1].start, m[1].otel_start_ns), m[0]), default=None)
    order = _last_events(pending, failed, suspects, topo, verdicts)
    return {
        "seq": seq, "op": op, "ops_disagree": len(ops) > 1, "claim": shape, "verdict": verdict,
        "completed": {"count": counts["completed"], "ranks": completed},
        "pending": {"count": counts["pending"], "members": [_member(m, verdicts) for m in pending]},
        "failed": {"count": counts["failed"], "members": [_member(m, verdicts) for m in failed]},
        "never_entered": {"count": counts["never_entered"],
                          "ranks": [_suspect(r, f, facts, verdicts) for r, f in suspects]},
        "since": None if since is None else {"rank": since[0], "host": since[1].host,
                                             **_time(since[1].start, since[1].otel_start_ns, since[1], verdicts)},
        "order": order[0], "order_total": order[1],
    }


def _member(m: Member, verdicts: Verdicts) -> dict[str, Any]:
    rank, s = m
    t = s.torch
    assert t is not None
    return {"rank": rank, "host": s.host, "op": t.op, "seq": t.seq, "completion": t.completion,
            "span_id": s.span_id, "trace_id": s.trace_id, "error": s.error,
            "entered": _time(s.start, s.otel_start_ns, s, verdicts)}


def _suspect(rank: int, f: RankFacts | None, facts: HangFacts, verdicts: Verdicts) -> dict[str, Any]:
    done = f.done if f is not None else None
    ahead = seq_of(f.open[0]) if f is not None and f.open else None
    last = None
    if done is not None:
        event, stamp, raw = _last_of(done)
        t = done.torch
        assert t is not None
        last = {"op": t.op, "seq": t.seq, "completion": t.completion, "span_id": done.span_id,
                "trace_id": done.trace_id, "event": event, **_time(stamp, raw, done, verdicts)}
    host = done.host if done is not None else f.open[0].host if f is not None and f.open else facts.seen.get(rank)
    spans = "in_group" if f is not None else "elsewhere" if rank in facts.seen else "none"
    return {"rank": rank, "host": host, "spans": spans, "last_completed": last, "entered_later": ahead,
            "overwritten": facts.overwritten.get(rank, 0)}


def _last_of(s: SpanRecord) -> tuple[str, Stamp, int]:
    """A last completed op's last event: its end when that was a completion, else (``queued``, ``unfinished``:
    the call returned, the op's end is unknown) its start."""
    t = s.torch
    if t is not None and t.completion in NOT_COMPLETED:
        return "entered", s.start, s.otel_start_ns
    return "completed", s.end or NO_STAMP, s.otel_end_ns


# -- the last events, in reading order ----------------------------------------------------------------------
def _last_events(pending: list[Member], failed: list[Member], suspects: list[tuple[int, RankFacts | None]],
                 topo: Topology, verdicts: Verdicts) -> tuple[list[dict[str, Any]], int]:
    """The last events (module doc), at most MAX_ORDER, in reading order, and how many there were."""
    events: list[tuple[str, Stamp, int, int, SpanRecord]] = []  # what, stamp, its time, rank, span
    for r, f in suspects:
        if f is not None and f.done is not None:
            events.append((*_last_of(f.done), r, f.done))
    total = len(events) + len(failed) + len(pending)
    events = events[:MAX_ORDER // 2]
    for r, s in failed[:MAX_ORDER // 4]:
        events.append(("failed", s.end, s.otel_end_ns, r, s) if s.end is not None and s.end.ptp_ns is not None
                      else ("entered", s.start, s.otel_start_ns, r, s))
    latest = sorted(pending, key=lambda m: (-_reading(m[1].start, m[1].otel_start_ns), m[0]))
    events += [("entered", s.start, s.otel_start_ns, r, s) for r, s in latest[:MAX_ORDER - len(events)]]
    events.sort(key=lambda e: (_reading(e[1], e[2]), e[3], e[4].span_id))
    out: list[dict[str, Any]] = []
    before: Event | None = None
    for what, stamp, raw, rank, s in events:
        t = s.torch
        assert t is not None
        here = _event(what, stamp, raw, s)
        row = {"rank": rank, "host": s.host, "event": what, "op": t.op, "seq": t.seq,
               **_time(stamp, raw, s, verdicts), "after_previous": None}
        if before is not None:
            row["after_previous"] = _decided(before, here, topo)
        out.append(row)
        before = here
    return out, total


def _event(what: str, stamp: Stamp, raw: int, s: SpanRecord) -> Event:
    """The event as order.decide takes it, without the Lamport value and sketch: no recorded merge joins two
    ranks' last events (module doc), so their counters order nothing."""
    bare = msgspec.structs.replace(stamp, lts=None)
    return Event(KIND_START if what == "entered" else KIND_END, s.span_id, s.host, bare, None, raw)


def _decided(ea: Event, eb: Event, topo: Topology) -> dict[str, Any]:
    """order.decide on two last events; ``basis`` says which bound physics held them to: one host clock's
    relative bound (clockdomain.py) or their absolute ones; ``why`` why physics was silent."""
    d: Decision = decide(ea, eb, topo.extra_ns(ea.host, eb.host))
    out = d.to_dict()
    if d.method is Method.PHYSICS:
        sa, sb = ea.stamp, eb.stamp
        one_clock = sa.domain is not None and sb.domain is not None and sa.ptp_ns is not None and \
            sb.ptp_ns is not None and relative_gap(sa.ptp_ns, sa.domain, sb.ptp_ns, sb.domain) != 0
        out["basis"] = "clock_domain" if one_clock else "bounds"
    elif d.method is Method.UNDECIDED:
        out["why"] = physics_silence(ea.stamp, eb.stamp)
    return out


# -- times --------------------------------------------------------------------------------------------------
def _reading(stamp: Stamp | None, otel_ns: int) -> int:
    """A TAI reading to sort by: the TempoTrace one, else the OpenTelemetry (UTC) time taken to TAI."""
    return stamp.ptp_ns if stamp is not None and stamp.ptp_ns is not None else utc_to_tai_ns(otel_ns)


def _time(stamp: Stamp | None, otel_ns: int, s: SpanRecord, verdicts: Verdicts) -> dict[str, Any]:
    """An instant as the JSON gives it: TAI and UTC ns, the bound and quality of a TempoTrace reading (none for
    an OpenTelemetry time), and the fault ledger's verdict on the clock that read it."""
    if stamp is not None and stamp.ptp_ns is not None:
        tai = stamp.ptp_ns
        return {"tai_ns": tai, "utc_ns": tai_to_utc_ns(tai), "uncertainty_ns": stamp.uncertainty_ns,
                "quality": stamp.quality, "reading": "tempotrace", "clock_verdict": verdicts.get((s.host, s.rank))}
    return {"tai_ns": utc_to_tai_ns(otel_ns), "utc_ns": otel_ns, "uncertainty_ns": None, "quality": None,
            "reading": "opentelemetry", "clock_verdict": verdicts.get((s.host, s.rank))}


# -- dumps and point-to-point ---------------------------------------------------------------------------------
def _dumps(facts: HangFacts, verdicts: Verdicts) -> dict[str, Any]:
    listed = []
    for _, s in sorted(facts.dumps, key=lambda ps: (ps[1].rank is None, ps[1].rank or 0, ps[0])):
        d = s.dump
        assert d is not None
        listed.append({"rank": s.rank, "host": s.host, "reason": d.reason, "ops": d.ops, "pending": d.pending,
                       "overwritten": d.overwritten, "requested_by": d.requested_by, "span_id": s.span_id,
                       "trace_id": s.trace_id, "at": _time(s.start, s.otel_start_ns, s, verdicts)})
    return {"total": facts.dumps_total, "by_reason": dict(sorted(facts.dumps_by_reason.items())), "listed": listed,
            "overwritten": [{"rank": r, "ops": n} for r, n in sorted(facts.overwritten.items()) if n][:MAX_NAMED]}


def _p2p(facts: HangFacts, verdicts: Verdicts) -> dict[str, Any]:
    listed = []
    for _, kind, s in facts.messages:
        t = s.torch
        assert t is not None
        listed.append({"kind": kind, "op": t.op, "group": t.group, "src": t.src, "dst": t.dst, "tag": t.tag,
                       "p2p_seq": t.p2p_seq, "rank": s.rank, "host": s.host, "completion": t.completion,
                       "span_id": s.span_id, "trace_id": s.trace_id,
                       "started": _time(s.start, s.otel_start_ns, s, verdicts)})
    return {"unmatched_sends": facts.messages_by_kind["unmatched_send"],
            "pending_recvs": facts.messages_by_kind["pending_recv"], "listed": listed}

