"""A collective's ordering claim, decided as a whole in O(n log n) (spec/analysis.md §1.3, §2.7).

A collective of n ranks guarantees n x n causal edges: for an all-reduce every
rank's start precedes every rank's end. Deciding them one by one would cost
4 million decisions for a 2,048-rank all-reduce. They are decided together:

- physics (§2.1, through ``order.physics_gap``, the one definition): the claim
  holds when the latest start interval ends before the earliest end interval
  begins; it is contradicted by every pair whose start interval lies wholly
  after the end interval. Each end is checked against the start that lies
  furthest after it, and each start against the end that lies furthest before
  it (the top two of each side, so a span is never paired with itself): O(n),
  and every pair the checks name is a real violation (the *witnesses*);
- Lamport (§2.2), only where a merge was recorded: an end whose span recorded
  ``tempotrace.torch.recv.lts`` merged the records of every rank not in its
  ``recv.missing``, so each such rank's start (made before its record) must
  have a smaller Lamport value than that end. An end without a recorded merge
  says nothing about other ranks' counters. Checked with the starts sorted by
  counter: O(n log n + the missing lists);
- SVC (§2.3), only with recorded sketches: every start's span id must be in
  every end's recorded sketch (``recv.svc_sketch``, with the span's own): one
  AND over the ends, one test per start;
- otherwise undecided. Never a guess.

Members are SpanRecords; starts and ends are indexes into the member list.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress

import msgspec

from ..semconv import TORCH_CLAIMS, TORCH_NOT_COMPLETED
from ..wire.layout import LTS_MAX, SKETCH_BITS, SKETCH_HASHES
from .claims_absolute import absolute_physics
from .claims_arrays import ARRAYS_FROM, Declined, arrival_arrays, naive_arrays, physics_arrays
from .events import NO_STAMP, SpanRecord, Stamp
from .order import SILENCE_REASONS, Decision, Method, Relation, physics_gap, physics_silence, span_mask, stamp_usable

__all__ = ["ALL", "NOT_COMPLETED", "ROOT_END", "ROOT_START", "SHAPES", "Claim", "arrival", "decide_claim", "required"]

#: Shapes of the claim: every start precedes every end; the root's start precedes every end; every start
#: precedes the root's end.
ALL = "all"
ROOT_START = "root_start"
ROOT_END = "root_end"

#: The collectives the torch instrumentation traces (spec/torch.md §1.1), by the shape of their guarantee:
#: semconv's one list.
SHAPES: dict[str, str] = TORCH_CLAIMS
assert set(SHAPES.values()) == {ALL, ROOT_START, ROOT_END}

#: Completions that are not the op completing (spec/torch.md §1.3): such a span's end is no end event.
NOT_COMPLETED = TORCH_NOT_COMPLETED  # queued, unfinished, error: their end stamp is no completion

Witness = tuple[int, int, int]  # start member, end member, by how much (physics: ns beyond the bounds)


class Claim(msgspec.Struct, gc=False):
    """The decision on a collective's claim and what it rests on.

    ``pairs``: the (start, end) pairs of different spans the claim covers; ``starts`` / ``ends`` the
    members that take part in one (indexes into the member list). ``witnesses``: violated pairs
    (physics: excess beyond the bounds in ns; Lamport: start lts minus end lts), each violating start
    against the end that lies furthest before it and each violating end against the start that lies
    furthest after it: at most one per start and one per end. ``worst`` is the witness the wrong
    decision is tallied on. ``naive``: what raw timestamps show (1 an inversion, 0 a tie, -1 in order,
    None without times); ``silence``: why physics was silent (order.SILENCE_REASONS), when it was."""

    decision: Decision
    pairs: int
    starts: list[int]
    ends: list[int]
    witnesses: list[Witness]
    worst: Witness | None
    naive: int | None
    silence: str | None


def required(members: Sequence[SpanRecord], ranks: Sequence[int], shape: str,
             root: int | None) -> tuple[list[int], list[int]]:
    """(starts, ends) the claim is about: indexes of members; an end that was not a completion
    (``NOT_COMPLETED``) is left out. A rooted shape whose root is not among the members has no starts
    (ROOT_START) or no ends (ROOT_END)."""
    everyone = list(range(len(members)))
    done = [i for i in everyone if _completed(members[i])]
    if shape == ALL:
        return everyone, done
    at = next((i for i, r in enumerate(ranks) if r == root), None)
    if shape == ROOT_START:
        return ([] if at is None else [at]), done
    return everyone, ([] if at is None or at not in done else [at])


def _completed(m: SpanRecord) -> bool:
    return m.torch is None or m.torch.completion not in NOT_COMPLETED


def _end(m: SpanRecord) -> Stamp:
    return m.end or NO_STAMP


def _top2(values: list[tuple[int, int]]) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """The largest two (value, index) pairs."""
    first = second = None
    for v in values:
        if first is None or v[0] > first[0]:
            first, second = v, first
        elif second is None or v[0] > second[0]:
            second = v
    return first, second


def _other(top: tuple[tuple[int, int] | None, tuple[int, int] | None], index: int) -> tuple[int, int] | None:
    """The best of ``top`` that is not member ``index`` (a span is never paired with itself)."""
    first, second = top
    return first if first is not None and first[1] != index else second


def decide_claim(members: Sequence[SpanRecord], ranks: Sequence[int], starts: list[int], ends: list[int],
                 extra_ns: int = 0) -> Claim | None:
    """Decide "every start in ``starts`` precedes every end in ``ends``" (pairs of one span excluded);
    None when there is no such pair. ``ranks``: each member's global rank; ``extra_ns``: the topology's
    extra error for the members' hosts."""
    in_starts, in_ends = set(starts), set(ends)
    pairs = len(starts) * len(ends) - len(in_starts & in_ends)
    if pairs <= 0:
        return None
    # Members that have a partner on the other side (another span): only they take part.
    starts, ends = ([i for i in starts if len(ends) > 1 or ends[0] != i],
                    [j for j in ends if len(starts) > 1 or starts[0] != j])
    naive = _naive(members, starts, ends)
    physics = _physics(members, starts, ends, extra_ns)
    if physics is not None:
        decision, witnesses = physics
        worst = max(witnesses, key=lambda w: w[2]) if witnesses else None
        return Claim(decision, pairs, starts, ends, witnesses, worst, naive, None)
    silence = _silence(members, starts, ends)
    witnesses, full = _lamport(members, ranks, starts, ends)
    if witnesses:
        worst = max(witnesses, key=lambda w: w[2])
        relation = Relation.CONCURRENT if worst[2] == 0 else Relation.NOT_BEFORE
        return Claim(Decision(relation, Method.LAMPORT), pairs, starts, ends, witnesses, worst, naive, silence)
    fp = _svc(members, starts, ends)
    if fp is not None:
        decision = Decision(Relation.BEFORE, Method.SVC, 1.0 - fp, fp)
    elif full:
        decision = Decision(Relation.NOT_AFTER, Method.LAMPORT)
    else:
        decision = Decision(Relation.UNDECIDED, Method.UNDECIDED, 0.0)
    return Claim(decision, pairs, starts, ends, [], None, naive, silence)


def _physics(members: Sequence[SpanRecord], starts: list[int], ends: list[int],
             extra: int) -> tuple[Decision, list[Witness]] | None:
    """BEFORE when every pair is ordered, AFTER (with the witnesses) when any pair is reversed, else None.

    Pairs within one host clock domain (clockdomain.py) are judged by their readings' difference, against
    the domain's widest relative bound (``_Group``); pairs across domains, and members without one, by
    their absolute intervals. Each side is checked against its extremes: O(n)."""
    start_stamps = [members[i].start for i in starts]
    end_stamps = [_end(members[j]) for j in ends]
    if all(s.domain is None for s in start_stamps) and all(e.domain is None for e in end_stamps):
        if len(members) >= ARRAYS_FROM:
            with suppress(Declined):
                return physics_arrays(starts, ends, start_stamps, end_stamps, extra)
        return absolute_physics(starts, ends, start_stamps, end_stamps, extra)  # the common case, in one pass
    return _grouped_physics(members, starts, ends, extra)


def _grouped_physics(members: Sequence[SpanRecord], starts: list[int], ends: list[int],
                     extra: int) -> tuple[Decision, list[Witness]] | None:
    """``_physics`` for any stamps, host clock domains or not."""
    sstamp = {i: members[i].start for i in starts}
    estamp = {j: _end(members[j]) for j in ends}
    # A member's start and end are grouped apart: one may have a reading in the domain, the other none.
    grouped = _groups([*(((0, i), s) for i, s in sstamp.items()), *(((1, j), e) for j, e in estamp.items())])
    group_s = {i: grouped[(0, i)] for i in starts}
    group_e = {j: grouped[(1, j)] for j in ends}
    found: dict[tuple[int, int], int] = {}
    room: int | None = None
    ordered = True
    # Within each domain: by the readings' difference.
    by_group: dict[int, tuple[_Group, list[int], list[int]]] = {}
    for is_end, members_of in ((False, starts), (True, ends)):
        for m in members_of:
            g = group_e[m] if is_end else group_s[m]
            if g is not None:
                entry = by_group.setdefault(id(g), (g, [], []))
                (entry[2] if is_end else entry[1]).append(m)
    for g, g_starts, g_ends in by_group.values():
        if not g_starts or not g_ends:
            continue
        latest = _top2([(sstamp[i].ptp_ns, i) for i in g_starts])  # type: ignore[misc]
        earliest = _top2([(-estamp[j].ptp_ns, j) for j in g_ends])  # type: ignore[operator]
        for j in g_ends:
            best = _other(latest, j)
            if best is not None:
                gap = estamp[j].ptp_ns - best[0] - g.slack  # type: ignore[operator]
                if -gap > 2 * g.slack:  # the start lies after the end by more than the bound
                    found[(best[1], j)] = -gap - 2 * g.slack
                if gap <= 0:
                    ordered = False
                else:
                    room = gap if room is None else min(room, gap)
        for i in g_starts:
            best = _other(earliest, i)
            if best is not None and sstamp[i].ptp_ns + best[0] > g.slack:  # type: ignore[operator]
                found[(i, best[1])] = sstamp[i].ptp_ns + best[0] - g.slack  # type: ignore[operator]
    # Across domains (a member without one is a domain of its own): by the absolute intervals.
    cross = _cross(starts, ends, group_s, group_e, sstamp, estamp, extra)
    if cross is None:
        ordered = False
    else:
        more, cross_room, cross_ordered = cross
        found.update(more)
        ordered = ordered and cross_ordered
        if cross_room is not None:
            room = cross_room if room is None else min(room, cross_room)
    if found:
        witnesses = [(i, j, excess) for (i, j), excess in found.items()]
        return Decision(Relation.AFTER, Method.PHYSICS, 1.0, 0.0, max(w[2] for w in witnesses)), witnesses
    if not ordered or room is None:
        return None
    return Decision(Relation.BEFORE, Method.PHYSICS, 1.0, 0.0, room), []


class _Group:
    """Members read from one host clock domain, and the widest relative bound between two of them."""

    __slots__ = ("slack",)

    def __init__(self, slack: int) -> None:
        self.slack = slack


def _groups(stamps: list[tuple[tuple[int, int], Stamp]]) -> dict[tuple[int, int], _Group | None]:
    """Each stamp's domain group, by (side, member) (None: no reading, no domain, or one whose epochs do not
    all agree: absolute only). A group's slack is an upper bound of every pair's relative_slack."""
    by_key: dict[str, list[tuple[int, int]]] = {}
    domains = {}
    for i, st in stamps:
        d = st.domain
        if d is not None and st.ptp_ns is not None and not st.degraded:
            domains[i] = d
            by_key.setdefault(d.key, []).append(i)
    out: dict[tuple[int, int], _Group | None] = dict.fromkeys((i for i, _ in stamps), None)
    for members in by_key.values():
        ds = [domains[i] for i in dict.fromkeys(members)]
        lo = min(d.epoch_ns for d in ds)
        hi = max(d.epoch_ns for d in ds)
        if hi - lo > 2 * min(d.bound_ns for d in ds):
            continue  # not one epoch for all of them (a step between): absolute bounds only
        g = _Group(2 * max(d.read_ns for d in ds) + (hi - lo) + 2 * max(d.bound_ns for d in ds))
        for i in members:
            out[i] = g
    return out


def _cross(starts: list[int], ends: list[int], group_s: dict[int, _Group | None], group_e: dict[int, _Group | None],
           sstamp: dict[int, Stamp], estamp: dict[int, Stamp],
           extra: int) -> tuple[dict[tuple[int, int], int], int | None, bool] | None:
    """Pairs of members in different domains (or without one), by their absolute intervals: the reversed
    ones found, the least room, and whether all are ordered; None when such a pair has an unusable side.
    A member's "others" are the members outside its group: the best of the top two groups. A stamp in no
    group is a group of its own, its member's (so a span is never paired with itself)."""
    def key_of(g: _Group | None, i: int) -> object:
        return ("member", i) if g is None else id(g)

    key_s = {i: key_of(group_s[i], i) for i in starts}
    key_e = {j: key_of(group_e[j], j) for j in ends}

    def best_by_group(values: list[tuple[int, int]], keys: dict[int, object]) -> list[tuple[tuple[int, int], object]]:
        best: dict[object, tuple[int, int]] = {}
        for v in values:
            k = keys[v[1]]
            if k not in best or v[0] > best[k][0]:
                best[k] = v
        return [(v, keys[v[1]]) for v in sorted(best.values(), reverse=True)[:2]]

    def other(top: list[tuple[tuple[int, int], object]], k: object) -> tuple[int, int] | None:
        """The best entry of ``top`` outside group ``k``."""
        return next((v for v, vk in top if vk != k), None)

    start_keys, end_keys = set(key_s.values()), set(key_e.values())
    if len(start_keys | end_keys) <= 1:
        return {}, None, True  # one domain: no pair across

    def partnered(k: object, keys: set[object]) -> bool:  # has a partner outside its own group
        return len(keys) > 1 or k not in keys

    use_s = [i for i in starts if stamp_usable(sstamp[i])]
    use_e = [j for j in ends if stamp_usable(estamp[j])]
    found: dict[tuple[int, int], int] = {}
    latest = best_by_group([(_lo(sstamp[i]), i) for i in use_s], key_s)
    earliest = best_by_group([(-_hi(estamp[j]), j) for j in use_e], key_e)
    for j in use_e:
        best = other(latest, key_e[j])
        if best is not None and (gap := physics_gap(_absolute(sstamp[best[1]]), estamp[j], extra)) < 0:
            found[(best[1], j)] = -gap
    for i in use_s:
        best = other(earliest, key_s[i])
        if best is not None and (gap := physics_gap(sstamp[i], _absolute(estamp[best[1]]), extra)) < 0:
            found[(i, best[1])] = -gap
    needs = [i for i in starts if partnered(key_s[i], end_keys)]
    needs_e = [j for j in ends if partnered(key_e[j], start_keys)]
    if found or any(not stamp_usable(sstamp[i]) for i in needs) or any(not stamp_usable(estamp[j]) for j in needs_e):
        return (found, None, False) if found else None
    reach = best_by_group([(_hi(sstamp[i]), i) for i in starts], key_s)
    room: int | None = None
    for j in ends:
        best = other(reach, key_e[j])
        if best is None:
            continue
        gap = physics_gap(_absolute(sstamp[best[1]]), estamp[j], extra)
        if gap <= 0:
            return found, None, False
        room = gap if room is None else min(room, gap)
    return found, room, True


def _absolute(s: Stamp) -> Stamp:
    """The stamp without its domain: across domains only the absolute interval counts."""
    return s if s.domain is None else Stamp(s.ptp_ns, s.uncertainty_ns, s.quality, s.lts, s.degraded)


def _lo(s: Stamp) -> int:
    assert s.ptp_ns is not None
    return s.ptp_ns - s.uncertainty_ns


def _hi(s: Stamp) -> int:
    assert s.ptp_ns is not None
    return s.ptp_ns + s.uncertainty_ns


def _silence(members: Sequence[SpanRecord], starts: list[int], ends: list[int]) -> str:
    """The first reason (order.SILENCE_REASONS) any stamp of the claim shows, else "overlap"."""
    stamps = [members[i].start for i in starts] + [_end(members[j]) for j in ends]
    rank = {r: k for k, r in enumerate(SILENCE_REASONS)}
    return min((physics_silence(s, s) for s in stamps), key=rank.__getitem__, default="overlap")


def _lts(s: Stamp) -> int | None:
    v = s.lts
    return None if v is None or v == LTS_MAX else v


def _lamport(members: Sequence[SpanRecord], ranks: Sequence[int], starts: list[int],
             ends: list[int]) -> tuple[list[Witness], bool]:
    """Lamport witnesses among the pairs a recorded merge covers, and whether merges cover every pair.

    End j covers start i when j recorded a merge (recv.lts), i's span sent a record, and i's rank is
    not in j's recv.missing. Then start_i.lts < record_i.lts < recv.lts_j < end_j.lts, honestly."""
    slts = {i: _lts(members[i].start) for i in starts}
    sent = [i for i in starts if slts[i] is not None and members[i].sends]
    merged: list[int] = []
    missing: dict[int, frozenset[int]] = {}
    for j in ends:
        t = members[j].torch
        if t is not None and t.recv_lts is not None and _lts(_end(members[j])) is not None:
            merged.append(j)
            missing[j] = frozenset(t.recv_missing)
    found: dict[tuple[int, int], int] = {}
    by_start = sorted(sent, key=lambda i: slts[i], reverse=True)  # type: ignore[arg-type,return-value]
    for j in merged:  # the covered start with the largest counter; skipping at most len(missing[j]) + 1
        end_lts = _lts(_end(members[j]))
        assert end_lts is not None
        for i in by_start:
            if i != j and ranks[i] not in missing[j]:
                start_lts = slts[i]
                assert start_lts is not None
                if start_lts >= end_lts:
                    found[(i, j)] = start_lts - end_lts
                break
    by_end = sorted(merged, key=lambda j: _lts(_end(members[j])))  # type: ignore[arg-type,return-value]
    for i in sent:  # the covering end with the smallest counter
        start_lts = slts[i]
        assert start_lts is not None
        for j in by_end:
            if j != i and ranks[i] not in missing[j]:
                end_lts = _lts(_end(members[j]))
                assert end_lts is not None
                if start_lts >= end_lts:
                    found[(i, j)] = start_lts - end_lts
                break
    start_ranks = {ranks[i] for i in starts}
    full = (len(sent) == len(starts) and len(merged) == len(ends)
            and not any((missing[j] & start_ranks) - {ranks[j]} for j in merged))
    return [(i, j, d) for (i, j), d in found.items()], full


def _svc(members: Sequence[SpanRecord], starts: list[int], ends: list[int]) -> float | None:
    """fp when every start's span id is in every end's recorded sketch (None otherwise, or when the
    union bound on a false positive somewhere reaches 1: no confidence left)."""
    common = (1 << SKETCH_BITS) - 1
    fp = 0.0
    in_starts = set(starts)
    for j in ends:
        m = members[j]
        t = m.torch
        if t is None or t.recv_sketch is None:
            return None
        sketch = t.recv_sketch | (m.sketch or 0)
        common &= sketch
        fp += (sketch.bit_count() / SKETCH_BITS) ** SKETCH_HASHES * (len(starts) - (j in in_starts))
    for i in starts:
        mask = span_mask(members[i].span_id)
        if common & mask != mask:
            return None
    return fp if fp < 1.0 else None


def _naive(members: Sequence[SpanRecord], starts: list[int], ends: list[int]) -> int | None:
    """What raw timestamps show (spec §6.1, like with like): TAI readings when every event has one,
    else OpenTelemetry times. 1 when some end reads before a start of another span, 0 for a tie."""
    if len(members) >= ARRAYS_FROM:
        with suppress(Declined):
            return naive_arrays(members, starts, ends)
    tai = all(members[i].start.ptp_ns is not None for i in starts) and \
        all(_end(members[j]).ptp_ns is not None for j in ends)
    s = {i: (members[i].start.ptp_ns if tai else members[i].otel_start_ns) for i in starts}
    e = {j: (_end(members[j]).ptp_ns if tai else members[j].otel_end_ns) for j in ends}
    latest = _top2([(v, i) for i, v in s.items() if v is not None])
    out: int | None = None
    for j, v in e.items():
        best = _other(latest, j)
        if best is None or v is None:
            continue
        seen = 1 if best[0] > v else (0 if best[0] == v else -1)
        out = seen if out is None else max(out, seen)
    return out


def arrival(members: Sequence[SpanRecord], ranks: Sequence[int], extra_ns: int = 0) -> tuple[list[int], bool]:
    """Members in arrival order (by start: TAI readings when all have one, else OpenTelemetry times) and
    whether physics says the last arriver started after every other member (its start interval wholly
    after theirs)."""
    if len(members) >= ARRAYS_FROM and all(m.start.domain is None for m in members):
        with suppress(Declined):
            return arrival_arrays(members, ranks, extra_ns)
    tai = all(m.start.ptp_ns is not None for m in members)
    order = sorted(range(len(members)), key=lambda i: (members[i].start.ptp_ns if tai else members[i].otel_start_ns,
                                                      ranks[i]))
    if len(order) < 2:
        return order, False
    last = members[order[-1]].start
    # Each other start against the last, by the one rule (a host clock domain's relative bound, else the
    # absolute intervals): O(n).
    return order, all(physics_gap(members[i].start, last, extra_ns) > 0 for i in order[:-1])
