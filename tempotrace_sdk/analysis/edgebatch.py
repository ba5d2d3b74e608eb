"""Parent -> child edges decided a few thousand at a time, as array expressions (spec/analysis.md §5.6): the
counts ``EdgeJudge.parent_child`` makes one pair at a time, equal.

The columnar engine's analyzer queues each part's (parent, child) pairs here and flushes them when a batch is
full and when it finishes. What a pair contributes is a sum (edges, decisions, naive order, silences), a tally
per clock pair or a largest value (the fault ledger), so when it is counted does not change the report.
Per batch: the physics rule (§2.1), the naive order (§6.1), physics' silences and the Lamport rule (§2.2) over
whole arrays; pairs of readings both in a host clock domain are judged by ``physics_gap`` itself, and the SVC
test (§2.3), a 256-bit mask, by ``span_mask`` pair by pair where Lamport leaves the pair open. A batch holding
a time at or beyond 2^62 ns (int64 arithmetic could overflow) is counted pair by pair by the judge.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from ..wire.layout import LTS_MAX, UNCERTAINTY_SATURATED
from .clockdomain import claimed_bounds
from .edges import end_edge
from .events import NO_STAMP, SpanRecord, Stamp
from .order import interval_gaps, physics_gap, physics_silence, span_mask
from .stamparrays import SAFE, StampArrays, times

if TYPE_CHECKING:
    from .edges import EdgeJudge

__all__ = ["BATCH", "ParentChildBatch"]

#: pairs per flush: arrays long enough to pay for themselves, short enough to hold no more records than a part
BATCH = 4096
_CLOCK, _START_NS, _END_NS = attrgetter("clock"), attrgetter("otel_start_ns"), attrgetter("otel_end_ns")


class ParentChildBatch:
    """Queue pairs with ``add``; ``flush`` counts them into the judge's report and ledger."""

    def __init__(self, judge: EdgeJudge, size: int = BATCH) -> None:
        self.judge = judge
        self.size = size
        self.parents: list[SpanRecord] = []
        self.children: list[SpanRecord] = []

    def add(self, parent: SpanRecord, child: SpanRecord) -> None:
        self.parents.append(parent)
        self.children.append(child)
        if len(self.parents) >= self.size:
            self.flush()

    def flush(self) -> None:
        parents, children = self.parents, self.children
        if not parents:
            return
        self.parents, self.children = [], []
        judge = self.judge
        # parent start -> child start; the parent's Lamport value orders nothing across a hop whose receiver
        # recorded no merge (edges.unmerged)
        unmerged = np.array([c.remote is not None and c.recv_lts is None for c in children], dtype=bool)
        if not self._edges("parent_child", [p.start for p in parents], [c.start for c in children], parents, children,
                           list(map(_START_NS, parents)), list(map(_START_NS, children)), unmerged, True):
            for parent, child in zip(parents, children, strict=True):
                judge.parent_start(parent, child)
        # child end -> parent end, where that is known
        ends = [k for k, (p, c) in enumerate(zip(parents, children, strict=True)) if end_edge(p, c)]
        if not ends:
            return
        ps, cs = [parents[k] for k in ends], [children[k] for k in ends]
        if not self._edges("child_end", [c.end or NO_STAMP for c in cs], [p.end or NO_STAMP for p in ps], cs, ps,
                           list(map(_END_NS, cs)), list(map(_END_NS, ps)), np.zeros(len(ends), bool), False):
            for parent, child in zip(ps, cs, strict=True):
                judge.child_end(parent, child)

    def _edges(self, kind: str, stamps_a: list[Stamp], stamps_b: list[Stamp], a: list[SpanRecord],
               b: list[SpanRecord], raw_a: list[int], raw_b: list[int], unmerged: np.ndarray, starts: bool) -> bool:
        """EdgeJudge._edge and, where physics is silent, ``_logical``, for each pair a[k] -> b[k] (``starts``:
        both events are span starts, so SVC may decide; ``unmerged``: a's Lamport value is not used). False,
        counting nothing, when a time is at or beyond 2^62 ns: the caller counts those pairs one by one."""
        sa, sb = StampArrays(stamps_a), StampArrays(stamps_b)
        ra, rb = times(raw_a), times(raw_b)
        extra = self._extra(a, b)
        if ra is None or rb is None or not sa.safe() or not sb.safe() or extra is None:
            return False
        judge = self.judge
        c, ledger = judge.counts, judge.ledger
        n = len(a)
        clock_a, clock_b = list(map(_CLOCK, a)), list(map(_CLOCK, b))
        c.total += n
        c.by_kind[kind] = c.by_kind.get(kind, 0) + n
        # the naive order: TAI readings when both have one, else the span times
        both = sa.reading() & sb.reading()
        ta, tb = np.where(both, sa.ptp, ra), np.where(both, sb.ptp, rb)
        c.naive_inversions += int(np.count_nonzero(ta > tb))
        c.naive_ties += int(np.count_nonzero(ta == tb))
        edges = judge.ledger_edges
        for clock, count in (Counter(clock_a) + Counter(y for x, y in zip(clock_a, clock_b, strict=True)
                                                        if y != x)).items():
            edges[clock] = edges.get(clock, 0) + count
        gap = self._physics(sa, sb, extra)
        c.decided["physics"] += int(np.count_nonzero(gap > 0))
        for k in np.flatnonzero(gap < 0).tolist():
            c.wrong["physics"] += 1
            c.wrong_pair(clock_a[k], clock_b[k], "physics")
            x, y = stamps_a[k], stamps_b[k]
            ledger.physics_violation(clock_a[k], clock_b[k], -int(gap[k]),
                                     *claimed_bounds(x.uncertainty_ns, x.domain, y.uncertainty_ns, y.domain))
        silent = gap == 0
        if silent.any():
            self._silences(sa, sb, silent)
            self._logical(sa, sb, a, b, clock_a, clock_b, silent, unmerged, starts)
        return True

    def _extra(self, a: list[SpanRecord], b: list[SpanRecord]) -> np.ndarray | int | None:
        """The topology's extra error of each pair's hosts (0 without racks); None when one is at or beyond 2^62 ns
        (a topology may name any bound: the sums below must stay within int64)."""
        judge = self.judge
        if judge.flat:
            return 0
        known: dict[tuple[str, str], int] = {}
        values = []
        for x, y in zip(a, b, strict=True):
            if x.host == y.host:
                values.append(0)
                continue
            key = (x.host, y.host)
            got = known.get(key)
            if got is None:
                got = known[key] = judge.topology.extra_ns(x.host, y.host)
                if got >= SAFE:
                    return None
            values.append(got)
        return np.array(values, dtype=np.int64)

    def _physics(self, sa: StampArrays, sb: StampArrays, extra: np.ndarray | int) -> np.ndarray:
        """order.physics_gap of every pair, ``extra`` its topology extra."""
        n = len(sa.stamps)
        usable = sa.usable() & sb.usable()
        gap = np.where(usable, interval_gaps(sa.ptp, sa.unc, sb.ptp, sb.unc, extra), 0)
        # readings both in a host clock domain: by their difference first, the one definition decides
        for k in range(n) if sa.domains and sb.domains else ():
            if sa.domain[k] is not None and sb.domain[k] is not None:
                gap[k] = physics_gap(sa.stamps[k], sb.stamps[k], 0 if isinstance(extra, int) else int(extra[k]))
        return gap

    def _silences(self, sa: StampArrays, sb: StampArrays, silent: np.ndarray) -> None:
        """Why physics was silent (order.physics_silence), counted by reason."""
        out = self.judge.counts.physics_silent
        no_reading = silent & ~(sa.reading() & sb.reading())
        degrade = silent & ~no_reading & (sa.degraded | sb.degraded)
        rest = silent & ~no_reading & ~degrade
        domains = np.zeros(len(sa.domain), bool)
        if sa.domains and sb.domains:
            domains[[k for k, (x, y) in enumerate(zip(sa.domain, sb.domain, strict=True))
                     if x is not None and y is not None]] = True
        reasons: Counter[str] = Counter()
        for k in np.flatnonzero(rest & domains).tolist():  # (one domain may make it an overlap first)
            reasons[physics_silence(sa.stamps[k], sb.stamps[k])] += 1
        rest &= ~domains
        unknown = rest & (sa.unknown | sb.unknown)
        saturated = rest & ~unknown & ((sa.unc >= UNCERTAINTY_SATURATED) | (sb.unc >= UNCERTAINTY_SATURATED))
        reasons["no_reading"] += int(np.count_nonzero(no_reading))
        reasons["policy_degrade"] += int(np.count_nonzero(degrade))
        reasons["unknown_quality"] += int(np.count_nonzero(unknown))
        reasons["saturated_bound"] += int(np.count_nonzero(saturated))
        reasons["overlap"] += int(np.count_nonzero(rest & ~unknown & ~saturated))
        for reason, count in reasons.items():
            if count:
                out[reason] = out.get(reason, 0) + count

    def _logical(self, sa: StampArrays, sb: StampArrays, a: list[SpanRecord], b: list[SpanRecord], clock_a: list[str],
                 clock_b: list[str], silent: np.ndarray, unmerged: np.ndarray, starts: bool) -> None:
        """order.decide_logical of the silent pairs, counted as EdgeJudge.count_decision counts it."""
        judge = self.judge
        c, ledger = judge.counts, judge.ledger
        la = np.where(unmerged, -1, sa.lts)
        lb = sb.lts
        have = (la >= 0) & (lb >= 0) & (la != LTS_MAX) & (lb != LTS_MAX)
        concurrent = silent & have & (la == lb)
        may_before = ~(have & (la > lb))
        may_after = ~(have & (la < lb))
        svc_before = np.zeros(len(a), bool)
        svc_after = np.zeros(len(a), bool)
        open_ = silent & ~concurrent
        if starts:  # a start whose span id is in the other's sketch (order._in_sketch)
            for k in np.flatnonzero(open_).tolist():
                x, y = a[k], b[k]
                if may_before[k] and y.sketch is not None:
                    mask = span_mask(x.span_id)
                    svc_before[k] = y.sketch & mask == mask
                if may_after[k] and x.sketch is not None:
                    mask = span_mask(y.span_id)
                    svc_after[k] = x.sketch & mask == mask
        before = open_ & svc_before & ~svc_after
        after = open_ & svc_after & ~svc_before
        rest = open_ & ~before & ~after
        not_before = rest & ~may_before
        not_after = rest & may_before & ~may_after
        undecided = rest & may_before & may_after
        c.decided["svc"] += int(np.count_nonzero(before))
        c.decided["lamport"] += int(np.count_nonzero(not_after))
        c.decided["undecided"] += int(np.count_nonzero(undecided))
        for flags, method in ((concurrent, "lamport"), (not_before, "lamport"), (after, "svc")):
            for k in np.flatnonzero(flags).tolist():
                c.wrong[method] += 1
                c.wrong_pair(clock_a[k], clock_b[k], method)
                if method == "lamport":
                    ledger.lamport_violation(clock_a[k], clock_b[k])
