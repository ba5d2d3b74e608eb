"""``analyze --jobs N``: the same analysis split by trace id over N local processes (spec/analysis.md §5.3).

Every edge lies inside one trace, so traces can be analysed independently:
worker k of N reads every input line (so that it numbers span positions as
one process would) but builds and analyses only the traces it owns
(``shard_of(trace_id, N) == k``). The parent merges the partial results
(merge.py) and attributes faults once, over all evidence. Windows are counted
in input positions, so each worker forms exactly the trace parts one process
would: the report is the same, and each worker holds about window / N spans.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from .engine import Options, Outcome, gc_paused, outcomes_of, run
from .inputs import Source
from .topology import Topology

__all__ = ["analyze_parallel"]


def _worker(sources: list[Source], topology: Topology | None, options: Options, k: int, n: int) -> Outcome:
    with gc_paused():  # the worker process only analyses
        return run(sources, topology, options, (k, n))


def analyze_parallel(sources: list[Source], topology: Topology | None, options: Options, jobs: int) -> list[Outcome]:
    """The partitions' outcomes, in partition order (raises the input's first TraceFileError)."""
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may run threads
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        return outcomes_of([pool.submit(_worker, sources, topology, options, k, jobs) for k in range(jobs)])
