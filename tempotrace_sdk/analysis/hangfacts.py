"""What the hang report needs of the input, gathered as it streams and merged across partitions
(spec/analysis.md §1.4; hang.py decides the wavefront from it).

Per (job, process group) and rank: the op span of the highest sequence number the rank got past (its
*last completed* op: any completion but ``pending`` and ``error``) and the spans above that one it did
not get past (``pending``: open when a dump was taken; ``error``: the call raised), lowest first. A
rank's collectives of one group run in sequence order (spec/torch.md §2), so that is all the wavefront
needs: a rank got past every collective below its last completed one, whether or not the input holds
their spans. A step is one trace, so a rank's last completed op and the collective it hangs in may lie
in different traces: the facts are kept per (job, group), across traces. Beside them: the op of a
group's lowest incomplete instances (collectives.py; hang.py names a wavefront's op from them when it
keeps no span of it), the ranks that left any span at all, the dump records (``torch.dump`` spans), and
the point-to-point sends no receive matched and the receives still pending (p2p.py).

Bounded, whatever the input: MAX_GROUPS (job, group) keys, MAX_RANK_ROWS rank rows over all of them,
MAX_OPEN spans above a rank's last completed one, MAX_OPS op names a group, MAX_SEEN_RANKS ranks, and
MAX_LISTED dump records and messages (the first by input position). What a cap leaves out is counted in
``dropped`` and the report says so. ``merge`` combines partitions that analysed disjoint traces into what
one process gathers: every choice is by sequence number and input position, never by arrival.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from .events import JobKey, SpanRecord
from .groupkey import member_rank, parse_key

__all__ = [
    "DUMP_SPAN", "ERROR", "MAX_GROUPS", "MAX_LISTED", "MAX_OPEN", "MAX_OPS", "MAX_RANK_ROWS", "MAX_SEEN_RANKS",
    "PENDING", "PENDING_RECV", "STUCK", "UNMATCHED_SEND", "GroupFacts", "GroupId", "HangFacts", "RankFacts", "seq_of",
]

#: Completions (semconv TORCH_COMPLETIONS, spec/torch.md §1.3) of an op the rank did not get past: still open
#: when a dump was taken, or raised. Every other completion (``queued`` and ``unfinished`` included: the call
#: returned, the rank went on) counts as getting past it.
PENDING = "pending"
ERROR = "error"
STUCK = frozenset((PENDING, ERROR))
#: The flight recorder's dump record, one span per rank per dump (the SDK's name: spec/torch.md §7.3).
DUMP_SPAN = "torch.dump"
#: What a listed point-to-point span is: a send no receive in the input matched, a receive still pending.
UNMATCHED_SEND = "unmatched_send"
PENDING_RECV = "pending_recv"

#: (job, group key) pairs followed; rank rows over all of them (a 16k-rank job with a few dozen groups fits).
MAX_GROUPS = 4096
MAX_RANK_ROWS = 1 << 20
#: Spans kept above a rank's last completed op: the ops it had open when dumped (async ops queue up a few).
MAX_OPEN = 8
#: Ops of a group's lowest incomplete instances remembered (to name a wavefront no kept span names).
MAX_OPS = 64
#: Ranks remembered as having left spans (and a host each), and dump records and messages listed.
MAX_SEEN_RANKS = 1 << 20
MAX_LISTED = 1024

#: A group's identity across traces: the job its spans name (None: none) and its group key.
GroupId = tuple["JobKey | None", str]
_Listed = TypeVar("_Listed", tuple[int, SpanRecord], tuple[int, str, SpanRecord])


def seq_of(s: SpanRecord) -> int:
    """The ``tempotrace.torch.seq`` of a member span (only those are kept here)."""
    t = s.torch
    assert t is not None and t.seq is not None
    return t.seq


def _earlier(a: SpanRecord, b: SpanRecord) -> bool:
    """``a`` precedes ``b`` in the input (the ordering every choice below takes, so partitions agree)."""
    return (a.pos, a.span_id) < (b.pos, b.span_id)


@dataclass
class RankFacts:
    """One rank in one group: its last completed op span, and the spans above it it did not get past."""

    done: SpanRecord | None = None
    open: list[SpanRecord] = field(default_factory=list)  # by seq, one span a seq, at most MAX_OPEN

    def add(self, s: SpanRecord, stuck: bool) -> int:
        """Take one member span; returns how many open spans the cap dropped (0 or 1)."""
        seq = seq_of(s)
        done = self.done
        if not stuck:
            if done is None or seq > seq_of(done) or (seq == seq_of(done) and _earlier(s, done)):
                self.done = s
                self.open = [o for o in self.open if seq_of(o) > seq]
            return 0
        if done is not None and seq <= seq_of(done):  # it got past this one later: an error it went on from
            return 0
        keys = [seq_of(o) for o in self.open]
        i = bisect.bisect_left(keys, seq)
        if i < len(keys) and keys[i] == seq:  # a second span of one op (a conflict): the first in the input
            if _earlier(s, self.open[i]):
                self.open[i] = s
            return 0
        self.open.insert(i, s)
        if len(self.open) > MAX_OPEN:
            self.open.pop()
            return 1
        return 0

    def merge(self, other: RankFacts) -> int:
        dropped = 0
        for s in [*([other.done] if other.done is not None else []), *other.open]:
            dropped += self.add(s, s is not other.done)
        return dropped


@dataclass
class GroupFacts:
    """One (job, group): its ranks' facts and the ops of its lowest incomplete instances (seq -> op)."""

    ranks: dict[int, RankFacts] = field(default_factory=dict)
    ops: dict[int, str] = field(default_factory=dict)

    def note_op(self, seq: int, op: str) -> None:
        ops = self.ops
        if seq in ops:
            ops[seq] = min(ops[seq], op)  # ranks that disagree (a mismatch): one answer whatever the order
            return
        ops[seq] = op
        if len(ops) > MAX_OPS:
            del ops[max(ops)]


@dataclass
class HangFacts:
    """Everything the hang report is decided from (module doc); ``merge`` adds another partition's."""

    groups: dict[GroupId, GroupFacts] = field(default_factory=dict)
    rank_rows: int = 0
    #: ranks that left any span in the input -> a host they ran on (the first by name)
    seen: dict[int, str] = field(default_factory=dict)
    dumps_total: int = 0
    dumps_by_reason: Counter[str] = field(default_factory=Counter)
    #: rank -> the most ops its ring said it overwrote unexported (cumulative since the process started)
    overwritten: dict[int, int] = field(default_factory=dict)
    #: the first MAX_LISTED dump records by input position: (position, span)
    dumps: list[tuple[int, SpanRecord]] = field(default_factory=list)
    messages_by_kind: Counter[str] = field(default_factory=Counter)
    #: the first MAX_LISTED listed point-to-point spans by input position: (position, kind, span)
    messages: list[tuple[int, str, SpanRecord]] = field(default_factory=list)
    #: what a cap left out: "groups", "ranks" (member spans of ranks beyond MAX_RANK_ROWS), "open", "seen"
    dropped: Counter[str] = field(default_factory=Counter)

    # -- input ------------------------------------------------------------------------------------------
    def saw(self, spans: Iterable[SpanRecord]) -> None:
        """Note the ranks of analysed spans (to tell a rank that left no span at all)."""
        seen = self.seen
        for s in spans:
            r = s.rank
            if r is None:
                continue
            host = seen.get(r)
            if host is None:
                if len(seen) >= MAX_SEEN_RANKS:
                    self.dropped["seen"] += 1
                    continue
                seen[r] = s.host
            elif s.host < host:
                seen[r] = s.host

    def add(self, s: SpanRecord) -> None:
        """Take ``s`` if it is a collective's member span (a group, a seq and a rank the key holds)."""
        t = s.torch
        if t is None or t.seq is None or t.group is None:
            return
        rank = member_rank(s, parse_key(t.group))
        if rank is None:
            return
        row = self._row((s.job, t.group), rank)
        if row is not None:
            self.dropped["open"] += row.add(s, t.completion in STUCK)

    def incomplete(self, job: JobKey | None, group: str, seq: int, op: str) -> None:
        """An instance of ``group`` some expected rank never joined (collectives.py)."""
        g = self.groups.get((job, group))
        if g is not None:
            g.note_op(seq, op)

    def dump(self, s: SpanRecord) -> None:
        """A dump record (a ``torch.dump`` span)."""
        d = s.dump
        assert d is not None
        self.dumps_total += 1
        self.dumps_by_reason[d.reason] += 1
        if s.rank is not None and d.overwritten > self.overwritten.get(s.rank, 0):
            if s.rank in self.overwritten or len(self.overwritten) < MAX_SEEN_RANKS:
                self.overwritten[s.rank] = d.overwritten
        _first(self.dumps, (s.pos, s))

    def message(self, kind: str, s: SpanRecord) -> None:
        """A point-to-point span to list: UNMATCHED_SEND or PENDING_RECV (p2p.py)."""
        self.messages_by_kind[kind] += 1
        _first(self.messages, (s.pos, kind, s))

    def _row(self, gid: GroupId, rank: int) -> RankFacts | None:
        g = self.groups.get(gid)
        if g is None:
            if len(self.groups) >= MAX_GROUPS:
                self.dropped["groups"] += 1
                return None
            g = self.groups[gid] = GroupFacts()
        row = g.ranks.get(rank)
        if row is None:
            if self.rank_rows >= MAX_RANK_ROWS:
                self.dropped["ranks"] += 1
                return None
            self.rank_rows += 1
            row = g.ranks[rank] = RankFacts()
        return row

    # -- partitions -------------------------------------------------------------------------------------
    def merge(self, other: HangFacts) -> None:
        for gid, og in other.groups.items():
            for rank, facts in og.ranks.items():
                row = self._row(gid, rank)
                if row is not None:
                    self.dropped["open"] += row.merge(facts)
            g = self.groups.get(gid)
            if g is not None:
                for seq, op in og.ops.items():
                    g.note_op(seq, op)
        self._saw_hosts(other.seen)
        self.dumps_total += other.dumps_total
        self.dumps_by_reason.update(other.dumps_by_reason)
        for rank, n in other.overwritten.items():
            if n > self.overwritten.get(rank, 0) and (rank in self.overwritten
                                                      or len(self.overwritten) < MAX_SEEN_RANKS):
                self.overwritten[rank] = n
        for item in other.dumps:
            _first(self.dumps, item)
        self.messages_by_kind.update(other.messages_by_kind)
        for message in other.messages:
            _first(self.messages, message)
        self.dropped.update(other.dropped)

    def _saw_hosts(self, seen: dict[int, str]) -> None:
        for rank, host in seen.items():
            have = self.seen.get(rank)
            if have is None and len(self.seen) >= MAX_SEEN_RANKS:
                self.dropped["seen"] += 1
            elif have is None or host < have:
                self.seen[rank] = host


def _first(items: list[_Listed], item: _Listed) -> None:
    """Keep the MAX_LISTED items with the smallest input positions (then span ids: partitions agree)."""
    key = _key(item)
    if len(items) < MAX_LISTED or key < _key(items[-1]):
        bisect.insort(items, item, key=_key)
        del items[MAX_LISTED:]


def _key(item: _Listed) -> tuple[int, str]:
    return item[0], item[-1].span_id
