"""One process analysing its inputs, or one partition of them (spec/analysis.md §5).

``run`` wires a TraceReader into an Analyzer and returns the partial result
that merge.py combines; ``Options`` carries every knob to the other engines'
workers (parallel.py, dask.py) unchanged, so each partition runs exactly this.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from .analyzer import DEFAULT_DEDUP, DEFAULT_KEEP, DEFAULT_WINDOW, Analyzer
from .inputs import DEFAULT_MAX_LINE, Source, TraceFileError
from .merge import Partial
from .progress import Progress
from .reader import TraceReader
from .topology import Topology

__all__ = ["Options", "Outcome", "gc_paused", "outcomes_of", "run"]


class Options(msgspec.Struct, frozen=True):
    """How to analyse (the CLI's flags): window, kept spans, dedup horizon, strictness, line cap, and whether
    lines are decoded as columns (``--engine columnar``: the same records, spec/analysis.md §5.6)."""

    window: int = DEFAULT_WINDOW
    keep: int = DEFAULT_KEEP
    dedup: int = DEFAULT_DEDUP
    strict: bool = False
    max_line: int = DEFAULT_MAX_LINE
    columnar: bool = False

    def __post_init__(self) -> None:
        if self.window < 1 or self.keep < 0 or self.dedup < 0 or self.max_line < 1:
            raise ValueError("window and max_line must be >= 1; keep and dedup >= 0")


class Outcome(msgspec.Struct, gc=False):
    """A partition's partial result and what its reader saw (trace lines, span objects)."""

    partial: Partial
    trace_lines: int
    positions: int


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector, for processes that do nothing but analyse.

    The records and counters the analysis keeps form no reference cycles
    (reference counting frees them), yet every collection walks the whole
    window of buffered spans. Used by the CLI and the workers, whose process
    is the analysis; the library calls leave the collector to their host program."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def describe(sources: list[Source]) -> str:
    """The report's ``source``: the one input, or how many."""
    return sources[0].name if len(sources) == 1 else f"{sources[0].name} and {len(sources) - 1} more"


def run(sources: list[Source], topology: Topology | None, options: Options, shard: tuple[int, int] | None = None,
        progress: Progress | None = None) -> Outcome:
    """Analyse ``sources`` (the traces partition ``shard`` owns, or all); faults not yet attributed."""
    analyzer = Analyzer(topology, window_spans=options.window, keep=options.keep, source=describe(sources),
                        dedup_spans=options.dedup, batch_edges=options.columnar)
    analyzer.report.inputs = len(sources)
    reader = TraceReader(sources, analyzer.report, strict=options.strict, max_line=options.max_line, shard=shard,
                         progress=progress, columnar=options.columnar, plain=options.columnar)
    analyzer.add_batches(reader.batches())
    report = analyzer.finish()
    return Outcome((report, analyzer.ledger), reader.trace_lines, reader.positions)


def outcomes_of(futures: Iterable[Any]) -> list[Outcome]:
    """The outcomes of partitions run elsewhere (futures of ``run``), in order; where any raised
    TraceFileError, the input's first: each partition stops at the first bad line it meets (strict), so the
    earliest of theirs is the one a single process would have raised."""
    outcomes: list[Outcome] = []
    errors: list[TraceFileError] = []
    for fut in futures:
        try:
            outcomes.append(fut.result())
        except TraceFileError as err:
            errors.append(err)
    if errors:
        raise min(errors, key=lambda e: (e.path, e.line))
    return outcomes
