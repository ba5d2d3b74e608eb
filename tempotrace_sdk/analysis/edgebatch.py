"""Known edges decided a few thousand at a time, as array expressions (spec/analysis.md §5.6): the counts
``EdgeJudge.parent_child`` makes one pair at a time, equal; ``count_pairs`` is the rules' array form, which
hopbatch.py shares.

The columnar engine's analyzer queues each part's (parent, child) pairs here and flushes them when a batch is
full and when it finishes. What an edge contributes is
a sum (edges, decisions, naive order, silences), a tally per clock pair or a largest value (the fault ledger),
so when it is counted does not change the report. Per batch: the physics rule (§2.1), the naive order (§6.1),
physics' silences and the Lamport rule (§2.2) over whole arrays; pairs of readings both in a host clock domain
are judged by ``physics_gap`` itself, and the SVC test (§2.3), a 256-bit mask, by ``span_mask`` pair by pair
where Lamport leaves the pair open. A batch holding a time at or beyond 2^62 ns (int64 arithmetic could
overflow) is counted pair by pair by the judge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import compress
from operator import attrgetter, ne
from typing import TYPE_CHECKING

import numpy as np

from ..wire.layout import LTS_MAX, UNCERTAINTY_SATURATED
from .clockdomain import claimed_bounds
from .edges import end_edge, unmerged
from .events import NO_STAMP, SpanRecord, Stamp
from .order import interval_gaps, physics_gap, physics_silence, span_mask
from .stamparrays import SAFE, StampArrays, times

try:
    from .. import _columns
except ImportError:  # not built: the SVC tests with order.span_mask
    _columns = None

if TYPE_CHECKING:
    from .edges import EdgeJudge

__all__ = ["BATCH", "PairSides", "ParentChildBatch", "SvcTest", "count_pairs", "in_sketches"]

#: pairs per flush: arrays long enough to pay for themselves, short enough to hold no more records than a part
BATCH = 4096
CLOCK, HOST = attrgetter("clock"), attrgetter("host")
START_NS, _END_NS = attrgetter("otel_start_ns"), attrgetter("otel_end_ns")
#: (open pairs, may a precede b, may b precede a) -> (SVC says a before b, SVC says b before a), per pair
SvcTest = Callable[[list[int], np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


class PairSides:
    """What the rules read of a batch's pairs a[k] -> b[k] beyond their stamps: each side's clock key and host,
    the span times the naive order falls back to (``raw_a_ok`` False: side a has none, nor a reading to take
    to UTC), whose Lamport value a receiver did not merge (``unmerged``: a's is not used), which pairs blame
    their clocks (``attributed``: an unknown sender blames nobody), and the SVC test."""

    __slots__ = ("attributed", "clock_a", "clock_b", "host_a", "host_b", "raw_a", "raw_a_ok", "raw_b", "svc",
                 "unmerged")

    def __init__(self, clock_a: list[str], clock_b: list[str], host_a: list[str], host_b: list[str],
                 raw_a: np.ndarray, raw_b: np.ndarray, unmerged: np.ndarray, svc: SvcTest | None,
                 attributed: np.ndarray | None = None, raw_a_ok: np.ndarray | None = None) -> None:
        self.clock_a, self.clock_b, self.host_a, self.host_b = clock_a, clock_b, host_a, host_b
        self.raw_a, self.raw_b, self.raw_a_ok = raw_a, raw_b, raw_a_ok
        self.unmerged, self.svc, self.attributed = unmerged, svc, attributed


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
        no_merge = np.array(list(map(unmerged, children)), dtype=bool)
        if not _spans_counted(judge, "parent_child", [p.start for p in parents], [c.start for c in children],
                              parents, children, list(map(START_NS, parents)), list(map(START_NS, children)),
                              no_merge, True):
            for parent, child in zip(parents, children, strict=True):
                judge.parent_start(parent, child)
        # child end -> parent end, where that is known
        ends = [k for k, (p, c) in enumerate(zip(parents, children, strict=True)) if end_edge(p, c)]
        if not ends:
            return
        ps, cs = [parents[k] for k in ends], [children[k] for k in ends]
        if not _spans_counted(judge, "child_end", [c.end or NO_STAMP for c in cs], [p.end or NO_STAMP for p in ps],
                              cs, ps, list(map(_END_NS, cs)), list(map(_END_NS, ps)), np.zeros(len(ends), bool),
                              False):
            for parent, child in zip(ps, cs, strict=True):
                judge.child_end(parent, child)


def _spans_counted(judge: EdgeJudge, kind: str, stamps_a: list[Stamp], stamps_b: list[Stamp], a: list[SpanRecord],
                   b: list[SpanRecord], raw_a: list[int], raw_b: list[int], unmerged_a: np.ndarray,
                   starts: bool) -> bool:
    """``count_pairs`` for pairs of span events a[k] -> b[k] (``starts``: both are span starts, so SVC may decide
    either way); False, counting nothing, when a span time is missing or out of range."""
    ra, rb = times(raw_a), times(raw_b)
    if ra is None or rb is None:
        return False
    svc = _span_svc(a, b) if starts else None
    sides = PairSides(list(map(CLOCK, a)), list(map(CLOCK, b)), list(map(HOST, a)), list(map(HOST, b)), ra, rb,
                      unmerged_a, svc)
    return count_pairs(judge, kind, StampArrays(stamps_a), StampArrays(stamps_b), sides)


def _span_svc(a: list[SpanRecord], b: list[SpanRecord]) -> SvcTest:
    """A start whose span id is in the other's sketch (order._in_sketch), both ways."""
    def test(open_: list[int], may_before: np.ndarray, may_after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        before, after = np.zeros(len(a), bool), np.zeros(len(a), bool)
        mb, ma = may_before.tolist(), may_after.tolist()
        rows = [k for k in open_ if mb[k]]
        if rows:
            before[rows] = in_sketches([b[k].sketch for k in rows], [a[k].span_id for k in rows])
        rows = [k for k in open_ if ma[k]]
        if rows:
            after[rows] = in_sketches([a[k].sketch for k in rows], [b[k].span_id for k in rows])
        return before, after
    return test


def in_sketches(sketches: list[int | None], span_ids: list[str]) -> np.ndarray:
    """For each k: every bit span id k sets is in sketch k (None holds none), in C where the native columns
    module is built (native/columns/tt_ownsketch.c), else with order.span_mask."""
    if _columns is not None:
        got = _columns.in_sketches(sketches, span_ids)
        if got is not None:
            return np.frombuffer(got, dtype=np.uint8).astype(bool)
    out = np.zeros(len(sketches), bool)
    for k, (sketch, span_id) in enumerate(zip(sketches, span_ids, strict=True)):
        if sketch is not None:
            mask = span_mask(span_id)
            out[k] = sketch & mask == mask
    return out


def count_pairs(judge: EdgeJudge, kind: str, sa: StampArrays, sb: StampArrays, sides: PairSides) -> bool:
    """EdgeJudge._edge and, where physics is silent, ``_logical``, for each pair a[k] -> b[k]. False, counting
    nothing, when a reading or an extra is at or beyond 2^62 ns: the caller counts those pairs one by one."""
    extra = _extra(judge, sides)
    if not sa.safe() or not sb.safe() or extra is None:
        return False
    c, ledger = judge.counts, judge.ledger
    n = len(sa.stamps)
    clock_a, clock_b, attributed = sides.clock_a, sides.clock_b, sides.attributed
    c.total += n
    c.by_kind[kind] = c.by_kind.get(kind, 0) + n
    # the naive order: TAI readings when both have one, else the span times (none for a side without either)
    both = sa.reading() & sb.reading()
    ta, tb = np.where(both, sa.ptp, sides.raw_a), np.where(both, sb.ptp, sides.raw_b)
    known = both | sides.raw_a_ok if sides.raw_a_ok is not None else None
    c.naive_inversions += int(np.count_nonzero(ta > tb if known is None else (ta > tb) & known))
    c.naive_ties += int(np.count_nonzero(ta == tb if known is None else (ta == tb) & known))
    edges = judge.ledger_edges
    blamed = None if attributed is None else attributed.tolist()
    blamed_a, blamed_b = (clock_a, clock_b) if blamed is None else \
        (list(compress(clock_a, blamed)), list(compress(clock_b, blamed)))
    per_clock = Counter(blamed_a)  # each pair's clocks, its second one where another (counted at C speed)
    per_clock.update(compress(blamed_b, map(ne, blamed_b, blamed_a)))
    for clock, count in per_clock.items():
        edges[clock] = edges.get(clock, 0) + count
    gap = _physics(sa, sb, extra)
    c.decided["physics"] += int(np.count_nonzero(gap > 0))
    for k in np.flatnonzero(gap < 0).tolist():
        c.wrong["physics"] += 1
        if attributed is not None and not attributed[k]:
            c.unattributed += 1
            continue
        c.wrong_pair(clock_a[k], clock_b[k], "physics")
        x, y = sa.stamps[k], sb.stamps[k]
        ledger.physics_violation(clock_a[k], clock_b[k], -int(gap[k]),
                                 *claimed_bounds(x.uncertainty_ns, x.domain, y.uncertainty_ns, y.domain))
    silent = gap == 0
    if silent.any():
        _silences(judge, sa, sb, silent)
        _logical(judge, sa, sb, sides, silent)
    return True


def _extra(judge: EdgeJudge, sides: PairSides) -> np.ndarray | int | None:
    """The topology's extra error of each pair's hosts (0 without racks); None when one is at or beyond 2^62 ns
    (a topology may name any bound: the sums below must stay within int64)."""
    if judge.flat:
        return 0
    known: dict[tuple[str, str], int] = {}
    values = []
    for x, y in zip(sides.host_a, sides.host_b, strict=True):
        if x == y:
            values.append(0)
            continue
        key = (x, y)
        got = known.get(key)
        if got is None:
            got = known[key] = judge.topology.extra_ns(x, y)
            if got >= SAFE:
                return None
        values.append(got)
    return np.array(values, dtype=np.int64)


def _physics(sa: StampArrays, sb: StampArrays, extra: np.ndarray | int) -> np.ndarray:
    """order.physics_gap of every pair, ``extra`` its topology extra."""
    n = len(sa.stamps)
    usable = sa.usable() & sb.usable()
    gap = np.where(usable, interval_gaps(sa.ptp, sa.unc, sb.ptp, sb.unc, extra), 0)
    # readings both in a host clock domain: by their difference first, the one definition decides
    for k in range(n) if sa.domains and sb.domains else ():
        if sa.domain[k] is not None and sb.domain[k] is not None:
            gap[k] = physics_gap(sa.stamps[k], sb.stamps[k], 0 if isinstance(extra, int) else int(extra[k]))
    return gap


def _silences(judge: EdgeJudge, sa: StampArrays, sb: StampArrays, silent: np.ndarray) -> None:
    """Why physics was silent (order.physics_silence), counted by reason."""
    out = judge.counts.physics_silent
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


def _logical(judge: EdgeJudge, sa: StampArrays, sb: StampArrays, sides: PairSides, silent: np.ndarray) -> None:
    """order.decide_logical of the silent pairs, counted as EdgeJudge.count_decision counts it."""
    c, ledger = judge.counts, judge.ledger
    clock_a, clock_b, attributed = sides.clock_a, sides.clock_b, sides.attributed
    n = len(sa.stamps)
    la = np.where(sides.unmerged, -1, sa.lts)
    lb = sb.lts
    have = (la >= 0) & (lb >= 0) & (la != LTS_MAX) & (lb != LTS_MAX)
    concurrent = silent & have & (la == lb)
    may_before = ~(have & (la > lb))
    may_after = ~(have & (la < lb))
    open_ = silent & ~concurrent
    if sides.svc is not None:
        svc_before, svc_after = sides.svc(np.flatnonzero(open_).tolist(), may_before, may_after)
    else:
        svc_before = svc_after = np.zeros(n, bool)
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
            if attributed is not None and not attributed[k]:
                c.unattributed += 1
                continue
            c.wrong_pair(clock_a[k], clock_b[k], method)
            if method == "lamport":
                ledger.lamport_violation(clock_a[k], clock_b[k])
