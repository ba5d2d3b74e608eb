"""The torchrun job's lines in the demo's summary: the clock check, collectives, p2p messages, stragglers.

Lines about collectives, p2p messages and stragglers appear when the report
has them (``result.torch``, from torch_story); without any edge between two
ranks the summary says that the analysis ordered only each rank's own edges.
"""

from __future__ import annotations

from typing import Any

from .._terminal_text import shown
from .formatting import labels
from .model import DemoResult

__all__ = ["clock_check_table", "naive_detail", "torch_lines"]

#: Stragglers listed by name; the rest are counted.
STRAGGLERS_SHOWN = 4


def _size(ns: float) -> str:
    """A duration without sign, in the unit that reads best."""
    ns = abs(ns)
    if ns >= 1_000_000:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1_000:
        return f"{ns / 1e3:,.0f} µs"
    return f"{ns:.0f} ns"


def _measured(row: dict[str, Any]) -> str:
    if row["verdict"] == "ref":
        return "reference"
    sign = "-" if row["offset_ns"] < 0 else "+"
    return f"{sign}{_size(row['offset_ns'])} ± {_size(row['bound_ns'])}"


def clock_check_table(result: DemoResult) -> list[str]:
    """check_clocks' measurement of every rank, as rank 0 reported it before training."""
    check = result.clock_check or {}
    suspects = set(check.get("suspects", []))
    hosts = {p.rank: shown(p.host) for p in result.plans}
    lines = [
        "check_clocks, before training: each rank against rank 0 (four-timestamp ping-pong over gloo, best of 8)",
        f"  {'rank':<5}{'host':<7}{'measured offset':<24}{'claims':<22}verdict",
    ]
    verdicts = {
        "ref": "reference",
        "ok": "ok: within both claims + the measurement's bound",
        "unbounded": "unbounded: its claim promises nothing to check",
        "irreconcilable": "IRRECONCILABLE with its claim",
    }
    for row in check.get("ranks", []):
        claim = "nothing (saturated)" if row["unbounded"] else f"±{row['claim_ns']:,} ns ({row['quality']})"
        mark = "   <- named before training" if row["rank"] in suspects else ""
        lines.append(f"  {row['rank']:<5}{hosts.get(row['rank'], '?'):<7}{_measured(row):<24}{claim:<22}"
                     f"{verdicts.get(row['verdict'], row['verdict'])}{mark}")
    named = ", ".join(f"rank {r} ({hosts.get(r, '?')})" for r in sorted(suspects)) or "none"
    lines.append(f"  suspects: {named}   (tt.check_clocks(require=\"DEGRADED\") would stop the job here; the demo "
                 "trains on to show what the analysis sees)" if suspects else f"  suspects: {named}")
    return lines


def naive_detail(result: DemoResult) -> str:
    """', incl. ...' about the p2p messages and collectives a plain tracer shows reversed (when reported)."""
    story = result.torch
    parts = []
    if story.get("p2p"):
        parts.append(f"{story['p2p_naive']} of {story['p2p']} p2p messages with the receive before the send")
    if story.get("collectives"):
        parts.append(f"{story['collectives_naive']} of {story['collectives']} collectives with a rank leaving "
                     "before another arrived")
    return ", incl. " + " and ".join(parts) if parts else ""


def _stragglers(result: DemoResult) -> list[str]:
    stragglers = result.torch.get("stragglers") or []
    if not stragglers:
        return []
    total = result.torch.get("collectives", 0)
    named = ", ".join(f"{shown(s['host'])} last in {s['last']}"
                      + (f" ({s['certain']} certainly)" if s["certain"] else "") for s in stragglers[:STRAGGLERS_SHOWN])
    rest = sum(s["last"] for s in stragglers[STRAGGLERS_SHOWN:])
    lines = [f"  stragglers, by their own start stamps, of {total} collectives: {named}"
             + (f", others {rest}" if rest else "")]
    lying = set(result.report.get("lying_hosts", [])) | set(result.report.get("suspect_hosts", []))
    if stragglers[0]["host"] in lying:
        lines.append(f"    {shown(stragglers[0]['host'])} only looks last: its clock is flagged below, and its stamps "
                     "are as late as its lie")
    return lines


def torch_lines(result: DemoResult) -> list[str]:
    """Collectives, p2p messages, NTP-class edges and stragglers; or why the analysis has none of them."""
    story = result.torch
    lines = []
    if story.get("collectives"):
        ops = ", ".join(f"{op} {n}" for op, n in sorted(story["ops"].items()))
        lines.append(f"  collectives: {story['collectives']} ({ops}), {story['collectives_complete']} complete: "
                     + labels(story["collectives_by"]))
    if story.get("p2p"):
        lines.append(f"  p2p messages: {story['p2p_matched']}/{story['p2p']} matched: " + labels(story["p2p_by"]))
    if story.get("saturated"):
        total = sum(story["saturated"].values())
        lines.append(f"  of these, {total} touch an NTP-class clock (bound saturated, physics cannot use it): "
                     + labels(story["saturated"]))
    undecided = story.get("collectives_by", {}).get("undecided", 0)
    if undecided and story.get("carriage") != "op":
        plural = "s" if undecided != 1 else ""
        lines.append(f"  the {undecided} undecided collective{plural} said so rather than guess: "
                     f"with carriage={story.get('carriage')} no record crosses ranks at each collective, so Lamport "
                     "and SVC have nothing to go on, and physics cannot use an NTP-class member's saturated bound "
                     "(--carriage op carries a record at every collective)")
    lines += _stragglers(result)
    if not story.get("cross_rank_edges"):
        lines.append(
            "  this analysis orders each rank's own edges (parent/child) only: the collectives and p2p messages "
            "between ranks are traced (spans, sequence numbers, carried records) but not ordered by it, so no "
            "edge here can expose the liar; check_clocks named it above")
    return lines
