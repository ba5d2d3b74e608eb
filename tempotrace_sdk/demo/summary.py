"""What the demo prints after the analysis: numbers, two hops told in words, checks, paths."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .model import DemoResult
from .plan import RankPlan

__all__ = ["checks", "examples", "honest_wrong", "hop_stats", "offset_text", "render_summary"]


LIAR_CHECK = "the lying clock was flagged"


def _peer_list(fault: dict[str, Any]) -> list[str]:
    peers = fault.get("peer_sample", fault.get("peers"))
    # analysis/2 lists peers as {"host", "rank"} (a clock); analysis/1 as host names
    return [str(p["host"] if isinstance(p, dict) else p) for p in peers] if isinstance(peers, list) else []


def _faces_only_liars(fault: dict[str, Any], liars: set[str]) -> bool:
    """Whether every peer of this fault is known to be a liar (peer_sample lists at most 10 of them)."""
    sample = _peer_list(fault)
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


def checks(
    plans: list[RankPlan], report: dict[str, Any], hops_sent: int, saturated_hops: dict[str, int]
) -> dict[str, bool]:
    """The demo's pass/fail checks, by what a user would see break."""
    liars = {p.host for p in plans if p.liar}
    result = {
        "every hop the workload made was matched in the trace": report["hops"]["matched"] == hops_sent,
        "no wrong decision on edges between honest clocks": not honest_wrong(plans, report),
    }
    if saturated_hops:
        result["physics never used a saturated (NTP-class) bound"] = saturated_hops.get("physics", 0) == 0
    if liars:
        witnesses = sum(1 for p in plans if p.profile == "ptp")
        if witnesses >= 2:
            result[LIAR_CHECK] = set(report["lying_hosts"]) == liars
        else:
            # One PTP-class peer: the analysis cannot tell which of the two lied, so both are suspects.
            result["the lying clock was caught (a suspect: its only PTP-class peer cannot say which lied)"] = (
                liars <= set(report["suspect_hosts"]) | set(report["lying_hosts"])
            )
    return result


def hop_stats(hops: list[dict[str, Any]], plans: list[RankPlan]) -> tuple[int, dict[str, int]]:
    """(hops a plain tracer shows receive-before-send, decisions on hops touching an NTP-class clock)."""
    naive = sum(
        1
        for h in hops
        if h["send_ptp_ns"] is not None and h["recv_ptp_ns"] is not None and h["recv_ptp_ns"] < h["send_ptp_ns"]
    )
    ntp = {p.host for p in plans if p.profile == "ntp"}
    saturated: Counter[str] = Counter()
    for h in hops:
        if h["send_host"] in ntp or h["recv_host"] in ntp:
            outcome = h["outcome"]
            saturated[h["decision"]["method"] if outcome == "consistent" else outcome] += 1
    return naive, dict(saturated)


def _pct(n: int, total: int) -> str:
    return f"{n:>6,}  ({100.0 * n / total:5.1f}%)" if total else f"{n:>6,}"


def render_summary(result: DemoResult) -> str:
    rep = result.report
    edges = rep["edges"]
    total = edges["total"]
    kinds = ", ".join(f"{k} {v:,}" for k, v in edges["by_kind"].items())
    decided = edges["decided"]
    liars = {p.host: p for p in result.plans if p.liar}
    lines = [
        "",
        f"Known causal edges: {total:,} ({kinds}); {rep['hops']['matched']:,}/{result.hops_sent:,} hops matched",
        f"  plain tracer (raw timestamps): {_pct(edges['naive_inversions'], total)} edges shown reversed, "
        f"incl. {result.naive_hops} of {rep['hops']['total']} hops with the receive before the send",
        "  TempoTrace:",
        f"    physics (disjoint bounds)  {_pct(decided['physics'], total)}",
        f"    Lamport                    {_pct(decided['lamport'], total)}",
        f"    SVC sketch                 {_pct(decided['svc'], total)}",
        f"    undecided (said so)        {_pct(decided['undecided'], total)}",
        f"    wrong                      {_pct(edges['wrong_total'], total)}"
        + (
            "   <- not silent: each is evidence against the lying clock below"
            if edges["wrong_total"] and result.checks.get("no wrong decision on edges between honest clocks")
            else ""
        ),
    ]
    if result.saturated_hops:
        sat = result.saturated_hops
        lines.append(
            f"  hops touching an NTP-class clock (bound saturated, physics cannot use it): {sum(sat.values())}: "
            + ", ".join(f"{k} {sat.get(k, 0)}" for k in ("physics", "lamport", "svc", "undecided"))
            + "".join(f", {k} {v}" for k, v in sat.items() if k not in ("physics", "lamport", "svc", "undecided"))
        )
    if result.examples:
        lines.append("  for example:")
        lines.extend(f"    {e}" for e in result.examples)
    for fault in rep["faults"]:
        plan = liars.get(fault["host"])
        who = f" (the {plan.profile} profile, truly {plan.offset_ns / 1e6:+.3f} ms off)" if plan else ""
        if fault["verdict"] == "lying":
            what = f"broke its {fault['claimed_bound_ns']:,} ns promise"
        else:
            what = f"it or its peer broke a promise (it claimed {fault['claimed_bound_ns']:,} ns)"
        lines.append(
            f"  {fault['verdict'].upper()} clock: {fault['host']}{who}: {what} on {fault['violations']:,} of "
            f"{fault['edges']:,} edges with {_peers(fault)}, by up to {fault['max_excess_ns'] / 1e3:,.1f} µs"
        )
    if not rep["faults"]:
        lines.append("  no clock broke its promise")
    unexplained = honest_wrong(result.plans, rep)
    if unexplained:
        lines.append(
            "  wrong decisions no lying clock explains: " + ", ".join(f"{k} {v:,}" for k, v in unexplained.items())
        )
    lines.append("")
    for name, passed in result.checks.items():
        lines.append(f"  [{'ok' if passed else 'FAILED'}] {name}")
    if not all(passed for name, passed in result.checks.items() if "lying clock was" in name):
        liar = next(p for p in result.plans if p.liar)
        lines.append(
            f"    the liar is {offset_text(liar.offset_ns)} off; a lie only shows when it is larger than the hops "
            "it stamps take, so no known edge could expose it (the default, 10ms, is larger)"
        )
    lines.append("")
    lines.append(f"Outputs in {result.paths['out']}/:")
    lines.append(f"  spans (OTLP JSON lines)  {result.paths['trace']}")
    lines.append(f"  analysis (JSON)          {result.paths['report']}")
    lines.append(f"  Perfetto trace           {result.paths['perfetto']}   (open in https://ui.perfetto.dev)")
    lines.append(f"  HTML timeline            {result.paths['html']}")
    lines.append(f"  worker logs              {result.paths['out']}/worker-*.log")
    lines.append(f"  analyse it again         tempotrace analyze {result.paths['trace']}")
    return "\n".join(lines)


def examples(hops: list[dict[str, Any]], liars: set[str]) -> list[str]:
    """One hop a plain tracer gets backwards and TempoTrace still orders, and one the liar broke."""
    out: list[str] = []
    honest = [
        h
        for h in hops
        if h["outcome"] == "consistent"
        and h["send_host"] not in liars
        and h["recv_host"] not in liars
        and h["send_ptp_ns"] is not None
        and h["recv_ptp_ns"] is not None
        and h["recv_ptp_ns"] < h["send_ptp_ns"]
    ]
    if honest:
        h = max(honest, key=lambda h: h["send_ptp_ns"] - h["recv_ptp_ns"])
        d = h["decision"]
        how = {
            "svc": f"the SVC sketch (send in the receive's causal past; false-positive rate {d.get('fp', 0.0):.1e})",
            "lamport": "Lamport counters (they rule out receive-before-send)",
        }.get(d["method"], d["method"])
        out.append(
            f"hop {h['send_host']} -> {h['recv_host']}: raw timestamps put the receive "
            f"{(h['send_ptp_ns'] - h['recv_ptp_ns']) / 1e3:,.0f} µs BEFORE the send; "
            f"TempoTrace orders it correctly by {how}"
        )
    broken = [h for h in hops if h["outcome"] == "contradiction"]
    if broken:
        h = max(broken, key=lambda h: (h["send_ptp_ns"] or 0) - (h["recv_ptp_ns"] or 0))
        out.append(
            f"hop {h['send_host']} -> {h['recv_host']}: both claim ±{h['send_uncertainty_ns']} / "
            f"±{h['recv_uncertainty_ns']} ns, yet the receive is stamped "
            f"{(h['send_ptp_ns'] - h['recv_ptp_ns']) / 1e3:,.0f} µs before the send: a clock broke its bound"
        )
    return out


def _peers(fault: dict[str, Any]) -> str:
    peers = _peer_list(fault)
    count = fault["peers"] if isinstance(fault.get("peers"), int) else len(peers)
    more = f" (+{count - len(peers)} more)" if count > len(peers) else ""
    return ", ".join(peers) + more


def offset_text(ns: float) -> str:
    if abs(ns) >= 1_000_000:
        return f"{ns / 1e6:+.3f} ms"
    if abs(ns) >= 1_000:
        return f"{ns / 1e3:+,.0f} µs"
    return f"{ns:+.0f} ns"
