"""A saturated Lamport counter orders nothing (spec/analysis.md §2.2, spec/tt-ext-v3.md §10)."""

import numpy as np

from tempotrace_sdk.analysis.events import KIND_START, Event, Stamp
from tempotrace_sdk.analysis.order import METHOD_CODES, Method, Relation, decide, decide_arrays
from tempotrace_sdk.wire.layout import LTS_MAX


def _event(span_id: int, lts: int) -> Event:
    # No physical time and an empty sketch: only Lamport could decide.
    return Event(KIND_START, f"{span_id:016x}", "h", Stamp(None, 65535, "UNKNOWN", lts), 0, 0)


def test_two_saturated_events_are_undecided_not_concurrent() -> None:
    decision = decide(_event(1, LTS_MAX), _event(2, LTS_MAX))
    assert decision.relation is Relation.UNDECIDED


def test_one_saturated_event_rules_out_nothing() -> None:
    decision = decide(_event(1, LTS_MAX), _event(2, 5))
    assert decision.relation is Relation.UNDECIDED


def test_honest_values_still_decide() -> None:
    assert decide(_event(1, 7), _event(2, 5)).method is Method.LAMPORT


def test_array_form_agrees() -> None:
    z = np.zeros(2, dtype=np.int64)
    no = np.zeros(2, dtype=bool)
    lts_a = np.array([LTS_MAX, 7], dtype=np.int64)
    lts_b = np.array([LTS_MAX, 5], dtype=np.int64)
    _, meth = decide_arrays(z, z + 65535, no, lts_a, z, z + 65535, no, lts_b, no, no)
    assert METHOD_CODES[meth[0]] is Method.UNDECIDED
    assert METHOD_CODES[meth[1]] is Method.LAMPORT
