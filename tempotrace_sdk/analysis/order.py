"""The ordering engine: decide which of two events came first, and how sure we are.

The procedure is spec/analysis.md §2, rule by rule, in this order:

1. physics (§2.1): two readings of one host clock domain further apart than
   their relative bound (clockdomain.py), else both stamps usable and their
   intervals, widened by the topology's extra error for the host pair, disjoint
   -> BEFORE / AFTER (``physics_gap``, the one definition: the analyzer counts
   with it too);
2. Lamport (§2.2): lts_a >= lts_b -> a did not happen before b (and the mirror);
   equal values -> neither happened before the other (CONCURRENT);
3. SVC (§2.3): a is a span start and a's span id is in b's sketch -> a happened
   before b, with the sketch's false-positive estimate (popcount/256)^4; only in
   a direction Lamport did not rule out;
4. otherwise UNDECIDED. Never a guess.

A fifth method, DERIVED (§2.8), is not a rule on two events: it reads a whole trace's structure (program
order on each process and its matched messages and collectives) and is applied by derived.py to the
torch edges these rules leave undecided; ``decide`` never answers it.

``decide`` is the scalar form used on traces (``physics_gap`` then
``decide_logical``); ``decide_arrays`` is the same procedure over numpy arrays,
used by the simulator (a test checks they agree).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

import msgspec

from ..wire.layout import LTS_MAX, SKETCH_BITS, SKETCH_HASHES, UNCERTAINTY_SATURATED
from ..wire.sketch import _indices_and_mask
from .clockdomain import comparable, relative_gap
from .events import KIND_START, Event, Stamp

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "SILENCE_REASONS", "Decision", "Method", "Relation", "decide", "decide_arrays", "decide_logical", "interval_gap",
    "interval_gaps", "naive_order", "own_mask", "physics_gap", "physics_silence", "sketch_fp", "span_mask",
    "stamp_usable",
]


class Relation(str, enum.Enum):
    """What the rules established about the pair (a, b)."""

    BEFORE = "before"  #: a happened before b
    AFTER = "after"  #: b happened before a
    NOT_BEFORE = "not_before"  #: a did not happen before b (b first, or concurrent)
    NOT_AFTER = "not_after"  #: b did not happen before a (a first, or concurrent)
    CONCURRENT = "concurrent"  #: neither happened before the other
    UNDECIDED = "undecided"  #: the stamps do not say; no guess


class Method(str, enum.Enum):
    """Which rule produced the decision."""

    PHYSICS = "physics"
    LAMPORT = "lamport"
    SVC = "svc"
    #: the trace's own structure: program order on each process plus matched messages and collectives
    #: (derived.py, spec §2.8); never a recorded Lamport value across processes
    DERIVED = "derived"
    UNDECIDED = "undecided"


#: Relations that agree with a known edge a -> b, and those that contradict it.
CONSISTENT = frozenset({Relation.BEFORE, Relation.NOT_AFTER})
CONTRADICTS = frozenset({Relation.AFTER, Relation.NOT_BEFORE, Relation.CONCURRENT})


class Decision(msgspec.Struct, frozen=True, gc=False):
    """The engine's answer for (a, b).

    ``confidence`` is the probability the answer is right given that every
    clock keeps its claimed bound and Lamport counters are honest: 1.0 for
    physics and Lamport, 1 − fp for SVC; 1.0 for derived, given that the
    trace's numbering and each process's counter are (derived.py). ``gap_ns`` is, for physics, the room
    between the two intervals (positive when disjoint) after the extra error.
    """

    relation: Relation
    method: Method
    confidence: float = 1.0
    fp: float = 0.0
    gap_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"relation": self.relation.value, "method": self.method.value}
        out["confidence"] = self.confidence
        if self.method is Method.SVC:
            out["fp"] = self.fp
        if self.gap_ns is not None:
            out["gap_ns"] = self.gap_ns
        return out


UNDECIDED = Decision(Relation.UNDECIDED, Method.UNDECIDED, 0.0)
CONCURRENT_BY_LAMPORT = Decision(Relation.CONCURRENT, Method.LAMPORT)
NOT_BEFORE_BY_LAMPORT = Decision(Relation.NOT_BEFORE, Method.LAMPORT)
NOT_AFTER_BY_LAMPORT = Decision(Relation.NOT_AFTER, Method.LAMPORT)
_UNKNOWN = "UNKNOWN"


def stamp_usable(s: Stamp) -> bool:
    """§2.1: may physics use this stamp? Exactly when ``physics_gap`` (the one definition) orders it
    before a reading later than any clock's."""
    return physics_gap(s, _LATER_THAN_ANY) > 0


#: Why physics was silent on an edge (the report's ``physics_silent`` keys, §6.1), first reason first.
SILENCE_REASONS = ("no_reading", "policy_degrade", "unknown_quality", "saturated_bound", "overlap")


def physics_silence(sa: Stamp, sb: Stamp) -> str:
    """Why ``physics_gap`` was 0 for these stamps: the first of SILENCE_REASONS either stamp shows, or
    "overlap" when both were usable and the intervals (widened by the topology) touched, or when both
    were readings of one clock domain closer than their relative bound."""
    for s in (sa, sb):
        if s.ptp_ns is None:
            return "no_reading"
    for s in (sa, sb):
        if s.degraded:
            return "policy_degrade"
    da, db = sa.domain, sb.domain
    if da is not None and db is not None and comparable(da, db):
        return "overlap"
    for s in (sa, sb):
        if s.quality == _UNKNOWN:
            return "unknown_quality"
    for s in (sa, sb):
        if s.uncertainty_ns >= UNCERTAINTY_SATURATED:
            return "saturated_bound"
    return "overlap"


def physics_gap(sa: Stamp, sb: Stamp, extra_ns: int = 0) -> int:
    """§2.1, the physics rule, its one definition: > 0 when a lies before b (the room left between the
    intervals after ``extra_ns``), < 0 when b lies before a (minus that room), 0 when physics is silent.

    Two readings of one host clock domain are compared by their difference first (clockdomain.py: the
    clock's error is common to both, whatever its quality; no topology extra within a host). Otherwise a
    stamp is usable with a reading, a quality other than UNKNOWN, a bound below the saturated 65,535 ns
    (only a lower bound on the error), and no ``degrade`` policy verdict."""
    pa, pb = sa.ptp_ns, sb.ptp_ns
    if pa is None or pb is None or sa.degraded or sb.degraded:
        return 0
    da, db = sa.domain, sb.domain
    if da is not None and db is not None:
        gap = relative_gap(pa, da, pb, db)
        if gap:
            return gap
    if sa.quality == _UNKNOWN or sb.quality == _UNKNOWN:
        return 0
    ua, ub = sa.uncertainty_ns, sb.uncertainty_ns
    if ua >= UNCERTAINTY_SATURATED or ub >= UNCERTAINTY_SATURATED:
        return 0
    return interval_gap(pa, ua, pb, ub, extra_ns)


def interval_gap(pa: int, ua: int, pb: int, ub: int, extra_ns: int = 0) -> int:
    """``physics_gap`` of two usable stamps' absolute intervals (readings ``pa``/``pb``, bounds ``ua``/``ub``):
    the part of the rule every engine's fast path shares (claims_absolute.py)."""
    gap = (pb - ub) - (pa + ua) - extra_ns
    if gap > 0:
        return gap
    gap = (pa - ua) - (pb + ub) - extra_ns
    return -gap if gap > 0 else 0


def interval_gaps(pa: npt.NDArray[np.int64], ua: npt.NDArray[np.int64], pb: npt.NDArray[np.int64],
                  ub: npt.NDArray[np.int64], extra_ns: npt.NDArray[np.int64] | int = 0) -> npt.NDArray[np.int64]:
    """``interval_gap`` elementwise (edgebatch.py, claims_arrays.py, ``decide_arrays``); the caller keeps the sums
    within int64."""
    import numpy as np

    after = (pb - ub) - (pa + ua) - extra_ns
    before = (pa - ua) - (pb + ub) - extra_ns
    gaps: npt.NDArray[np.int64] = np.where(after > 0, after, np.where(before > 0, -before, 0))
    return gaps


#: A reading later than any clock's (2^65 ns, beyond int64), bound 0: what stamp_usable orders against.
_LATER_THAN_ANY = Stamp(2**65, 0, "OK")


def naive_order(sa: Stamp, raw_a: int | None, sb: Stamp, raw_b: int | None) -> int | None:
    """§6.1, what a tracer that trusts timestamps sees on an edge a -> b: 1 when it shows b first (an
    inversion), 0 for equal readings, -1 in order, None when a side has no time at all.

    Like with like: both TempoTrace readings (TAI) when both sides have one; otherwise OpenTelemetry's
    span times (UTC), a TAI reading taken to UTC with the leap-second table where a side has no span
    time (a hop's send)."""
    ta, tb = sa.ptp_ns, sb.ptp_ns
    if ta is None or tb is None:
        if ta is not None and raw_a is None:
            raw_a = _utc(ta)
        if tb is not None and raw_b is None:
            raw_b = _utc(tb)
        ta, tb = raw_a, raw_b
        if ta is None or tb is None:
            return None
    return 1 if ta > tb else (0 if ta == tb else -1)


def _utc(tai_ns: int) -> int:
    from ..clocks.leapseconds import tai_to_utc_ns

    return tai_to_utc_ns(tai_ns)


def span_mask(span_id: str) -> int:
    """The sketch bits a span id (16 hex chars) sets, as an int (spec tt-ext-v3 §3.7)."""
    return int(_indices_and_mask(bytes.fromhex(span_id))[1])


def own_mask(span_id: str, parent_id: str) -> int:
    """The sketch bits a span without a recorded sketch is known to hold: its own id's and its parent's, when
    it has one (values.build_record; columnar/sketchmask.py computes them for a column)."""
    return span_mask(span_id) | span_mask(parent_id) if parent_id else span_mask(span_id)


def sketch_fp(sketch: int) -> float:
    """False-positive estimate of a membership test: (popcount / 256) ** 4."""
    return float((sketch.bit_count() / SKETCH_BITS) ** SKETCH_HASHES)


def _in_sketch(event: Event, other: Event) -> float | None:
    """fp when ``event`` is a span start whose span id is in ``other``'s sketch."""
    if event.kind != KIND_START or other.sketch is None:
        return None
    mask = span_mask(event.span_id)
    if other.sketch & mask != mask:
        return None
    return sketch_fp(other.sketch)


def decide(a: Event, b: Event, extra_ns: int = 0) -> Decision:
    """Order a and b by the §2 procedure. ``extra_ns`` is the topology's extra
    error for the pair of hosts (0 within a rack or without a topology)."""
    gap = physics_gap(a.stamp, b.stamp, extra_ns)
    if gap > 0:
        return Decision(Relation.BEFORE, Method.PHYSICS, 1.0, 0.0, gap)
    if gap < 0:
        return Decision(Relation.AFTER, Method.PHYSICS, 1.0, 0.0, -gap)
    return decide_logical(a, b)


def decide_logical(a: Event, b: Event) -> Decision:
    """§2.2-§2.4: Lamport, then SVC, else undecided; what ``decide`` answers when physics is silent."""
    la, lb = a.stamp.lts, b.stamp.lts
    may_before = may_after = True
    # A saturated counter (2^63-1) is shared by every later event of that
    # process: it orders nothing (spec/tt-ext-v3.md §10, §11.2).
    if la is not None and lb is not None and la != LTS_MAX and lb != LTS_MAX:
        if la == lb:
            return CONCURRENT_BY_LAMPORT
        if la > lb:
            may_before = False
        else:
            may_after = False
    fp_before = _in_sketch(a, b) if may_before else None
    fp_after = _in_sketch(b, a) if may_after else None
    if fp_before is not None and fp_after is None:
        return Decision(Relation.BEFORE, Method.SVC, 1.0 - fp_before, fp_before)
    if fp_after is not None and fp_before is None:
        return Decision(Relation.AFTER, Method.SVC, 1.0 - fp_after, fp_after)
    # Both sketches claim the other: a false positive somewhere; say nothing more than Lamport did.
    if not may_before:
        return NOT_BEFORE_BY_LAMPORT
    if not may_after:
        return NOT_AFTER_BY_LAMPORT
    return UNDECIDED


# Integer codes for the array form (index into these tuples).
RELATION_CODES: tuple[Relation, ...] = tuple(Relation)
METHOD_CODES: tuple[Method, ...] = tuple(Method)


def decide_arrays(
    ptp_a: npt.NDArray[np.int64],
    u_a: npt.NDArray[np.int64],
    ok_a: npt.NDArray[np.bool_],
    lts_a: npt.NDArray[np.int64],
    ptp_b: npt.NDArray[np.int64],
    u_b: npt.NDArray[np.int64],
    ok_b: npt.NDArray[np.bool_],
    lts_b: npt.NDArray[np.int64],
    a_in_b: npt.NDArray[np.bool_],
    b_in_a: npt.NDArray[np.bool_],
    extra_ns: npt.NDArray[np.int64] | int = 0,
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]]:
    """``decide`` over arrays of pairs; returns (relation codes, method codes)
    indexing RELATION_CODES / METHOD_CODES. ``ok_*`` is "quality not UNKNOWN";
    saturation is checked here; ``lts_* < 0`` (or saturated, 2^63-1) means no Lamport value;
    ``a_in_b`` is "a is a span start whose id is in b's sketch"."""
    import numpy as np

    n = ptp_a.shape[0]
    rel = np.full(n, RELATION_CODES.index(Relation.UNDECIDED), dtype=np.int8)
    meth = np.full(n, METHOD_CODES.index(Method.UNDECIDED), dtype=np.int8)
    usable = ok_a & ok_b & (u_a < UNCERTAINTY_SATURATED) & (u_b < UNCERTAINTY_SATURATED)
    gaps = interval_gaps(ptp_a, u_a, ptp_b, u_b, extra_ns)
    before = usable & (gaps > 0)
    after = usable & (gaps < 0)
    phys = before | after
    rel[before] = RELATION_CODES.index(Relation.BEFORE)
    rel[after] = RELATION_CODES.index(Relation.AFTER)
    meth[phys] = METHOD_CODES.index(Method.PHYSICS)
    rest = ~phys
    have_l = (lts_a >= 0) & (lts_b >= 0) & (lts_a != LTS_MAX) & (lts_b != LTS_MAX)
    conc = rest & have_l & (lts_a == lts_b)
    rel[conc] = RELATION_CODES.index(Relation.CONCURRENT)
    meth[conc] = METHOD_CODES.index(Method.LAMPORT)
    rest &= ~conc
    may_before = ~(have_l & (lts_a > lts_b))
    may_after = ~(have_l & (lts_b > lts_a))
    hit_b = rest & may_before & a_in_b
    hit_a = rest & may_after & b_in_a
    svc_before = hit_b & ~hit_a
    svc_after = hit_a & ~hit_b
    rel[svc_before] = RELATION_CODES.index(Relation.BEFORE)
    rel[svc_after] = RELATION_CODES.index(Relation.AFTER)
    meth[svc_before | svc_after] = METHOD_CODES.index(Method.SVC)
    rest &= ~(svc_before | svc_after)
    nb = rest & ~may_before
    na = rest & ~may_after
    rel[nb] = RELATION_CODES.index(Relation.NOT_BEFORE)
    rel[na] = RELATION_CODES.index(Relation.NOT_AFTER)
    meth[nb | na] = METHOD_CODES.index(Method.LAMPORT)
    return rel, meth
