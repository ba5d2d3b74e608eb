"""What the demo prints after the analysis: numbers, edges told in words, clock verdicts, checks, paths.

The torchrun job's own parts (the clock check, collectives, p2p messages) are in torch_summary.py.
Host names are read back from the trace file, so they are shown as every printer shows a string from a
trace (``_terminal_text.shown``), though here the demo's own ranks wrote them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .._terminal_text import shown
from .checks import honest_wrong, peer_list
from .formatting import labels, offset_text
from .model import DemoResult
from .plan import RankPlan
from .torch_summary import clock_check_table, naive_detail, torch_lines

__all__ = ["examples", "hop_stats", "render_summary"]


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
    torch_run = result.clock_check is not None
    lines = [""]
    if torch_run:
        lines += clock_check_table(result)
        lines.append("")
    matched = "" if torch_run else f"; {rep['hops']['matched']:,}/{result.hops_sent:,} hops matched"
    lines.append(f"Known causal edges: {total:,} ({kinds}){matched}")
    naive = f"  plain tracer (raw timestamps): {_pct(edges['naive_inversions'], total)} edges shown reversed"
    if torch_run:
        lines.append(naive + naive_detail(result))
    else:
        lines.append(naive + f", incl. {result.naive_hops} of {rep['hops']['total']} hops with the receive before "
                     "the send")
    honest_ok = result.checks.get("no wrong decision on edges between honest clocks")
    lines += [
        "  TempoTrace:",
        f"    physics (disjoint bounds)  {_pct(decided['physics'], total)}",
        f"    Lamport                    {_pct(decided['lamport'], total)}",
        f"    SVC sketch                 {_pct(decided['svc'], total)}",
        f"    derived (matched pairs)    {_pct(decided.get('derived', 0), total)}",
        f"    undecided (said so)        {_pct(decided['undecided'], total)}",
        f"    wrong                      {_pct(edges['wrong_total'], total)}"
        + ("   <- not silent: each is evidence against the lying clock below"
           if edges["wrong_total"] and honest_ok else ""),
    ]
    if torch_run:
        lines += torch_lines(result)
    elif result.saturated_hops:
        lines.append(
            "  hops touching an NTP-class clock (bound saturated, physics cannot use it): "
            f"{sum(result.saturated_hops.values())}: " + labels(result.saturated_hops)
        )
    if result.examples:
        lines.append("  for example:")
        lines.extend(f"    {e}" for e in result.examples)
    lines += _faults(result)
    lines.append("")
    for name, passed in result.checks.items():
        lines.append(f"  [{'ok' if passed else 'FAILED'}] {name}")
    for name, why in result.not_checked.items():
        lines.append(f"  [--] {name}: not checked ({why})")
    lines += _liar_hint(result)
    lines.append("")
    lines += _outputs(result)
    return "\n".join(lines)


def _faults(result: DemoResult) -> list[str]:
    rep = result.report
    liars = {p.host: p for p in result.plans if p.liar}
    lines = []
    for fault in rep["faults"]:
        plan = liars.get(fault["host"])
        who = f" (the {plan.profile} profile, truly {plan.offset_ns / 1e6:+.3f} ms off)" if plan else ""
        if fault["verdict"] == "lying":
            what = f"broke its {fault['claimed_bound_ns']:,} ns promise"
        else:
            what = f"it or its peer broke a promise (it claimed {fault['claimed_bound_ns']:,} ns)"
        lines.append(
            f"  {fault['verdict'].upper()} clock: {shown(fault['host'])}{who}: {what} on {fault['violations']:,} of "
            f"{fault['edges']:,} edges with {_peers(fault)}, by up to {fault['max_excess_ns'] / 1e3:,.1f} µs"
        )
    if not rep["faults"]:
        lines.append("  no clock broke its promise")
    unexplained = honest_wrong(result.plans, rep)
    if unexplained:
        lines.append(
            "  wrong decisions no lying clock explains: " + ", ".join(f"{k} {v:,}" for k, v in unexplained.items())
        )
    return lines


def _liar_hint(result: DemoResult) -> list[str]:
    liar = next((p for p in result.plans if p.liar), None)
    caught = [passed for name, passed in result.checks.items() if "lying clock" in name]
    if liar is None or all(caught):
        return []
    if result.clock_check is not None:
        return [f"    the liar is {offset_text(liar.offset_ns)} off; a lie only shows when it is larger than the "
                "round trip check_clocks measures over and the messages and collectives it stamps take "
                "(the default, 10ms, is larger)"]
    return [f"    the liar is {offset_text(liar.offset_ns)} off; a lie only shows when it is larger than the hops "
            "it stamps take, so no known edge could expose it (the default, 10ms, is larger)"]


def _outputs(result: DemoResult) -> list[str]:
    out = result.paths["out"]
    lines = [
        f"Outputs in {out}/:",
        f"  spans (OTLP JSON lines)  {result.paths['trace']}",
        f"  analysis (JSON)          {result.paths['report']}",
        f"  Perfetto trace           {result.paths['perfetto']}   (open in https://ui.perfetto.dev)",
        f"  HTML timeline            {result.paths['html']}",
    ]
    if result.clock_check is not None:
        lines.append(f"  per-rank results         {out}/result-*.json   (ops called, check_clocks, carried records)")
        lines.append(f"  logs                     {out}/rank-*.log, {out}/torchrun.log")
    else:
        lines.append(f"  worker logs              {out}/worker-*.log")
    lines.append(f"  analyse it again         tempotrace analyze {result.paths['trace']}")
    return lines


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
            f"hop {shown(h['send_host'])} -> {shown(h['recv_host'])}: raw timestamps put the receive "
            f"{(h['send_ptp_ns'] - h['recv_ptp_ns']) / 1e3:,.0f} µs BEFORE the send; "
            f"TempoTrace orders it correctly by {how}"
        )
    broken = [h for h in hops if h["outcome"] == "contradiction"]
    if broken:
        h = max(broken, key=lambda h: (h["send_ptp_ns"] or 0) - (h["recv_ptp_ns"] or 0))
        out.append(
            f"hop {shown(h['send_host'])} -> {shown(h['recv_host'])}: both claim ±{h['send_uncertainty_ns']} / "
            f"±{h['recv_uncertainty_ns']} ns, yet the receive is stamped "
            f"{(h['send_ptp_ns'] - h['recv_ptp_ns']) / 1e3:,.0f} µs before the send: a clock broke its bound"
        )
    return out


def _peers(fault: dict[str, Any]) -> str:
    peers = peer_list(fault)
    count = fault["peers"] if isinstance(fault.get("peers"), int) else len(peers)
    more = f" (+{count - len(peers)} more)" if count > len(peers) else ""
    return ", ".join(map(shown, peers)) + more
