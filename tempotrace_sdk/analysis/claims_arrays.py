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

from ..wire.layout import UNCERTAINTY_SATURATED
from .events import NO_STAMP, SpanRecord, Stamp
from .order import Decision, Method, Relation

__all__ = ["ARRAYS_FROM", "Declined", "arrival_arrays", "naive_arrays", "physics_arrays"]

#: Members from which a claim is decided by these arrays: below, the list forms cost less than making arrays.
ARRAYS_FROM = 64
#: Readings and times in [0, 2^62) ns and a topology extra below 2^62 - 2^17 keep every sum below within int64
#: (a reading near 2^62 against one near 0 with the largest extra still fits; only usable stamps' bounds, below
#: 65,535 ns, enter a sum).
_SAFE = 1 << 62
_EXTRA_MAX = _SAFE - (1 << 17)
_UNKNOWN = "UNKNOWN"

Witness = tuple[int, int, int]


class Declined(Exception):
    """These arrays cannot answer this claim exactly: the list form does."""


class _Readings:
    """Stamps as arrays: reading (0 where none), bound, and whether order.stamp_usable accepts each."""

    def __init__(self, stamps: Sequence[Stamp]) -> None:
        ptp = [s.ptp_ns for s in stamps]
        have = [p is not None for p in ptp]
        try:
            self.ptp = np.array([p if p is not None else 0 for p in ptp], dtype=np.int64)
            self.unc = np.array([s.uncertainty_ns for s in stamps], dtype=np.int64)
        except OverflowError:
            raise Declined from None
        self.usable = np.array(have, dtype=bool) & ~np.array([s.degraded for s in stamps], dtype=bool) & \
            ~np.array([s.quality == _UNKNOWN for s in stamps], dtype=bool) & (self.unc < UNCERTAINTY_SATURATED)
        if len(ptp) and not 0 <= int(self.ptp.min()) <= int(self.ptp.max()) < _SAFE:
            raise Declined


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


def _gap(pa: np.ndarray, ua: np.ndarray, pb: np.ndarray, ub: np.ndarray, extra: int) -> np.ndarray:
    """order.physics_gap of usable stamps without domains, elementwise."""
    after = (pb - ub) - (pa + ua) - extra
    before = (pa - ua) - (pb + ub) - extra
    return np.where(after > 0, after, np.where(before > 0, -before, 0))


def physics_arrays(starts: list[int], ends: list[int], start_stamps: list[Stamp], end_stamps: list[Stamp],
                   extra: int) -> tuple[Decision, list[Witness]] | None:
    """``absolute_physics`` (same arguments, same answer, witnesses in its order)."""
    if not 0 <= extra < _EXTRA_MAX:
        raise Declined
    s, e = _Readings(start_stamps), _Readings(end_stamps)
    s_member, e_member = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
    us, ue = np.flatnonzero(s.usable), np.flatnonzero(e.usable)
    found: dict[tuple[int, int], int] = {}
    if len(us) and len(ue):
        sp, su, sm = s.ptp[us], s.unc[us], s_member[us]
        ep, eu, em = e.ptp[ue], e.unc[ue], e_member[ue]
        latest, earliest = _top2(sp - su, sm), _top2(-(ep + eu), em)
        # each usable end against the usable start lying furthest after it
        at, has = _other(latest, sm, em)
        gap = _gap(sp[at], su[at], ep, eu, extra)
        for k in np.flatnonzero(has & (gap < 0)).tolist():
            found[(int(sm[at[k]]), int(em[k]))] = -int(gap[k])
        # each usable start against the usable end lying furthest before it
        at, has = _other(earliest, em, sm)
        gap = _gap(sp, su, ep[at], eu[at], extra)
        for k in np.flatnonzero(has & (gap < 0)).tolist():
            found.setdefault((int(sm[k]), int(em[at[k]])), -int(gap[k]))
    if found:
        witnesses = [(i, j, excess) for (i, j), excess in found.items()]
        return Decision(Relation.AFTER, Method.PHYSICS, 1.0, 0.0, max(w[2] for w in witnesses)), witnesses
    if len(us) < len(starts) or len(ue) < len(ends):
        return None  # a member physics cannot use: silent on its pairs
    at, has = _other(_top2(s.ptp + s.unc, s_member), s_member, e_member)
    assert has.all()  # every end has a partner
    gap = _gap(s.ptp[at], s.unc[at], e.ptp, e.unc, extra)
    if (gap <= 0).any():
        return None
    return Decision(Relation.BEFORE, Method.PHYSICS, 1.0, 0.0, int(gap.min())), []


def _times(values: list[int | None]) -> np.ndarray:
    """int64 times; Declined when one is missing or at or beyond 2^62 ns."""
    if None in values:
        raise Declined
    try:
        out = np.array(values, dtype=np.uint64)
    except OverflowError:  # (a negative time: beyond what a span table or OTLP JSON holds)
        raise Declined from None
    if len(out) and int(out.max()) >= _SAFE:
        raise Declined
    return out.astype(np.int64)


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
    r = _Readings(starts)
    last = int(order[-1])
    before = order[:-1]
    if not r.usable[last] or not r.usable[before].all():
        return order.tolist(), False
    gap = (r.ptp[last] - r.unc[last]) - (r.ptp[before] + r.unc[before]) - extra
    return order.tolist(), bool((gap > 0).all())
