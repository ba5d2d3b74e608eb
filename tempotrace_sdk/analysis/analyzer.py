"""The streaming analysis: spans in, known edges decided, evidence counted
(spec/analysis.md §1, §4, §5).

Spans are buffered per trace, in parts. A part holds the spans of one trace
that arrive within ``window`` input positions of its first span (each span
object read takes one position): a span arriving later closes the part
(it is analysed) and opens the next. So memory holds at most the spans of the
last ``window`` positions, plus what ``memory.py`` keeps of analysed traces,
plus per-clock and per-clock-pair counters, plus the hang facts (a few spans
per rank and group, ``hangfacts.py``), plus the derived structure of the
traces whose spans can still arrive (a few arrays, ``derived.py``), plus the
spans kept for rendering (``keep``). Whether two spans share a part depends
only on their positions: a run split by trace id forms exactly the same parts
(``--jobs``, ``--engine dask``: the report equals one process's).

A parent -> child edge whose spans fall in different parts is counted as
unresolved, not guessed. A hop split that way still finds its sender, within
the hop horizon; a hop whose sender never shows up is decided and counted, but
its contradictions are "unattributed": no clock is blamed for them.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Iterable
from operator import attrgetter

from .collectives import Collectives
from .derived import Derived
from .edgebatch import ParentChildBatch
from .edges import EdgeJudge
from .events import SpanRecord
from .hopbatch import HopBatch
from .memory import Sender, Senders, TraceMemory, Waiting
from .p2p import Messages
from .plainlane import PlainLane, PlainRun
from .report import AnalysisReport
from .stepgather import StepGatherer
from .stepparent import is_virtual_step_parent
from .topology import Topology

__all__ = ["DEFAULT_DEDUP", "DEFAULT_KEEP", "DEFAULT_WINDOW", "MIN_REMEMBER", "Analyzer"]

DEFAULT_WINDOW = 100_000
DEFAULT_KEEP = 20_000
#: Positions within which a duplicate of an analysed span is still recognised (about 8 bytes a span).
DEFAULT_DEDUP = 1_000_000
#: The hop horizon: a client and its receive span this many positions apart or closer are matched even
#: in different parts; at least the window, and at least this (a few MB) so a small window keeps its hops.
MIN_REMEMBER = 4096


_JOB = attrgetter("job")


def _first(part: list[SpanRecord | int]) -> int:
    """The position of a part's first span (a plain row stands as its position)."""
    x = part[0]
    return x if type(x) is int else x.pos  # type: ignore[union-attr]


def _completes(span: SpanRecord, held: SpanRecord) -> bool:
    """``span`` is the end of the op ``held`` shows pending (a dump's span of an op still open, spec/torch.md
    §8.2): the same span id, so it takes its place (§5.2)."""
    op, held_op = span.torch, held.torch
    return (op is not None and held_op is not None and held_op.completion == "pending"
            and op.completion != "pending")


class Analyzer:
    """Feed spans with ``add_all``; call ``finish`` for the report."""

    def __init__(
        self,
        topology: Topology | None = None,
        *,
        window_spans: int = DEFAULT_WINDOW,
        keep: int = 0,
        source: str = "",
        dedup_spans: int = DEFAULT_DEDUP,
        batch_edges: bool = False,
    ) -> None:
        if window_spans < 1 or dedup_spans < 0 or keep < 0:
            raise ValueError("window_spans must be >= 1, dedup_spans and keep >= 0")
        self.window = window_spans
        self.horizon = max(window_spans, MIN_REMEMBER)
        self.keep = keep
        self.report = AnalysisReport(source=source, topology=topology.to_dict() if topology else None)
        self.report.limits = {"window": window_spans, "hop_horizon": self.horizon, "dedup": dedup_spans}
        topology = topology or Topology()
        # the traces' structure, which orders the torch edges physics and recorded evidence leave open
        self.derived = Derived(self.report.derived, self.horizon)
        self.judge = EdgeJudge(topology, self.report, self.derived)
        self.ledger = self.judge.ledger
        # the columnar engine's parent -> child edges and unkept hops, counted a batch at a time (edgebatch.py,
        # hopbatch.py: the same counts)
        self.pairs = ParentChildBatch(self.judge) if batch_edges else None
        self.hops = HopBatch(self.judge) if batch_edges else None
        # the columnar engine's plain lane: parts of plain rows (columnar/plain.py) counted a batch at a time
        self.lane = PlainLane(self) if batch_edges else None
        self.traces = TraceMemory(dedup_spans)
        self.senders = Senders()
        self.waiting = Waiting()
        # torch collectives, point-to-point messages and steps, gathered across parts within the hop horizon
        self.steps = StepGatherer(self.report, self.horizon)
        self.collectives = Collectives(self.judge, self.report, topology, self.horizon, keep, self.steps)
        self.messages = Messages(self.judge, self.report, self.horizon, keep)
        # trace id -> open part, in order of first position (an OrderedDict: memory.TraceMemory says why); a
        # plain row (PlainRun) stands in a part as its position, an int
        self._open: OrderedDict[str, list[SpanRecord | int]] = OrderedDict()
        self._pos = -1  # the last position seen
        self._step = max(1, self.window // 16)  # how often (positions) to analyse parts that can grow no more
        self._next_sweep = self._step
        self._t0 = time.monotonic()

    # -- input ------------------------------------------------------------------
    def add(self, span: SpanRecord) -> None:
        self.add_all((span,))

    def add_all(self, spans: Iterable[SpanRecord]) -> None:
        """Buffer spans into parts (module doc); spans with ``pos`` -1 are numbered here, in order."""
        self.add_batches((spans,))

    def add_batches(self, batches: Iterable[Iterable[SpanRecord] | PlainRun]) -> None:
        """``add_all`` for batches of spans (the reader's lines)."""
        rep = self.report
        place = self._place
        pos = self._pos
        n = 0
        for spans in batches:
            if isinstance(spans, PlainRun):
                self._pos = pos
                rep.spans += n
                n = 0
                self._add_plain(spans)
                pos = self._pos
                continue
            for span in spans:
                n += 1
                p = span.pos
                if p < 0:
                    pos += 1
                    span.pos = p = pos
                elif p > pos:
                    pos = p
                place(span.trace_id, span, p)
                if pos >= self._next_sweep:
                    self._sweep(pos)
        self._pos = pos
        rep.spans += n

    def _add_plain(self, run: PlainRun) -> None:
        """``add_batches`` for a line of plain rows: each stands in its part as its position."""
        assert self.lane is not None, "plain rows reach only an analyzer with the plain lane"
        self.lane.add_run(run)
        place = self._place
        pos = self._pos
        trace_id, first, at = run.block.trace_id, run.first, run.pos
        for i in run.rows:
            p = at + i - first
            if p > pos:
                pos = p
            place(trace_id[i], p, p)
            if pos >= self._next_sweep:
                self._sweep(pos)
        self._pos = pos
        self.report.spans += len(run.rows)

    def _place(self, tid: str, item: SpanRecord | int, p: int) -> None:
        """Put a span (or a plain row, as its position) read at position ``p`` in its trace's open part; a part that
        has lasted a window is complete, and ``item`` opens the next."""
        open_ = self._open
        part = open_.get(tid)
        if part is None:
            open_[tid] = [item]
        elif p - _first(part) >= self.window:
            del open_[tid]
            self._close(tid, part)
            open_[tid] = [item]
        else:
            part.append(item)

    def _sweep(self, pos: int) -> None:
        """Analyse the parts no span can join any more; forget what is out of every horizon."""
        limit = pos - self.window
        open_ = self._open
        while open_:
            tid = next(iter(open_))
            part = open_[tid]
            if _first(part) > limit:
                break
            del open_[tid]
            self._close(tid, part)
        if self.lane is not None:  # (before the waiting receivers are given up: a queued sender may be theirs)
            self.lane.flush()
            self.lane.forget_before(_first(open_[next(iter(open_))]) if open_ else pos + 1)
        # Every part analysed from now on starts after `limit`: nothing before these can match it.
        self.traces.forget_before(limit - self.traces.horizon)
        self.senders.forget_before(limit - self.horizon)
        for receiver in self.waiting.take_before(limit - self.horizon):
            self._hop(receiver, None)
        self.collectives.expire(limit - self.horizon)
        self.messages.expire(limit - self.horizon)
        self.steps.expire(limit - self.horizon)  # after the collectives: a step's last ones have reported to it
        self.derived.expire(limit - self.horizon)  # after the collectives and messages: its links are all in
        self._next_sweep = pos + self._step

    def finish(self) -> AnalysisReport:
        """Analyse what is left and return the report."""
        open_ = self._open
        while open_:
            self._close(*open_.popitem(last=False))
        if self.lane is not None:
            self.lane.flush()
        for receiver in self.waiting.take_before(None):  # senders that never showed up: blame nobody
            self._hop(receiver, None)
        self.collectives.expire(None)  # ranks that never joined: incomplete
        self.messages.expire(None)
        self.steps.expire(None)
        self.derived.expire(None)
        if self.pairs is not None:
            self.pairs.flush()
        if self.hops is not None:
            self.hops.flush()
        rep = self.report
        rep.faults = self.ledger.attribute()
        rep.elapsed_s = time.monotonic() - self._t0
        return rep

    # -- one part of one trace ------------------------------------------------------
    def _close(self, tid: str, part: list[SpanRecord | int]) -> None:
        """A part is complete: queued in the plain lane when all its rows are plain and the lane may take it,
        else analysed here, its plain rows made into records first."""
        lane = self.lane
        if lane is None:
            self._analyse(part)  # type: ignore[arg-type]  # (only records without the lane)
            return
        if tid in lane.tids:  # an earlier part of the trace is queued: it is counted first (a sweep empties the queue,
            lane.flush()  # but the positions of another partition's spans trigger none)
        plain = [x for x in part if type(x) is int]
        if len(plain) == len(part) and lane.takes(tid, plain):
            lane.queue(tid, plain)
            return
        spans: list[SpanRecord] = lane.records(part) if plain else part  # type: ignore[assignment]
        if lane.queued and lane.new_job(spans):  # (the job table takes new keys in the order parts complete)
            lane.flush()
        self._analyse(spans)

    def _analyse(self, spans: list[SpanRecord]) -> None:
        rep = self.report
        tid = spans[0].trace_id
        earlier = self.traces.earlier(tid, spans[0].pos)
        by_id: dict[str, SpanRecord] = {}
        for s in spans:
            sid = s.span_id
            held = by_id.get(sid)
            if held is not None:  # delivered more than once, or an op a dump showed pending that then ended
                rep.duplicate_spans += 1
                if _completes(s, held):
                    by_id[sid] = s
            elif earlier is not None and sid in earlier:
                rep.duplicate_spans += 1
            else:
                by_id[sid] = s
        if not by_id:
            return
        rep.trace_parts += 1
        if earlier is None:
            rep.traces += 1
        self.traces.remember(tid, by_id, spans[-1].pos, earlier is not None)
        rep.jobs.merge_counts(Counter(map(_JOB, by_id.values())))  # the ranks of a step name one job: few keys
        judge = self.judge
        pair = judge.parent_child if self.pairs is None else self.pairs.add
        steps = self.steps
        derived = self.derived
        hang = rep.hang_facts
        hang.saw(by_id.values())
        kept = rep.spans_kept
        keep = self.keep - len(kept)  # spans still to keep for rendering
        for s in by_id.values():
            if s.degraded:
                rep.degraded_spans += 1
            if keep > 0:
                rep.keep_span(s)
                keep -= 1
            if s.torch is not None or s.step is not None:
                steps.add(s)
                derived.add(s)
            pid = s.parent_id
            parent = by_id.get(pid) if pid else None
            if parent is not None:
                pair(parent, s)
            elif pid:
                if is_virtual_step_parent(s):  # missing by design (spec/torch.md §4.1): not lost data
                    rep.virtual_parents += 1
                else:
                    rep.unresolved_parents += 1
            if s.remote is not None:
                if parent is not None:
                    self._hop(s, (parent.pos, parent.clock, parent.host, parent.sends, parent.degraded))
                else:
                    sender = self.senders.get(tid, pid) if pid else None
                    if sender is not None and abs(sender[0] - s.pos) > self.horizon:
                        sender = None  # (remembered past the horizon, not yet forgotten: as if it were)
                    if sender is not None or not pid:
                        self._hop(s, sender)
                    else:
                        self.waiting.add(s)
        waiting = self.waiting
        for s in by_id.values():
            if s.sends:
                sender = self.senders.add(s)
                if waiting:
                    receivers = waiting.take(tid, s.span_id)
                    if receivers is not None:
                        for r in receivers:
                            self._hop(r, sender)
            if s.torch is not None:
                hang.add(s)  # before the collective can finish: an incomplete one names its op to it
                if not self.collectives.add(s):
                    self.messages.add(s)
            elif s.dump is not None:
                hang.dump(s)

    def _hop(self, s: SpanRecord, client: Sender | None) -> None:
        """Decide one hop; a client span further than the hop horizon from its receive span is not used."""
        if client is not None and abs(client[0] - s.pos) > self.horizon:
            client = None
        rep = self.report
        keep = len(rep.hops_kept) < self.keep
        if not keep and self.hops is not None:
            self.hops.add(s, client)
            return
        record = self.judge.hop(s, client, keep)
        if record is not None:
            rep.hops_kept.append(record)
