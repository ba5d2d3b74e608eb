"""Parent -> child edges counted a batch at a time (analysis/edgebatch.py, the columnar engine's): the report's
edge counts and the fault ledger equal what ``EdgeJudge.parent_child`` counts one pair at a time, on drawn
pairs about every rule's edges: readings missing, degraded, UNKNOWN, saturated, overlapping or apart by the
topology's extra; host clock domains alike and not; Lamport values equal, reversed, missing, saturated, a
receiver that recorded no merge; sketches holding the other's id or not; ends known and not; times past 2^62
(counted pair by pair). A difference is the batch's bug: the judge is the reference."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numpy")

from tempotrace_sdk.analysis.clockdomain import Domain
from tempotrace_sdk.analysis.edgebatch import ParentChildBatch
from tempotrace_sdk.analysis.edges import EdgeJudge
from tempotrace_sdk.analysis.events import SpanRecord, Stamp
from tempotrace_sdk.analysis.hopbatch import HopBatch
from tempotrace_sdk.analysis.order import span_mask
from tempotrace_sdk.analysis.report import AnalysisReport
from tempotrace_sdk.analysis.topology import Topology
from tempotrace_sdk.wire.layout import LTS_MAX

T0 = 1_800_000_000_000_000_000
HOSTS = ("h1", "h2", "h3")
IDS = [f"{k:016x}" for k in range(1, 9)]
DOMAINS = [Domain("kernel:a:tai", 500, 40, 30), Domain("kernel:a:tai", 560, 40, 30),
           Domain("kernel:a:tai", 9000, 40, 30), Domain("kernel:b:tai", 500, 40, 30)]


def _rarely(draw: Any, value: Any, usual: Any, one_in: int = 6) -> Any:
    """``value`` about once in ``one_in`` draws, else a draw of ``usual`` (so most pairs reach the later rules)."""
    return value if draw(st.integers(1, one_in)) == 1 else draw(usual)


@st.composite
def stamps(draw: Any, degraded: bool) -> Stamp:
    ptp = _rarely(draw, None, st.integers(T0, T0 + 3000))
    if draw(st.integers(1, 40)) == 1:
        ptp = 2**62 + 5  # past what the arrays take: the batch counts pair by pair
    lts = _rarely(draw, None, st.one_of(st.integers(0, 6), st.just(LTS_MAX)))
    return Stamp(ptp, _rarely(draw, 65_535, st.sampled_from([0, 200, 900])),
                 _rarely(draw, "UNKNOWN", st.sampled_from(["OK", "DEGRADED"])), lts, degraded,
                 _rarely(draw, draw(st.sampled_from(DOMAINS)), st.none(), 3))


@st.composite
def records(draw: Any) -> SpanRecord:
    degraded = draw(st.integers(1, 8)) == 1
    span_id = draw(st.sampled_from(IDS))
    others = draw(st.lists(st.sampled_from(IDS), max_size=3))
    sketch = draw(st.one_of(st.none(), st.just(0), st.just(sum({span_mask(i) for i in [span_id, *others]}))))
    start = draw(stamps(degraded))
    t0 = _rarely(draw, 2**63 + 1, st.integers(T0 - 5000, T0 + 5000), 40)
    return SpanRecord(
        "t" * 32, span_id, "", "op", draw(st.sampled_from([0, 1, 2, 3, 5])), draw(st.sampled_from(HOSTS)), start,
        draw(st.one_of(st.none(), stamps(degraded))), t0, t0 + draw(st.integers(-10, 4000)), sketch,
        rank=draw(st.sampled_from([None, 0, 1])),
        remote=draw(st.one_of(st.none(), st.just(Stamp(T0, 100, "OK", 2)))),
        recv_lts=draw(st.one_of(st.none(), st.integers(0, 5))), degraded=degraded)


def _state(judge: EdgeJudge) -> dict[str, Any]:
    ledger = judge.ledger
    return {"edges": judge.counts.to_dict(), "unattributed": judge.counts.unattributed,
            "physics": dict(ledger.physics_pairs),
            "lamport": dict(ledger.lamport_pairs), "excess": dict(ledger.pair_excess), "claimed": dict(ledger.claimed),
            "per_clock": dict(ledger.edges)}


TOPOLOGIES = [Topology(), Topology(racks={"h1": "r1", "h2": "r1", "h3": "r2"}, default_cross_rack_ns=700),
              # (an extra past int64: the batch counts those pairs one by one)
              Topology(racks={"h1": "r1", "h2": "r1", "h3": "r2"}, default_cross_rack_ns=2**63 - 1),
              Topology(racks={"h1": "r1", "h2": "r2", "h3": "r2"}, default_cross_rack_ns=2**64)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pairs=st.lists(st.tuples(records(), records()), min_size=1, max_size=40), size=st.integers(1, 64),
       topology=st.sampled_from(TOPOLOGIES))
def test_a_batch_counts_what_the_judge_counts_pair_by_pair(pairs: list[tuple[SpanRecord, SpanRecord]], size: int,
                                                           topology: Topology) -> None:
    one, many = EdgeJudge(topology, AnalysisReport()), EdgeJudge(topology, AnalysisReport())
    batch = ParentChildBatch(many, size)
    for parent, child in pairs:
        one.parent_child(parent, child)
        batch.add(parent, child)
    batch.flush()
    assert _state(many) == _state(one)


def test_the_batch_decides_the_usual_cases_by_arrays() -> None:
    """Honest in-process pairs: every outcome the arrays decide (physics, Lamport, SVC, silence) counted."""
    def rec(span: str, t: int, lts: int, unc: int = 100, sketch: int | None = None) -> SpanRecord:
        return SpanRecord("t" * 32, span, "", "op", 0, "h1", Stamp(T0 + t, unc, "OK", lts),
                          Stamp(T0 + t + 10_000, unc, "OK", lts + 5), T0 + t, T0 + t + 10_000, sketch)

    parent = rec(IDS[0], 0, 1)
    children = [rec(IDS[1], 5_000, 2), rec(IDS[2], 50, 3, 65_535), rec(IDS[3], 50, 0, 900),
                rec(IDS[4], 50, 2, 900, span_mask(IDS[0]))]
    one, many = EdgeJudge(Topology(), AnalysisReport()), EdgeJudge(Topology(), AnalysisReport())
    batch = ParentChildBatch(many)
    for child in children:
        one.parent_child(parent, child)
        batch.add(parent, child)
    batch.flush()
    got = _state(many)
    assert got == _state(one)
    edges = got["edges"]
    decided = edges["decided"]
    assert decided["physics"] == 1 and decided["lamport"] >= 1 and decided["svc"] == 1
    assert edges["wrong"]["lamport"] == 1
    assert edges["physics_silent"] and edges["by_kind"]["parent_child"] == 4


# -- hops (HopBatch: EdgeJudge.hop for hops whose record is not kept) ---------------------------------------------
CLIENT_CLOCKS = ("h1/0", "h2/1", "h3")


@st.composite
def hops(draw: Any) -> tuple[SpanRecord, Any]:
    """A receive span with its sender's record, and its client span as the analyzer finds it (or none)."""
    server = draw(records())
    remote = draw(stamps(False))
    sketch = draw(st.one_of(st.none(), st.just(0), st.just(span_mask(server.span_id)),
                            st.just(span_mask(server.span_id) | span_mask(IDS[0])), st.just(span_mask(IDS[0]))))
    server = msgspec.structs.replace(server, remote=remote, remote_sketch=sketch, parent_id=IDS[0])
    client = None
    if draw(st.integers(1, 4)) > 1:
        sends = draw(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 6)), st.just(0), st.just(0)),
                              max_size=3))
        client = (0, draw(st.sampled_from(CLIENT_CLOCKS)), draw(st.sampled_from(HOSTS)), tuple(sends),
                  draw(st.integers(1, 5)) == 1)
    return server, client


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drawn=st.lists(hops(), min_size=1, max_size=40), size=st.integers(1, 64), topology=st.sampled_from(TOPOLOGIES))
def test_a_hop_batch_counts_what_the_judge_counts_hop_by_hop(drawn: list[tuple[SpanRecord, Any]], size: int,
                                                             topology: Topology) -> None:
    """Senders unknown (blaming nobody), degraded by the client's policy, with or without the matching send;
    receivers that merged or not; sketches holding the receive's id or not; a receive with no reading (the send's
    naive time its reading in UTC)."""
    one_report, many_report = AnalysisReport(), AnalysisReport()
    one, many = EdgeJudge(topology, one_report), EdgeJudge(topology, many_report)
    batch = HopBatch(many, size)
    for server, client in drawn:
        assert one.hop(server, client, False) is None
        batch.add(server, client)
    batch.flush()
    assert _state(many) == _state(one)
    assert (many_report.hops, many_report.hops_matched) == (one_report.hops, one_report.hops_matched)


def test_the_hop_batch_decides_the_usual_cases_by_arrays() -> None:
    """A clean hop by physics, an overlapping one by Lamport, one by SVC reversed, an unknown sender's
    reversed one (unattributed), a receive without a reading (naive order in UTC)."""
    def server(span: str, t: int, unc: int, lts: int | None, remote_lts: int | None = 1,
               sketch: int | None = None, reading: bool = True) -> SpanRecord:
        start = Stamp(T0 + t, unc, "OK", lts) if reading else Stamp(None)
        return SpanRecord("t" * 32, span, IDS[0], "srv", 2, "h2", start, None, T0 + t, T0 + t + 9_000, None,
                          remote=Stamp(T0, 100, "OK", remote_lts), remote_sketch=sketch, recv_lts=lts)

    client = (0, "h1/0", "h1", ((1, 0, 0),), False)
    drawn = [(server(IDS[1], 5_000, 100, 2), client), (server(IDS[2], 50, 900, 2), client),
             (server(IDS[3], 50, 900, None, None, span_mask(IDS[3])), client),
             (server(IDS[4], -5_000, 100, 2), None), (server(IDS[5], 5_000, 100, 2, reading=False), client)]
    one_report, many_report = AnalysisReport(), AnalysisReport()
    one, many = EdgeJudge(Topology(), one_report), EdgeJudge(Topology(), many_report)
    batch = HopBatch(many)
    for s, c in drawn:
        one.hop(s, c, False)
        batch.add(s, c)
    batch.flush()
    got = _state(many)
    assert got == _state(one)
    edges = got["edges"]
    assert edges["decided"]["physics"] == 1 and edges["decided"]["lamport"] == 1 and edges["wrong"]["svc"] == 1
    assert edges["wrong"]["physics"] == 1 and got["unattributed"] == 1 and edges["by_kind"]["hop"] == 5
    assert edges["naive_inversions"] == 1
    assert (many_report.hops, many_report.hops_matched) == (5, 3)  # no client; a record without a counter
