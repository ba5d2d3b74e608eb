"""One report from the partial results of partitions that each analysed their own traces
(``--jobs``, ``--engine dask``; spec/analysis.md §5.3).

Every edge lies inside one trace and a trace lies inside one partition, so
counts add up; the fault ledgers are merged and faults attributed once, over
all the evidence, exactly as one process would. Bad-line samples are ordered
by where they sit in the input; exporter loss takes each writer's largest
count; the hang facts are merged, and the wavefront decided once over all of
them (hang.py). The kept spans, hops and collectives (a rendering sample) are
cut to ``keep``.
"""

from __future__ import annotations

from .faults import FaultLedger
from .report import SAMPLES, AnalysisReport, EdgeCounts

__all__ = ["Partial", "merge_ledgers", "merge_reports"]

#: What a partition hands back: its report (faults not yet attributed) and its evidence.
Partial = tuple[AnalysisReport, FaultLedger]


def merge_ledgers(ledgers: list[FaultLedger]) -> FaultLedger:
    """One ledger holding all the evidence of several."""
    out = FaultLedger()
    for led in ledgers:
        for clock, n in led.edges.items():
            out.edges[clock] = out.edges.get(clock, 0) + n
        for clock, bound in led.claimed.items():
            out.claim(clock, bound)
        out.physics_pairs.update(led.physics_pairs)
        out.lamport_pairs.update(led.lamport_pairs)
        for key, (mx, total) in led.pair_excess.items():
            omx, ototal = out.pair_excess.get(key, (0, 0))
            out.pair_excess[key] = (max(mx, omx), total + ototal)
    return out


def merge_counts(parts: list[EdgeCounts]) -> EdgeCounts:
    out = EdgeCounts()
    for c in parts:
        out.total += c.total
        for kind, n in c.by_kind.items():
            out.by_kind[kind] = out.by_kind.get(kind, 0) + n
        for key, n in c.decided.items():
            out.decided[key] += n
        for key, n in c.wrong.items():
            out.wrong[key] += n
        for key, n in c.physics_silent.items():
            out.physics_silent[key] = out.physics_silent.get(key, 0) + n
        out.naive_inversions += c.naive_inversions
        out.naive_ties += c.naive_ties
        out.wrong_pairs.update(c.wrong_pairs)
        out.unattributed += c.unattributed
    return out


def merge_reports(parts: list[Partial], keep: int) -> AnalysisReport:
    """The report one process would have given, from the partitions' partial results."""
    reports = [r for r, _ in parts]
    first = reports[0]
    rep = AnalysisReport(source=first.source, topology=first.topology, inputs=first.inputs, limits=dict(first.limits),
                         not_traces=list(first.not_traces))
    samples = []
    for r in reports:
        rep.spans += r.spans
        rep.traces += r.traces  # partitions own disjoint trace ids
        rep.trace_parts += r.trace_parts
        rep.hops += r.hops
        rep.hops_matched += r.hops_matched
        rep.unresolved_parents += r.unresolved_parents
        rep.virtual_parents += r.virtual_parents
        rep.duplicate_spans += r.duplicate_spans
        rep.degraded_spans += r.degraded_spans
        rep.bad_lines += r.bad_lines
        rep.bad_spans += r.bad_spans
        samples += r.samples
        for writer, dropped in r.export_loss.items():
            rep.note_loss(writer, dropped)
        rep.spans_kept.extend(r.spans_kept[: max(0, keep - len(rep.spans_kept))])
        rep.hops_kept.extend(r.hops_kept[: max(0, keep - len(rep.hops_kept))])
        rep.collectives.merge(r.collectives)
        rep.p2p.merge(r.p2p)
        rep.derived.merge(r.derived)
        rep.jobs.merge(r.jobs)
        rep.torch_job.merge(r.torch_job)
        rep.hang_facts.merge(r.hang_facts)
        budget = keep - sum(max(len(c["members"]), len(c["ranks"])) for c in rep.collectives_kept)
        for record in r.collectives_kept:  # the same budget of member rows as one process
            cost = max(len(record["members"]), len(record["ranks"]))
            if cost <= budget:
                budget -= cost
                rep.collectives_kept.append(record)
    rep.samples = sorted(samples, key=lambda s: s[0])[:SAMPLES]
    rep.edges = merge_counts([r.edges for r in reports])
    rep.faults = merge_ledgers([led for _, led in parts]).attribute()
    return rep
