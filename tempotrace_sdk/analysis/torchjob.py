"""A torch job as its engineers read it: per step, the slowest rank and by how much; per rank, time in
communication against the rest of the step; the ops that failed; the collectives a rank never joined
(spec/analysis.md §6.1, ``torch``; gathered by stepgather.py).

State is per job and per clock (rank), plus a few listed steps and samples, never per span or per step:
bounded whatever the job's length. ``merge`` adds the results of partitions that analysed disjoint traces
(a step is one trace), so a split run reports what one process would.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from .events import split_clock
from .torchcounts import TOP

__all__ = ["MAX_RANKS_LISTED", "MAX_STEPS_LISTED", "STEP_RANKS_LISTED", "JobSteps", "RankTotals", "TorchJob"]

#: Steps listed per job: all of a short job's; of a longer one, those whose slowest rank trailed most.
MAX_STEPS_LISTED = 20
#: Ranks listed per job (per-rank totals) and per listed step.
MAX_RANKS_LISTED = 1024
STEP_RANKS_LISTED = 64

#: A listed step's rank key: most trailing first, then restart, step, occurrence and trace (so partitions agree).
StepKey = tuple[int, int, int, int, str]


@dataclass
class RankTotals:
    """One rank (clock) over a job's steps: its step spans' time, the part of it inside op spans (the union
    of their intervals: overlapping async ops count once), the steps it was the slowest in and by how much
    it trailed the first arriver at their collectives, and its failed ops."""

    host: str
    rank: int | None
    steps: int = 0
    step_ns: int = 0
    comm_ns: int = 0
    slowest: int = 0
    late_ns: int = 0
    failed: int = 0

    def add(self, other: RankTotals) -> None:
        self.steps += other.steps
        self.step_ns += other.step_ns
        self.comm_ns += other.comm_ns
        self.slowest += other.slowest
        self.late_ns += other.late_ns
        self.failed += other.failed

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "steps": self.steps, "step_ns": self.step_ns,
                "comm_ns": self.comm_ns, "rest_ns": max(0, self.step_ns - self.comm_ns),
                "slowest_in": self.slowest, "late_ns": self.late_ns, "failed": self.failed}


@dataclass
class JobSteps:
    """The steps of one job id: how many, per-rank totals, and the listed steps (rows as in the JSON)."""

    steps: int = 0
    ranks: dict[str, RankTotals] = field(default_factory=dict)  # clock key -> totals
    listed: list[tuple[StepKey, dict[str, Any]]] = field(default_factory=list)

    def rank(self, clock: str) -> RankTotals:
        row = self.ranks.get(clock)
        if row is None:
            host, rank = split_clock(clock)
            row = self.ranks[clock] = RankTotals(host, rank)
        return row

    def keep(self, key: StepKey, row: dict[str, Any]) -> None:
        self.listed.append((key, row))
        if len(self.listed) > 2 * MAX_STEPS_LISTED:
            self.listed.sort(key=lambda kr: kr[0])
            del self.listed[MAX_STEPS_LISTED:]

    def merge(self, other: JobSteps) -> None:
        self.steps += other.steps
        for clock, totals in other.ranks.items():
            self.rank(clock).add(totals)
        for key, row in other.listed:
            self.keep(key, row)

    def step_rows(self) -> list[dict[str, Any]]:
        """The listed steps in step order (restart, step, occurrence, trace)."""
        chosen = sorted(self.listed, key=lambda kr: kr[0])[:MAX_STEPS_LISTED]
        return [row for _, row in sorted(chosen, key=lambda kr: kr[0][1:])]

    def rank_rows(self) -> list[dict[str, Any]]:
        """Per-rank totals by rank (then host); at most MAX_RANKS_LISTED."""
        rows = sorted(self.ranks.values(), key=lambda r: (r.rank is None, r.rank or 0, r.host))
        return [r.to_dict() for r in rows[:MAX_RANKS_LISTED]]


@dataclass
class TorchJob:
    """Steps per job id ("" where the spans name none), failed ops, incomplete collectives with their step."""

    jobs: dict[str, JobSteps] = field(default_factory=dict)
    failed: int = 0
    #: the first TOP failed torch spans by input position: (position, sample)
    failed_first: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    #: the first TOP incomplete collectives by input position, with their step: (position, sample)
    incomplete_first: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    #: steps whose trace holds two step spans of one rank: two runs that named the same job id and restart
    repeated_steps: int = 0

    @property
    def steps(self) -> int:
        return sum(j.steps for j in self.jobs.values())

    def job(self, job_id: str) -> JobSteps:
        found = self.jobs.get(job_id)
        if found is None:
            found = self.jobs[job_id] = JobSteps()
        return found

    def note_failed(self, pos: int, sample: dict[str, Any]) -> None:
        self.failed += 1
        _first(self.failed_first, pos, sample)

    def note_incomplete(self, pos: int, sample: dict[str, Any]) -> None:
        _first(self.incomplete_first, pos, sample)

    def merge(self, other: TorchJob) -> None:
        for job_id, steps in other.jobs.items():
            self.job(job_id).merge(steps)
        self.failed += other.failed
        for pos, sample in other.failed_first:
            _first(self.failed_first, pos, sample)
        for pos, sample in other.incomplete_first:
            _first(self.incomplete_first, pos, sample)
        self.repeated_steps += other.repeated_steps

    def by_job(self) -> list[tuple[str, JobSteps]]:
        """Jobs with steps, most steps first (then by id)."""
        return sorted(((j, s) for j, s in self.jobs.items() if s.steps), key=lambda js: (-js[1].steps, js[0]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "by_job": [{"job_id": job_id or None, "steps": steps.steps, "ranks": steps.rank_rows(),
                        "listed": steps.step_rows()} for job_id, steps in self.by_job()],
            "failed": {"total": self.failed, "first": [sample for _, sample in self.failed_first]},
            "incomplete_first": [sample for _, sample in self.incomplete_first],
            "repeated_steps": self.repeated_steps,
        }


def _first(samples: list[tuple[int, dict[str, Any]]], pos: int, sample: dict[str, Any]) -> None:
    """Keep the TOP samples with the smallest input positions (partitions merge to what one process keeps)."""
    if len(samples) < TOP or pos < samples[-1][0]:
        bisect.insort(samples, (pos, sample), key=lambda x: x[0])
        del samples[TOP:]
