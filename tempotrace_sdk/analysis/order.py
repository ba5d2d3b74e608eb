"""The ordering engine: decide which of two events came first, and how sure we are.

The procedure is spec/analysis.md §2, rule by rule, in this order:

1. physics (§2.1): both stamps usable and their intervals, widened by the
   topology's extra error for the host pair, are disjoint -> BEFORE / AFTER;
2. Lamport (§2.2): lts_a >= lts_b -> a did not happen before b (and the mirror);
   equal values -> neither happened before the other (CONCURRENT);
3. SVC (§2.3): a is a span start and a's span id is in b's sketch -> a happened
   before b, with the sketch's false-positive estimate (popcount/256)^4; only in
   a direction Lamport did not rule out;
4. otherwise UNDECIDED. Never a guess.

``decide`` is the scalar form used on traces; ``decide_arrays`` is the same
procedure over numpy arrays, used by the simulator (a test checks they agree).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..wire._layout import LTS_MAX, SKETCH_BITS, SKETCH_HASHES, UNCERTAINTY_SATURATED
from ..wire.sketch import _indices_and_mask
from .events import KIND_START, Event

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["Decision", "Method", "Relation", "decide", "decide_arrays", "sketch_fp", "span_mask"]


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
    UNDECIDED = "undecided"


#: Relations that agree with a known edge a -> b, and those that contradict it.
CONSISTENT = frozenset({Relation.BEFORE, Relation.NOT_AFTER})
CONTRADICTS = frozenset({Relation.AFTER, Relation.NOT_BEFORE, Relation.CONCURRENT})


@dataclass(frozen=True, slots=True)
class Decision:
    """The engine's answer for (a, b).

    ``confidence`` is the probability the answer is right given that every
    clock keeps its claimed bound and Lamport counters are honest: 1.0 for
    physics and Lamport, 1 − fp for SVC. ``gap_ns`` is, for physics, the room
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


def span_mask(span_id: str) -> int:
    """The sketch bits a span id (16 hex chars) sets, as an int (spec tt-ext-v3 §3.7)."""
    return int(_indices_and_mask(bytes.fromhex(span_id))[1])


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
    sa, sb = a.stamp, b.stamp
    ia, ib = sa.interval(), sb.interval()
    if ia is not None and ib is not None:
        gap_ab = ib[0] - ia[1] - extra_ns  # room left when a lies before b
        if gap_ab > 0:
            return Decision(Relation.BEFORE, Method.PHYSICS, 1.0, 0.0, gap_ab)
        gap_ba = ia[0] - ib[1] - extra_ns
        if gap_ba > 0:
            return Decision(Relation.AFTER, Method.PHYSICS, 1.0, 0.0, gap_ba)
    la, lb = sa.lts, sb.lts
    may_before = may_after = True
    # A saturated counter (2^63-1) is shared by every later event of that
    # process: it orders nothing (spec/tt-ext-v3.md §10, §11.2).
    if la is not None and lb is not None and la != LTS_MAX and lb != LTS_MAX:
        if la == lb:
            return Decision(Relation.CONCURRENT, Method.LAMPORT)
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
        return Decision(Relation.NOT_BEFORE, Method.LAMPORT)
    if not may_after:
        return Decision(Relation.NOT_AFTER, Method.LAMPORT)
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
    before = usable & ((ptp_b - u_b) - (ptp_a + u_a) - extra_ns > 0)
    after = usable & ~before & ((ptp_a - u_a) - (ptp_b + u_b) - extra_ns > 0)
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
