"""The streaming analysis: spans in, known edges decided, evidence counted
(spec/analysis.md §1, §4, §5).

Spans are buffered per trace; a trace is analysed when it has not been seen
for ``window_spans`` spans (or at end of input). Memory is therefore the spans
of the traces active within the last window (default 100,000 spans), plus
per-host and per-host-pair counters, plus whatever is kept for rendering
(``keep`` spans, capped). A parent -> child edge whose spans fall on both sides
of a flush (a trace idle for longer than the window) is counted as unresolved,
not guessed. A hop split that way still finds its sender: client spans of
analysed traces are remembered, and receive spans wait for their client, both
in maps bounded by the window. A hop whose sender never shows up is decided and
counted, but its contradictions are "unattributed": no host is blamed for them.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import IO, Any

from ..wire._layout import UNCERTAINTY_SATURATED
from .events import Event, SpanRecord, Stamp
from .faults import FaultLedger
from .order import CONSISTENT, Decision, Method, Relation, decide
from .report import AnalysisReport, EdgeCounts
from .topology import Topology

__all__ = ["Analyzer"]

#: What a hop needs of its client span: the host and the headers it injected (SpanRecord.sends).
Sender = tuple[str, tuple[tuple[int, int | None, int | None], ...]]

SERVER = 2
DEFAULT_WINDOW = 100_000
DEFAULT_KEEP = 20_000
#: Senders, waiting receivers and analysed trace ids remembered: the window, but at least this many
#: (a few MB), so that a small window does not lose hops split across a flush.
MIN_REMEMBER = 4096
#: How often (in spans) to look at the clock for a progress line; a line at most every 2 s.
PROGRESS_EVERY = 20_000


class Analyzer:
    """Feed spans with ``add``; call ``finish`` for the report."""

    def __init__(
        self,
        topology: Topology | None = None,
        *,
        window_spans: int = DEFAULT_WINDOW,
        keep: int = 0,
        progress: IO[str] | None = None,
        source: str = "",
    ) -> None:
        self.topology = topology or Topology()
        # No racks and no default extra: every pair's extra is 0, skip the lookup.
        self._flat = not self.topology.racks and not self.topology.pairs and not self.topology.default_cross_rack_ns
        self.window = max(1, window_spans)
        self.keep = keep
        self.progress = progress
        self._open: OrderedDict[str, list[SpanRecord]] = OrderedDict()
        self._buffered = 0
        self.ledger = FaultLedger()
        self.counts = EdgeCounts()
        self.report = AnalysisReport(source=source, topology=self.topology.to_dict() if topology else None)
        self._t0 = time.monotonic()
        self._next_progress = self._t0 + 2.0
        # Client spans (span id -> record) of traces already analysed: a hop split by a flush finds its sender.
        self._senders: OrderedDict[str, Sender] = OrderedDict()
        # Receive spans whose client span has not been analysed yet (client span id -> receive spans).
        self._waiting: OrderedDict[str, list[SpanRecord]] = OrderedDict()
        self._waiting_n = 0
        # Trace ids already analysed (a trace flushed in parts counts once while its id is remembered).
        self._done_traces: OrderedDict[str, None] = OrderedDict()
        self._remember = max(self.window, MIN_REMEMBER)

    # -- input ------------------------------------------------------------------
    def add(self, span: SpanRecord) -> None:
        rep = self.report
        rep.spans += 1
        bucket = self._open.get(span.trace_id)
        if bucket is None:
            self._open[span.trace_id] = [span]
        else:
            bucket.append(span)
            self._open.move_to_end(span.trace_id)
        self._buffered += 1
        if self._buffered > self.window:
            self._flush_oldest()
        if self.progress is not None and rep.spans % PROGRESS_EVERY == 0:
            self._progress_line()

    def _progress_line(self) -> None:
        now = time.monotonic()
        if now >= self._next_progress:
            self._next_progress = now + 2.0
            rep = self.report
            rate = rep.spans / (now - self._t0)
            print(f"analyze: {rep.spans:,} spans, {rep.traces:,} traces done, {rate:,.0f} spans/s",
                  file=self.progress, flush=True)

    def add_all(self, spans: Iterable[SpanRecord]) -> None:
        """``add`` for each span, with the per-span work inlined (the hot loop of analyze)."""
        rep, open_, window, progress = self.report, self._open, self.window, self.progress is not None
        get, move = open_.get, open_.move_to_end
        for span in spans:
            rep.spans += 1
            tid = span.trace_id
            bucket = get(tid)
            if bucket is None:
                open_[tid] = [span]
            else:
                bucket.append(span)
                move(tid)
            self._buffered += 1
            if self._buffered > window:
                self._flush_oldest()
            if progress and rep.spans % PROGRESS_EVERY == 0:
                self._progress_line()

    def _flush_oldest(self) -> None:
        # Release the least recently seen traces until half the window is free.
        while self._buffered > self.window // 2 and self._open:
            _, spans = self._open.popitem(last=False)
            self._buffered -= len(spans)
            self._analyse_trace(spans)

    def finish(self) -> AnalysisReport:
        while self._open:
            _, spans = self._open.popitem(last=False)
            self._analyse_trace(spans)
        self._buffered = 0
        # Senders that never showed up: decide the hops, blame nobody.
        while self._waiting:
            _, receivers = self._waiting.popitem(last=False)
            for s in receivers:
                self._hop(s, None, len(self.report.hops_kept) < self.keep)
        self._waiting_n = 0
        rep = self.report
        rep.edges = self.counts
        rep.faults = self.ledger.attribute()
        rep.elapsed_s = time.monotonic() - self._t0
        return rep

    # -- one trace ----------------------------------------------------------------
    def _analyse_trace(self, spans: list[SpanRecord]) -> None:
        rep = self.report
        rep.trace_parts += 1
        done, tid = self._done_traces, spans[0].trace_id
        if tid in done:
            done.move_to_end(tid)
        else:
            rep.traces += 1
            done[tid] = None
            if len(done) > self._remember:
                done.popitem(last=False)
        by_id: dict[str, SpanRecord] = {}
        for s in spans:
            if s.span_id in by_id:  # the same span exported twice: count it once
                rep.duplicate_spans += 1
            else:
                by_id[s.span_id] = s
        # Most known edges are settled by physics: _physics counts those without building
        # Event/Decision objects; every other edge takes the general path (_edge), as before.
        physics = self._physics
        for s in by_id.values():
            keep = len(rep.spans_kept) < self.keep
            if keep:
                rep.keep_span(s)
            parent = by_id.get(s.parent_id) if s.parent_id else None
            if s.parent_id and parent is None:
                rep.unresolved_parents += 1
            if parent is not None:
                pa, sa = parent.start, s.start
                if not physics("parent_child", pa, sa, parent.host, s.host,
                               parent.otel_start_ns if pa.ptp_ns is None else pa.ptp_ns,
                               s.otel_start_ns if sa.ptp_ns is None else sa.ptp_ns):
                    self._edge("parent_child", parent.start_event(), s.start_event())
                end, pend = s.end, parent.end
                if end is not None and pend is not None and self._end_edge(parent, s) and not physics(
                    "child_end", end, pend, s.host, parent.host,
                    s.otel_end_ns if end.ptp_ns is None else end.ptp_ns,
                    parent.otel_end_ns if pend.ptp_ns is None else pend.ptp_ns,
                ):
                    self._edge("child_end", s.end_event(), parent.end_event())
            if s.remote is not None:
                client = (parent.host, parent.sends) if parent is not None else self._senders.get(s.parent_id)
                if client is None and s.parent_id:
                    self._wait(s)
                else:
                    self._hop(s, client, keep)
        senders, waiting = self._senders, self._waiting
        for s in by_id.values():
            if s.sends:
                senders[s.span_id] = sender = (s.host, s.sends)  # not the record: less to keep
                if len(senders) > self._remember:
                    senders.popitem(last=False)
                if waiting:
                    receivers = waiting.pop(s.span_id, None)
                    if receivers is not None:
                        self._waiting_n -= len(receivers)
                        for r in receivers:
                            self._hop(r, sender, len(rep.hops_kept) < self.keep)

    def _wait(self, s: SpanRecord) -> None:
        """Hold a receive span until its client span is analysed (bounded by the window)."""
        self._waiting.setdefault(s.parent_id, []).append(s)
        self._waiting_n += 1
        while self._waiting_n > self._remember:
            _, receivers = self._waiting.popitem(last=False)
            self._waiting_n -= len(receivers)
            for r in receivers:
                self._hop(r, None, len(self.report.hops_kept) < self.keep)

    @staticmethod
    def _end_edge(parent: SpanRecord, child: SpanRecord) -> bool:
        """Is "child ended before parent ended" known from structure alone (§1.2)?

        Only inside one process: there the child's end and the parent's end share
        one Lamport counter and one clock, and the process's own end times tell
        synchronous children from async leftovers. Across a hop the reply would
        have to carry a header for Lamport to hold, and nothing says it did.
        """
        return (
            parent.host == child.host
            and child.remote is None
            and child.kind != SERVER
            and child.otel_end_ns <= parent.otel_end_ns
        )

    def _hop(self, s: SpanRecord, client: Sender | None, keep: bool) -> None:
        rep = self.report
        remote = s.remote
        assert remote is not None
        rep.hops += 1
        matched = client is not None and any(lts == remote.lts for lts, _, _ in client[1])
        if matched:
            rep.hops_matched += 1
        # An unknown sender is never guessed: "?" only reaches the topology (whose unknown-host extra
        # is the worst case) and the rendered record, never the fault ledger (attributed=False).
        attributed = client is not None
        host = client[0] if client is not None else "?"
        record = keep and len(rep.hops_kept) < self.keep
        start = s.start
        if not record and self._physics("hop", remote, start, host, s.host, remote.ptp_ns,
                                         s.otel_start_ns if start.ptp_ns is None else start.ptp_ns, attributed):
            return
        send = Event("send", s.parent_id, host, remote, s.remote_sketch, remote.ptp_ns)
        recv = s.start_event()
        decision = self._edge("hop", send, recv, attributed)
        if record:
            rep.hops_kept.append(_hop_record(s, host, send, recv, decision, matched))

    def _physics(self, kind: str, sa: Stamp, sb: Stamp, host_a: str, host_b: str, raw_a: int | None,
                 raw_b: int | None, attributed: bool = True) -> bool:
        """Count the known edge a -> b if physics settles it (order.decide's first rule, §2.1) and
        return True; return False, counting nothing, when the later rules must speak.

        The counting is _edge's, step for step, so the report is the same either way."""
        pa, pb = sa.ptp_ns, sb.ptp_ns
        if (
            pa is None or pb is None or sa.quality == "UNKNOWN" or sb.quality == "UNKNOWN"
            or sa.uncertainty_ns >= UNCERTAINTY_SATURATED or sb.uncertainty_ns >= UNCERTAINTY_SATURATED
        ):
            return False
        extra = 0 if self._flat or host_a == host_b else self.topology.extra_ns(host_a, host_b)
        ua, ub = sa.uncertainty_ns, sb.uncertainty_ns
        gap_ab = (pb - ub) - (pa + ua) - extra
        gap_ba = (pa - ua) - (pb + ub) - extra
        if gap_ab <= 0 and gap_ba <= 0:
            return False
        c = self.counts
        c.total += 1
        c.by_kind[kind] = c.by_kind.get(kind, 0) + 1
        if raw_a is not None and raw_b is not None:
            if raw_a > raw_b:
                c.naive_inversions += 1
            elif raw_a == raw_b:
                c.naive_ties += 1
        if attributed:
            self.ledger.edge(host_a, host_b)
        if gap_ab > 0:
            c.decided["physics"] += 1
        else:
            c.wrong["physics"] += 1
            if attributed:
                c.wrong_pair(host_a, host_b, "physics")
                self.ledger.physics_violation(host_a, host_b, gap_ba, ua, ub)
            else:
                c.unattributed += 1
        return True

    def _edge(self, kind: str, a: Event, b: Event, attributed: bool = True) -> Decision:
        extra = 0 if self._flat or a.host == b.host else self.topology.extra_ns(a.host, b.host)
        d = decide(a, b, extra)
        c = self.counts
        c.total += 1
        c.by_kind[kind] = c.by_kind.get(kind, 0) + 1
        if a.raw_ns is not None and b.raw_ns is not None:
            if a.raw_ns > b.raw_ns:
                c.naive_inversions += 1
            elif a.raw_ns == b.raw_ns:
                c.naive_ties += 1
        if attributed:
            self.ledger.edge(a.host, b.host)
        rel = d.relation
        if rel in CONSISTENT:
            c.decided[d.method.value] += 1
        elif rel is Relation.UNDECIDED:
            c.decided["undecided"] += 1
        else:
            c.wrong[d.method.value] += 1
            if not attributed:
                c.unattributed += 1
                return d
            c.wrong_pair(a.host, b.host, d.method.value)
            if d.method is Method.PHYSICS:
                self.ledger.physics_violation(a.host, b.host, d.gap_ns or 0, a.stamp.uncertainty_ns,
                                              b.stamp.uncertainty_ns)
            elif d.method is Method.LAMPORT:
                self.ledger.lamport_violation(a.host, b.host)
        return d


def _hop_record(s: SpanRecord, host: str, send: Event, recv: Event, d: Decision, matched: bool) -> dict[str, Any]:
    return {
        "trace_id": s.trace_id,
        "send_span": s.parent_id,
        "recv_span": s.span_id,
        "send_host": host,
        "recv_host": s.host,
        "send_ptp_ns": send.stamp.ptp_ns,
        "send_uncertainty_ns": send.stamp.uncertainty_ns,
        "recv_ptp_ns": recv.stamp.ptp_ns,
        "recv_uncertainty_ns": recv.stamp.uncertainty_ns,
        "matched": matched,
        "decision": d.to_dict(),
        "outcome": "consistent" if d.relation in CONSISTENT else
                   ("undecided" if d.relation is Relation.UNDECIDED else "contradiction"),
    }
