"""The analysis result: counts, evidence, and what the renderers draw (spec/analysis.md §6).

``to_dict`` is the JSON contract (``tempotrace analyze --json``, schema
spec/analysis-report.schema.json); the HTML and Perfetto writers take their
numbers from it, so all three outputs agree. ``to_text`` is the summary a
person reads (text.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .events import SpanRecord, split_clock
from .faults import HostFault
from .hangfacts import HangFacts
from .jobs import JobSpans
from .torchcounts import CollectiveCounts, DerivedCounts, P2PCounts
from .torchjob import TorchJob

__all__ = ["SCHEMA", "AnalysisReport", "EdgeCounts"]

SCHEMA = "tempotrace.analysis/7"
METHODS = ("physics", "lamport", "svc", "derived")
#: Bad lines and refused spans kept in the report with their path:line (the count covers them all).
SAMPLES = 20


def _zero(keys: tuple[str, ...]) -> dict[str, int]:
    return dict.fromkeys(keys, 0)


@dataclass
class EdgeCounts:
    """Known causal edges and what the engine made of them.

    ``decided`` counts decisions that agree with the edge, by method (plus
    "undecided"); ``wrong`` counts confident decisions that contradict it, by
    method; every physics or Lamport contradiction is also clock-fault evidence
    (a derived one is a cycle in the trace's structure: no clock's fault).
    ``wrong_pairs`` tallies the wrong decisions per (clock, clock, method), the
    pair sorted; ``unattributed`` counts wrong decisions on hops whose sender span
    was not in the input (no clock pair to tally or blame). Together they add up
    to the sum of ``wrong``. ``physics_silent`` says, per edge physics left open,
    why (order.SILENCE_REASONS).
    """

    total: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    decided: dict[str, int] = field(default_factory=lambda: _zero((*METHODS, "undecided")))
    wrong: dict[str, int] = field(default_factory=lambda: _zero(METHODS))
    naive_inversions: int = 0
    naive_ties: int = 0
    wrong_pairs: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    unattributed: int = 0
    physics_silent: dict[str, int] = field(default_factory=dict)

    def wrong_pair(self, clock_a: str, clock_b: str, method: str) -> None:
        """Tally one wrong decision on a known edge between these clocks."""
        key = (clock_a, clock_b, method) if clock_a <= clock_b else (clock_b, clock_a, method)
        self.wrong_pairs[key] += 1

    def wrong_by_pair(self) -> list[dict[str, Any]]:
        """``wrong_pairs`` as JSON: [{"hosts": [a, b], "ranks": [ra, rb], "method": m, "count": n}], sorted."""
        out = []
        for (a, b, m), n in sorted(self.wrong_pairs.items()):
            (ha, ra), (hb, rb) = split_clock(a), split_clock(b)
            out.append({"hosts": [ha, hb], "ranks": [ra, rb], "method": m, "count": n})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "by_kind": dict(sorted(self.by_kind.items())),
            "decided": dict(self.decided),
            "wrong": dict(self.wrong),
            "wrong_total": sum(self.wrong.values()),
            "naive_inversions": self.naive_inversions,
            "naive_ties": self.naive_ties,
            "physics_silent": dict(sorted(self.physics_silent.items())),
        }


@dataclass
class AnalysisReport:
    """Everything ``tempotrace analyze`` reports about its input."""

    source: str = ""
    topology: dict[str, Any] | None = None
    inputs: int = 1
    spans: int = 0
    traces: int = 0
    trace_parts: int = 0
    hops: int = 0
    hops_matched: int = 0
    unresolved_parents: int = 0
    #: step spans whose absent parent is the step's virtual parent (never exported, by design: stepparent.py)
    virtual_parents: int = 0
    duplicate_spans: int = 0
    degraded_spans: int = 0
    bad_lines: int = 0
    bad_spans: int = 0
    #: the first SAMPLES bad lines / refused spans in input order: (order key, {"path", "line", "reason"})
    samples: list[tuple[tuple[int, int], dict[str, Any]]] = field(default_factory=list)
    #: files a directory gave that are not trace files (first line not OTLP traces): "path: why"
    not_traces: list[str] = field(default_factory=list)
    #: cumulative spans each exporter instance said it dropped (the largest value seen per writer id)
    export_loss: dict[str, int] = field(default_factory=dict)
    limits: dict[str, int] = field(default_factory=dict)
    edges: EdgeCounts = field(default_factory=EdgeCounts)
    faults: list[HostFault] = field(default_factory=list)
    elapsed_s: float = 0.0
    collectives: CollectiveCounts = field(default_factory=CollectiveCounts)
    p2p: P2PCounts = field(default_factory=P2PCounts)
    #: the structure the derived order read (derived.py)
    derived: DerivedCounts = field(default_factory=DerivedCounts)
    #: spans per job (jobs.py) and the torch job's steps, failures and incomplete collectives (torchjob.py)
    jobs: JobSpans = field(default_factory=JobSpans)
    torch_job: TorchJob = field(default_factory=TorchJob)
    spans_kept: list[dict[str, Any]] = field(default_factory=list)
    #: HTTP/gRPC hops ("kind": "hop") and torch point-to-point messages ("kind": "p2p")
    hops_kept: list[dict[str, Any]] = field(default_factory=list)
    #: one record per collective instance (spec/analysis.md §6.1), while the budget of member rows lasts
    collectives_kept: list[dict[str, Any]] = field(default_factory=list)
    #: what the hang report is decided from (hangfacts.py; decided by hang.py when the report is read)
    hang_facts: HangFacts = field(default_factory=HangFacts)

    @property
    def lying_hosts(self) -> list[str]:
        return sorted({f.host for f in self.faults if f.verdict == "lying"})

    @property
    def suspect_hosts(self) -> list[str]:
        return sorted({f.host for f in self.faults if f.verdict == "suspect"})

    @property
    def export_dropped_spans(self) -> int:
        return sum(self.export_loss.values())

    @property
    def bad_samples(self) -> list[dict[str, Any]]:
        return [sample for _, sample in self.samples]

    def note_bad(self, path: str, line: int, reason: str, spans: bool, order: tuple[int, int] = (0, 0)) -> None:
        """Count a bad line (``spans`` False) or a refused span, keeping the first few with path:line;
        ``order`` (line's ordinal in the input, span's index in the line) sorts samples of merged runs."""
        if spans:
            self.bad_spans += 1
        else:
            self.bad_lines += 1
        if len(self.samples) < SAMPLES:
            self.samples.append((order, {"path": path, "line": line, "reason": reason}))

    def note_loss(self, writer_id: str, dropped: int) -> None:
        """An exporter's loss record: counts are cumulative per writer, so the largest one is the total."""
        if dropped > self.export_loss.get(writer_id, -1):
            self.export_loss[writer_id] = dropped

    def keep_span(self, s: SpanRecord) -> None:
        """Keep what the renderers draw of one span."""
        end = s.end
        torch = s.torch
        self.spans_kept.append({
            "trace_id": s.trace_id,
            "span_id": s.span_id,
            "parent_id": s.parent_id,
            "name": s.name,
            "host": s.host,
            "rank": s.rank,
            "clock": s.clock_source,
            "start_ptp_ns": s.start.ptp_ns if s.start.ptp_ns is not None else s.otel_start_ns,
            "start_uncertainty_ns": s.start.uncertainty_ns,
            "start_quality": s.start.quality,
            "start_lts": s.start.lts,
            "end_ptp_ns": end.ptp_ns if end is not None and end.ptp_ns is not None else s.otel_end_ns,
            "end_uncertainty_ns": end.uncertainty_ns if end is not None else None,
            "end_quality": end.quality if end is not None else None,
            "stamped": s.start.ptp_ns is not None,
            "op": torch.op if torch is not None else None,
            "group": torch.group if torch is not None else None,
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
            "derived": e.decided["derived"],
            "undecided": e.decided["undecided"],
            "wrong": sum(e.wrong.values()),
            "naive_inversions": e.naive_inversions,
            "lying_hosts": len(self.lying_hosts),
            "suspect_hosts": len(self.suspect_hosts),
            "bad_lines": self.bad_lines,
            "bad_spans": self.bad_spans,
            "export_dropped_spans": self.export_dropped_spans,
            "collectives": self.collectives.total,
            "collectives_incomplete": self.collectives.incomplete,
            "p2p": self.p2p.total,
            "p2p_matched": self.p2p.matched,
            "jobs": len(self.jobs.job_ids()),
            "steps": self.torch_job.steps,
            "failed_ops": self.torch_job.failed,
        }

    def hang(self) -> dict[str, Any] | None:
        """The hang report (spec/analysis.md §1.4): per process group the wavefront, the dumps seen, the
        point-to-point sends no receive matched; None when there is nothing to say. Decided from the facts
        and the attributed faults, so call it on a finished (or merged) report; decided once and shared by
        the outputs until the facts change (do not change what it returns)."""
        from .hang import hang_report

        return hang_report(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "source": self.source,
            "inputs": self.inputs,
            "summary": self.summary(),
            "spans": self.spans,
            "traces": self.traces,
            "trace_parts": self.trace_parts,
            "hops": {"total": self.hops, "matched": self.hops_matched},
            "unresolved_parents": self.unresolved_parents,
            "virtual_parents": self.virtual_parents,
            "duplicate_spans": self.duplicate_spans,
            "degraded_spans": self.degraded_spans,
            "bad": {"lines": self.bad_lines, "spans": self.bad_spans, "first": self.bad_samples,
                    "not_trace_files": list(self.not_traces)},
            "export_loss": {"dropped_spans": self.export_dropped_spans, "writers": len(self.export_loss),
                            "writers_with_loss": sum(1 for n in self.export_loss.values() if n)},
            "edges": self.edges.to_dict(),
            "faults": [f.to_dict() for f in self.faults],
            "unattributed": self.edges.unattributed,
            "wrong_by_pair": self.edges.wrong_by_pair(),
            "lying_hosts": self.lying_hosts,
            "suspect_hosts": self.suspect_hosts,
            "topology": self.topology,
            "limits": dict(self.limits),
            "collective_counts": self.collectives.to_dict(),
            "stragglers": self.collectives.straggler_rows(),
            "p2p": self.p2p.to_dict(),
            "derived": self.derived.to_dict(),
            "jobs": {"count": len(self.jobs.job_ids()), "by_job": self.jobs.to_list(),
                     "beyond_limit_spans": self.jobs.other},
            "torch": self.torch_job.to_dict(),
            "hang": self.hang(),
            "collectives": sorted(self.collectives_kept, key=_instance_order),
            "elapsed_s": round(self.elapsed_s, 3),
            "rendered": {"spans": len(self.spans_kept), "hops": len(self.hops_kept),
                         "collectives": len(self.collectives_kept)},
        }

    def to_text(self) -> str:
        from .text import report_text

        return report_text(self)


def _instance_order(record: dict[str, Any]) -> tuple[str, str, int, str]:
    """Kept collectives in a fixed order, whichever partition or sweep finished them."""
    return record["trace_id"], record["group"], record["seq"], record["members"][0]["span_id"]
