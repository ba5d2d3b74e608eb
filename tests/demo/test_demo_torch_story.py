"""The torchrun demo's story and checks read the report's collective and p2p records right (no processes).

Records are built by hand in the shape CONTRACT-collectives.md fixes (p2p records in ``hops_kept`` with
``"kind": "p2p"``, one ``collectives_kept`` record per instance); the end-to-end tests
(test_demo_torchrun.py) run the real job through whichever analysis is installed.
"""

from __future__ import annotations

from typing import Any

import pytest

from tempotrace_sdk.demo.checks import HONEST_CHECK, LIAR_CHECK, torch_checks
from tempotrace_sdk.demo.model import DemoResult
from tempotrace_sdk.demo.plan import plan_ranks
from tempotrace_sdk.demo.summary import render_summary
from tempotrace_sdk.demo.torch_story import cross_rank_edges, torch_story

PLANS = plan_ranks(3, liar=True)  # node0 ptp, node1 liar, node2 ptp, node3 ntp
MS = 1_000_000


def _decision(method: str) -> dict[str, Any]:
    relation = {"physics": "before", "lamport": "before", "svc": "before", "undecided": "undecided"}
    return {"relation": relation.get(method, "after"), "method": method, "confidence": 1.0, "fp": 1e-3}


def _p2p(src: int, dst: int, send_ns: int, recv_ns: int, method: str, outcome: str = "consistent") -> dict[str, Any]:
    return {
        "kind": "p2p", "trace_id": "ab" * 16, "send_span": f"{src:016x}", "recv_span": f"{dst + 100:016x}",
        "send_host": f"node{src}", "send_rank": src, "recv_host": f"node{dst}", "recv_rank": dst,
        "send_ptp_ns": send_ns, "send_uncertainty_ns": 220, "recv_ptp_ns": recv_ns, "recv_uncertainty_ns": 220,
        "matched": True, "decision": _decision(method), "outcome": outcome,
    }


def _span(rank: int, seq: int, start: int, end: int) -> dict[str, Any]:
    return {"span_id": f"{seq:08x}{rank:08x}", "rank": rank, "host": f"node{rank}", "name": "torch.all_reduce",
            "start_ptp_ns": start, "end_ptp_ns": end}


Record = dict[str, Any]


def _collective(seq: int, times: dict[int, tuple[int, int]], method: str, outcome: str = "consistent",
                last: int | None = None, missing: list[int] | None = None) -> tuple[Record, list[Record]]:
    spans = [_span(r, seq, s, e) for r, (s, e) in times.items()]
    record = {
        "trace_id": "ab" * 16, "op": "all_reduce", "group": "0-3", "seq": seq, "root": None, "ranks": [0, 1, 2, 3],
        "missing_ranks": missing or [], "members": [{"rank": s["rank"], "host": s["host"], "span_id": s["span_id"]}
                                                    for s in spans],
        "last_arriver": None if last is None else {"rank": last, "host": f"node{last}", "certain": False},
        "decision": _decision(method), "outcome": outcome,
    }
    return record, spans


def _story_inputs() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    p2p = [
        _p2p(3, 2, 10 * MS, 9 * MS, "lamport"),  # NTP sender 1 ms ahead: receive stamped before the send
        _p2p(0, 2, 10 * MS, 10 * MS + 50_000, "physics"),
        _p2p(1, 2, 20 * MS, 11 * MS, "physics", "contradiction"),  # the liar, 9 ms late
    ]
    honest, honest_spans = _collective(0, {0: (0, 5 * MS), 2: (MS, 5 * MS), 3: (6 * MS, 7 * MS)}, "svc", last=3)
    broken, broken_spans = _collective(1, {0: (0, 2 * MS), 1: (12 * MS, 13 * MS)}, "physics", "contradiction", last=1)
    open_, open_spans = _collective(2, {0: (0, MS), 2: (0, MS)}, "undecided", "undecided", missing=[3])
    return p2p, [honest, broken, open_], honest_spans + broken_spans + open_spans


def test_the_story_counts_and_tells_what_a_plain_tracer_reverses_and_the_liar_broke() -> None:
    p2p, collectives, spans = _story_inputs()
    story = torch_story(p2p, collectives, spans, PLANS)
    assert (story.p2p, story.p2p_matched, story.p2p_naive) == (3, 3, 2)
    assert dict(story.p2p_by) == {"lamport": 1, "physics": 1, "contradiction": 1}
    assert (story.collectives, story.collectives_complete, story.collectives_naive) == (3, 2, 2)
    assert dict(story.collectives_by) == {"svc": 1, "contradiction": 1, "undecided": 1}
    # NTP-class node3 is in one p2p message and one collective: never physics there.
    assert dict(story.saturated) == {"lamport": 1, "svc": 1}
    assert [s["host"] for s in story.stragglers] == ["node1", "node3"]
    text = "\n".join(story.examples)
    assert "p2p node3 -> node2: raw timestamps put the receive 1,000 µs BEFORE the send" in text
    assert "Lamport" in text
    assert "all_reduce #0 of group 0-3: raw timestamps show node0 leaving 1,000 µs before node3 arrived" in text
    assert "p2p node1 -> node2: both claim ±220 / ±220 ns, yet the receive is stamped 9,000 µs before" in text


def test_the_report_s_own_straggler_tally_wins_over_the_kept_records() -> None:
    p2p, collectives, spans = _story_inputs()
    tally = [{"host": "node2", "rank": 2, "joined": 40, "last": 30, "last_certain": 4},
             {"host": "node0", "rank": 0, "joined": 40, "last": 0, "last_certain": 0}]
    story = torch_story(p2p, collectives, spans, PLANS, tally)
    assert story.stragglers == [{"host": "node2", "last": 30, "certain": 4, "joined": 40}]


def _rank_results(sends: int = 2, suspects: list[int] | None = None) -> list[dict[str, Any]]:
    return [{"rank": r, "ops": {"torch.send": sends, "torch.all_reduce": 2, "torch.barrier": 1},
             "clock_check": {"suspects": [1] if suspects is None else suspects, "ranks": []}} for r in range(4)]


def _report(by_kind: dict[str, int], lying: list[str]) -> dict[str, Any]:
    return {"edges": {"by_kind": by_kind, "wrong": {"physics": 0, "lamport": 0, "svc": 0}},
            "faults": [], "wrong_by_pair": [], "unattributed": 0, "lying_hosts": lying, "suspect_hosts": []}


def _kept(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"rank": r["rank"], "name": name} for r in results
            for name, n in {**r["ops"], "torch.check_clocks": 1}.items() for _ in range(n)]


def test_without_cross_rank_edges_the_analysis_liar_check_is_not_made_and_says_why() -> None:
    results = _rank_results()
    story = torch_story([], [], [], PLANS)
    report = _report({"parent_child": 10, "child_end": 10}, [])
    assert cross_rank_edges(report) == 0
    checks, skipped = torch_checks(PLANS, report, results, _kept(results), story, 0)
    assert checks == {"every rank's spans are in the trace, one per op it called": True,
                      "check_clocks named the lying clock before training": True, HONEST_CHECK: True}
    assert set(skipped) == {"every p2p message was matched in the trace", "every collective was complete in the trace",
                            LIAR_CHECK + " by the analysis"}


@pytest.mark.parametrize("lying", [["node1"], []], ids=["flagged", "missed"])
def test_with_cross_rank_edges_the_analysis_must_flag_the_liar(lying: list[str]) -> None:
    results = _rank_results(sends=1)
    p2p = [_p2p(r, (r + 1) % 4, MS, 2 * MS, "physics") for r in range(4)]
    collectives = [_collective(s, {0: (0, MS)}, "physics")[0] for s in range(3)]
    story = torch_story(p2p, collectives, [], PLANS)
    report = _report({"parent_child": 10, "p2p": 4, "collective": 3}, lying)
    checks, skipped = torch_checks(PLANS, report, results, _kept(results), story, cross_rank_edges(report))
    assert skipped == {}
    assert checks[LIAR_CHECK] is bool(lying)
    assert checks["every p2p message was matched in the trace"] is True
    assert checks["every collective was complete in the trace"] is True


def test_a_missing_span_an_unmatched_message_and_disagreeing_clock_checks_fail() -> None:
    results = _rank_results(sends=2)
    kept = _kept(results)
    kept.remove({"rank": 2, "name": "torch.send"})
    results[3]["clock_check"]["suspects"] = [1, 3]
    p2p = [_p2p(0, 1, MS, 2 * MS, "physics")] * 7 + [{**_p2p(0, 1, MS, 2 * MS, "physics"), "matched": False}]
    story = torch_story(p2p, [], [], PLANS)
    checks, _ = torch_checks(PLANS, _report({"p2p": 8}, ["node1"]), results, kept, story, 8)
    assert checks["every rank's spans are in the trace, one per op it called"] is False
    assert checks["check_clocks named the lying clock before training"] is False
    assert checks["every p2p message was matched in the trace"] is False


def test_one_ptp_witness_makes_the_liar_and_rank_0_suspects_and_no_liar_must_name_none() -> None:
    plans = plan_ranks(2, liar=True)  # node0 ptp, node1 liar, node2 ntp
    results = _rank_results(suspects=[0, 1])[:3]
    checks, _ = torch_checks(plans, _report({}, []), results, _kept(results), torch_story([], [], [], plans), 0)
    assert checks["check_clocks caught the lying clock before training (with rank 0: one witness cannot say which "
                  "lied)"] is True
    honest = plan_ranks(2, liar=False)
    results = _rank_results(suspects=[])[:2]
    checks, _ = torch_checks(honest, _report({}, []), results, _kept(results), torch_story([], [], [], honest), 0)
    assert checks["check_clocks named no clock"] is True
    results[1]["clock_check"]["suspects"] = [1]
    results[0]["clock_check"]["suspects"] = [1]
    checks, _ = torch_checks(honest, _report({}, []), results, _kept(results), torch_story([], [], [], honest), 0)
    assert checks["check_clocks named no clock"] is False


def test_the_summary_shows_collective_lines_only_when_the_report_has_them(tmp_path: Any) -> None:
    p2p, collectives, spans = _story_inputs()
    paths = {k: tmp_path / k for k in ("out", "trace", "report", "perfetto", "html")}
    report = {"edges": {"total": 30, "by_kind": {"p2p": 3, "collective": 3, "parent_child": 24},
                        "decided": {"physics": 20, "lamport": 5, "svc": 3, "undecided": 1},
                        "wrong": {"physics": 1, "lamport": 0, "svc": 0}, "wrong_total": 1, "naive_inversions": 4},
              "hops": {"total": 0, "matched": 0}, "faults": [], "wrong_by_pair": [], "unattributed": 0,
              "lying_hosts": ["node1"], "suspect_hosts": []}
    check = {"suspects": [1], "ranks": [
        {"rank": 0, "offset_ns": 0, "bound_ns": 0, "claim_ns": 220, "quality": "OK", "unbounded": False,
         "verdict": "ref"},
        {"rank": 1, "offset_ns": 10 * MS, "bound_ns": 90_000, "claim_ns": 220, "quality": "OK", "unbounded": False,
         "verdict": "irreconcilable"}]}
    story = torch_story(p2p, collectives, spans, PLANS).to_dict()
    result = DemoResult(PLANS, report, paths, 0, 1.0, clock_check=check,
                        torch={**story, "cross_rank_edges": 6, "carriage": "step"})
    text = render_summary(result)
    assert "+10.000 ms ± 90 µs" in text and "<- named before training" in text
    assert "collectives: 3 (all_reduce 3), 2 complete: physics 0, lamport 0, svc 1, undecided 1, contradiction 1" \
        in text
    assert "p2p messages: 3/3 matched" in text
    assert "1 of 3 p2p messages" not in text and "2 of 3 p2p messages with the receive before the send" in text
    assert "node1 only looks last" in text
    assert "the 1 undecided collective said so" in text
    assert "orders each rank's own edges" not in text

    local = DemoResult(PLANS, {**report, "edges": {**report["edges"], "by_kind": {"parent_child": 24}}}, paths, 0,
                       1.0, clock_check=check, torch={**torch_story([], [], [], PLANS).to_dict(),
                                                      "cross_rank_edges": 0, "carriage": "step"})
    text = render_summary(local)
    assert "collectives:" not in text and "p2p messages:" not in text and "stragglers" not in text
    assert "orders each rank's own edges (parent/child) only" in text
