"""A large collective's claim physics, naive order and arrival order as numpy arrays (spec/analysis.md §1.3,
§2.1, §2.7, §6.1): what ``claims_absolute.absolute_physics``, ``claims._naive`` and ``claims.arrival`` answer, for
stamps without a host clock domain.

A 2,048-rank collective costs those functions a few Python steps per member (7-8 µs a member together); here
a member costs the gathering of its fields into lists, and the rest is a handful of array expressions. Each
function raises ``Declined`` where it cannot answer exactly (a time at or beyond 2^62 ns or a topology extra near
it, where int64 sums could overflow, or a missing time the list form would skip): the caller then asks the list
form.
test_analysis_claims.py checks each against its list form on drawn claims.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .events import NO_STAMP, SpanRecord, Stamp
from .order import Decision, Method, Relation, interval_gaps
from .stamparrays import SAFE, StampArrays, times

__all__ = ["ARRAYS_FROM", "Declined", "arrival_arrays", "naive_arrays", "physics_arrays"]

#: Members from which a claim is decided by these arrays: below, the list forms cost less than making arrays.
ARRAYS_FROM = 64
#: Readings and times in [0, 2^62) ns and a topology extra below 2^62 - 2^17 keep every sum below within int64
#: (a reading near 2^62 against one near 0 with the largest extra still fits; only usable stamps' bounds, below
#: 65,535 ns, enter a sum).
_EXTRA_MAX = SAFE - (1 << 17)

Witness = tuple[int, int, int]


class Declined(Exception):
    """These arrays cannot answer this claim exactly: the list form does."""


def _readings(stamps: Sequence[Stamp]) -> StampArrays:
    """The stamps as arrays; Declined where a reading lies outside [0, 2^62) ns."""
    try:
        out = StampArrays(stamps)
    except OverflowError:
        raise Declined from None
    if not out.safe():
        raise Declined
    return out


def _top2(value: np.ndarray, member: np.ndarray) -> tuple[int, int | None]:
    """Positions of the two largest (value, member) pairs, the largest first (``sorted(..., reverse=True)``)."""
    order = np.lexsort((member, value))
    return int(order[-1]), (int(order[-2]) if len(order) > 1 else None)


def _other(top: tuple[int, int | None], member: np.ndarray, of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each member in ``of``: the position in ``top``'s side of its best partner that is another member,
    and whether it has one."""
    first, second = top
    mine = member[first] == of
    at = np.where(mine, -1 if second is None else second, first)
    return at, at >= 0


def physics_arrays(starts: list[int], ends: list[int], start_stamps: list[Stamp], end_stamps: list[Stamp],
                   extra: int) -> tuple[Decision, list[Witness]] | None:
    """``absolute_physics`` (same arguments, same answer, witnesses in its order)."""
    if not 0 <= extra < _EXTRA_MAX:
        raise Declined
    s, e = _readings(start_stamps), _readings(end_stamps)
    s_member, e_member = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
    us, ue = np.flatnonzero(s.usable()), np.flatnonzero(e.usable())
    found: dict[tuple[int, int], int] = {}
    if len(us) and len(ue):
        sp, su, sm = s.ptp[us], s.unc[us], s_member[us]
        ep, eu, em = e.ptp[ue], e.unc[ue], e_member[ue]
        latest, earliest = _top2(sp - su, sm), _top2(-(ep + eu), em)
        # each usable end against the usable start lying furthest after it
        at, has = _other(latest, sm, em)
        gap = interval_gaps(sp[at], su[at], ep, eu, extra)
        for k in np.flatnonzero(has & (gap < 0)).tolist():
            found[(int(sm[at[k]]), int(em[k]))] = -int(gap[k])
        # each usable start against the usable end lying furthest before it
        at, has = _other(earliest, em, sm)
        gap = interval_gaps(sp, su, ep[at], eu[at], extra)
        for k in np.flatnonzero(has & (gap < 0)).tolist():
            found.setdefault((int(sm[k]), int(em[at[k]])), -int(gap[k]))
    if found:
        witnesses = [(i, j, excess) for (i, j), excess in found.items()]
        return Decision(Relation.AFTER, Method.PHYSICS, 1.0, 0.0, max(w[2] for w in witnesses)), witnesses
    if len(us) < len(starts) or len(ue) < len(ends):
        return None  # a member physics cannot use: silent on its pairs
    at, has = _other(_top2(s.ptp + s.unc, s_member), s_member, e_member)
    assert has.all()  # every end has a partner
    gap = interval_gaps(s.ptp[at], s.unc[at], e.ptp, e.unc, extra)
    if (gap <= 0).any():
        return None
    return Decision(Relation.BEFORE, Method.PHYSICS, 1.0, 0.0, int(gap.min())), []


def _times(values: Sequence[int | None]) -> np.ndarray:
    """stamparrays.times; Declined where it has none."""
    out = times(values)
    if out is None:
        raise Declined
    return out


def naive_arrays(members: Sequence[SpanRecord], starts: list[int], ends: list[int]) -> int | None:
    """``claims._naive``."""
    sv: list[int | None] = [members[i].start.ptp_ns for i in starts]
    ev: list[int | None] = [(members[j].end or NO_STAMP).ptp_ns for j in ends]
    if None in sv or None in ev:  # like with like: OpenTelemetry times for all
        sv = [members[i].otel_start_ns for i in starts]
        ev = [members[j].otel_end_ns for j in ends]
    s, e = _times(sv), _times(ev)
    if not len(s):
        raise Declined
    s_member, e_member = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
    first = int(np.argmax(s))  # the latest start, the first such in the list; then the latest of the others
    rest = np.delete(s, first)
    second = None if not len(rest) else int(np.argmax(rest)) + (int(np.argmax(rest)) >= first)
    at, has = _other((first, second), s_member, e_member)
    if not has.any():
        return None
    best = s[at[has]]
    seen = np.sign(best - e[has])
    return int(seen.max())


def arrival_arrays(members: Sequence[SpanRecord], ranks: Sequence[int], extra: int) -> tuple[list[int], bool]:
    """``claims.arrival`` for members whose starts name no domain."""
    if not 0 <= extra < _EXTRA_MAX:
        raise Declined
    starts = [m.start for m in members]
    tai: list[int | None] = [s.ptp_ns for s in starts]
    times = _times(tai if None not in tai else [m.otel_start_ns for m in members])
    order = np.lexsort((np.array(ranks, dtype=np.int64), times))
    if len(order) < 2:
        return order.tolist(), False
    r = _readings(starts)
    last = int(order[-1])
    before = order[:-1]
    usable = r.usable()
    if not usable[last] or not usable[before].all():
        return order.tolist(), False
    gap = interval_gaps(r.ptp[before], r.unc[before], r.ptp[last], r.unc[last], extra)
    return order.tolist(), bool((gap > 0).all())
