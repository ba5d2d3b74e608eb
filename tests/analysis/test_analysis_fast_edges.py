"""The analyzer's short cuts give the general path's answers (spec/analysis.md §2, §4, §6.1).

Edges physics settles are counted from the stamps without building Event and
Decision objects (Analyzer._physics); every other edge, and every hop kept for
rendering, goes through order.decide. These tests hold the short cut to the
general path: edge by edge on random stamps, and report by report on traces
where nothing takes the short cut.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk.analysis import Event, Method, Stamp, analyze_file, decide
from tempotrace_sdk.analysis.analyzer import Analyzer
from tempotrace_sdk.analysis.api import gc_paused
from tempotrace_sdk.analysis.order import CONSISTENT
from tempotrace_sdk.analysis.topology import Topology

from .tracegen import write_trace

stamps = st.builds(
    Stamp,
    st.one_of(st.none(), st.integers(0, 10_000)),
    st.sampled_from([0, 1, 100, 2_000, 65_534, 65_535]),
    st.sampled_from(["OK", "DEGRADED", "UNKNOWN"]),
    st.one_of(st.none(), st.integers(0, 5)),
)
TOPOLOGY = Topology(racks={"h1": "r1", "h2": "r2"}, pairs={frozenset({"r1", "r2"}): 300})


def _general(analyzer: Analyzer, a: Stamp, b: Stamp, host_a: str, host_b: str) -> None:
    analyzer._edge("hop", Event("start", "00000000000000a1", host_a, a, None, a.ptp_ns),
                   Event("start", "00000000000000b2", host_b, b, None, b.ptp_ns))


@settings(max_examples=400, deadline=None)
@given(a=stamps, b=stamps, host_b=st.sampled_from(["h1", "h2", "h3"]))
def test_physics_short_cut_counts_exactly_what_decide_decides(a: Stamp, b: Stamp, host_b: str) -> None:
    """§2.1: the short cut takes an edge iff decide() settles it by physics, and then counts it (and any
    clock-fault evidence, §4) exactly as the general path does; otherwise it counts nothing."""
    short, general = Analyzer(TOPOLOGY), Analyzer(TOPOLOGY)
    took = short._physics("hop", a, b, "h1", host_b, a.ptp_ns, b.ptp_ns)
    extra = 0 if host_b == "h1" else TOPOLOGY.extra_ns("h1", host_b)
    by_physics = decide(Event("start", "a", "h1", a, None, a.ptp_ns), Event("start", "b", host_b, b, None, b.ptp_ns),
                        extra).method is Method.PHYSICS
    assert took == by_physics
    if took:
        _general(general, a, b, "h1", host_b)
    assert short.counts == general.counts
    assert short.ledger == general.ledger


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


@given(stamp=stamps)
def test_make_stamp_builds_what_the_constructor_builds(stamp: Stamp) -> None:
    """The reader's stamp maker skips the frozen __init__: same fields, equal, same hash, still frozen."""
    import dataclasses

    from tempotrace_sdk.analysis.events import STAMP_FIELDS, make_stamp

    assert STAMP_FIELDS == tuple(f.name for f in dataclasses.fields(Stamp))
    assert not hasattr(Stamp, "__post_init__"), "make_stamp would skip it"
    made = make_stamp(stamp.ptp_ns, stamp.uncertainty_ns, stamp.quality, stamp.lts)
    assert made == stamp and hash(made) == hash(stamp) and repr(made) == repr(stamp)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.lts = 1  # type: ignore[misc]
