"""Collectives across ranks: gather each one's members, decide its claim, report it (spec/analysis.md §1.3).

A collective instance is one (trace, group key, seq): the k-th collective of a
group has number k on every rank (spec/torch.md §2). Its members arrive as
their trace's parts are analysed; a collective is finished when every rank the
group key names has a span, or when its first member falls out of the hop
horizon (then it is *incomplete*: the ranks with no span never joined, as far
as the input shows). A member further than the horizon from the first one
starts a new instance, so which spans form an instance depends only on their
positions: a run split by trace forms the same instances.

Finishing decides the claim (claims.py) and counts it as one known edge
(edges.EdgeJudge.collective), links it into its trace's derived structure
(derived.py: which decides, later, a claim that physics and recorded evidence
left open), adds each member to the straggler table, tells the step gatherer
who arrived last and who never joined (stepgather.py), gives the hang facts
an incomplete one's op (hangfacts.py), and keeps a rendering record while the
budget (``keep`` member rows) lasts.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from .claims import NOT_COMPLETED, SHAPES, arrival, decide_claim, required
from .edges import EdgeJudge, outcome_of
from .events import SpanRecord
from .groupkey import GroupKey, member_rank, parse_key
from .order import UNDECIDED, Decision, Relation
from .report import AnalysisReport
from .topology import Topology
from .torchcounts import TOP

if TYPE_CHECKING:
    from .derived import Settle
    from .stepgather import StepGatherer

__all__ = ["MAX_LISTED", "Collectives"]

#: Missing ranks of one incomplete collective are named (per-rank table, samples) only up to this many:
#: a record that claims a million-rank group with one member present must not cost a million entries.
MAX_LISTED = 1024
#: Missing ranks shown per incomplete collective in the report's samples.
SAMPLE_RANKS = 64

Key = tuple[str, str, int]  # trace id, group key, seq
#: An instance finished incomplete is remembered (its key, a few hundred bytes) this many horizons past its first
#: member: a later piece of the same collective within that distance that is incomplete too is counted ``split``
#: (and how far its members spread), so a report can say that the horizon, not a rank, left it incomplete.
SPLIT_MEMORY = 8


class _Open:
    __slots__ = ("first", "members", "origin")

    def __init__(self, first: int, origin: int | None = None) -> None:
        self.first = first  # input position of the first member
        #: the first member's position of the collective's first piece, when the horizon split it (else None)
        self.origin = origin
        self.members: dict[int, SpanRecord] = {}  # global rank -> span


class Collectives:
    """Collective instances being gathered; ``add`` each analysed op span, ``expire`` as the input moves."""

    def __init__(self, judge: EdgeJudge, report: AnalysisReport, topology: Topology, horizon: int,
                 keep: int, steps: StepGatherer | None = None) -> None:
        self.judge = judge
        self.steps = steps  # told of each finished instance: its step's slowest rank, its missing ranks
        self.report = report
        self.counts = report.collectives
        self.topology = topology
        self.horizon = horizon
        self.budget = keep  # member rows still to keep for rendering
        self._open: OrderedDict[Key, _Open] = OrderedDict()  # a queue: see memory.TraceMemory
        #: instances finished incomplete: key -> input position of their first member (SPLIT_MEMORY)
        self._expired: OrderedDict[Key, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def add(self, s: SpanRecord) -> bool:
        """Take ``s`` if it is a collective's member span (it has a group and a seq)."""
        t = s.torch
        if t is None or t.seq is None or t.group is None:
            return False
        key = parse_key(t.group)
        rank = member_rank(s, key)
        if rank is None:
            self.counts.foreign += 1
            return True
        k = (s.trace_id, t.group, t.seq)
        open_ = self._open.get(k)
        if open_ is not None and s.pos - open_.first > self.horizon:  # too far from the first: a new instance
            del self._open[k]
            self._finish(k, open_)
            open_ = None
        if open_ is None:
            open_ = self._open[k] = _Open(s.pos, self._split(k, s.pos) if self._expired else None)
        have = open_.members.get(rank)
        if have is not None:
            if have.span_id != s.span_id:
                self.counts.conflicts += 1
            return True
        open_.members[rank] = s
        if len(open_.members) == key.size:
            del self._open[k]
            self._finish(k, open_)
        return True

    def _split(self, k: Key, pos: int) -> int | None:
        """A new instance of ``k`` at ``pos``: the position of the collective's first member when an earlier
        piece of it was finished incomplete within SPLIT_MEMORY horizons of it, else None (a test of positions
        only, so a run split by trace gives the same)."""
        origin = self._expired.pop(k, None)
        return origin if origin is not None and pos - origin <= SPLIT_MEMORY * self.horizon else None

    def expire(self, limit: int | None) -> None:
        """Finish instances whose first member lies before ``limit`` (all of them with None): no member
        can join them any more."""
        if limit is not None:
            # Every span analysed from now on lies at least a horizon past ``limit``: a piece remembered from
            # further back than the memory can never be found again (so forgetting it changes no count).
            expired, forget = self._expired, limit - SPLIT_MEMORY * self.horizon
            while expired:
                oldest = next(iter(expired))
                if expired[oldest] >= forget:
                    break
                del expired[oldest]
        queue = self._open
        while queue:
            k = next(iter(queue))
            if limit is not None and queue[k].first >= limit:
                return
            self._finish(k, queue.pop(k))

    # -- one instance --------------------------------------------------------------------------------
    def _finish(self, k: Key, open_: _Open) -> None:
        trace_id, group, seq = k
        key = parse_key(group)
        ranks = sorted(open_.members)
        spans = [open_.members[r] for r in ranks]
        c = self.counts
        c.total += 1
        c.members += len(spans)
        missing = self._missing(key, open_, ranks)
        ops = {s.torch.op for s in spans if s.torch is not None}
        roots = {s.torch.root for s in spans if s.torch is not None}
        op = spans[0].torch.op if spans[0].torch is not None else ""
        c.by_op[op] += 1
        if missing:  # the hang report names a wavefront's op from here when it keeps no span of it
            self.report.hang_facts.incomplete(spans[0].job, group, seq, op)
            origin = open_.origin
            if origin is not None:  # an incomplete later piece: the horizon cut this collective
                c.split += 1
                c.split_distance = max(c.split_distance, max(s.pos for s in spans) - origin)
            self._expired[k] = open_.first if origin is None else origin
        c.ends_not_completed += sum(1 for s in spans if s.torch is not None and s.torch.completion in NOT_COMPLETED)
        root = next(iter(roots)) if len(roots) == 1 else None
        extra = self._extra(spans)
        claim = None
        shape = SHAPES.get(op)
        if len(ops) > 1 or len(roots) > 1:
            c.mismatched += 1
        elif shape is not None:
            starts, ends = required(spans, ranks, shape, root)
            claim = decide_claim(spans, ranks, starts, ends, extra)
        derived = self.judge.derived
        # Left undecided by physics and by recorded evidence: decided by the trace's structure (derived.py).
        deferred = claim is not None and derived is not None and claim.decision.relation is Relation.UNDECIDED
        if claim is None:
            c.no_claim += 1
            decision, outcome = UNDECIDED, "undecided"
        else:
            self.judge.collective(spans, claim, deferred)
            decision = claim.decision
            outcome = outcome_of(decision)
            if not deferred:
                self._outcome(decision)
        order, certain = arrival(spans, ranks, extra)
        times = self._times(spans)
        self._stragglers(spans, order, certain, times)
        if self.steps is not None:  # reporting only: who was last, by how much, who never joined
            self.steps.collective(trace_id, open_.first, [spans[i].clock for i in order],
                                  times[order[-1]] - times[order[0]] if len(order) > 1 else 0, op, group, seq, missing,
                                  self._all_missing(key, open_)[:SAMPLE_RANKS] if 0 < missing <= MAX_LISTED else [])
        cost = max(len(spans), key.size)
        record: dict[str, Any] | None = None
        if cost <= self.budget:
            self.budget -= cost
            record = {
                "trace_id": trace_id, "op": op, "group": group, "seq": seq, "root": root,
                "ranks": list(key.ranks()), "missing_ranks": self._all_missing(key, open_) if missing else [],
                "members": [_member(spans[i], ranks[i]) for i in order],
                "last_arriver": ({"rank": ranks[order[-1]], "host": spans[order[-1]].host, "certain": certain,
                                  "lead_ns": times[order[-1]] - times[order[-2]]} if len(order) > 1 else None),
                "spread_ns": times[order[-1]] - times[order[0]],
                "claim": shape if claim is not None else None,
                "decision": decision.to_dict(), "outcome": outcome,
            }
            self.report.collectives_kept.append(record)
        if claim is not None and derived is not None:
            settle = self._settle([spans[i].clock for i in claim.starts], [spans[j].clock for j in claim.ends],
                                  record) if deferred else None
            derived.claim(spans, claim.starts, claim.ends, settle)

    def _outcome(self, d: Decision) -> None:
        """Count a claim's decision among the collectives' outcomes."""
        c = self.counts
        outcome = outcome_of(d)
        c.outcomes[outcome] += 1
        if outcome != "contradiction":
            c.decided[d.method.value] += 1

    def _settle(self, starts: list[str], ends: list[str], record: dict[str, Any] | None) -> Settle:
        """What counts a deferred claim's derived decision: its required starts' and ends' clocks name the
        witness of a contradiction (a cycle, spec §2.8); the rendering record takes the decision."""
        def settle(d: Decision, witness: tuple[int, int] | None) -> None:
            i, j = witness if witness is not None else (0, 0)
            self.judge.count_decision(d, starts[i], ends[j], True)
            self._outcome(d)
            if record is not None:
                record["decision"], record["outcome"] = d.to_dict(), outcome_of(d)
        return settle

    def _missing(self, key: GroupKey, open_: _Open, present: list[int]) -> int:
        """Count (and, when few, name) the ranks the key expects that have no span."""
        c = self.counts
        missing = key.size - len(present)
        if not missing:
            c.complete += 1
            return 0
        c.incomplete += 1
        c.missing_members += missing
        if missing <= MAX_LISTED:
            named = self._all_missing(key, open_)
            c.missing_by_rank.update(named)
            if len(c.incomplete_first) < TOP or open_.first < c.incomplete_first[-1][0]:
                s = next(iter(open_.members.values()))
                t = s.torch
                assert t is not None
                sample = {"trace_id": s.trace_id, "op": t.op, "group": t.group, "seq": t.seq,
                          "missing": missing, "missing_ranks": named[:SAMPLE_RANKS]}
                bisect.insort(c.incomplete_first, (open_.first, sample), key=lambda x: x[0])
                del c.incomplete_first[TOP:]
        return missing

    @staticmethod
    def _all_missing(key: GroupKey, open_: _Open) -> list[int]:
        return [r for r in key.ranks() if r not in open_.members]

    def _extra(self, spans: list[SpanRecord]) -> int:
        """The topology's extra error for the members' hosts: 0 on one host or one rack, else the largest
        extra in the topology (a bound for every pair: a collective is decided as a whole)."""
        if self.judge.flat:
            return 0
        hosts = {s.host for s in spans}
        if len(hosts) == 1:
            return 0
        racks = {self.topology.racks.get(h) for h in hosts}
        return 0 if len(racks) == 1 and None not in racks else self.topology.worst_ns

    @staticmethod
    def _times(spans: list[SpanRecord]) -> list[int]:
        """Each member's arrival reading: TAI when every member has one, else OpenTelemetry start times."""
        if all(s.start.ptp_ns is not None for s in spans):
            return [s.start.ptp_ns for s in spans]  # type: ignore[misc]
        return [s.otel_start_ns for s in spans]

    def _stragglers(self, spans: list[SpanRecord], order: list[int], certain: bool, times: list[int]) -> None:
        c = self.counts
        for s in spans:
            c.straggler(s.clock).joined += 1
        if len(order) < 2:
            return
        row = c.straggler(spans[order[-1]].clock)
        row.last += 1
        row.last_certain += certain
        late = times[order[-1]] - times[order[0]]
        row.late_ns_total += late
        row.late_ns_max = max(row.late_ns_max, late)


def _member(s: SpanRecord, rank: int) -> dict[str, Any]:
    """A member row, in arrival order (times as in ``spans_kept``: TAI when the span has a reading)."""
    end = s.end
    return {
        "rank": rank, "host": s.host, "span_id": s.span_id,
        "start_ptp_ns": s.start.ptp_ns if s.start.ptp_ns is not None else s.otel_start_ns,
        "start_uncertainty_ns": s.start.uncertainty_ns,
        "end_ptp_ns": end.ptp_ns if end is not None and end.ptp_ns is not None else s.otel_end_ns,
        "end_uncertainty_ns": end.uncertainty_ns if end is not None else None,
        "completion": s.torch.completion if s.torch is not None else None,
    }
