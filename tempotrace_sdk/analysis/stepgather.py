"""Training steps gathered from their spans, as the input streams by (spec/analysis.md §6.1, ``torch``).

A step is one trace (spec/torch.md §4.1): every rank's ``torch.step`` span and the op spans inside it.
Its record is held while its spans arrive, per rank: the step span's times, the op spans' intervals, and
from each finished collective (collectives.py calls ``collective``) who arrived last and how far behind the
first arriver. Once no span can join it any more (its last span is more than the hop horizon behind the
input, or the input ended), the step is folded into the report's TorchJob and forgotten:

- per rank, *communication* is the union of its op spans' intervals inside its step span (async ops and a
  DDP bucket with its all_reduce overlap: each instant counts once), the *rest* is the step span's
  duration less that; both on the rank's own clock (OpenTelemetry span times: one clock per process);
- the *slowest* rank is the one that arrived last at most of the step's collectives (then: trailed most),
  by the readings the straggler table uses (collectives.py); *by how much* is how far behind the first
  arriver it started, summed over the collectives it was last at;
- failed ops (status ERROR) and incomplete collectives are listed with their step; torch spans of a trace
  with no step span (ops outside ``step()``) give their failures and incomplete collectives, not a step.

Only traces with torch spans are held, and only while they can grow: memory is bounded by the spans of the
hop horizon, like the collectives' own.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .events import JobKey, SpanRecord, split_clock
from .report import AnalysisReport
from .stepparent import STEP_SPAN
from .torchjob import STEP_RANKS_LISTED

__all__ = ["SAMPLE_RANKS", "StepGatherer", "union_ns"]

#: Missing ranks named per listed incomplete collective (as collectives.SAMPLE_RANKS).
SAMPLE_RANKS = 64


class _Rank:
    __slots__ = ("end", "failed", "last", "late", "late_max", "ops", "start", "step_spans")

    def __init__(self) -> None:
        self.start: int | None = None  # the step span's OpenTelemetry times
        self.end: int | None = None
        self.step_spans = 0
        self.ops: list[tuple[int, int]] = []
        self.last = 0  # collectives of the step this rank arrived last at
        self.late = 0  # summed: its start behind the first arriver's, at those
        self.late_max = 0
        self.failed = 0


class _Step:
    __slots__ = ("collectives", "failures", "incomplete", "job", "last_pos", "occurrence", "ranks", "step")

    def __init__(self, pos: int) -> None:
        self.last_pos = pos
        self.step: int | None = None
        self.occurrence = 0  # the step number's earlier uses in the job's processes (spec/torch.md §4.1)
        self.job: JobKey | None = None
        self.ranks: dict[str, _Rank] = {}  # clock key -> what that rank did in the step
        self.collectives = 0  # finished with two members or more (an arrival order)
        self.failures: list[tuple[int, dict[str, Any]]] = []
        self.incomplete: list[tuple[int, dict[str, Any]]] = []

    def rank(self, clock: str) -> _Rank:
        r = self.ranks.get(clock)
        if r is None:
            r = self.ranks[clock] = _Rank()
        return r


class StepGatherer:
    """``add`` each analysed span, ``collective`` each finished collective; ``expire`` as the input moves."""

    def __init__(self, report: AnalysisReport, horizon: int) -> None:
        self.report = report
        self.horizon = horizon
        self._open: OrderedDict[str, _Step] = OrderedDict()  # trace id -> step, by last position (re-queued)

    def __len__(self) -> int:
        return len(self._open)

    def _step(self, trace_id: str, pos: int) -> _Step:
        st = self._open.get(trace_id)
        if st is None:
            st = self._open[trace_id] = _Step(pos)
        elif pos > st.last_pos:
            st.last_pos = pos
            self._open.move_to_end(trace_id)
        return st

    def add(self, s: SpanRecord) -> None:
        """Take ``s`` if it is a torch span (an op or a step span)."""
        if s.torch is None and s.step is None:
            return
        st = self._step(s.trace_id, s.pos)
        r = st.rank(s.clock)
        if s.step is not None and s.name == STEP_SPAN:
            st.step, st.occurrence, st.job = s.step, s.step_occurrence, s.job
            r.step_spans += 1
            if r.start is None:  # a second one (a repeated run) is counted, not measured
                r.start, r.end = s.otel_start_ns, s.otel_end_ns
        elif s.torch is not None:
            r.ops.append((s.otel_start_ns, s.otel_end_ns))
        if s.error is not None:
            r.failed += 1
            t = s.torch
            st.failures.append((s.pos, {
                "trace_id": s.trace_id, "span_id": s.span_id, "rank": s.rank, "host": s.host,
                "op": t.op if t is not None else None, "group": t.group if t is not None else None,
                "seq": t.seq if t is not None else None, "name": s.name, "error": s.error}))

    def collective(self, trace_id: str, first: int, clocks: list[str], late: int, op: str, group: str, seq: int,
                   missing: int, missing_ranks: list[int]) -> None:
        """A finished collective of ``trace_id`` whose first member was at input position ``first``: its
        members' clocks in arrival order, how far the last started behind the first, and the ranks (how
        many, and the first few) that never joined."""
        st = self._step(trace_id, first)
        if len(clocks) > 1:
            st.collectives += 1
            r = st.rank(clocks[-1])
            r.last += 1
            r.late += late
            r.late_max = max(r.late_max, late)
        if missing:
            st.incomplete.append((first, {"trace_id": trace_id, "op": op, "group": group, "seq": seq,
                                          "missing": missing, "missing_ranks": missing_ranks[:SAMPLE_RANKS]}))

    def expire(self, limit: int | None) -> None:
        """Fold the steps whose last span lies before ``limit`` (all of them with None)."""
        queue = self._open
        while queue:
            trace_id = next(iter(queue))
            if limit is not None and queue[trace_id].last_pos >= limit:
                return
            self._fold(trace_id, queue.pop(trace_id))

    # -- one step -------------------------------------------------------------------------------------
    def _fold(self, trace_id: str, st: _Step) -> None:
        tj = self.report.torch_job
        for pos, sample in st.failures:
            tj.note_failed(pos, {**sample, "step": st.step})
        for pos, sample in st.incomplete:
            tj.note_incomplete(pos, {**sample, "step": st.step})
        if st.step is None:  # torch ops outside a step: no step to report
            return
        job_id, restart = st.job if st.job is not None else ("", 0)
        steps = tj.job(job_id)
        steps.steps += 1
        slowest = max(st.ranks.items(), key=lambda kv: (kv[1].last, kv[1].late, kv[0])) if st.collectives else None
        if slowest is not None and not slowest[1].last:
            slowest = None
        repeated = any(r.step_spans > 1 for r in st.ranks.values())
        tj.repeated_steps += repeated
        per_rank = []
        longest = 0
        for clock, r in sorted(st.ranks.items(), key=_rank_order):
            totals = steps.rank(clock)
            totals.failed += r.failed
            step_ns = None if r.start is None or r.end is None else max(0, r.end - r.start)
            comm = union_ns(r.ops, r.start, r.end)
            if step_ns is not None:  # a rank with op spans but no step span here has no step to split
                totals.steps += 1
                totals.step_ns += step_ns
                totals.comm_ns += comm
                longest = max(longest, step_ns)
            if slowest is not None and clock == slowest[0]:
                totals.slowest += 1
                totals.late_ns += r.late
            per_rank.append({"rank": totals.rank, "host": totals.host, "step_ns": step_ns, "comm_ns": comm,
                             "rest_ns": None if step_ns is None else max(0, step_ns - comm), "last": r.last,
                             "failed": r.failed})
        who: dict[str, Any] | None = None
        late = 0
        if slowest is not None:
            totals = steps.rank(slowest[0])
            late = slowest[1].late
            who = {"rank": totals.rank, "host": totals.host, "last": slowest[1].last, "late_ns": late,
                   "late_ns_max": slowest[1].late_max}
        row = {"job_id": job_id or None, "restart": restart, "step": st.step, "occurrence": st.occurrence,
               "trace_id": trace_id,
               "ranks": len(st.ranks), "longest_ns": longest, "collectives": st.collectives,
               "incomplete": len(st.incomplete), "failed": len(st.failures), "repeated": repeated, "slowest": who,
               "per_rank": per_rank[:STEP_RANKS_LISTED]}
        steps.keep((-late, restart, st.step, st.occurrence, trace_id), row)


def _rank_order(item: tuple[str, _Rank]) -> tuple[bool, int, str]:
    host, rank = split_clock(item[0])
    return (rank is None, rank or 0, host)


def union_ns(intervals: list[tuple[int, int]], lo: int | None = None, hi: int | None = None) -> int:
    """The time covered by ``intervals`` (each instant once), inside [lo, hi] where given."""
    total = 0
    end = None
    for a, b in sorted(intervals):
        if lo is not None:
            a = max(a, lo)
        if hi is not None:
            b = min(b, hi)
        if b <= a:
            continue
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total
