"""The analyzer counts what the ordering rules decide (spec/analysis.md §2, §4, §6.1).

Edges physics settles are counted from ``order.physics_gap`` without building
Event and Decision objects; the others go through ``order.decide_logical``;
hops kept for rendering carry their Decision. These tests hold the counting to
``order.decide``: edge by edge on random stamps, and report by report.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk.analysis import Method, SpanRecord, Stamp, analyze_file, decide
from tempotrace_sdk.analysis.edges import EdgeJudge
from tempotrace_sdk.analysis.engine import gc_paused
from tempotrace_sdk.analysis.order import CONSISTENT
from tempotrace_sdk.analysis.report import AnalysisReport
from tempotrace_sdk.analysis.topology import Topology

from .tracegen import write_trace

stamps = st.builds(
    Stamp,
    st.one_of(st.none(), st.integers(0, 10_000)),
    st.sampled_from([0, 1, 100, 2_000, 65_534, 65_535]),
    st.sampled_from(["OK", "DEGRADED", "UNKNOWN"]),
    st.one_of(st.none(), st.integers(0, 5)),
    st.booleans(),
)
TOPOLOGY = Topology(racks={"h1": "r1", "h2": "r2"}, pairs={frozenset({"r1", "r2"}): 300})


def _record(span_id: str, host: str, stamp: Stamp, parent: str = "") -> SpanRecord:
    return SpanRecord("1" * 32, span_id, parent, "s", 1, host, stamp, None, 10, 20)


@settings(max_examples=400, deadline=None)
@given(a=stamps, b=stamps, host_b=st.sampled_from(["h1", "h2", "h3"]))
def test_the_judge_counts_what_decide_decides(a: Stamp, b: Stamp, host_b: str) -> None:
    """§2, §6.1: the analyzer's edge counting (physics_gap first, Event/Decision objects only when the
    logical rules must speak) gives decide()'s method and outcome for every pair of stamps."""
    parent, child = _record("00000000000000a1", "h1", a), _record("00000000000000b2", host_b, b, "00000000000000a1")
    judge = EdgeJudge(TOPOLOGY, AnalysisReport())
    judge.parent_child(parent, child)
    extra = 0 if host_b == "h1" else TOPOLOGY.extra_ns("h1", host_b)
    d = decide(parent.start_event(), child.start_event(), extra)
    counts = judge.counts
    assert counts.total == 1
    if d.relation in CONSISTENT:
        assert counts.decided[d.method.value] == 1
    elif d.method is Method.UNDECIDED:
        assert counts.decided["undecided"] == 1
    else:
        assert counts.wrong[d.method.value] == 1
        assert judge.ledger.physics_pairs.total() == (d.method is Method.PHYSICS)
    assert d.method is not Method.PHYSICS or not (a.degraded or b.degraded)


@given(stamp=stamps)
def test_stamp_usable_is_the_physics_rule(stamp: Stamp) -> None:
    """§2.1: stamp_usable is exactly what physics_gap requires of a stamp."""
    from tempotrace_sdk.analysis.order import physics_gap, stamp_usable

    later = Stamp(10**9, 0, "OK")
    assert stamp_usable(stamp) == (physics_gap(stamp, later) != 0)
    assert stamp_usable(stamp) == (stamp.ptp_ns is not None and stamp.quality != "UNKNOWN"
                                   and stamp.uncertainty_ns < 65_535 and not stamp.degraded)


def test_stamp_is_a_frozen_msgspec_struct() -> None:
    """The project's one immutable-record strategy: a frozen msgspec Struct, built by its constructor."""
    import msgspec

    s = Stamp(1, 2, "OK", 3)
    assert isinstance(s, msgspec.Struct) and s == Stamp(1, 2, "OK", 3) and hash(s) == hash(Stamp(1, 2, "OK", 3))
    with pytest.raises(AttributeError):
        s.lts = 4  # type: ignore[misc]


@pytest.fixture(scope="module")
def liar_trace(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("fe") / "liar.jsonl")
    write_trace(path, {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ntp", "w4": "sim:ptp"})
    return path


def test_keeping_every_hop_changes_no_count(liar_trace: str) -> None:
    """§6.1: kept hops take the general path, the others the short cut; the report is the same."""
    short = analyze_file(liar_trace, keep=0).to_dict()
    general = analyze_file(liar_trace, keep=10**6)
    assert general.to_dict()["rendered"]["hops"] == general.hops > 0
    long = general.to_dict()
    for d in (short, long):
        d.pop("elapsed_s"), d.pop("rendered")
    assert short == long
    assert short["faults"] and short["edges"]["wrong"]["physics"] > 0  # the liar's evidence went through both paths
    kept = [h for h in general.hops_kept if h["outcome"] == "consistent"]
    assert kept and all(h["decision"]["relation"] in {r.value for r in CONSISTENT} for h in kept)


def test_gc_paused_restores_the_collector(tmp_path: Path) -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled(), "a collector the caller had disabled stays disabled"
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
