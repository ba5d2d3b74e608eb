"""The hang report: per process group, the wavefront -- which rank hung, in which collective
(spec/analysis.md §1.4; the JSON's ``hang``, §6.1).

Decided from the facts hangfacts.py gathered (merged across partitions by merge.py), per (job, group):

- each rank with spans in the group has a *next* collective: the one after its last got-past op, or, with
  none, its lowest span's; the lowest of them is the **wavefront** when a rank got past it (it ran) or
  some rank has a span in it; otherwise every rank with spans got past every collective it shows;
- each expected rank is then *completed* (a completion seen at or above it), *queued* (it got past it, no
  completion seen: ``queued``, ``unfinished``), *pending* in it, *failed* in it (``error``), *unknown* (a cap
  left out where it is) or *never entered* it: a suspect, with its last got-past op, the ops its ring
  overwrote, or no spans. Only the ranks with spans are walked; the others are counted, and the first of
  them listed lazily, so a key naming a million ranks costs what its spans cost;
- the verdict: ``spans_missing`` when a rank completed an op at or above it whose claim is "every start
  precedes every end" (then every rank got past it: the missing spans are lost, not hung); else ``hang``
  when a rank is pending in it, or a rank never entered it while others wait (queued) or failed in it; else
  ``failed`` when ranks failed in it; else ``spans_stop``: ranks never entered it that the others completed,
  and nobody waits in it (their later spans are missing, or they stopped outside the group's collectives);
- *since*: the latest start reading among the pending ranks whose clock the fault ledger trusts (among all
  when it trusts none), with its bound;
- the ranks' last events around it (a pending rank's entry, a failed rank's failure, a suspect's last
  got-past op) in reading order, each decided against the one before by ``order.decide``: physics where the
  bounds are disjoint (one host's readings by their clock domain, clockdomain.py), else "cannot tell"; and
  "cannot tell" whenever either side's clock is one the ledger calls lying or suspect (its bound is not
  what it claims). Two ranks' Lamport counters are compared only through a recorded merge (§1.3) and none
  joins these events (a merge comes with a completion), so their counters are left out; SVC likewise;
- every time names the verdict the fault ledger gave its clock (§4), when it gave one.

Decided once per finished report: the answer is kept with the facts (``HangFacts.decided``) until they
change, and the outputs share it (read it, do not change it).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Container, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from ..clocks.leapseconds import tai_to_utc_ns, utc_to_tai_ns
from .claims import NOT_COMPLETED, SHAPES
from .clockdomain import relative_gap
from .events import KIND_END, KIND_START, NO_STAMP, Event, JobKey, SpanRecord, Stamp
from .groupkey import GroupKey, parse_key
from .hangfacts import PENDING, GroupFacts, HangFacts, RankFacts, seq_of
from .html_text import fault_verdicts
from .order import UNDECIDED, Decision, Method, decide, physics_silence
from .topology import Topology, parse_topology

if TYPE_CHECKING:
    from .report import AnalysisReport

__all__ = ["MAX_NAMED", "MAX_ORDER", "STATES", "hang_report"]

#: Ranks named per list of a wavefront (one per state below); the counts cover all.
MAX_NAMED = 1024
#: Last events ordered per wavefront: the suspects' first, then the failed ranks', then the latest entries.
MAX_ORDER = 64
#: What an expected rank is at its group's wavefront (module doc).
STATES = ("completed", "queued", "pending", "failed", "unknown", "never_entered")
_VERDICT_ORDER = {"hang": 0, "failed": 1, "spans_stop": 2, "spans_missing": 3}
#: The fault ledger's verdicts (§4) under which a clock's readings order nothing, and the ``why`` they give.
_UNTRUSTED = {"lying": "lying_clock", "suspect": "suspect_clock"}

Verdicts = dict[tuple[str, "int | None"], str]
#: A rank's span in the report: its global rank (the group key's, where the span names none) and the span.
Member = tuple[int, SpanRecord]


def hang_report(report: AnalysisReport) -> dict[str, Any] | None:
    """The JSON's ``hang`` (spec/analysis.md §6.1): None when the input holds no wavefront, no rank missing from
    a group, no stale pending span, no dump record and no listed point-to-point span."""
    facts = report.hang_facts
    facts.settle()
    key = (facts.revision, id(report.faults), len(report.faults), id(report.topology))
    if facts.decided is None or facts.decided[0] != key:
        facts.decided = (key, _decide(facts, report.topology, fault_verdicts(report)))
    out: dict[str, Any] | None = facts.decided[1]
    return out


def _decide(facts: HangFacts, topology: dict[str, Any] | None, verdicts: Verdicts) -> dict[str, Any] | None:
    topo = parse_topology(topology) if topology else Topology()
    groups = []
    for (job, group), g in facts.groups.items():
        row = _group(job, group, g, facts, topo, verdicts)
        if row is not None:
            groups.append(row)
    groups.sort(key=lambda r: (_VERDICT_ORDER.get(r["wavefront"]["verdict"], 4) if r["wavefront"] else 4,
                               r["job_id"] or "", r["restart"], r["group"]))
    if not groups and not facts.dumps_total and not facts.messages:
        return None
    return {"groups": groups, "dumps": _dumps(facts, verdicts), "p2p": _p2p(facts, verdicts),
            "dropped": facts.dropped()}


# -- one group ----------------------------------------------------------------------------------------------
def _next(facts: RankFacts) -> int:
    return seq_of(facts.done) + 1 if facts.done is not None else seq_of(facts.open[0])


def _group(job: JobKey | None, group: str, g: GroupFacts, facts: HangFacts, topo: Topology,
           verdicts: Verdicts) -> dict[str, Any] | None:
    if not g.ranks:  # every row of it a cap left out: hang.dropped counts them
        return None
    key = parse_key(group)
    ranks = g.ranks
    present = sorted(ranks)
    absent = key.size - len(ranks)
    wave = _wavefront_seq(ranks)
    stale = [(r, s) for r in present for s in [ranks[r].stale] if s is not None]
    if wave is None and not absent and not stale:
        return None
    no_spans = list(itertools.islice(_absent(key, ranks), MAX_NAMED)) if absent else []
    return {
        "job_id": job[0] if job else None, "restart": job[1] if job else 0, "group": group, "size": key.size,
        "ranks_with_spans": len(ranks), "left_out_spans": g.rows_dropped,
        "no_spans_in_group": {"count": absent, "ranks": no_spans},
        "no_spans_in_input": [r for r in no_spans if (job, r) not in facts.seen],
        "stale_pending": {"count": len(stale),
                          "members": [_stale(m, ranks[m[0]], verdicts) for m in stale[:MAX_NAMED]]},
        "wavefront": None if wave is None else _wavefront(wave, job, key, g, present, facts, topo, verdicts),
    }


def _wavefront_seq(ranks: dict[int, RankFacts]) -> int | None:
    low = min(_next(f) for f in ranks.values())
    if any(f.done is not None and seq_of(f.done) >= low for f in ranks.values()):
        return low  # a rank got past it: it ran
    entered = [seq_of(f.open[0]) for f in ranks.values() if f.open]  # every open span lies at low or above
    return min(entered) if entered else None


def _absent(key: GroupKey, ranks: Container[int]) -> Iterator[int]:
    """The key's members with no row, ascending, generated as they are read (a key may name 2^20 ranks)."""
    members = heapq.merge(*(range(first, last + 1, step) for first, last, step in key.runs))
    return (r for r in members if r not in ranks)


def _state(f: RankFacts, seq: int) -> str:
    if f.done is not None and seq_of(f.done) >= seq:
        return "completed" if f.completed is not None and seq_of(f.completed) >= seq else "queued"
    if f.open and seq_of(f.open[0]) == seq:
        t = f.open[0].torch
        return "pending" if t is not None and t.completion == PENDING else "failed"
    return "unknown" if f.open_dropped else "never_entered"  # the open cap may have dropped its span here


def _wavefront(seq: int, job: JobKey | None, key: GroupKey, g: GroupFacts, present: list[int], facts: HangFacts,
               topo: Topology, verdicts: Verdicts) -> dict[str, Any]:
    counts = dict.fromkeys(STATES, 0)
    named: dict[str, list[int]] = {"completed": [], "queued": [], "unknown": [], "never_entered": []}
    stuck: dict[str, list[Member]] = {"pending": [], "failed": []}  # every one: since and the order read them all
    behind = 0  # ranks that never entered it with a last got-past op: their last events
    ops: set[str] = set()
    proof: Member | None = None
    for r in present:
        f = g.ranks[r]
        a = f.all_completed
        if a is not None and seq_of(a) >= seq and (proof is None or (seq_of(a), r) < (seq_of(proof[1]), proof[0])):
            proof = (r, a)
        state = _state(f, seq)
        counts[state] += 1
        if state in stuck:
            s = f.open[0]
            stuck[state].append((r, s))
            if s.torch is not None:
                ops.add(s.torch.op)
        elif len(named[state]) < MAX_NAMED:
            named[state].append(r)
        behind += state == "never_entered" and f.done is not None
        if f.done is not None and f.done.torch is not None and seq_of(f.done) == seq:
            ops.add(f.done.torch.op)
    absent = key.size - len(present)
    hidden = "unknown" if g.rows_dropped else "never_entered"  # a cap left out rows of the group: unknown
    counts[hidden] += absent
    if absent:
        named[hidden] = list(itertools.islice(heapq.merge(named[hidden], _absent(key, g.ranks)), MAX_NAMED))
    op = min(ops) if ops else g.ops.get(seq)
    shape = SHAPES.get(op) if op is not None else None
    pending, failed = stuck["pending"], stuck["failed"]
    if proof is not None:
        verdict = "spans_missing"
    elif counts["pending"] or ((counts["never_entered"] or counts["unknown"]) and (counts["failed"] or
                                                                                  counts["queued"])):
        verdict = "hang"
    else:
        verdict = "failed" if counts["failed"] else "spans_stop"
    since = max(pending, key=lambda m: (verdicts.get((m[1].host, m[1].rank)) is None,
                                        _reading(m[1].start, m[1].otel_start_ns), m[0]), default=None)
    suspects = [(r, g.ranks.get(r)) for r in named["never_entered"]]
    order = _last_events(pending, failed, suspects, topo, verdicts)
    return {
        "seq": seq, "op": op, "ops_disagree": len(ops) > 1, "claim": shape, "verdict": verdict,
        "completed": {"count": counts["completed"], "ranks": named["completed"]},
        "queued": {"count": counts["queued"], "ranks": named["queued"]},
        "pending": {"count": counts["pending"], "members": [_member(m, verdicts) for m in pending[:MAX_NAMED]]},
        "failed": {"count": counts["failed"], "members": [_member(m, verdicts) for m in failed[:MAX_NAMED]]},
        "never_entered": {"count": counts["never_entered"],
                          "ranks": [_suspect(job, r, f, facts, verdicts) for r, f in suspects]},
        "unknown": {"count": counts["unknown"], "ranks": named["unknown"]},
        "proof": None if proof is None else _proof(proof),
        "since": None if since is None else {"rank": since[0], "host": since[1].host,
                                             **_time(since[1].start, since[1].otel_start_ns, since[1], verdicts)},
        "order": order, "order_total": behind + counts["failed"] + counts["pending"],
    }


def _member(m: Member, verdicts: Verdicts) -> dict[str, Any]:
    rank, s = m
    t = s.torch
    assert t is not None
    return {"rank": rank, "host": s.host, "op": t.op, "seq": t.seq, "completion": t.completion,
            "span_id": s.span_id, "trace_id": s.trace_id, "error": s.error,
            "entered": _time(s.start, s.otel_start_ns, s, verdicts)}


def _stale(m: Member, f: RankFacts, verdicts: Verdicts) -> dict[str, Any]:
    """A pending span at or below its rank's last got-past op, and that op's seq."""
    assert f.done is not None
    return {**_member(m, verdicts), "got_past": seq_of(f.done)}


def _proof(m: Member) -> dict[str, Any]:
    """The completion that shows every rank got past the wavefront: an "all" op at or above it."""
    rank, s = m
    t = s.torch
    assert t is not None
    return {"rank": rank, "host": s.host, "op": t.op, "seq": t.seq, "span_id": s.span_id, "trace_id": s.trace_id}


def _suspect(job: JobKey | None, rank: int, f: RankFacts | None, facts: HangFacts,
             verdicts: Verdicts) -> dict[str, Any]:
    done = f.done if f is not None else None
    ahead = seq_of(f.open[0]) if f is not None and f.open else None
    last = None
    if done is not None:
        event, stamp, raw = _last_of(done)
        t = done.torch
        assert t is not None
        last = {"op": t.op, "seq": t.seq, "completion": t.completion, "span_id": done.span_id,
                "trace_id": done.trace_id, "event": event, **_time(stamp, raw, done, verdicts)}
    host = done.host if done is not None else f.open[0].host if f is not None and f.open else \
        facts.seen.get((job, rank))
    spans = "in_group" if f is not None else "elsewhere" if (job, rank) in facts.seen else "none"
    return {"rank": rank, "host": host, "spans": spans, "last_completed": last, "entered_later": ahead,
            "overwritten": facts.overwritten.get((job, rank), 0)}


def _last_of(s: SpanRecord) -> tuple[str, Stamp, int]:
    """A last got-past op's last event: its end when that was a completion, else (``queued``, ``unfinished``:
    the call returned, the op's end is unknown) its start."""
    t = s.torch
    if t is not None and t.completion in NOT_COMPLETED:
        return "entered", s.start, s.otel_start_ns
    return "completed", s.end or NO_STAMP, s.otel_end_ns


# -- the last events, in reading order ----------------------------------------------------------------------
def _last_events(pending: list[Member], failed: list[Member], suspects: list[tuple[int, RankFacts | None]],
                 topo: Topology, verdicts: Verdicts) -> list[dict[str, Any]]:
    """The last events (module doc), at most MAX_ORDER, in reading order."""
    events: list[tuple[str, Stamp, int, int, SpanRecord]] = []  # what, stamp, its time, rank, span
    for r, f in suspects:
        if f is not None and f.done is not None and len(events) < MAX_ORDER // 2:
            events.append((*_last_of(f.done), r, f.done))
    for r, s in failed[:MAX_ORDER // 4]:
        events.append(("failed", s.end, s.otel_end_ns, r, s) if s.end is not None and s.end.ptp_ns is not None
                      else ("entered", s.start, s.otel_start_ns, r, s))
    latest = heapq.nlargest(MAX_ORDER - len(events), pending,
                            key=lambda m: (_reading(m[1].start, m[1].otel_start_ns), -m[0]))
    events += [("entered", s.start, s.otel_start_ns, r, s) for r, s in latest]
    events.sort(key=lambda e: (_reading(e[1], e[2]), e[3], e[4].span_id))
    out: list[dict[str, Any]] = []
    before: tuple[Event, str | None] | None = None
    for what, stamp, raw, rank, s in events:
        t = s.torch
        assert t is not None
        here = (_event(what, stamp, raw, s), verdicts.get((s.host, s.rank)))
        row = {"rank": rank, "host": s.host, "event": what, "op": t.op, "seq": t.seq,
               **_time(stamp, raw, s, verdicts), "after_previous": None}
        if before is not None:
            row["after_previous"] = _decided(before, here, topo)
        out.append(row)
        before = here
    return out


def _event(what: str, stamp: Stamp, raw: int, s: SpanRecord) -> Event:
    """The event as order.decide takes it, without the Lamport value and sketch: no recorded merge joins two
    ranks' last events (module doc), so their counters order nothing."""
    bare = msgspec.structs.replace(stamp, lts=None)
    return Event(KIND_START if what == "entered" else KIND_END, s.span_id, s.host, bare, None, raw)


def _decided(a: tuple[Event, str | None], b: tuple[Event, str | None], topo: Topology) -> dict[str, Any]:
    """order.decide on two last events (each with its clock's verdict); ``basis`` says which bound physics held
    them to: one host clock's relative bound (clockdomain.py) or their absolute ones; ``why`` why physics was
    silent, or that a side's clock is one the fault ledger does not trust (then physics is not asked)."""
    (ea, va), (eb, vb) = a, b
    distrust = [_UNTRUSTED[v] for v in ("lying", "suspect") if v in (va, vb)]
    if distrust:
        return {**UNDECIDED.to_dict(), "why": distrust[0]}
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
    rings = sorted(facts.overwritten.items(), key=lambda kn: (kn[0][1], kn[0][0] is not None, kn[0][0] or ("", 0)))
    return {"total": facts.dumps_total, "by_reason": dict(sorted(facts.dumps_by_reason.items())),
            "pending": facts.dumps_pending, "listed": listed,
            "overwritten": [{"job_id": job[0] if job else None, "restart": job[1] if job else 0, "rank": rank,
                             "ops": n} for (job, rank), n in rings[:MAX_NAMED] if n]}


def _p2p(facts: HangFacts, verdicts: Verdicts) -> dict[str, Any]:
    listed = []
    for _, kind, s in facts.messages:
        t = s.torch
        assert t is not None
        listed.append({"kind": kind, "op": t.op, "group": t.group, "src": t.src, "dst": t.dst, "tag": t.tag,
                       "p2p_seq": t.p2p_seq, "rank": s.rank, "host": s.host, "completion": t.completion,
                       "ambiguous": t.ambiguous, "span_id": s.span_id, "trace_id": s.trace_id,
                       "started": _time(s.start, s.otel_start_ns, s, verdicts)})
    return {"unmatched_sends": facts.messages_by_kind["unmatched_send"],
            "pending_recvs": facts.messages_by_kind["pending_recv"], "listed": listed}
