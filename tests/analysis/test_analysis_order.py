"""The ordering rules, one named case each (spec/analysis.md §2), and the
property that honest clocks never yield a wrong confident decision (§2.5)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk.analysis import Decision, Event, Method, Relation, Stamp, decide
from tempotrace_sdk.analysis.order import CONSISTENT, METHOD_CODES, RELATION_CODES, decide_arrays, span_mask
from tempotrace_sdk.wire import Sketch

A_ID, B_ID, OTHER_ID = "00000000000000a1", "00000000000000b2", "00000000000000c3"


def ev(ptp: int | None, u: int = 100, q: str = "OK", lts: int | None = None, kind: str = "start",
       span: str = A_ID, sketch: int | None = None, host: str = "h") -> Event:
    return Event(kind, span, host, Stamp(ptp, u, q, lts), sketch, ptp)


def sk(*ids: str) -> int:
    return int(Sketch.of(*(bytes.fromhex(i) for i in ids)))


CASES = [
    # (name, a, b, extra_ns, relation, method) -- each cites the rule it shows
    ("§2.1 disjoint intervals: a before b", ev(1000), ev(1300, span=B_ID), 0, Relation.BEFORE, Method.PHYSICS),
    ("§2.1 disjoint intervals: b before a", ev(1300), ev(1000, span=B_ID), 0, Relation.AFTER, Method.PHYSICS),
    ("§2.1 touching intervals are not disjoint", ev(1000), ev(1200, span=B_ID), 0, Relation.UNDECIDED,
     Method.UNDECIDED),
    ("§2.1 overlapping intervals: physics silent", ev(1000), ev(1150, span=B_ID), 0, Relation.UNDECIDED,
     Method.UNDECIDED),
    ("§2.1 UNKNOWN quality is never physics-ordered", ev(1000, q="UNKNOWN"), ev(9_000_000, span=B_ID), 0,
     Relation.UNDECIDED, Method.UNDECIDED),
    ("§2.1 saturated bound is unusable", ev(1000, u=65535), ev(10_000_000, span=B_ID), 0, Relation.UNDECIDED,
     Method.UNDECIDED),
    ("§2.1 DEGRADED with an honest bound still counts", ev(1000, q="DEGRADED"), ev(1300, span=B_ID), 0,
     Relation.BEFORE, Method.PHYSICS),
    ("§2.1 missing reading (no end stamp) has no bound", ev(None), ev(10**12, span=B_ID), 0, Relation.UNDECIDED,
     Method.UNDECIDED),
    ("§3 cross-rack extra error closes the gap", ev(1000), ev(1300, span=B_ID), 150, Relation.UNDECIDED,
     Method.UNDECIDED),
    ("§3 gap larger than the extra error", ev(1000), ev(1500, span=B_ID), 150, Relation.BEFORE, Method.PHYSICS),
    ("§2.2 lts_a > lts_b: a did not happen before b", ev(1000, lts=9), ev(1100, lts=3, span=B_ID), 0,
     Relation.NOT_BEFORE, Method.LAMPORT),
    ("§2.2 lts_a < lts_b: b did not happen before a", ev(1000, lts=3), ev(1100, lts=9, span=B_ID), 0,
     Relation.NOT_AFTER, Method.LAMPORT),
    ("§2.2 equal lts: concurrent", ev(1000, lts=5), ev(1100, lts=5, span=B_ID), 0, Relation.CONCURRENT,
     Method.LAMPORT),
    ("§2.2 physics first: Lamport never overrides it", ev(1000, lts=9), ev(1300, lts=3, span=B_ID), 0,
     Relation.BEFORE, Method.PHYSICS),
    ("§2.3 a's span in b's sketch: a before b", ev(None, lts=3), ev(None, lts=9, span=B_ID, sketch=sk(A_ID, B_ID)),
     0, Relation.BEFORE, Method.SVC),
    ("§2.3 no Lamport values: SVC alone", ev(None), ev(None, span=B_ID, sketch=sk(A_ID, B_ID)), 0, Relation.BEFORE,
     Method.SVC),
    ("§2.3 b's span in a's sketch: b before a", ev(None, sketch=sk(B_ID, A_ID)), ev(None, span=B_ID), 0,
     Relation.AFTER, Method.SVC),
    ("§2.3 SVC only in the direction Lamport allows", ev(None, lts=9), ev(None, lts=3, span=B_ID,
     sketch=sk(A_ID, B_ID)), 0, Relation.NOT_BEFORE, Method.LAMPORT),
    ("§2.3 SVC speaks for span starts only", ev(None, kind="end"), ev(None, span=B_ID, sketch=sk(A_ID, B_ID)), 0,
     Relation.UNDECIDED, Method.UNDECIDED),
    ("§2.3 both sketches claim the other: no guess", ev(None, sketch=sk(B_ID, A_ID)), ev(None, span=B_ID,
     sketch=sk(A_ID, B_ID)), 0, Relation.UNDECIDED, Method.UNDECIDED),
    ("§2.4 nothing known: undecided", ev(None), ev(None, span=B_ID, sketch=sk(OTHER_ID)), 0, Relation.UNDECIDED,
     Method.UNDECIDED),
]


@pytest.mark.parametrize(("name", "a", "b", "extra", "relation", "method"), CASES, ids=[c[0] for c in CASES])
def test_rule(name: str, a: Event, b: Event, extra: int, relation: Relation, method: Method) -> None:
    d = decide(a, b, extra)
    assert (d.relation, d.method) == (relation, method), name


def test_svc_decision_reports_the_sketch_false_positive_estimate() -> None:
    """§2.3: fp = (popcount / 256) ** 4, confidence = 1 − fp."""
    sketch = sk(A_ID, B_ID, OTHER_ID)
    d = decide(ev(None), ev(None, span=B_ID, sketch=sketch))
    pop = bin(sketch).count("1")
    assert d.fp == pytest.approx((pop / 256) ** 4)
    assert d.confidence == pytest.approx(1 - d.fp)
    assert d.to_dict()["fp"] == d.fp


def test_physics_reports_the_gap() -> None:
    d = decide(ev(1000), ev(1500, span=B_ID), 50)
    assert d == Decision(Relation.BEFORE, Method.PHYSICS, 1.0, 0.0, 1500 - 100 - 1100 - 50)


def test_span_mask_matches_the_wire_sketch() -> None:
    assert span_mask(A_ID) == sk(A_ID)


honest_edge = st.tuples(
    st.integers(0, 10**12),  # true time of a
    st.integers(1, 10**7),  # latency a -> b (ns)
    st.integers(0, 65535), st.integers(0, 65535),  # claimed bounds
    st.floats(-1, 1), st.floats(-1, 1),  # where inside its bound each error falls
    st.sampled_from(["OK", "DEGRADED", "UNKNOWN"]), st.sampled_from(["OK", "DEGRADED", "UNKNOWN"]),
    st.integers(0, 10**6), st.integers(1, 1000),  # lts_a, lts increment
    st.booleans(), st.booleans(),  # a is a start; lts present
    st.integers(0, 40),  # other ids in the sketches
)


@settings(max_examples=500, deadline=None)
@given(honest_edge)
def test_honest_clocks_never_give_a_wrong_confident_decision(params: tuple) -> None:  # type: ignore[type-arg]
    """§2.5: every clock within its bound, Lamport honest, sketches true -> never a contradiction."""
    t, lat, ua, ub, fa, fb, qa, qb, la, dl, a_start, have_lts, n_other = params
    others = [f"{0x1000 + k:016x}" for k in range(n_other)]
    sketch_b = sk(A_ID, B_ID, *others[: n_other // 2])
    sketch_a = sk(A_ID, *others[n_other // 2:])
    a = ev(t + int(fa * ua), ua, qa, la if have_lts else None, "start" if a_start else "end", A_ID, sketch_a)
    b = ev(t + lat + int(fb * ub), ub, qb, la + dl if have_lts else None, "start", B_ID, sketch_b)
    d = decide(a, b)
    if d.relation not in CONSISTENT and d.relation is not Relation.UNDECIDED:
        # Physics and Lamport are exact under honest clocks. Only a Bloom false positive
        # can mislead, only without Lamport values, and the decision then carries its fp.
        assert d.method is Method.SVC and not have_lts and d.fp > 0, (params, d)


def test_array_form_agrees_with_scalar_form() -> None:
    """decide_arrays is the same procedure as decide (the simulator relies on it)."""
    rng = np.random.default_rng(3)
    n = 3000
    ptp_a = rng.integers(0, 5000, n)
    ptp_b = rng.integers(0, 5000, n)
    u_a = rng.choice([0, 50, 300, 65535], n)
    u_b = rng.choice([0, 50, 300, 65535], n)
    ok_a = rng.random(n) < 0.8
    ok_b = rng.random(n) < 0.8
    lts_a = rng.integers(-1, 4, n)
    lts_b = rng.integers(-1, 4, n)
    a_in_b = rng.random(n) < 0.4
    b_in_a = rng.random(n) < 0.4
    rel, meth = decide_arrays(ptp_a, u_a, ok_a, lts_a, ptp_b, u_b, ok_b, lts_b, a_in_b, b_in_a, 40)
    for i in range(n):
        a = ev(int(ptp_a[i]), int(u_a[i]), "OK" if ok_a[i] else "UNKNOWN", int(lts_a[i]) if lts_a[i] >= 0 else None,
               "start" if a_in_b[i] else "end", A_ID, sk(B_ID) if b_in_a[i] else None)
        b = ev(int(ptp_b[i]), int(u_b[i]), "OK" if ok_b[i] else "UNKNOWN", int(lts_b[i]) if lts_b[i] >= 0 else None,
               "start" if b_in_a[i] else "end", B_ID, sk(A_ID) if a_in_b[i] else None)
        d = decide(a, b, 40)
        assert (RELATION_CODES[rel[i]], METHOD_CODES[meth[i]]) == (d.relation, d.method), i
