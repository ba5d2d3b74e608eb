"""What the report counts about collectives and point-to-point messages (spec/analysis.md §1.3, §6.1).

State is per collective outcome, per op, per clock (stragglers) and per rank (ranks that never joined),
never per span: bounded by the number of clocks and ranks, whatever the input's size. ``merge`` adds
the counts of partitions that analysed disjoint traces (merge.py), so a split run reports what one
process would.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .events import split_clock

__all__ = ["TOP", "CollectiveCounts", "DerivedCounts", "P2PCounts", "StragglerRow"]

#: Rows of the per-clock and per-rank tables, and incomplete collectives, listed in the JSON.
TOP = 20
OUTCOMES = ("consistent", "undecided", "contradiction")


@dataclass
class StragglerRow:
    """One clock's record as a collective member: how often it joined, how often it arrived last (by its
    start reading; ``last_certain``: physics says it started after every other member), and by how much
    it trailed the first arriver when it was last."""

    joined: int = 0
    last: int = 0
    last_certain: int = 0
    late_ns_total: int = 0
    late_ns_max: int = 0

    def add(self, other: StragglerRow) -> None:
        self.joined += other.joined
        self.last += other.last
        self.last_certain += other.last_certain
        self.late_ns_total += other.late_ns_total
        self.late_ns_max = max(self.late_ns_max, other.late_ns_max)


@dataclass
class CollectiveCounts:
    """Collective instances (one (trace, group, seq) each) and what became of them."""

    total: int = 0
    complete: int = 0
    incomplete: int = 0
    members: int = 0
    missing_members: int = 0
    #: collectives whose members disagree on the op or the root (the program called different collectives)
    mismatched: int = 0
    #: collectives with no ordering claim to decide (one member, a rooted op without its root, an op the
    #: analysis has no rule for, a mismatch)
    no_claim: int = 0
    #: a second span of one rank for one collective (kept: the first), and spans whose rank is not in the key
    conflicts: int = 0
    foreign: int = 0
    #: member spans whose end was not the op completing (unfinished, error): no end event
    ends_not_completed: int = 0
    #: instances that began after an earlier instance of the same (trace, group, seq) was finished incomplete by
    #: the hop horizon: one collective whose members lie further apart in the input than the horizon
    split: int = 0
    #: the most input positions one split collective's members span (its first member to its last seen): a
    #: window this large gathers it
    split_distance: int = 0
    by_op: Counter[str] = field(default_factory=Counter)
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    decided: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("physics", "lamport", "svc", "derived", "undecided"), 0))
    stragglers: dict[str, StragglerRow] = field(default_factory=dict)  # clock key -> row
    missing_by_rank: Counter[int] = field(default_factory=Counter)
    #: the first TOP incomplete collectives: (input position of the first member, summary)
    incomplete_first: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    def straggler(self, clock: str) -> StragglerRow:
        row = self.stragglers.get(clock)
        if row is None:
            row = self.stragglers[clock] = StragglerRow()
        return row

    def merge(self, other: CollectiveCounts) -> None:
        for name in ("total", "complete", "incomplete", "members", "missing_members", "mismatched", "no_claim",
                     "conflicts", "foreign", "ends_not_completed", "split"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.split_distance = max(self.split_distance, other.split_distance)
        self.by_op.update(other.by_op)
        for key, n in other.outcomes.items():
            self.outcomes[key] += n
        for key, n in other.decided.items():
            self.decided[key] += n
        for clock, row in other.stragglers.items():
            self.straggler(clock).add(row)
        self.missing_by_rank.update(other.missing_by_rank)
        self.incomplete_first = sorted(self.incomplete_first + other.incomplete_first, key=lambda x: x[0])[:TOP]

    def straggler_rows(self) -> list[dict[str, Any]]:
        """The clocks that arrived last most often (at most TOP), most often first."""
        rows = [(split_clock(clock), row) for clock, row in self.stragglers.items() if row.last]
        rows.sort(key=lambda cr: (-cr[1].last, -cr[1].late_ns_total, cr[0][0], -1 if cr[0][1] is None else cr[0][1]))
        return [{"host": host, "rank": rank, "joined": row.joined, "last": row.last, "last_certain": row.last_certain,
                 "late_ns_total": row.late_ns_total, "late_ns_max": row.late_ns_max}
                for (host, rank), row in rows[:TOP]]

    def to_dict(self) -> dict[str, Any]:
        missing = sorted(self.missing_by_rank.items(), key=lambda rn: (-rn[1], rn[0]))[:TOP]
        return {
            "total": self.total, "complete": self.complete, "incomplete": self.incomplete, "members": self.members,
            "missing_members": self.missing_members, "mismatched": self.mismatched, "no_claim": self.no_claim,
            "conflicts": self.conflicts, "foreign": self.foreign, "ends_not_completed": self.ends_not_completed,
            "split": self.split, "split_distance": self.split_distance,
            "by_op": dict(sorted(self.by_op.items())), "outcomes": dict(self.outcomes), "decided": dict(self.decided),
            "missing_ranks": [{"rank": r, "count": n} for r, n in missing],
            "incomplete_first": [summary for _, summary in self.incomplete_first],
        }


@dataclass
class P2PCounts:
    """torch point-to-point messages, one per (trace, group, src, dst, tag, p2p_seq)."""

    total: int = 0
    matched: int = 0  #: both the send span and the receive span are in the input
    unmatched_sends: int = 0
    unmatched_recvs: int = 0
    carried: int = 0  #: the receive recorded the sender's record (torch.remote.*)
    #: the carried record names another send span or send event than the one the sequence numbers pair
    record_mismatch: int = 0
    conflicts: int = 0  #: a second span for one side of one message (the first is paired)
    not_completed: int = 0  #: receives that never completed (unfinished, error): no receive event
    #: messages whose receive is marked ambiguous (spec/torch.md §2): not paired by p2p_seq, no edge
    ambiguous: int = 0

    def merge(self, other: P2PCounts) -> None:
        for name in ("total", "matched", "unmatched_sends", "unmatched_recvs", "carried", "record_mismatch",
                     "conflicts", "not_completed", "ambiguous"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self) -> dict[str, int]:
        return {"total": self.total, "matched": self.matched, "unmatched_sends": self.unmatched_sends,
                "unmatched_recvs": self.unmatched_recvs, "carried": self.carried,
                "record_mismatch": self.record_mismatch, "conflicts": self.conflicts,
                "not_completed": self.not_completed, "ambiguous": self.ambiguous}


@dataclass
class DerivedCounts:
    """The structure the derived order reads (derived.py, spec/analysis.md §2.8): trace runs checked, messages
    and claims linked, runs holding a cycle, and the edges left undecided for want of a trustworthy structure."""

    runs: int = 0  #: runs with an edge to derive, checked
    links: int = 0  #: matched messages and collective claims in the structure
    cycles: int = 0  #: runs whose structure leads around a cycle (a numbering or counter fault)
    beyond_limit: int = 0  #: edges of runs past derived_graph.MAX_NODES: undecided
    repeated: int = 0  #: edges of runs with two step spans of one clock (two processes under one key): undecided

    def merge(self, other: DerivedCounts) -> None:
        for name in ("runs", "links", "cycles", "beyond_limit", "repeated"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self) -> dict[str, int]:
        return {"runs": self.runs, "links": self.links, "cycles": self.cycles, "beyond_limit": self.beyond_limit,
                "repeated": self.repeated}
