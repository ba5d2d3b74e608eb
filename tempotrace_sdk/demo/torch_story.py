"""What the analysis made of the training job's collectives and point-to-point messages.

Reads the report's rendering records (CONTRACT-collectives.md): p2p messages
are ``hops_kept`` records with ``"kind": "p2p"``, collectives are
``collectives_kept`` records (one per (group, seq) within a trace), each
member's span in ``spans_kept``. A report without them (an analysis that
orders only each rank's own parent/child edges) gives empty numbers, and the
summary leaves their lines out and says why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..semconv import TORCH_CLAIMS
from .plan import RankPlan

__all__ = ["LOCAL_KINDS", "TorchStory", "cross_rank_edges", "decision_label", "torch_story"]

#: Edge kinds between two events of one rank; every other kind crosses ranks (hop, p2p, collective ...).
LOCAL_KINDS = frozenset({"parent_child", "child_end"})
#: Collectives in which every member's start precedes every member's end (spec/analysis.md: no root).
EVERY_START_BEFORE_EVERY_END = frozenset(op for op, claim in TORCH_CLAIMS.items() if claim == "all")


def cross_rank_edges(report: dict[str, Any]) -> int:
    """Known edges between two ranks' events, whatever the analysis calls their kinds."""
    by_kind: dict[str, int] = report["edges"]["by_kind"]
    return sum(n for kind, n in by_kind.items() if kind not in LOCAL_KINDS)


def decision_label(record: dict[str, Any]) -> str:
    """physics / lamport / svc for an agreeing decision, else the outcome (undecided, contradiction)."""
    outcome = str(record.get("outcome", "undecided"))
    return str(record["decision"]["method"]) if outcome == "consistent" else outcome


@dataclass
class TorchStory:
    p2p: int = 0
    p2p_matched: int = 0
    p2p_naive: int = 0  #: raw timestamps put the receive before the send
    p2p_by: Counter[str] = field(default_factory=Counter)  #: decision_label counts
    collectives: int = 0
    collectives_complete: int = 0
    collectives_naive: int = 0  #: raw timestamps show a rank leaving before another arrived
    collectives_by: Counter[str] = field(default_factory=Counter)
    ops: Counter[str] = field(default_factory=Counter)
    #: per clock that arrived last at least once: {"host", "last", "certain", "joined"}, most often last first
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    saturated: Counter[str] = field(default_factory=Counter)  #: decisions on those touching an NTP-class clock
    examples: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: dict(v) if isinstance(v, Counter) else v for k, v in self.__dict__.items()}


def _spread(members: list[dict[str, Any]], spans: dict[str, dict[str, Any]]) -> tuple[int, str, str] | None:
    """(latest start - earliest end, the host that started last, the host that ended first) by raw stamps."""
    timed = [(m, spans[m["span_id"]]) for m in members if m.get("span_id") in spans]
    if len(timed) < 2 or any(s["start_ptp_ns"] is None or s["end_ptp_ns"] is None for _, s in timed):
        return None
    last = max(timed, key=lambda t: t[1]["start_ptp_ns"])
    first = min(timed, key=lambda t: t[1]["end_ptp_ns"])
    return int(last[1]["start_ptp_ns"] - first[1]["end_ptp_ns"]), str(last[0]["host"]), str(first[0]["host"])


def _how(decision: dict[str, Any]) -> str:
    return {
        "svc": f"the SVC sketch (false-positive rate {decision.get('fp', 0.0):.1e})",
        "lamport": "Lamport counters (merged from the records the ranks carried)",
        "physics": "physics (its bounds are disjoint)",
        "derived": "the order derived from the trace itself (program order on each rank and the matched pairs)",
    }.get(str(decision["method"]), str(decision["method"]))


def torch_story(p2p: list[dict[str, Any]], collectives: list[dict[str, Any]], spans_kept: list[dict[str, Any]],
                plans: list[RankPlan], stragglers: list[dict[str, Any]] | None = None) -> TorchStory:
    """Counts and examples from the report's p2p and collective records.

    ``stragglers``: the report's own per-clock tally (over every collective, not only the kept
    records), when it has one; else it is counted from the records.
    """
    liars = {p.host for p in plans if p.liar}
    ntp = {p.host for p in plans if p.profile == "ntp"}
    story = TorchStory()
    honest_p2p: list[tuple[int, dict[str, Any]]] = []
    broken_p2p: list[tuple[int, dict[str, Any]]] = []
    for h in p2p:
        story.p2p += 1
        story.p2p_matched += bool(h.get("matched"))
        label = decision_label(h)
        story.p2p_by[label] += 1
        hosts = {h["send_host"], h["recv_host"]}
        if hosts & ntp:
            story.saturated[label] += 1
        if h["send_ptp_ns"] is None or h["recv_ptp_ns"] is None:
            continue
        early = int(h["send_ptp_ns"] - h["recv_ptp_ns"])
        if early > 0:
            story.p2p_naive += 1
            if label in ("lamport", "svc", "physics") and not hosts & liars:
                honest_p2p.append((early, h))
        if label == "contradiction":
            broken_p2p.append((early, h))

    spans = {s["span_id"]: s for s in spans_kept}
    honest_coll: list[tuple[int, str, str, dict[str, Any]]] = []
    last_count: Counter[str] = Counter()
    certain_count: Counter[str] = Counter()
    joined: Counter[str] = Counter()
    for c in collectives:
        story.collectives += 1
        story.collectives_complete += not c.get("missing_ranks")
        story.ops[str(c.get("op"))] += 1
        label = decision_label(c)
        story.collectives_by[label] += 1
        hosts = {str(m["host"]) for m in c.get("members", [])}
        if hosts & ntp:
            story.saturated[label] += 1
        last = c.get("last_arriver")
        if last:
            host = str(last["host"])
            last_count[host] += 1
            certain_count[host] += bool(last.get("certain"))
        for host in hosts:
            joined[host] += 1
        spread = _spread(c.get("members", []), spans) if c.get("op") in EVERY_START_BEFORE_EVERY_END else None
        if spread is not None and spread[0] > 0:
            story.collectives_naive += 1
            if label in ("lamport", "svc", "physics") and not hosts & liars:
                honest_coll.append((spread[0], spread[1], spread[2], c))

    if stragglers is None:
        stragglers = [{"host": h, "last": n, "last_certain": certain_count[h], "joined": joined[h]}
                      for h, n in last_count.items()]
    story.stragglers = sorted(
        ({"host": str(s["host"]), "last": int(s["last"]), "certain": int(s.get("last_certain", 0)),
          "joined": int(s.get("joined", 0))} for s in stragglers if s.get("last")),
        key=lambda s: (-s["last"], s["host"]))
    if honest_p2p:
        early, h = max(honest_p2p, key=lambda t: t[0])
        story.examples.append(
            f"p2p {h['send_host']} -> {h['recv_host']}: raw timestamps put the receive {early / 1e3:,.0f} µs BEFORE "
            f"the send; TempoTrace orders it by {_how(h['decision'])}")
    if honest_coll:
        gap, last, first, c = max(honest_coll, key=lambda t: t[0])
        story.examples.append(
            f"{c['op']} #{c['seq']} of group {c['group']}: raw timestamps show {first} leaving {gap / 1e3:,.0f} µs "
            f"before {last} arrived; TempoTrace orders it by {_how(c['decision'])}")
    if broken_p2p:
        early, h = max(broken_p2p, key=lambda t: t[0])
        story.examples.append(
            f"p2p {h['send_host']} -> {h['recv_host']}: both claim ±{h['send_uncertainty_ns']} / "
            f"±{h['recv_uncertainty_ns']} ns, yet the receive is stamped {early / 1e3:,.0f} µs before the send: "
            "a clock broke its bound")
    return story
