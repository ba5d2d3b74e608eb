"""The demo's pass/fail checks read the analysis report correctly (no processes: reports built by hand).

The end-to-end tests run real workers; here the report's shape is pinned so a wrong decision
between two honest clocks can never print [ok], whatever method made it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tempotrace_sdk.demo.checks import honest_wrong, http_checks
from tempotrace_sdk.demo.plan import plan_ranks

HONEST = "no wrong decision on edges between honest clocks"
PLANS = plan_ranks(3, liar=True)  # node0 ptp, node1 liar, node2 ptp, node3 ntp


def _report(
    wrong: dict[str, int], faults: list[dict[str, Any]], by_pair: list[dict[str, Any]] | None, unattributed: int = 0
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "hops": {"total": 10, "matched": 10},
        "edges": {"wrong": {"physics": 0, "lamport": 0, "svc": 0, **wrong}},
        "faults": faults,
        "lying_hosts": ["node1"],
        "suspect_hosts": [],
    }
    report["edges"]["wrong_total"] = sum(report["edges"]["wrong"].values())
    if by_pair is not None:
        report["wrong_by_pair"] = by_pair
        report["unattributed"] = unattributed
    return report


def _liar_fault(violations: int, peers: list[str]) -> dict[str, Any]:
    return {
        "host": "node1",
        "verdict": "lying",
        "kind": "physics",
        "violations": violations,
        "peers": len(peers),
        "peer_sample": peers[:10],
    }


def _pair(a: str, b: str, method: str, count: int) -> dict[str, Any]:
    return {"hosts": [a, b], "method": method, "count": count}


@pytest.mark.parametrize("with_pairs", [True, False], ids=["wrong_by_pair", "by-method-fallback"])
def test_wrongs_explained_by_the_liar_pass(with_pairs: bool) -> None:
    by_pair = [_pair("node0", "node1", "physics", 3), _pair("node1", "node2", "physics", 2)] if with_pairs else None
    report = _report({"physics": 5}, [_liar_fault(5, ["node0", "node2"])], by_pair)
    assert http_checks(PLANS, report, 10, {})[HONEST] is True
    assert honest_wrong(PLANS, report) == {}


@pytest.mark.parametrize("with_pairs", [True, False], ids=["wrong_by_pair", "by-method-fallback"])
def test_an_svc_wrong_between_honest_hosts_fails_even_beside_a_liar(with_pairs: bool) -> None:
    """The liar's faults explain physics wrongs; an SVC wrong is no clock's doing and must never print [ok]."""
    by_pair = [_pair("node0", "node1", "physics", 3), _pair("node0", "node2", "svc", 1)] if with_pairs else None
    report = _report({"physics": 3, "svc": 1}, [_liar_fault(3, ["node0"])], by_pair)
    assert http_checks(PLANS, report, 10, {})[HONEST] is False
    assert honest_wrong(PLANS, report) == {"svc": 1}


def test_a_physics_wrong_between_two_honest_hosts_fails_though_no_fault_names_them() -> None:
    by_pair = [_pair("node1", "node2", "physics", 4), _pair("node0", "node3", "physics", 1)]
    report = _report({"physics": 5}, [_liar_fault(4, ["node2"])], by_pair)
    assert http_checks(PLANS, report, 10, {})[HONEST] is False
    assert honest_wrong(PLANS, report) == {"physics": 1}


def test_unattributed_wrongs_cannot_be_blamed_on_the_liar() -> None:
    report = _report({"physics": 2}, [], [], unattributed=2)
    assert http_checks(PLANS, report, 10, {})[HONEST] is False
    assert honest_wrong(PLANS, report) == {"unattributed": 2}


def test_an_honest_suspect_whose_peers_are_not_all_listed_is_not_assumed_to_face_the_liar() -> None:
    """peer_sample holds at most 10 peers: beyond it, an honest host's peers are unknown, so not all liars."""
    many = plan_ranks(24, liar=True)
    fault = {
        "host": "node0",
        "verdict": "suspect",
        "kind": "physics",
        "violations": 12,
        "peers": 12,
        "peer_sample": ["node1"] * 10,
    }
    report = _report({"physics": 12}, [fault], None)
    assert http_checks(many, report, 10, {})[HONEST] is False
    fault_all_listed = {**fault, "peers": 1, "peer_sample": ["node1"]}
    assert http_checks(many, _report({"physics": 12}, [fault_all_listed], None), 10, {})[HONEST] is True


def test_without_a_liar_any_wrong_decision_fails() -> None:
    plans = plan_ranks(2, liar=False)
    report = _report({"lamport": 1}, [], None)
    assert http_checks(plans, report, 10, {})[HONEST] is False
    assert http_checks(plans, _report({}, [], [], 0), 10, {})[HONEST] is True
