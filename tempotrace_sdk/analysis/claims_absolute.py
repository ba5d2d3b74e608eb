"""A collective claim's physics when no stamp names a host clock domain (spec/analysis.md §1.3, §2.1, §2.7):
what ``claims._physics`` decides, in one pass over plain lists.

Without domains every member is a group of its own, so the generic path's group bookkeeping (a dict per
side, a group per stamp, closures) reduces to each side's top two by member, and ``physics_gap`` to the
absolute intervals. A 2,048-GPU step finishes hundreds of thousands of collectives, most of them judged
this way; test_analysis_claims.py checks this path against the generic one, witnesses in order. Where the
native columns module is built, the same pass runs in C (native/columns/tt_claimphysics.c) for claims of up
to 64 stamps a side whose fields are plain ints; it declines anything else to the Python pass, which it
equals (test_analysis_claims.py).
"""

from __future__ import annotations

from ..wire.layout import UNCERTAINTY_SATURATED
from .events import Stamp
from .order import Decision, Method, Relation, interval_gap

try:
    from .. import _columns
except ImportError:  # (not built: the Python pass answers)
    _columns = None
if _columns is not None and _columns.UNCERTAINTY_SATURATED != UNCERTAINTY_SATURATED:
    _columns = None  # built against another saturated bound: a stale build must not judge

__all__ = ["absolute_physics"]

Witness = tuple[int, int, int]
_UNKNOWN = "UNKNOWN"
#: (value, member, reading, bound); compared as tuples, so ties go to the larger member as in ``sorted``
_Entry = tuple[int, int, int, int]


def _usable(members: list[int], stamps: list[Stamp]) -> list[tuple[int, int, int]]:
    """(member, reading, bound) of the stamps order.stamp_usable accepts, for stamps without a domain (a
    reading is at most 2^63 - 1 ns, so always before stamp_usable's reading "later than any clock")."""
    out = []
    for m, s in zip(members, stamps, strict=True):
        p = s.ptp_ns
        if p is not None and not s.degraded and s.quality != _UNKNOWN and s.uncertainty_ns < UNCERTAINTY_SATURATED:
            out.append((m, p, s.uncertainty_ns))
    return out


def _top2(entries: list[_Entry]) -> tuple[_Entry | None, _Entry | None]:
    """The two largest entries (``sorted(..., reverse=True)[:2]``)."""
    first = second = None
    for e in entries:
        if first is None or e > first:
            first, second = e, first
        elif second is None or e > second:
            second = e
    return first, second


def _other(top: tuple[_Entry | None, _Entry | None], member: int) -> _Entry | None:
    """The best of ``top`` that is not ``member`` (a span is never paired with itself)."""
    first, second = top
    return first if first is not None and first[1] != member else second


#: claim_physics's codes (native/columns/tt_claimphysics.h)
_SILENT, _BEFORE = 0, 1


def absolute_physics(starts: list[int], ends: list[int], start_stamps: list[Stamp], end_stamps: list[Stamp],
                     extra: int, native: bool = True) -> tuple[Decision, list[Witness]] | None:
    """``claims._physics`` where no stamp has a domain: ``start_stamps[k]`` is member ``starts[k]``'s start,
    ``end_stamps[k]`` member ``ends[k]``'s end, each member with a partner on the other side (as
    ``decide_claim`` passes them). BEFORE when every pair is ordered, AFTER with the witnesses (each violating
    end against the usable start lying furthest after it, then each violating start against the usable end
    lying furthest before it) when any pair is reversed, else None."""
    if native and _columns is not None:
        got = _columns.claim_physics(starts, ends, start_stamps, end_stamps, extra, Stamp)
        if got is not None:
            code, value, witnesses = got
            if code == _SILENT:
                return None
            if code == _BEFORE:
                return Decision(Relation.BEFORE, Method.PHYSICS, 1.0, 0.0, value), []
            return Decision(Relation.AFTER, Method.PHYSICS, 1.0, 0.0, value), witnesses
    use_s, use_e = _usable(starts, start_stamps), _usable(ends, end_stamps)
    found: dict[tuple[int, int], int] = {}
    latest = _top2([(p - u, i, p, u) for i, p, u in use_s])
    earliest = _top2([(-(p + u), j, p, u) for j, p, u in use_e])
    for j, pb, ub in use_e:
        best = _other(latest, j)
        if best is not None and (gap := interval_gap(best[2], best[3], pb, ub, extra)) < 0:
            found[(best[1], j)] = -gap
    for i, pa, ua in use_s:
        best = _other(earliest, i)
        if best is not None and (gap := interval_gap(pa, ua, best[2], best[3], extra)) < 0:
            found[(i, best[1])] = -gap
    if found:
        witnesses = [(i, j, excess) for (i, j), excess in found.items()]
        return Decision(Relation.AFTER, Method.PHYSICS, 1.0, 0.0, max(w[2] for w in witnesses)), witnesses
    if len(use_s) < len(starts) or len(use_e) < len(ends):
        return None  # a member physics cannot use: silent on its pairs
    reach = _top2([(p + u, i, p, u) for i, p, u in use_s])
    room: int | None = None
    for j, pb, ub in use_e:
        best = _other(reach, j)
        assert best is not None  # every end has a partner
        gap = interval_gap(best[2], best[3], pb, ub, extra)
        if gap <= 0:
            return None
        room = gap if room is None else min(room, gap)
    assert room is not None
    return Decision(Relation.BEFORE, Method.PHYSICS, 1.0, 0.0, room), []
