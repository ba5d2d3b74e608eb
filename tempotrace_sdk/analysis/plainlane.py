"""The plain lane: trace parts of plain rows counted a batch at a time from arrays (spec/analysis.md §5.6).

A part all of whose rows are plain (columnar/plain.py: no torch op, step, dump or host clock domain) asks of
the analysis only what analyzer._analyse does for any part -- duplicates, parent -> child edges, hops, lost
parents, the trace memory, senders, job and rank counts -- and each of those is a sum, a tally, a table
keyed by the part's own trace, or looked up by position (a sender further than the hop horizon is none,
however long the memory holds it). One is not: the job table tells its first MAX_JOBS keys apart, so it
takes keys in the order the parts complete in -- a batch adds them in that order, and a part the analyzer
analyses itself that names a new job empties the queue first. So the analyzer queues plain parts as they
complete and this counts a batch of them with joins and array rules (edgebatch.count_pairs), the report
unchanged. A part the arrays cannot take exactly is handed back whole to ``_analyse`` in its place among
the others, its rows made into records: one with a span id twice, or a receive span whose client is in no
part of its own (the senders and waiting receivers decide it); a batch whose readings lie outside the
int64 rules' range is counted pair by pair by the judge. The lane takes a part only once the kept spans and
hops are all kept (their order is the reference's), and only when no earlier part of its trace is
remembered; the analyzer empties the queue before anything another part could read of a queued one (a
later part of its trace, the waiting receivers given up, the job table's next new key).
"""

from __future__ import annotations

from collections import Counter
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from .columnar.sketchmask import own_sketches
from .edgebatch import PairSides, count_pairs, in_sketches
from .edges import UNKNOWN_SENDER
from .events import SpanRecord
from .hopbatch import _tai_as_utc
from .stamparrays import StampArrays

if TYPE_CHECKING:
    from .analyzer import Analyzer
    from .columnar.plain import PlainRows

__all__ = ["LANE_ROWS", "PlainLane", "PlainRun"]

#: rows queued before a batch is counted
LANE_ROWS = 16384
# the stamps slots (native/stamp TT_STAMPS_SLOTS; analysis/values._from_slots)
_START, _HAS_END, _END, _HAS_REMOTE, _REMOTE, _HAS_SKETCH = 2, 6, 7, 11, 12, 20
_REMOTE_LTS, _MERGED = 17, 18


class PlainRun:
    """One line's plain rows: table rows ``first``..``first + n - 1`` of ``block`` at positions from ``pos``, those
    of the owned traces in ``rows``."""

    __slots__ = ("block", "first", "n", "pos", "rows")

    def __init__(self, block: PlainRows, first: int, n: int, pos: int, rows: list[int]) -> None:
        self.block, self.first, self.n, self.pos, self.rows = block, first, n, pos, rows

    def __len__(self) -> int:
        return len(self.rows)


class PlainLane:
    """The analyzer's queue of plain parts, and the runs their rows are in."""

    def __init__(self, analyzer: Analyzer) -> None:
        self.analyzer = analyzer
        self._runs: list[PlainRun] = []  # in order of position
        self._queued: list[tuple[str, list[int]]] = []
        self.tids: set[str] = set()  #: the traces of the queued parts
        self._rows = 0
        #: parts counted from arrays, and parts queued but handed back to analyzer._analyse (module doc)
        self.counted = self.handed_back = 0

    # -- runs ----------------------------------------------------------------------------------------
    def add_run(self, run: PlainRun) -> None:
        self._runs.append(run)

    def forget_before(self, pos: int) -> None:
        """Let go of the runs all of whose rows lie before ``pos`` (the first position of every open part) and
        before every queued part's."""
        if self._queued:
            pos = min(pos, min(part[0] for _, part in self._queued))
        runs = self._runs
        k = 0
        while k < len(runs) and runs[k].pos + runs[k].n <= pos:
            k += 1
        if k:
            del runs[:k]

    def _locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each position's run (index into the runs) and table row."""
        runs = self._runs
        starts = np.fromiter((r.pos for r in runs), dtype=np.int64, count=len(runs))
        at = np.searchsorted(starts, positions, side="right") - 1
        firsts = np.fromiter((r.first for r in runs), dtype=np.int64, count=len(runs))
        return at, firsts[at] + positions - starts[at]

    def records(self, part: list[Any]) -> list[SpanRecord]:
        """A part with its plain rows (positions) made into their records, in its order."""
        plain = [k for k, x in enumerate(part) if type(x) is int]
        out = list(part)
        at, rows = self._locate(np.array([part[k] for k in plain], dtype=np.int64))
        by_block: dict[int, tuple[PlainRows, list[int], list[int], list[int]]] = {}
        for k, r, row in zip(plain, at.tolist(), rows.tolist(), strict=True):
            block = self._runs[r].block
            entry = by_block.get(id(block))
            if entry is None:
                entry = by_block[id(block)] = (block, [], [], [])
            entry[1].append(k)
            entry[2].append(row)
            entry[3].append(part[k])
        for block, where, rows_of, positions in by_block.values():
            for k, record in zip(where, block.record(rows_of, positions), strict=True):
                out[k] = record
        return out

    # -- the queue -----------------------------------------------------------------------------------
    def takes(self, tid: str, part: list[int]) -> bool:
        """May the lane count this part (module doc)?"""
        a = self.analyzer
        rep = a.report
        if len(rep.spans_kept) < a.keep or len(rep.hops_kept) < a.keep:
            return False
        return a.traces.earlier(tid, part[0]) is None

    @property
    def queued(self) -> bool:
        return bool(self._queued)

    def new_job(self, spans: list[SpanRecord]) -> bool:
        """Whether a part the analyzer analyses itself names a job its job table does not hold yet."""
        held = self.analyzer.report.jobs.spans
        return any(s.job not in held for s in spans)

    def queue(self, tid: str, part: list[int]) -> None:
        self._queued.append((tid, part))
        self.tids.add(tid)
        self._rows += len(part)
        if self._rows >= LANE_ROWS:
            self.flush()

    def flush(self) -> None:
        """Count the queued parts."""
        parts = self._queued
        if not parts:
            return
        self._queued, self.tids, self._rows = [], set(), 0
        batch = _Batch(self, parts)
        a = self.analyzer
        bad = batch.find_bad()
        if not bad.any():
            batch.count(a)
            self.counted += len(parts)
            return
        # A part handed back is analysed in its place among the others: the job table takes new keys in the
        # order the parts completed (and refuses them, once full, in that order).
        start = 0
        for k in [*np.flatnonzero(bad).tolist(), len(parts)]:
            if k > start:
                run = _Batch(self, parts[start:k])
                run.find_bad()
                run.count(a)
                self.counted += k - start
            if k < len(parts):
                self.handed_back += 1
                a._analyse(self.records(parts[k][1]))
            start = k + 1


class _Batch:
    """The queued parts' rows gathered from their blocks, grouped by block (any order serves but the job table's,
    which is taken in the parts' order)."""

    def __init__(self, lane: PlainLane, parts: list[tuple[str, list[int]]]) -> None:
        self.lane = lane
        self.tids = [tid for tid, _ in parts]
        lens = np.fromiter(map(len, (p for _, p in parts)), dtype=np.int64, count=len(parts))
        pos = np.fromiter(chain.from_iterable(p for _, p in parts), dtype=np.int64, count=int(lens.sum()))
        part = np.repeat(np.arange(len(parts), dtype=np.int64), lens)
        at, row = lane._locate(pos)
        blocks: dict[int, int] = {}
        block_list: list[PlainRows] = []
        run_block = np.empty(len(lane._runs), dtype=np.int64)
        for r, run in enumerate(lane._runs):
            b = blocks.get(id(run.block))
            if b is None:
                b = blocks[id(run.block)] = len(block_list)
                block_list.append(run.block)
            run_block[r] = b
        bk = run_block[at]
        order = np.argsort(bk, kind="stable")
        self.pos, self.part, self.bk, self.row = pos[order], part[order], bk[order], row[order]
        self.blocks = block_list
        bounds = np.searchsorted(self.bk, np.arange(len(block_list) + 1))
        self.segments = [(b, int(bounds[b]), int(bounds[b + 1])) for b in range(len(block_list))
                         if bounds[b + 1] > bounds[b]]
        self.n = len(pos)
        self.parts = len(parts)
        self.bad = np.zeros(len(parts), dtype=bool)

    def gather(self, name: str) -> np.ndarray:
        """A block array's values at the rows, in the batch's order."""
        pieces = [getattr(self.blocks[b], name)[self.row[lo:hi]] for b, lo, hi in self.segments]
        return np.concatenate(pieces) if len(pieces) != 1 else pieces[0]

    def listed(self, name: str, rows: np.ndarray | None = None) -> list[Any]:
        """A block list's values at the rows (all, or the batch indices ``rows``)."""
        if rows is None:
            out: list[Any] = []
            for b, lo, hi in self.segments:
                values = getattr(self.blocks[b], name)
                out.extend(values[i] for i in self.row[lo:hi].tolist())
            return out
        bk, row = self.bk[rows].tolist(), self.row[rows].tolist()
        return [getattr(self.blocks[b], name)[i] for b, i in zip(bk, row, strict=True)]

    def records(self, rows: list[int]) -> list[SpanRecord]:
        """The records of batch indices ``rows`` (for the one-at-a-time rules)."""
        return self.lane.records(self.pos[rows].tolist())

    # -- counting ------------------------------------------------------------------------------------
    def find_bad(self) -> np.ndarray:
        """Each row's parent in its part, and the parts the arrays cannot take (module doc): which parts."""
        n = self.n
        span, parent, has_parent = self.gather("span"), self.gather("parent"), self.gather("has_parent")
        slots = self.slots = self.gather("slots")
        part = self.part
        # each row's parent in its part, and the parts with a span id twice
        uniq, inv = np.unique(np.concatenate([span, parent]), return_inverse=True)
        width = np.int64(len(uniq))
        own, theirs = part * width + inv[:n], part * width + inv[n:]
        by_key = np.argsort(own, kind="stable")
        keys = own[by_key]
        twice = np.flatnonzero(keys[1:] == keys[:-1])
        self.bad[part[by_key[twice]]] = True
        j = np.minimum(np.searchsorted(keys, theirs), max(n - 1, 0))
        self.found = has_parent & (keys[j] == theirs)
        self.parent_at = by_key[j]
        self.span, self.has_parent = span, has_parent
        remote = slots[:, _HAS_REMOTE] != 0
        self.bad[part[remote & has_parent & ~self.found]] = True  # (its client is the senders' or waiting receivers')
        return self.bad

    def count(self, a: Analyzer) -> None:
        """Count every part (``find_bad`` found none it cannot take)."""
        rep, judge = a.report, a.judge
        span, has_parent, found, parent_at, slots = self.span, self.has_parent, self.found, self.parent_at, self.slots
        remote = slots[:, _HAS_REMOTE] != 0
        assert not self.bad.any()
        rep.trace_parts += self.parts
        rep.traces += self.parts
        degraded = self.gather("degraded")
        rep.degraded_spans += int(np.count_nonzero(degraded))
        rep.unresolved_parents += int(np.count_nonzero(has_parent & ~found))
        clock, host = self.gather("clock"), self.gather("host")
        start_ns = self.gather("start_ns")
        receiving = self.gather("receiving")
        starts = _stamps(slots, _START, 3, degraded)
        # parent start -> child start; child end -> parent end where end_edge says it is known
        child = np.flatnonzero(found)
        par = parent_at[child]
        unmerged = remote & (slots[:, _MERGED] == 0)
        if len(child):
            sides = PairSides(clock[par].tolist(), clock[child].tolist(), host[par].tolist(), host[child].tolist(),
                              start_ns[par], start_ns[child], unmerged[child], self._start_svc(par, child, span))
            if not count_pairs(judge, "parent_child", starts.take(par), starts.take(child), sides):
                for p, c in zip(self.records(par.tolist()), self.records(child.tolist()), strict=True):
                    judge.parent_start(p, c)
            ends = (clock[par] == clock[child]) & ~remote[child] & ~receiving[child] & \
                (slots[child, _HAS_END] != 0) & (slots[par, _HAS_END] != 0) & \
                (slots[child, _END + 3] < slots[par, _END + 3])
            if ends.any():
                pe, ce = par[ends], child[ends]
                end_ns = self.gather("end_ns")
                stamps = _stamps(slots, _END, 3, degraded)
                sides = PairSides(clock[ce].tolist(), clock[pe].tolist(), host[ce].tolist(), host[pe].tolist(),
                                  end_ns[ce], end_ns[pe], np.zeros(len(ce), dtype=bool), None)
                if not count_pairs(judge, "child_end", stamps.take(ce), stamps.take(pe), sides):
                    for p, c in zip(self.records(pe.tolist()), self.records(ce.tolist()), strict=True):
                        judge.child_end(p, c)
        self._hops(a, np.flatnonzero(remote), found, parent_at, slots, degraded, clock, host, start_ns, starts)
        self._remember(a, span)
        self._senders(a)
        self._jobs_and_ranks(a)

    def _start_svc(self, par: np.ndarray, child: np.ndarray, span: np.ndarray) -> Any:
        """edgebatch._span_svc over batch indices: a start whose span id is in the other's sketch, both ways."""
        def test(open_: list[int], may_before: np.ndarray, may_after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            before, after = np.zeros(len(par), bool), np.zeros(len(par), bool)
            mb, ma = may_before.tolist(), may_after.tolist()
            rows = [k for k in open_ if mb[k]]
            if rows:
                before[rows] = in_sketches(self._sketches(child[rows]), self.listed("span_hex", par[rows]))
            rows = [k for k in open_ if ma[k]]
            if rows:
                after[rows] = in_sketches(self._sketches(par[rows]), self.listed("span_hex", child[rows]))
            return before, after
        return test

    def _sketches(self, rows: np.ndarray) -> list[int | None]:
        """The rows' sketches: the one written (a span that received a header), else the own id's and parent's."""
        out: list[int | None] = [None] * len(rows)
        bk, row = self.bk[rows], self.row[rows]
        for b in np.unique(bk).tolist():
            block = self.blocks[b]
            at = np.flatnonzero(bk == b)
            mine = row[at]
            written = block.slots[mine, _HAS_SKETCH] != 0
            sketches = own_sketches(block.span_hex, block.parent_hex, mine.tolist(), ~written)
            for k in np.flatnonzero(written).tolist():
                sketches[k] = int.from_bytes(block.sketch[mine[k]].tobytes(), "big")
            for k, sketch in zip(at.tolist(), sketches, strict=True):
                out[k] = sketch
        return out

    def _hops(self, a: Analyzer, hops: np.ndarray, found: np.ndarray, parent_at: np.ndarray, slots: np.ndarray,
              degraded: np.ndarray, clock: np.ndarray, host: np.ndarray, start_ns: np.ndarray,
              starts: _Stamps) -> None:
        """HopBatch.flush for the receive spans (their client span is their parent in the part, or they have no
        parent: an unknown sender)."""
        if not len(hops):
            return
        rep, judge = a.report, a.judge
        known = found[hops]
        client = np.where(known, parent_at[hops], 0)
        sent = _stamps(slots, _REMOTE, _REMOTE_LTS - _REMOTE, known & degraded[client], hops)
        sa, sb = sent.arrays(), starts.take(hops)
        raw_a, raw_a_ok = _tai_as_utc(sa, sb)
        matched = self._matched(hops, client, known, slots)
        if raw_a is not None:
            unknown = np.array([UNKNOWN_SENDER], dtype=object)
            sides = PairSides(np.where(known, clock[client], unknown).tolist(), clock[hops].tolist(),
                              np.where(known, host[client], unknown).tolist(), host[hops].tolist(), raw_a,
                              start_ns[hops], slots[hops, _MERGED] == 0, _no_svc, known, raw_a_ok)
            if count_pairs(judge, "hop", sa, sb, sides):
                rep.hops += len(hops)
                rep.hops_matched += int(np.count_nonzero(matched))
                return
        servers = self.records(hops.tolist())
        clients = self.records(client[known].tolist())
        senders = iter(clients)
        for s, k in zip(servers, known.tolist(), strict=True):
            c = next(senders) if k else None
            judge.hop(s, None if c is None else (c.pos, c.clock, c.host, c.sends, c.degraded), False)

    def _matched(self, hops: np.ndarray, client: np.ndarray, known: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Whether each hop's client span recorded a send with the hop's Lamport value (edges.hop_send)."""
        out = np.zeros(len(hops), dtype=bool)
        lts = slots[hops, _REMOTE_LTS]
        with_client = np.flatnonzero(known)
        bk, row = self.bk[client[with_client]], self.row[client[with_client]]
        for b in np.unique(bk).tolist():
            block = self.blocks[b]
            at = np.flatnonzero(bk == b)
            lo, hi = block.send_offsets[row[at]], block.send_offsets[row[at] + 1]
            counts = hi - lo
            total = int(counts.sum())
            if not total:
                continue
            first = np.cumsum(counts) - counts
            index = np.repeat(lo - first, counts) + np.arange(total)
            equal = block.sends[index, 0] == np.repeat(lts[with_client[at]], counts)
            hit = np.zeros(len(at), dtype=np.int64)
            np.add.at(hit, np.repeat(np.arange(len(at)), counts), equal)
            out[with_client[at]] = hit > 0
        return out

    def _remember(self, a: Analyzer, span: np.ndarray) -> None:
        """TraceMemory.remember of each part: its span ids, its last position."""
        by_part = np.argsort(self.part, kind="stable")
        parts = self.part[by_part]
        ids = span[by_part].astype(">u8").tobytes()
        edges = np.flatnonzero(np.diff(parts)) + 1
        lo = np.concatenate([[0], edges]).tolist()
        hi = np.concatenate([edges, [len(parts)]]).tolist()
        last = np.maximum.reduceat(self.pos[by_part], lo).tolist() if len(by_part) else []
        memory, tids = a.traces, self.tids
        for k, (x, y) in enumerate(zip(lo, hi, strict=True)):
            memory.remember_ids(tids[int(parts[x])], ids[8 * x:8 * y], last[k])

    def _senders(self, a: Analyzer) -> None:
        """Senders.add of each span that injected a header (held as its row until a part asks for it), and the
        receivers waiting for it."""
        waiting, senders = a.waiting, a.senders
        tids = self.tids
        for b, lo, hi in self.segments:
            block = self.blocks[b]
            rows = self.row[lo:hi]
            sending = np.flatnonzero(block.send_offsets[rows + 1] > block.send_offsets[rows])
            if not len(sending):
                continue
            at = rows[sending].tolist()
            keys = [tids[p] + block.span_hex[i] for p, i in zip(self.part[lo + sending].tolist(), at, strict=True)]
            positions = self.pos[lo + sending].tolist()
            senders.put_rows(keys, [(p, block, i) for p, i in zip(positions, at, strict=True)])
            if waiting:
                for key in keys:
                    receivers = waiting.take_key(key)
                    if receivers is not None:
                        sender = senders.get_key(key)
                        for r in receivers:
                            a._hop(r, sender)

    def _jobs_and_ranks(self, a: Analyzer) -> None:
        """The spans per job (JobSpans.merge_counts: its keys in the order the parts name them first, as one part
        after another would add them), and HangFacts.saw: spans and the least host name per (job, rank)."""
        keys: dict[Any, int] = {}
        code = np.empty(self.n, dtype=np.int64)
        for b, lo, hi in self.segments:
            block = self.blocks[b]
            table = np.array([keys.setdefault(j, len(keys)) for j in block.jobs], dtype=np.int64)
            code[lo:hi] = table[block.job_code[self.row[lo:hi]]]
        in_order = code[np.lexsort((self.pos, self.part))]
        named, first = np.unique(in_order, return_index=True)
        counts = np.bincount(code, minlength=len(keys)).tolist()
        names = list(keys)
        jobs: Counter[Any] = Counter()
        for c in named[np.argsort(first)].tolist():
            jobs[names[c]] = counts[c]
        ranks: dict[Any, tuple[int, str]] = {}
        for b, lo, hi in self.segments:
            block = self.blocks[b]
            rows = self.row[lo:hi]
            ranked = rows[block.has_rank[rows]]
            if not len(ranked):
                continue
            pairs, inverse, counts = np.unique(np.stack([block.job_code[ranked], block.rank[ranked]]), axis=1,
                                               return_inverse=True, return_counts=True)
            least = np.full(pairs.shape[1], np.iinfo(np.int64).max, dtype=np.int64)
            np.minimum.at(least, inverse.reshape(-1), block.host_code[ranked])
            for (code, rank), count, host in zip(pairs.T.tolist(), counts.tolist(), least.tolist(), strict=True):
                key = (block.jobs[code], rank)
                have = ranks.get(key)
                name = block.hosts[host]
                ranks[key] = (count, name) if have is None else (have[0] + count, min(have[1], name))
        a.report.jobs.merge_counts(jobs)
        a.report.hang_facts.saw_counts(ranks)


def _no_svc(open_: list[int], may_before: np.ndarray, may_after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A hop of a stamps text: the receive's remote record carries no sketch of its own (hopbatch._svc finds its
    id in none)."""
    return np.zeros(len(may_before), bool), np.zeros(len(may_before), bool)


class _Stamps:
    """One event's stamps of the batch's rows, from the slots (reading, bound, quality, Lamport value)."""

    def __init__(self, ptp: np.ndarray, unc: np.ndarray, qual: np.ndarray, lts: np.ndarray,
                 degraded: np.ndarray) -> None:
        self.ptp, self.unc, self.qual, self.lts, self.degraded = ptp, unc, qual, lts, degraded

    def take(self, rows: np.ndarray) -> StampArrays:
        return StampArrays.of_arrays(self.ptp[rows], self.unc[rows], self.qual[rows], self.lts[rows],
                                     self.degraded[rows])

    def arrays(self) -> StampArrays:
        return StampArrays.of_arrays(self.ptp, self.unc, self.qual, self.lts, self.degraded)


def _stamps(slots: np.ndarray, at: int, lts_at: int, degraded: np.ndarray, rows: np.ndarray | None = None) -> _Stamps:
    v = slots if rows is None else slots[rows]
    return _Stamps(v[:, at], v[:, at + 1], v[:, at + 2], v[:, at + lts_at], degraded)
