"""The known causal edges of a trace part, decided and counted (spec/analysis.md §1.2, §2, §4, §6.1).

``EdgeJudge`` takes each known edge a -> b, applies the ordering rules of
order.py (``physics_gap`` first, ``decide_logical`` when physics is silent)
and counts the outcome: in the report's EdgeCounts (by method, wrong, naive
view, why physics was silent) and, as clock-fault evidence, in the FaultLedger,
keyed by clock (host, and rank where spans carry one). Event and Decision
objects are built only when the logical rules must speak or a hop is kept
for rendering.

A torch message or collective claim these rules leave undecided waits for the
derived order of its trace (derived.py, §2.8): it is counted now, its decision
when the trace's structure is checked (``settle_p2p``; a claim's by
collectives.py through ``count_decision``).
Every matched message and claim joins that structure, however it was decided.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from .claims import Claim
from .clockdomain import claimed_bounds
from .events import KIND_END, KIND_SEND, KIND_START, NO_STAMP, Event, SpanRecord, Stamp, split_clock
from .faults import FaultLedger
from .memory import Sender
from .order import (
    CONSISTENT,
    UNDECIDED,
    Decision,
    Method,
    Relation,
    decide_logical,
    naive_order,
    physics_gap,
    physics_silence,
)
from .report import AnalysisReport
from .topology import Topology

if TYPE_CHECKING:
    from .derived import Derived, Settle

__all__ = ["EdgeJudge", "end_edge", "outcome_of"]

SERVER = 2
CONSUMER = 5
#: The sender of a hop whose client span is not in the input: never a ledger key (attributed=False).
UNKNOWN_SENDER = "?"


def end_edge(parent: SpanRecord, child: SpanRecord) -> bool:
    """Is "the child ended before its parent ended" known (§1.2)?

    Only inside one process, for a child started there (not remote-parented, not a SERVER or CONSUMER
    span), and only from what that process recorded: the end events' Lamport values when both carry
    one (one counter, strictly increasing per process), else the span end times, strictly. A child
    whose end was recorded after its parent's is an async leftover (a task or callback still running
    when the parent ended): no edge. Equal times prove nothing: no edge either."""
    if child.clock != parent.clock or child.remote is not None or child.kind == SERVER or child.kind == CONSUMER:
        return False
    ce, pe = child.end, parent.end
    if ce is None or pe is None:
        return False
    if ce.lts is not None and pe.lts is not None:
        return ce.lts < pe.lts
    return child.otel_end_ns < parent.otel_end_ns


def outcome_of(d: Decision) -> str:
    """A decision on a known edge (or claim) as the rendering records name it."""
    return "consistent" if d.relation in CONSISTENT else (
        "undecided" if d.relation is Relation.UNDECIDED else "contradiction")


def unmerged(s: SpanRecord) -> bool:
    """A receive span that records no merge of its sender's counter (remote.lts, no recv.lts): the
    receiver refused it (tt-ext §10.1), so Lamport orders nothing across that hop (spec §2.2)."""
    return s.remote is not None and s.recv_lts is None


def hop_send(s: SpanRecord, client: Sender | None) -> tuple[Stamp, str, str, bool]:
    """A hop's send event as the judge orders it: the receive span's remote record (degraded when the client
    span's policy said degrade), the sender's clock key and host, and whether the client span recorded a send
    with the record's Lamport value (matched). An unknown sender is never guessed: "?" reaches only the
    topology (whose unknown-host extra is the worst case) and the rendered record, never the fault ledger."""
    remote = s.remote
    assert remote is not None
    if client is None:
        return remote, UNKNOWN_SENDER, UNKNOWN_SENDER, False
    if client[4] and not remote.degraded:
        remote = msgspec.structs.replace(remote, degraded=True)
    return remote, client[1], client[2], any(lts == remote.lts for lts, _, _ in client[3])


class EdgeJudge:
    """Decides and counts known edges into ``report`` and ``ledger``."""

    def __init__(self, topology: Topology, report: AnalysisReport, derived: Derived | None = None) -> None:
        self.topology = topology
        self.derived = derived  # the trace structure matched messages and claims join (None: no derived order)
        # No racks and no default extra: every pair's extra is 0, skip the lookup.
        self.flat = not topology.racks and not topology.pairs and not topology.default_cross_rack_ns
        self.report = report
        self.counts = report.edges
        self.ledger = FaultLedger()
        self.ledger_edges = self.ledger.edges

    # -- the three kinds of known edge ----------------------------------------------
    def parent_child(self, parent: SpanRecord, s: SpanRecord) -> None:
        """parent start -> child start, and child end -> parent end where that is known."""
        self.parent_start(parent, s)
        if end_edge(parent, s):
            self.child_end(parent, s)

    def parent_start(self, parent: SpanRecord, s: SpanRecord) -> None:
        """parent start -> child start."""
        if not self._edge("parent_child", parent.start, s.start, parent, s, parent.otel_start_ns, s.otel_start_ns):
            before = parent.start_event()
            if unmerged(s):  # the remote parent's counter never reached s's clock (spec §2.2)
                before = msgspec.structs.replace(before, stamp=msgspec.structs.replace(before.stamp, lts=None))
            self._logical(before, s.start_event(), parent.clock, s.clock, True)

    def child_end(self, parent: SpanRecord, s: SpanRecord) -> None:
        """child end -> parent end (``end_edge`` says it is known)."""
        end, pend = s.end, parent.end
        assert end is not None and pend is not None
        if not self._edge("child_end", end, pend, s, parent, s.otel_end_ns, parent.otel_end_ns):
            self._logical(s.end_event(), parent.end_event(), s.clock, parent.clock, True)

    def hop(self, s: SpanRecord, client: Sender | None, keep: bool) -> dict[str, Any] | None:
        """send (the remote header) -> server span start; the rendering record when ``keep``."""
        rep = self.report
        remote, clock, host, matched = hop_send(s, client)
        rep.hops += 1
        if matched:
            rep.hops_matched += 1
        attributed = client is not None
        send = _Sender(host, clock)
        gap = self._edge("hop", remote, s.start, send, s, None, s.otel_start_ns, attributed)
        if gap == 0:
            sent = msgspec.structs.replace(remote, lts=None) if unmerged(s) else remote
            decision = self._logical(Event(KIND_SEND, s.parent_id, host, sent, s.remote_sketch, None),
                                     s.start_event(), clock, s.clock, attributed)
        elif not keep:
            return None
        else:
            decision = (Decision(Relation.BEFORE, Method.PHYSICS, 1.0, 0.0, gap) if gap > 0
                        else Decision(Relation.AFTER, Method.PHYSICS, 1.0, 0.0, -gap))
        return _hop_record(s, host, client, remote, decision, matched) if keep else None

    def collective(self, members: list[SpanRecord], claim: Claim, deferred: bool = False) -> None:
        """Count a collective's claim as one known edge (spec §1.3); its witnesses are clock-fault evidence.
        ``deferred``: its decision waits for the derived order (``count_decision`` counts it then).

        For the ledger each member clock takes part in the claim's pairs that involve it (a rank of a
        4-rank all-reduce in 6 of its 12 pairs), so a rate stays a share of pairs."""
        c = self.counts
        c.total += 1
        c.by_kind["collective"] = c.by_kind.get("collective", 0) + 1
        if claim.naive is not None and claim.naive >= 0:
            if claim.naive:
                c.naive_inversions += 1
            else:
                c.naive_ties += 1
        edges = self.ledger_edges
        starts, ends = set(claim.starts), set(claim.ends)
        for i in starts | ends:
            n = (len(ends) - (i in ends) if i in starts else 0) + (len(starts) - (i in starts) if i in ends else 0)
            clock = members[i].clock
            edges[clock] = edges.get(clock, 0) + n
        d = claim.decision
        method = d.method.value
        if d.method is not Method.PHYSICS:
            reason = claim.silence or "overlap"
            c.physics_silent[reason] = c.physics_silent.get(reason, 0) + 1
        if deferred:
            return
        if d.relation in CONSISTENT:
            c.decided[method] += 1
        elif d.relation is Relation.UNDECIDED:
            c.decided["undecided"] += 1
        else:
            c.wrong[method] += 1
            assert claim.worst is not None
            c.wrong_pair(members[claim.worst[0]].clock, members[claim.worst[1]].clock, method)
            for i, j, excess in claim.witnesses:
                a, b = members[i], members[j]
                if d.method is Method.PHYSICS:
                    end = b.end or NO_STAMP
                    self.ledger.physics_violation(a.clock, b.clock, excess, *claimed_bounds(
                        a.start.uncertainty_ns, a.start.domain, end.uncertainty_ns, end.domain))
                else:
                    self.ledger.lamport_violation(a.clock, b.clock)

    def p2p(self, send: SpanRecord | None, recv: SpanRecord, keep: bool) -> dict[str, Any] | None:
        """A torch message: the send event -> the receive's completion (spec §1.3); the record when ``keep``.

        The send event is the sender's carried record (``tempotrace.torch.remote.*`` on the receive span)
        when there is one, else the send span's start; the receive event is the receive span's end. Lamport
        values are used only when the receive recorded a merge (``recv.lts``); a record whose send span is
        not in the input (or is not the span the sequence numbers pair) blames no clock."""
        t = recv.torch
        assert t is not None
        rep = self.report
        remote = t.remote
        merged = t.recv_lts is not None
        end = recv.end or NO_STAMP
        if not merged and end.lts is not None:
            end = msgspec.structs.replace(end, lts=None)
        sender: SpanRecord | _Sender
        if remote is not None:
            rep.p2p.carried += 1
            stamp = remote if merged else msgspec.structs.replace(remote, lts=None)
            if send is not None and _made(send, t.remote_span, remote.lts):
                sender, attributed = send, True
                if send.degraded and not stamp.degraded:  # the send span's policy said degrade
                    stamp = msgspec.structs.replace(stamp, degraded=True)
            else:  # the sender's span is not in the input, or the record is another span's: blame nobody
                if send is not None:
                    rep.p2p.record_mismatch += 1
                sender, attributed = _Sender(UNKNOWN_SENDER, UNKNOWN_SENDER), False
            a = Event(KIND_SEND, t.remote_span or (send.span_id if send else ""), sender.host, stamp, None, None)
            raw_a = None
        elif send is not None:
            stamp = send.start if merged or send.start.lts is None else msgspec.structs.replace(send.start, lts=None)
            sender, attributed, raw_a = send, True, send.otel_start_ns
            a = Event(KIND_START, send.span_id, send.host, stamp, send.sketch, raw_a)
        else:
            return None  # a lone receive without its sender's record: no send event to order
        b = Event(KIND_END, recv.span_id, recv.host, end, t.recv_sketch, recv.otel_end_ns)
        gap = self._edge("p2p", stamp, end, sender, recv, raw_a, recv.otel_end_ns, attributed)
        # The pair joins the derived structure when both spans are in and any record is the send's own (§2.8).
        derived = self.derived if attributed and send is not None else None
        defer = False
        if gap == 0:
            decision = decide_logical(a, b)
            defer = decision.relation is Relation.UNDECIDED and derived is not None  # decided with its trace
            if not defer:
                self.count_decision(decision, sender.clock, recv.clock, attributed)
        elif not keep:
            decision = UNDECIDED  # physics decided it; nothing is rendered
        else:
            decision = (Decision(Relation.BEFORE, Method.PHYSICS, 1.0, 0.0, gap) if gap > 0
                        else Decision(Relation.AFTER, Method.PHYSICS, 1.0, 0.0, -gap))
        record = _p2p_record(recv, a, sender, attributed, stamp, end, decision, send is not None) if keep else None
        if derived is not None:
            assert send is not None
            derived.message(send, recv, self.settle_p2p(sender.clock, recv.clock, record) if defer else None)
        return record

    def settle_p2p(self, clock_a: str, clock_b: str, record: dict[str, Any] | None = None) -> Settle:
        """What counts a deferred message's derived decision, and puts it in its rendering record."""
        def settle(d: Decision, _witness: tuple[int, int] | None) -> None:
            self.count_decision(d, clock_a, clock_b, True)
            if record is not None:
                record["decision"], record["outcome"] = d.to_dict(), outcome_of(d)
        return settle

    # -- counting ------------------------------------------------------------------
    def _edge(self, kind: str, sa: Stamp, sb: Stamp, a: SpanRecord | _Sender, b: SpanRecord,
              raw_a: int | None, raw_b: int | None, attributed: bool = True) -> int:
        """Count a known edge a -> b and settle it by physics if physics can (§2.1). Returns the gap:
        0 when physics was silent and the caller must decide it with ``_logical``."""
        c = self.counts
        c.total += 1
        by_kind = c.by_kind
        by_kind[kind] = by_kind.get(kind, 0) + 1
        naive = naive_order(sa, raw_a, sb, raw_b)
        if naive is not None and naive >= 0:
            if naive:
                c.naive_inversions += 1
            else:
                c.naive_ties += 1
        ca, cb = a.clock, b.clock
        if attributed:
            edges = self.ledger_edges  # FaultLedger.edge, inline: this runs for every edge
            edges[ca] = edges.get(ca, 0) + 1
            if cb != ca:
                edges[cb] = edges.get(cb, 0) + 1
        extra = 0 if self.flat or a.host == b.host else self.topology.extra_ns(a.host, b.host)
        gap = physics_gap(sa, sb, extra)
        if gap > 0:
            c.decided["physics"] += 1
        elif gap < 0:
            c.wrong["physics"] += 1
            if attributed:
                c.wrong_pair(ca, cb, "physics")
                self.ledger.physics_violation(ca, cb, -gap, *claimed_bounds(sa.uncertainty_ns, sa.domain,
                                                                             sb.uncertainty_ns, sb.domain))
            else:
                c.unattributed += 1
        else:
            reason = physics_silence(sa, sb)
            c.physics_silent[reason] = c.physics_silent.get(reason, 0) + 1
        return gap

    def _logical(self, a: Event, b: Event, ca: str, cb: str, attributed: bool) -> Decision:
        """Decide an edge physics left open by Lamport / SVC (§2.2-§2.4) and count the outcome."""
        d = decide_logical(a, b)
        self.count_decision(d, ca, cb, attributed)
        return d

    def count_decision(self, d: Decision, ca: str, cb: str, attributed: bool) -> None:
        """Count a decision physics did not make: by method, or wrong (a Lamport contradiction is clock-fault
        evidence; a derived one, a cycle, blames no clock)."""
        c = self.counts
        rel = d.relation
        if rel in CONSISTENT:
            c.decided[d.method.value] += 1
        elif rel is Relation.UNDECIDED:
            c.decided["undecided"] += 1
        else:
            c.wrong[d.method.value] += 1
            if not attributed:
                c.unattributed += 1
            else:
                c.wrong_pair(ca, cb, d.method.value)
                if d.method is Method.LAMPORT:
                    self.ledger.lamport_violation(ca, cb)


def _made(send: SpanRecord, span_id: str | None, lts: int | None) -> bool:
    """Did ``send`` make the record a receive carries (its span id, and one of its send events' counters)?"""
    return (span_id is None or span_id == send.span_id) and (
        not send.sends or any(sent == lts for sent, _, _ in send.sends))


class _Sender:
    """A hop's sending side where the judge expects a record: its host and clock key."""

    __slots__ = ("clock", "host")

    def __init__(self, host: str, clock: str) -> None:
        self.host = host
        self.clock = clock


def _hop_record(s: SpanRecord, host: str, client: Sender | None, remote: Stamp, d: Decision,
                matched: bool) -> dict[str, Any]:
    return {
        "trace_id": s.trace_id,
        "send_span": s.parent_id,
        "recv_span": s.span_id,
        "send_host": host,
        "send_rank": split_clock(client[1])[1] if client is not None else None,
        "recv_host": s.host,
        "recv_rank": s.rank,
        "send_ptp_ns": remote.ptp_ns,
        "send_uncertainty_ns": remote.uncertainty_ns,
        "recv_ptp_ns": s.start.ptp_ns,
        "recv_uncertainty_ns": s.start.uncertainty_ns,
        "matched": matched,
        "decision": d.to_dict(),
        "outcome": outcome_of(d),
        "kind": "hop",
    }


def _p2p_record(recv: SpanRecord, a: Event, sender: SpanRecord | _Sender, attributed: bool, send_stamp: Stamp,
                end: Stamp, d: Decision, matched: bool) -> dict[str, Any]:
    """A torch message's rendering record (``hops_kept``, "kind": "p2p")."""
    t = recv.torch
    assert t is not None
    return {
        "trace_id": recv.trace_id, "send_span": a.span_id, "recv_span": recv.span_id,
        "send_host": sender.host, "send_rank": split_clock(sender.clock)[1] if attributed else None,
        "recv_host": recv.host, "recv_rank": recv.rank,
        "send_ptp_ns": send_stamp.ptp_ns, "send_uncertainty_ns": send_stamp.uncertainty_ns,
        "recv_ptp_ns": end.ptp_ns, "recv_uncertainty_ns": end.uncertainty_ns,
        "matched": matched, "decision": d.to_dict(), "outcome": outcome_of(d),
        "kind": "p2p", "op": t.op, "group": t.group, "src": t.src, "dst": t.dst, "tag": t.tag,
        "p2p_seq": t.p2p_seq,
    }
