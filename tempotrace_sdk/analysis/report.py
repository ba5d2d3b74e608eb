"""The analysis result: counts, evidence, and what the renderers draw (spec/analysis.md §6).

``to_dict`` is the JSON contract (``tempotrace analyze --json``); the HTML and
Perfetto writers take their numbers from it, so all three outputs agree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .events import SpanRecord
from .faults import HostFault

__all__ = ["SCHEMA", "AnalysisReport", "EdgeCounts"]

SCHEMA = "tempotrace.analysis/1"
METHODS = ("physics", "lamport", "svc")


def _zero(keys: tuple[str, ...]) -> dict[str, int]:
    return dict.fromkeys(keys, 0)


@dataclass
class EdgeCounts:
    """Known causal edges and what the engine made of them.

    ``decided`` counts decisions that agree with the edge, by method (plus
    "undecided"); ``wrong`` counts confident decisions that contradict it, by
    method; every physics or Lamport contradiction is also clock-fault evidence.
    ``wrong_pairs`` tallies the wrong decisions per (host, host, method), the pair
    sorted; ``unattributed`` counts wrong decisions on hops whose sender span was
    not in the input (no host pair to tally or blame). Together they add up to
    the sum of ``wrong``.
    """

    total: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    decided: dict[str, int] = field(default_factory=lambda: _zero((*METHODS, "undecided")))
    wrong: dict[str, int] = field(default_factory=lambda: _zero(METHODS))
    naive_inversions: int = 0
    naive_ties: int = 0
    wrong_pairs: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    unattributed: int = 0

    def wrong_pair(self, host_a: str, host_b: str, method: str) -> None:
        """Tally one wrong decision on a known edge between these hosts."""
        key = (host_a, host_b, method) if host_a <= host_b else (host_b, host_a, method)
        self.wrong_pairs[key] += 1

    def wrong_by_pair(self) -> list[dict[str, Any]]:
        """``wrong_pairs`` as JSON: [{"hosts": [a, b], "method": m, "count": n}], a <= b, sorted."""
        return [{"hosts": [a, b], "method": m, "count": n} for (a, b, m), n in sorted(self.wrong_pairs.items())]

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "by_kind": dict(sorted(self.by_kind.items())),
            "decided": dict(self.decided),
            "wrong": dict(self.wrong),
            "wrong_total": sum(self.wrong.values()),
            "naive_inversions": self.naive_inversions,
            "naive_ties": self.naive_ties,
        }


@dataclass
class AnalysisReport:
    """Everything ``tempotrace analyze`` reports about one trace file."""

    source: str = ""
    topology: dict[str, Any] | None = None
    spans: int = 0
    traces: int = 0
    trace_parts: int = 0
    hops: int = 0
    hops_matched: int = 0
    unresolved_parents: int = 0
    duplicate_spans: int = 0
    edges: EdgeCounts = field(default_factory=EdgeCounts)
    faults: list[HostFault] = field(default_factory=list)
    elapsed_s: float = 0.0
    spans_kept: list[dict[str, Any]] = field(default_factory=list)
    hops_kept: list[dict[str, Any]] = field(default_factory=list)

    @property
    def lying_hosts(self) -> list[str]:
        return sorted({f.host for f in self.faults if f.verdict == "lying"})

    @property
    def suspect_hosts(self) -> list[str]:
        return sorted({f.host for f in self.faults if f.verdict == "suspect"})

    def keep_span(self, s: SpanRecord) -> None:
        """Keep what the renderers draw of one span."""
        end = s.end
        self.spans_kept.append({
            "trace_id": s.trace_id,
            "span_id": s.span_id,
            "parent_id": s.parent_id,
            "name": s.name,
            "host": s.host,
            "rank": s.rank,
            "clock": s.clock,
            "start_ptp_ns": s.start.ptp_ns if s.start.ptp_ns is not None else s.otel_start_ns,
            "start_uncertainty_ns": s.start.uncertainty_ns,
            "start_quality": s.start.quality,
            "start_lts": s.start.lts,
            "end_ptp_ns": end.ptp_ns if end is not None and end.ptp_ns is not None else s.otel_end_ns,
            "end_uncertainty_ns": end.uncertainty_ns if end is not None else None,
            "end_quality": end.quality if end is not None else None,
            "stamped": s.start.ptp_ns is not None,
        })

    def summary(self) -> dict[str, Any]:
        """The headline numbers (also embedded in the HTML)."""
        e = self.edges
        return {
            "spans": self.spans,
            "traces": self.traces,
            "hops": self.hops,
            "hops_matched": self.hops_matched,
            "edges": e.total,
            "physics": e.decided["physics"],
            "lamport": e.decided["lamport"],
            "svc": e.decided["svc"],
            "undecided": e.decided["undecided"],
            "wrong": sum(e.wrong.values()),
            "naive_inversions": e.naive_inversions,
            "lying_hosts": len(self.lying_hosts),
            "suspect_hosts": len(self.suspect_hosts),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "source": self.source,
            "summary": self.summary(),
            "spans": self.spans,
            "traces": self.traces,
            "trace_parts": self.trace_parts,
            "hops": {"total": self.hops, "matched": self.hops_matched},
            "unresolved_parents": self.unresolved_parents,
            "duplicate_spans": self.duplicate_spans,
            "edges": self.edges.to_dict(),
            "faults": [f.to_dict() for f in self.faults],
            "unattributed": self.edges.unattributed,
            "wrong_by_pair": self.edges.wrong_by_pair(),
            "lying_hosts": self.lying_hosts,
            "suspect_hosts": self.suspect_hosts,
            "topology": self.topology,
            "elapsed_s": round(self.elapsed_s, 3),
            "rendered": {"spans": len(self.spans_kept), "hops": len(self.hops_kept)},
        }

    def to_text(self) -> str:
        e = self.edges
        n = e.total or 1

        def pct(k: int) -> str:
            return f"{k:>9,}  ({100.0 * k / n:5.1f}%)"

        lines = [
            f"TempoTrace analysis of {self.source or '<spans>'}",
            f"  spans {self.spans:,}   traces {self.traces:,}   hops {self.hops:,} ({self.hops_matched:,} matched)",
            f"  known causal edges {e.total:,}  " + ", ".join(f"{k} {v:,}" for k, v in sorted(e.by_kind.items())),
            "  decided, agreeing with the edge:",
            f"    physics     {pct(e.decided['physics'])}",
            f"    lamport     {pct(e.decided['lamport'])}   (rules out the inversion)",
            f"    svc         {pct(e.decided['svc'])}",
            f"    undecided   {pct(e.decided['undecided'])}   (no guess)",
            f"  WRONG (confident, contradicts the edge) {pct(sum(e.wrong.values()))}"
            + "   " + ", ".join(f"{k} {v}" for k, v in e.wrong.items() if v),
            f"  naive (raw timestamps) inversions {pct(e.naive_inversions)}   ties {e.naive_ties:,}",
        ]
        if self.duplicate_spans:
            lines.append(f"  spans exported more than once: {self.duplicate_spans:,} (counted once)")
        if self.unresolved_parents:
            lines.append(f"  parents not in the input: {self.unresolved_parents:,} (their edges are not counted)")
        if e.unattributed:
            lines.append(f"  unattributed: {e.unattributed:,} wrong decisions on hops whose sender span is not in the "
                         "input (no host blamed)")
        if not self.faults:
            lines.append("  clock faults: none attributed to a host" if e.unattributed
                         else "  clock faults: none (every bound held on every known edge)")
        for f in self.faults:
            lines.append(
                f"  clock fault: {f.host} {f.verdict.upper()} ({f.kind}): {f.violations:,} of {f.edges:,} edges "
                f"({100 * f.rate:.1f}%), peers {len(f.peers)}, up to {f.max_excess_ns:,} ns beyond the bounds "
                f"(mean {f.mean_excess_ns:,.0f} ns; claimed ±{f.claimed_bound_ns:,} ns)"
            )
        return "\n".join(lines)
