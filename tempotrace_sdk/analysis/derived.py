"""Derived order: the torch edges that physics and recorded evidence leave open, decided from the trace's
own structure (spec/analysis.md §2.8).

The structure is what the trace says without any counter compared across processes: each process's
program order (its own Lamport values, derived_graph.py), each matched message (p2p.py: the send span's
start before the receive's completion) and each collective's claim (claims.py: the required starts
before the required ends). A point-to-point or collective edge that physics (§2.1) does not order, and
that no recorded Lamport value or sketch (§2.2, §2.3) decides, is that structure's own link: it is
decided BEFORE by ``derived``, unless the structure also leads from the edge's end back to its start. Such
a cycle cannot happen in a job (a channel's numbering that names another message, or a counter that did
not increase): the edge is then a WRONG derived decision, blaming no clock.

The structure is gathered per *run* of a trace: the trace's torch spans in input order, a new run where
two consecutive ones lie more than the hop horizon apart. No message or collective spans such a gap (their
sides are gathered within the horizon of the first, §5.2), so each lies in one run, and runs depend only on
positions: a split run (``--jobs``, dask) forms the same ones and reports the same. A run is checked when no
span can join it any more (its last span is more than the hop horizon behind the input), after the
collectives and messages of that horizon were finished, so every link of it is in.

Left undecided, and counted: edges whose run reached derived_graph.MAX_NODES (their links are not held),
and the edges of a run where one clock key has two step spans (two processes under one key, a repeated
run: neither their program order nor their pairing can be trusted).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence

from .derived_graph import Graph, on_cycle
from .events import SpanRecord
from .order import UNDECIDED, Decision, Method, Relation
from .stepparent import STEP_SPAN
from .torchcounts import DerivedCounts

__all__ = ["BEFORE_BY_DERIVED", "CYCLE_BY_DERIVED", "Derived", "Settle"]

BEFORE_BY_DERIVED = Decision(Relation.BEFORE, Method.DERIVED)
#: The structure orders the edge's end before its start as well (a cycle): a contradiction.
CYCLE_BY_DERIVED = Decision(Relation.AFTER, Method.DERIVED)

#: Counts a deferred edge's decision; for a claim on a cycle also a witness, (start, end) as indexes into the
#: starts and ends it was linked with, else None.
Settle = Callable[[Decision, "tuple[int, int] | None"], None]

_MESSAGE = 0
_CLAIM = 1


class _Run:
    __slots__ = ("first", "full", "graph", "last", "pending", "repeated", "stepped", "trace_id")

    def __init__(self, trace_id: str, pos: int) -> None:
        self.trace_id = trace_id
        self.first = self.last = pos  # input positions of its first and last torch span
        self.graph = Graph()
        #: deferred edges: (_MESSAGE, send node, receive node, settle) or (_CLAIM, claim node, starts, settle)
        self.pending: list[tuple[int, int, int, Settle]] = []
        self.stepped: set[str] = set()  # clock keys with a step span here
        self.repeated = False  # one of them has two
        self.full = False  # reached MAX_NODES: links no more


class Derived:
    """``add`` each analysed torch span; ``message`` / ``claim`` each matched message and claim, with a
    ``settle`` when its edge waits for the derived decision; ``expire`` as the input moves."""

    def __init__(self, counts: DerivedCounts, horizon: int) -> None:
        self.counts = counts
        self.horizon = horizon
        self._queue: OrderedDict[tuple[str, int], _Run] = OrderedDict()  # (trace, first) -> run, by last position
        self._runs: dict[str, list[_Run]] = {}  # trace id -> its runs not yet checked, oldest first

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, s: SpanRecord) -> None:
        """Take a torch span (an op or a step span) of its trace's current run, or start the next run."""
        runs = self._runs.get(s.trace_id) or []
        run = runs[-1] if runs else None
        if run is None or s.pos - run.last > self.horizon:
            run = _Run(s.trace_id, s.pos)
            self._runs.setdefault(s.trace_id, []).append(run)
            self._queue[(s.trace_id, s.pos)] = run
        elif s.pos > run.last:
            run.last = s.pos
            self._queue.move_to_end((s.trace_id, run.first))
        if s.step is not None and s.name == STEP_SPAN:
            if s.clock in run.stepped:
                run.repeated = True
            else:
                run.stepped.add(s.clock)

    def message(self, send: SpanRecord, recv: SpanRecord, settle: Settle | None) -> None:
        """A matched message whose receive completed: send start -> receive end."""
        run = self._linkable(recv, 2, settle)
        if run is None:
            return
        g = run.graph
        s, r = g.event(send.clock, send.start), g.event(recv.clock, recv.end)
        g.message(s, r)
        self.counts.links += 1
        if settle is not None:
            run.pending.append((_MESSAGE, s, r, settle))

    def claim(self, members: Sequence[SpanRecord], starts: Sequence[int], ends: Sequence[int],
              settle: Settle | None) -> None:
        """A collective's claim: every required start (indexes into ``members``) -> every required end."""
        run = self._linkable(members[0], 1 + len(starts) + len(ends), settle)
        if run is None:
            return
        v = run.graph.claim([(members[i].clock, members[i].start) for i in starts],
                            [(members[j].clock, members[j].end) for j in ends])
        self.counts.links += 1
        if settle is not None:
            run.pending.append((_CLAIM, v, len(starts), settle))

    def _linkable(self, s: SpanRecord, nodes: int, settle: Settle | None) -> _Run | None:
        """The run ``s`` lies in, when it can hold ``nodes`` more; else None, and a waiting edge undecided."""
        runs = self._runs.get(s.trace_id) or []
        run = runs[-1] if runs else None
        if run is not None and run.first > s.pos:  # an earlier run's (the latest is nearly always the one)
            run = next((r for r in reversed(runs) if r.first <= s.pos), None)
        if run is not None and not run.full and not run.graph.room(nodes):
            run.full = True
        if run is not None and not run.full:
            return run
        if settle is not None:
            if run is not None:
                self.counts.beyond_limit += 1
            settle(UNDECIDED, None)
        return None

    def expire(self, limit: int | None) -> None:
        """Check the runs whose last span lies before ``limit`` (all of them with None)."""
        queue = self._queue
        while queue:
            key = next(iter(queue))
            run = queue[key]
            if limit is not None and run.last >= limit:
                return
            del queue[key]
            runs = self._runs[run.trace_id]
            runs.remove(run)
            if not runs:
                del self._runs[run.trace_id]
            self._check(run)

    def _check(self, run: _Run) -> None:
        """Decide a run's waiting edges: BEFORE by derived, unless the edge lies on a cycle of the structure."""
        if not run.pending:
            return
        c = self.counts
        c.runs += 1
        if run.repeated:
            c.repeated += len(run.pending)
            for *_, settle in run.pending:
                settle(UNDECIDED, None)
            return
        comp = run.graph.cycles()
        if comp is None:
            for *_, settle in run.pending:
                settle(BEFORE_BY_DERIVED, None)
            return
        c.cycles += 1
        sizes = Counter(comp.values())
        claim_out = run.graph.claim_out
        for kind, a, b, settle in run.pending:
            if kind == _MESSAGE:
                looped = a in comp and comp[a] == comp.get(b)
                settle(CYCLE_BY_DERIVED if looped else BEFORE_BY_DERIVED, None)
            elif on_cycle(comp, sizes, a):
                # The cycle enters the claim from one of its starts and leaves by one of its ends: the witness.
                start = next((k for k in range(b) if comp.get(a + 1 + k) == comp[a]), 0)
                end = next((k for k, e in enumerate(claim_out[a]) if comp.get(e) == comp[a]), 0)
                settle(CYCLE_BY_DERIVED, (start, end))
            else:
                settle(BEFORE_BY_DERIVED, None)
