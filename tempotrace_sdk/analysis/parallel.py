"""``analyze --jobs N``: the same analysis split across N processes by trace (spec/analysis.md §5).

Every edge the analysis decides lies inside one trace, so traces can be
analysed independently: worker k of N reads the whole file but builds and
decides only the traces it owns (``shard_of(trace_id, N) == k``); on the fast
path the others are skipped after reading 32 characters of their trace id.
The parent adds the workers' counts and fault ledgers and attributes the
faults once, over all evidence, so the result equals a single-process run
(a test checks it). Each worker's window is ``window / N``: memory stays what
one process would use.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from typing import IO

from .analyzer import Analyzer
from .faults import FaultLedger
from .otlp_reader import TraceFileError, iter_spans
from .report import AnalysisReport, EdgeCounts
from .topology import Topology

__all__ = ["analyze_parallel", "merge_ledgers"]


def _shard_worker(
    path: str, topology: Topology | None, k: int, n: int, window: int, keep: int
) -> tuple[AnalysisReport, FaultLedger]:
    from .api import gc_paused  # the worker process only analyses (api.gc_paused)

    analyzer = Analyzer(topology, window_spans=max(1, window // n), keep=keep, source=path)
    with gc_paused():
        analyzer.add_all(iter_spans(path, shard=(k, n)))
        return analyzer.finish(), analyzer.ledger


def merge_ledgers(ledgers: list[FaultLedger]) -> FaultLedger:
    """One ledger holding all the evidence of several."""
    out = FaultLedger()
    for led in ledgers:
        for host, st in led.hosts.items():
            mine = out._stats(host)
            mine.edges += st.edges
            mine.max_claimed_ns = max(mine.max_claimed_ns, st.max_claimed_ns)
        out.physics_pairs.update(led.physics_pairs)
        out.lamport_pairs.update(led.lamport_pairs)
        for key, (mx, total) in led.pair_excess.items():
            omx, ototal = out.pair_excess.get(key, (0, 0))
            out.pair_excess[key] = (max(mx, omx), total + ototal)
    return out


def _merge_counts(parts: list[EdgeCounts]) -> EdgeCounts:
    out = EdgeCounts()
    for c in parts:
        out.total += c.total
        for kind, n in c.by_kind.items():
            out.by_kind[kind] = out.by_kind.get(kind, 0) + n
        for key, n in c.decided.items():
            out.decided[key] += n
        for key, n in c.wrong.items():
            out.wrong[key] += n
        out.naive_inversions += c.naive_inversions
        out.naive_ties += c.naive_ties
        out.wrong_pairs.update(c.wrong_pairs)
        out.unattributed += c.unattributed
    return out


def analyze_parallel(
    path: str,
    topology: Topology | None,
    jobs: int,
    *,
    keep: int,
    window_spans: int,
    progress: IO[str] | None = None,
) -> AnalysisReport:
    """Analyse ``path`` with ``jobs`` worker processes; the report a single process would give."""
    t0 = time.monotonic()
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may run threads
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_shard_worker, path, topology, k, jobs, window_spans, keep) for k in range(jobs)]
        parts: list[tuple[AnalysisReport, FaultLedger]] = []
        errors: list[TraceFileError] = []
        for k, fut in enumerate(futures):
            try:
                parts.append(fut.result())
            except TraceFileError as err:
                errors.append(err)
                continue
            if progress is not None:
                print(f"analyze: worker {k + 1}/{jobs} done ({parts[-1][0].spans:,} spans)", file=progress, flush=True)
    if errors:
        # Each worker stops at the first bad line it meets; the earliest is the file's first.
        raise min(errors, key=lambda e: e.line)
    reports = [r for r, _ in parts]
    rep = AnalysisReport(source=path, topology=reports[0].topology)
    for r in reports:
        rep.spans += r.spans
        rep.traces += r.traces  # shards own disjoint trace ids
        rep.trace_parts += r.trace_parts
        rep.hops += r.hops
        rep.hops_matched += r.hops_matched
        rep.unresolved_parents += r.unresolved_parents
        rep.duplicate_spans += r.duplicate_spans
        rep.spans_kept.extend(r.spans_kept[: max(0, keep - len(rep.spans_kept))])
        rep.hops_kept.extend(r.hops_kept[: max(0, keep - len(rep.hops_kept))])
    rep.edges = _merge_counts([r.edges for r in reports])
    rep.faults = merge_ledgers([led for _, led in parts]).attribute()
    rep.elapsed_s = time.monotonic() - t0
    return rep
