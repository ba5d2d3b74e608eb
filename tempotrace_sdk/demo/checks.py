"""The demo's pass/fail checks, by what a user would see break.

Each check reads the analysis report (``to_dict()`` and its rendering
records) against what the workload is known to have done: the plan (which
clock lies), the hops the HTTP workload made, the ops each torch rank called
and the clock check each rank ran. A check the report cannot answer (an
analysis without cross-rank edges for torch ops) is listed as not checked,
with the reason, and counts neither way.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .plan import RankPlan
from .torch_story import TorchStory

__all__ = ["HONEST_CHECK", "LIAR_CHECK", "honest_wrong", "http_checks", "liar_check", "peer_list", "torch_checks"]

LIAR_CHECK = "the lying clock was flagged"
HONEST_CHECK = "no wrong decision on edges between honest clocks"
SATURATED_CHECK = "physics never used a saturated (NTP-class) bound"


def peer_list(fault: dict[str, Any]) -> list[str]:
    peers = fault.get("peer_sample", fault.get("peers"))
    # analysis/2 lists peers as {"host", "rank"} (a clock); analysis/1 as host names
    return [str(p["host"] if isinstance(p, dict) else p) for p in peers] if isinstance(peers, list) else []


def _faces_only_liars(fault: dict[str, Any], liars: set[str]) -> bool:
    """Whether every peer of this fault is known to be a liar (peer_sample lists at most 10 of them)."""
    sample = peer_list(fault)
    count = fault["peers"] if isinstance(fault.get("peers"), int) else len(sample)
    return count <= len(sample) and all(p in liars for p in sample)


def honest_wrong(plans: list[RankPlan], report: dict[str, Any]) -> dict[str, int]:
    """Wrong decisions no lying clock explains, by method (plus "unattributed"); empty when there are none.

    With the report's per-host-pair tally (``wrong_by_pair``) this is exact: every wrong decision
    between two hosts the plan calls honest, whatever method made it, plus those on hops whose
    sender was never seen (no pair to clear). Reports without the tally fall back to the
    per-method totals: an SVC decision does not read clocks, so no lie explains an SVC wrong; a
    physics or Lamport wrong is explained only when every fault is the liar's or faces only liars.
    """
    liars = {p.host for p in plans if p.liar}
    out: Counter[str] = Counter()
    if "wrong_by_pair" in report:
        for entry in report["wrong_by_pair"]:
            if not set(entry["hosts"]) & liars:
                out[str(entry["method"])] += int(entry["count"])
        out["unattributed"] += int(report.get("unattributed", 0))
    else:
        wrong = report["edges"]["wrong"]
        unexplained = [f for f in report["faults"] if f["host"] not in liars and not _faces_only_liars(f, liars)]
        for method, count in wrong.items():
            if count and (method == "svc" or not liars or unexplained):
                out[method] += count
    return {method: count for method, count in out.items() if count}


def liar_check(plans: list[RankPlan], report: dict[str, Any]) -> tuple[str, bool] | None:
    """(name, passed) of the analysis' verdict on the liar; None without a liar."""
    liars = {p.host for p in plans if p.liar}
    if not liars:
        return None
    if sum(1 for p in plans if p.profile == "ptp") >= 2:
        return LIAR_CHECK, set(report["lying_hosts"]) == liars
    # One PTP-class peer: the analysis cannot tell which of the two lied, so both are suspects.
    return (
        "the lying clock was caught (a suspect: its only PTP-class peer cannot say which lied)",
        liars <= set(report["suspect_hosts"]) | set(report["lying_hosts"]),
    )


def http_checks(
    plans: list[RankPlan], report: dict[str, Any], hops_sent: int, saturated_hops: dict[str, int]
) -> dict[str, bool]:
    """The HTTP demo's checks."""
    result = {
        "every hop the workload made was matched in the trace": report["hops"]["matched"] == hops_sent,
        HONEST_CHECK: not honest_wrong(plans, report),
    }
    if saturated_hops:
        result[SATURATED_CHECK] = saturated_hops.get("physics", 0) == 0
    verdict = liar_check(plans, report)
    if verdict is not None:
        result[verdict[0]] = verdict[1]
    return result


def missing_spans(rank_results: list[dict[str, Any]], spans_kept: list[dict[str, Any]]) -> list[str]:
    """'rank R: NAME n of m' for every op kind whose spans in the trace are not exactly the ops the rank called."""
    seen = Counter((s.get("rank"), s.get("name")) for s in spans_kept)
    out = []
    for res in rank_results:
        rank = res["rank"]
        for name, called in sorted({**res["ops"], "torch.check_clocks": 1}.items()):
            if seen[(rank, name)] != called:
                out.append(f"rank {rank}: {name} {seen[(rank, name)]} of {called}")
    return out


def torch_checks(plans: list[RankPlan], report: dict[str, Any], rank_results: list[dict[str, Any]],
                 spans_kept: list[dict[str, Any]], story: TorchStory,
                 cross_rank_edges: int) -> tuple[dict[str, bool], dict[str, str]]:
    """The torchrun demo's checks, and those this analysis cannot answer (name -> why)."""
    checks: dict[str, bool] = {}
    skipped: dict[str, str] = {}
    liar = next((p for p in plans if p.liar), None)
    checks["every rank's spans are in the trace, one per op it called"] = (
        len(rank_results) == len(plans) and not missing_spans(rank_results, spans_kept)
    )
    suspects = [r["clock_check"]["suspects"] for r in rank_results]
    agreed = all(s == suspects[0] for s in suspects) and bool(suspects)
    named = suspects[0] if suspects else []
    if liar is None:
        checks["check_clocks named no clock"] = agreed and named == []
    elif sum(1 for p in plans if p.profile == "ptp") >= 2:
        checks["check_clocks named the lying clock before training"] = agreed and named == [liar.rank]
    else:
        checks["check_clocks caught the lying clock before training (with rank 0: one witness cannot say which "
               "lied)"] = agreed and liar.rank in named
    checks[HONEST_CHECK] = not honest_wrong(plans, report)

    sends = sum(int(r["ops"].get("torch.send", 0)) for r in rank_results)
    first = rank_results[0]["ops"] if rank_results else {}
    collectives = int(first.get("torch.all_reduce", 0)) + int(first.get("torch.barrier", 0))
    name = "every p2p message was matched in the trace"
    if story.p2p:
        checks[name] = story.p2p == story.p2p_matched == sends
    else:
        skipped[name] = "the analysis reported no p2p messages"
    name = "every collective was complete in the trace"
    if story.collectives:
        checks[name] = story.collectives == story.collectives_complete == collectives
    else:
        skipped[name] = "the analysis reported no collectives"
    if story.saturated:
        checks[SATURATED_CHECK] = story.saturated.get("physics", 0) == 0
    verdict = liar_check(plans, report)
    if verdict is not None:
        if cross_rank_edges:
            checks[verdict[0]] = verdict[1]
        else:
            skipped[verdict[0] + " by the analysis"] = (
                "this analysis orders only each rank's own edges; a lie shows on edges between ranks")
    return checks, skipped
