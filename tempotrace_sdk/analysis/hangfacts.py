"""What the hang report needs of the input, gathered as it streams and merged across partitions
(spec/analysis.md §1.4; hang.py decides the wavefront from it).

Per (job, process group) and rank: the op span of the highest sequence number the rank got past (any
completion but ``pending`` and ``error``: ``queued`` and ``unfinished`` included, the call returned), the
span of the highest one it *completed* (a completion was seen: neither of those four), the span of the
highest completed op whose claim is "every start precedes every end" (it proves every rank got past every
lower collective), the spans above the first one it did not get past (``pending``: open when a dump was
taken; ``error``: the call raised), lowest first, and its lowest ``pending`` span at or below the first one
(a *stale* pending span: a dump from before the rank went on, or seqs that restarted). A rank's collectives
of one group run in sequence order (spec/torch.md §2), so that is all the wavefront needs. A step is one
trace, so the facts are kept per (job, group), across traces. Beside them: the op of a group's lowest
incomplete instances (collectives.py; hang.py names a wavefront's op from them when it keeps no span of
it), the ranks that left any span at all per job, the dump records (``torch.dump`` spans), and the
point-to-point sends no receive matched and the receives still pending (p2p.py).

Bounded, whatever the input, by content: the MAX_GROUPS smallest (job, group) keys, the MAX_RANK_ROWS
smallest (job, group, rank) rows, MAX_OPEN spans above a rank's last got-past op, MAX_OPS op names a
group, the MAX_SEEN_RANKS smallest (job, rank) keys of the ranks seen and of the rings that overwrote, and
the MAX_LISTED first dump records and messages by input position. A cap evicts its largest keys, and a key
larger than every one it kept is refused from then on, so what is kept is the smallest keys of the whole
input whichever partition saw them; what a cap leaves out is counted in spans (dump records for the rings)
and the report says so. ``merge`` combines partitions that analysed disjoint traces into what one process
gathers: every choice is by key, sequence number and input position, never by arrival (the open-span cap
excepted: a rank with more than MAX_OPEN stuck spans is reported *unknown*, hang.py).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .claims import ALL, NOT_COMPLETED, SHAPES
from .events import JobKey, SpanRecord
from .groupkey import member_rank, parse_key

__all__ = [
    "DUMP_SPAN", "ERROR", "MAX_GROUPS", "MAX_LISTED", "MAX_OPEN", "MAX_OPS", "MAX_RANK_ROWS", "MAX_SEEN_RANKS",
    "PENDING", "PENDING_RECV", "STUCK", "UNMATCHED_SEND", "GroupFacts", "GroupId", "HangFacts", "RankFacts", "RankId",
    "seq_of",
]

#: Completions (semconv TORCH_COMPLETIONS, spec/torch.md §1.3) of an op the rank did not get past: still open
#: when a dump was taken, or raised. Every other completion (``queued`` and ``unfinished`` included: the call
#: returned, the rank went on) counts as getting past it; only those outside claims.NOT_COMPLETED complete it.
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
#: Spans kept above a rank's last got-past op: the ops it had open when dumped (async ops queue up a few).
MAX_OPEN = 8
#: Ops of a group's lowest incomplete instances remembered (to name a wavefront no kept span names).
MAX_OPS = 64
#: (job, rank) keys remembered as having left spans (a host each) and as rings that overwrote ops unexported;
#: dump records and messages listed.
MAX_SEEN_RANKS = 1 << 20
MAX_LISTED = 1024

#: A group's identity across traces: the job its spans name (None: none) and its group key.
GroupId = tuple["JobKey | None", str]
#: A rank's identity across traces: its job (None: none) and its global rank.
RankId = tuple["JobKey | None", int]
_Listed = TypeVar("_Listed", tuple[int, SpanRecord], tuple[int, str, SpanRecord])
_K = TypeVar("_K", GroupId, RankId)


def seq_of(s: SpanRecord) -> int:
    """The ``tempotrace.torch.seq`` of a member span (only those are kept here)."""
    t = s.torch
    assert t is not None and t.seq is not None
    return t.seq


def _earlier(a: SpanRecord, b: SpanRecord) -> bool:
    """``a`` precedes ``b`` in the input (the ordering every choice below takes, so partitions agree)."""
    return (a.pos, a.span_id) < (b.pos, b.span_id)


def _higher(s: SpanRecord, have: SpanRecord | None) -> bool:
    """``s`` has a higher seq than ``have`` (or an equal one and comes first in the input)."""
    if have is None:
        return True
    a, b = seq_of(s), seq_of(have)
    return a > b or (a == b and _earlier(s, have))


def _lower(s: SpanRecord, have: SpanRecord | None) -> bool:
    return have is None or (seq_of(s), s.pos, s.span_id) < (seq_of(have), have.pos, have.span_id)


def _job_order(job: JobKey | None) -> tuple[int, str, int]:
    return (0, "", 0) if job is None else (1, job[0], job[1])


def _key_order(key: GroupId | RankId) -> tuple[tuple[int, str, int], Any]:
    """How the caps order (job, group) and (job, rank) keys: the smallest are kept."""
    return _job_order(key[0]), key[1]


def _over(n: int, cap: int) -> bool:
    """A cap trims once a quarter past it (amortised), and exactly to it when the facts are read (settle)."""
    return n > cap + cap // 4


def _trim(items: dict[_K, Any], cap: int) -> tuple[list[_K], Any]:
    """The keys beyond the ``cap`` smallest, to evict, and the order of the largest kept (the new limit)."""
    keys = sorted(items, key=_key_order)
    return keys[cap:], _key_order(keys[cap - 1])


@dataclass
class RankFacts:
    """One rank in one group (module doc); ``spans`` and ``open_dropped`` count what it was given and lost."""

    done: SpanRecord | None = None
    completed: SpanRecord | None = None
    all_completed: SpanRecord | None = None
    open: list[SpanRecord] = field(default_factory=list)  # by seq, one span a seq, at most MAX_OPEN
    stale: SpanRecord | None = None
    spans: int = 0
    open_dropped: int = 0

    def add(self, s: SpanRecord) -> None:
        """Take one member span."""
        t = s.torch
        assert t is not None
        seq = seq_of(s)
        if t.completion not in STUCK:
            # _higher written out: every op span of a job passes here (a rank's seqs mostly rise: one compare)
            have = self.done
            if have is None or seq > (b := seq_of(have)) or (seq == b and _earlier(s, have)):
                self.done = s
                if self.open:
                    for o in self.open:
                        if seq_of(o) <= seq:
                            self._pending_below(o)
                    self.open = [o for o in self.open if seq_of(o) > seq]
            if t.completion not in NOT_COMPLETED:
                have = self.completed
                if have is None or seq > (b := seq_of(have)) or (seq == b and _earlier(s, have)):
                    self.completed = s
                if SHAPES.get(t.op) == ALL and _higher(s, self.all_completed):
                    self.all_completed = s
            return
        done = self.done
        if done is not None and seq <= seq_of(done):  # it got past this one: an error it went on from, or stale
            self._pending_below(s)
            return
        keys = [seq_of(o) for o in self.open]
        i = bisect.bisect_left(keys, seq)
        if i < len(keys) and keys[i] == seq:  # a second span of one op (a conflict): the first in the input
            if _earlier(s, self.open[i]):
                self.open[i] = s
            return
        self.open.insert(i, s)
        if len(self.open) > MAX_OPEN:
            self.open.pop()
            self.open_dropped += 1

    def _pending_below(self, s: SpanRecord) -> None:
        t = s.torch
        if t is not None and t.completion == PENDING and _lower(s, self.stale):
            self.stale = s

    def merge(self, other: RankFacts) -> None:
        for s in (other.done, other.completed, other.all_completed, *other.open, other.stale):
            if s is not None:
                self.add(s)
        self.spans += other.spans
        self.open_dropped += other.open_dropped


@dataclass
class GroupFacts:
    """One (job, group): its ranks' facts, the ops of its lowest incomplete instances (seq -> op), the member
    spans it was given and of those the ones in rank rows the row cap left out."""

    ranks: dict[int, RankFacts] = field(default_factory=dict)
    ops: dict[int, str] = field(default_factory=dict)
    spans: int = 0
    rows_dropped: int = 0

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
    """Everything the hang report is decided from (module doc); ``merge`` adds another partition's, ``settle``
    trims the caps exactly (hang.py calls it before deciding)."""

    groups: dict[GroupId, GroupFacts] = field(default_factory=dict)
    rank_rows: int = 0
    #: (job, rank) of ranks that left any span in the input -> a host they ran on (the first by name)
    seen: dict[RankId, str] = field(default_factory=dict)
    seen_spans: Counter[RankId] = field(default_factory=Counter)
    dumps_total: int = 0
    dumps_by_reason: Counter[str] = field(default_factory=Counter)
    #: pending ops the dump records said they wrote, all of them together
    dumps_pending: int = 0
    #: (job, rank) -> the most ops its ring said it overwrote unexported (cumulative since the process started)
    overwritten: dict[RankId, int] = field(default_factory=dict)
    overwritten_dumps: Counter[RankId] = field(default_factory=Counter)
    #: the first MAX_LISTED dump records by input position: (position, span)
    dumps: list[tuple[int, SpanRecord]] = field(default_factory=list)
    messages_by_kind: Counter[str] = field(default_factory=Counter)
    #: the first MAX_LISTED listed point-to-point spans by input position: (position, kind, span)
    messages: list[tuple[int, str, SpanRecord]] = field(default_factory=list)
    #: what the caps left out that no kept row counts: member spans of groups, spans of ranks seen, dump records
    groups_dropped: int = 0
    seen_dropped: int = 0
    overwritten_dropped: int = 0
    #: the order of the largest key each cap kept once it trimmed; a larger key is refused from then on
    limits: dict[str, Any] = field(default_factory=dict)
    #: bumped by every change (hang.py caches its decision against it)
    revision: int = 0
    decided: tuple[Any, Any] | None = field(default=None, repr=False, compare=False)

    # -- input ------------------------------------------------------------------------------------------
    def saw(self, spans: Iterable[SpanRecord]) -> None:
        """Note the ranks of analysed spans (to tell a rank that left no span at all)."""
        self.revision += 1
        seen, counts = self.seen, self.seen_spans
        for s in spans:
            if s.rank is None:
                continue
            key = (s.job, s.rank)
            host = seen.get(key)
            if host is None:
                self._saw(key, s.host, 1)
                continue
            counts[key] += 1  # in spans: what the cap drops is counted in them (whichever partition)
            if s.host < host:
                seen[key] = s.host
        if _over(len(self.seen), MAX_SEEN_RANKS):
            self._trim_seen()

    def saw_counts(self, ranks: dict[RankId, tuple[int, str]]) -> None:
        """``saw`` of spans counted per rank: how many, and the least host name among them (plainlane.py)."""
        self.revision += 1
        for key, (n, host) in ranks.items():
            self._saw(key, host, n)
        if _over(len(self.seen), MAX_SEEN_RANKS):
            self._trim_seen()

    def add(self, s: SpanRecord) -> None:
        """Take ``s`` if it is a collective's member span (a group, a seq and a rank the key holds)."""
        t = s.torch
        if t is None or t.seq is None or t.group is None:
            return
        rank = member_rank(s, parse_key(t.group))
        if rank is None:
            return
        self.revision += 1
        gid = (s.job, t.group)
        g = self._group(gid, 1)
        if g is None:
            return
        row = self._row(gid, g, rank, 1)
        if row is not None:
            row.spans += 1
            row.add(s)
        self._trim(False)

    def incomplete(self, job: JobKey | None, group: str, seq: int, op: str) -> None:
        """An instance of ``group`` some expected rank never joined (collectives.py)."""
        g = self.groups.get((job, group))
        if g is not None:
            self.revision += 1
            g.note_op(seq, op)

    def dump(self, s: SpanRecord) -> None:
        """A dump record (a ``torch.dump`` span)."""
        d = s.dump
        assert d is not None
        self.revision += 1
        self.dumps_total += 1
        self.dumps_by_reason[d.reason] += 1
        self.dumps_pending += d.pending
        if s.rank is not None and d.overwritten:
            self._overwrote((s.job, s.rank), d.overwritten, 1)
            if _over(len(self.overwritten), MAX_SEEN_RANKS):
                self._trim_overwritten()
        _first(self.dumps, (s.pos, s))

    def message(self, kind: str, s: SpanRecord) -> None:
        """A point-to-point span to list: UNMATCHED_SEND or PENDING_RECV (p2p.py)."""
        self.revision += 1
        self.messages_by_kind[kind] += 1
        _first(self.messages, (s.pos, kind, s))

    # -- the caps ---------------------------------------------------------------------------------------
    def _refused(self, cap: str, key: GroupId | RankId | tuple[GroupId, int]) -> bool:
        limit = self.limits.get(cap)
        if limit is None:
            return False
        order = (_key_order(key[0]), key[1]) if cap == "rows" else _key_order(key)  # type: ignore[arg-type]
        return bool(order > limit)

    def _group(self, gid: GroupId, spans: int) -> GroupFacts | None:
        g = self.groups.get(gid)
        if g is None:
            if self._refused("groups", gid):
                self.groups_dropped += spans
                return None
            g = self.groups[gid] = GroupFacts()
        g.spans += spans
        return g

    def _row(self, gid: GroupId, g: GroupFacts, rank: int, spans: int) -> RankFacts | None:
        row = g.ranks.get(rank)
        if row is None:
            if self._refused("rows", (gid, rank)):
                g.rows_dropped += spans
                return None
            self.rank_rows += 1
            row = g.ranks[rank] = RankFacts()
        return row

    def _saw(self, key: RankId, host: str, spans: int) -> None:
        have = self.seen.get(key)
        if have is None:
            if self._refused("seen", key):
                self.seen_dropped += spans
                return
            self.seen[key] = host
        elif host < have:
            self.seen[key] = host
        self.seen_spans[key] += spans

    def _overwrote(self, key: RankId, n: int, dumps: int) -> None:
        if key not in self.overwritten:
            if self._refused("overwritten", key):
                self.overwritten_dropped += dumps
                return
            self.overwritten[key] = n
        self.overwritten[key] = max(self.overwritten[key], n)
        self.overwritten_dumps[key] += dumps

    def _trim(self, exact: bool) -> None:
        """Evict what lies beyond the group and row caps (``exact``: down to them; else once a quarter past)."""
        if len(self.groups) > MAX_GROUPS and (exact or _over(len(self.groups), MAX_GROUPS)):
            evicted, self.limits["groups"] = _trim(self.groups, MAX_GROUPS)
            for gid in evicted:
                g = self.groups.pop(gid)
                self.groups_dropped += g.spans
                self.rank_rows -= len(g.ranks)
        if self.rank_rows > MAX_RANK_ROWS and (exact or _over(self.rank_rows, MAX_RANK_ROWS)):
            rows = sorted(((_key_order(gid), rank), gid, rank) for gid, g in self.groups.items() for rank in g.ranks)
            self.limits["rows"] = rows[MAX_RANK_ROWS - 1][0]
            for _, gid, rank in rows[MAX_RANK_ROWS:]:
                g = self.groups[gid]
                g.rows_dropped += g.ranks.pop(rank).spans
            self.rank_rows = MAX_RANK_ROWS

    def _trim_seen(self) -> None:
        evicted, self.limits["seen"] = _trim(self.seen, MAX_SEEN_RANKS)
        for key in evicted:
            del self.seen[key]
            self.seen_dropped += self.seen_spans.pop(key)

    def _trim_overwritten(self) -> None:
        evicted, self.limits["overwritten"] = _trim(self.overwritten, MAX_SEEN_RANKS)
        for key in evicted:
            del self.overwritten[key]
            self.overwritten_dropped += self.overwritten_dumps.pop(key)

    def settle(self) -> None:
        """Trim every cap exactly to its size: what is kept is then the smallest keys of the input (module doc)."""
        before = (len(self.groups), self.rank_rows, len(self.seen), len(self.overwritten))
        self._trim(True)
        if len(self.seen) > MAX_SEEN_RANKS:
            self._trim_seen()
        if len(self.overwritten) > MAX_SEEN_RANKS:
            self._trim_overwritten()
        if (len(self.groups), self.rank_rows, len(self.seen), len(self.overwritten)) != before:
            self.revision += 1

    def dropped(self) -> dict[str, int]:
        """What the caps left out, in spans (``overwritten``: dump records), by cap; none when nothing was."""
        rows = sum(g.rows_dropped for g in self.groups.values())
        opened = sum(r.open_dropped for g in self.groups.values() for r in g.ranks.values())
        out = {"groups": self.groups_dropped, "ranks": rows, "open": opened, "seen": self.seen_dropped,
               "overwritten": self.overwritten_dropped}
        return {k: n for k, n in sorted(out.items()) if n}

    # -- partitions -------------------------------------------------------------------------------------
    def merge(self, other: HangFacts) -> None:
        self.revision += 1
        for gid, og in other.groups.items():
            g = self._group(gid, og.spans)
            if g is None:
                continue
            g.rows_dropped += og.rows_dropped
            for rank, facts in og.ranks.items():
                row = self._row(gid, g, rank, facts.spans)
                if row is not None:
                    row.merge(facts)
            for seq, op in og.ops.items():
                g.note_op(seq, op)
            self._trim(False)
        self.groups_dropped += other.groups_dropped
        for key, host in other.seen.items():
            self._saw(key, host, other.seen_spans[key])
        self.seen_dropped += other.seen_dropped
        if _over(len(self.seen), MAX_SEEN_RANKS):
            self._trim_seen()
        self.dumps_total += other.dumps_total
        self.dumps_by_reason.update(other.dumps_by_reason)
        self.dumps_pending += other.dumps_pending
        for key, n in other.overwritten.items():
            self._overwrote(key, n, other.overwritten_dumps[key])
        self.overwritten_dropped += other.overwritten_dropped
        if _over(len(self.overwritten), MAX_SEEN_RANKS):
            self._trim_overwritten()
        for item in other.dumps:
            _first(self.dumps, item)
        self.messages_by_kind.update(other.messages_by_kind)
        for message in other.messages:
            _first(self.messages, message)
        for cap in ("groups", "rows", "seen", "overwritten"):  # a key another partition refused stays refused
            theirs = other.limits.get(cap)
            if theirs is not None and (self.limits.get(cap) is None or theirs < self.limits[cap]):
                self.limits[cap] = theirs


def _first(items: list[_Listed], item: _Listed) -> None:
    """Keep the MAX_LISTED items with the smallest input positions (then span ids: partitions agree)."""
    key = _key(item)
    if len(items) < MAX_LISTED or key < _key(items[-1]):
        bisect.insort(items, item, key=_key)
        del items[MAX_LISTED:]


def _key(item: _Listed) -> tuple[int, str]:
    return item[0], item[-1].span_id

