"""Clock-fault attribution (spec/analysis.md §4): the liar is named, honest peers are not."""

from __future__ import annotations

from tempotrace_sdk.analysis import FaultLedger


def _ledger(violations: list[tuple[str, str]], edges: list[tuple[str, str]] = ()) -> FaultLedger:  # type: ignore[assignment]
    ledger = FaultLedger()
    for a, b in [*violations, *edges]:
        ledger.edge(a, b)
    for a, b in violations:
        ledger.physics_violation(a, b, 5000, 220, 220)
    return ledger


def test_host_violating_with_many_peers_is_the_liar() -> None:
    faults = _ledger([("liar", "h1"), ("h2", "liar"), ("liar", "h3"), ("liar", "h1")], [("h1", "h2")]).attribute()
    assert [(f.host, f.verdict) for f in faults] == [("liar", "lying")]
    f = faults[0]
    assert f.violations == 4 and f.edges == 4 and f.peers == ("h1", "h2", "h3")
    assert f.max_excess_ns == 5000 and f.claimed_bound_ns == 220


def test_a_single_violated_pair_leaves_both_suspect() -> None:
    faults = _ledger([("a", "b"), ("a", "b")]).attribute()
    assert sorted((f.host, f.verdict) for f in faults) == [("a", "suspect"), ("b", "suspect")]


def test_two_independent_liars_are_both_found() -> None:
    v = [("x", p) for p in ("h1", "h2", "h3")] + [("y", p) for p in ("h4", "h5", "h6")]
    faults = _ledger(v).attribute()
    assert sorted(f.host for f in faults if f.verdict == "lying") == ["x", "y"]
    assert len(faults) == 2


def test_a_clock_reversed_against_itself_is_its_own_evidence() -> None:
    faults = _ledger([("h1", "h1"), ("h1", "h2")]).attribute()
    assert [(f.host, f.verdict) for f in faults] == [("h1", "lying")]


def test_no_violations_no_faults() -> None:
    assert _ledger([], [("a", "b")]).attribute() == []


def test_lamport_violations_are_reported_separately() -> None:
    ledger = _ledger([])
    for peer in ("p1", "p2"):
        ledger.edge("bad", peer)
        ledger.lamport_violation("bad", peer)
    faults = ledger.attribute()
    assert [(f.host, f.kind, f.violations) for f in faults] == [("bad", "lamport", 2)]
