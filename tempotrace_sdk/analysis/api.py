"""The library entry points: analyse a file or in-memory spans, write the outputs.

Writers are atomic: they write a temporary file beside the target and rename
it into place, so a failure never leaves a partial output file (spec §6).
"""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

from .analyzer import DEFAULT_KEEP, DEFAULT_WINDOW, Analyzer
from .events import SpanRecord
from .otlp_reader import TraceFileError, iter_spans, record_from_attrs
from .report import AnalysisReport
from .topology import Topology, load_topology

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["analyze_file", "analyze_spans", "atomic_write", "gc_paused", "records_from_readable"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector, for processes that do nothing but analyse.

    The records and counters the analysis keeps form no reference cycles
    (reference counting frees them), yet every collection walks the whole
    window of buffered spans: about a tenth of analyze's time. Used by the
    CLI and the --jobs workers, whose process is the analysis; the library
    calls leave the collector to their host program."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _topology(topology: Topology | str | None) -> Topology | None:
    if isinstance(topology, str):
        return load_topology(topology)
    return topology


def analyze_file(
    path: str,
    topology: Topology | str | None = None,
    *,
    keep: int = DEFAULT_KEEP,
    window_spans: int = DEFAULT_WINDOW,
    progress: IO[str] | None = None,
    jobs: int = 1,
) -> AnalysisReport:
    """Analyse an OTLP JSON lines trace file (raises TraceFileError / TopologyError).

    ``jobs > 1`` splits the work by trace over that many processes (parallel.py);
    the report is the same. Reading stdin ("-") is always one process."""
    topo = _topology(topology)
    if jobs > 1 and path != "-":
        from .parallel import analyze_parallel

        report = analyze_parallel(path, topo, jobs, keep=keep, window_spans=window_spans, progress=progress)
    else:
        analyzer = Analyzer(topo, window_spans=window_spans, keep=keep, progress=progress, source=path)
        analyzer.add_all(iter_spans(path))
        report = analyzer.finish()
    if report.spans == 0:
        # Trace lines without a single span are no trace (§5: an empty file is bad input).
        raise TraceFileError("<stdin>" if path == "-" else path, 0, "no spans")
    return report


_KIND_NUMBERS = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}


def records_from_readable(spans: Iterable[ReadableSpan]) -> Iterable[SpanRecord]:
    """SpanRecords from finished OpenTelemetry SDK spans (e.g. an in-memory exporter)."""
    for span in spans:
        ctx = span.context
        if ctx is None:
            continue
        attrs: dict[str, Any] = {}
        for key, value in (span.attributes or {}).items():
            if key.startswith("tempotrace."):
                attrs[key] = list(value) if isinstance(value, tuple) else value
        parent = span.parent
        resource_host = span.resource.attributes.get("host.name") if span.resource is not None else None
        yield record_from_attrs(
            f"{ctx.trace_id:032x}",
            f"{ctx.span_id:016x}",
            f"{parent.span_id:016x}" if parent is not None else "",
            span.name,
            _KIND_NUMBERS.get(span.kind.name, 0),
            attrs,
            span.start_time or 0,
            span.end_time or 0,
            resource_host if isinstance(resource_host, str) else None,
        )


def analyze_spans(
    spans: Iterable[ReadableSpan | SpanRecord],
    topology: Topology | str | None = None,
    *,
    keep: int = DEFAULT_KEEP,
) -> AnalysisReport:
    """Analyse in-memory spans: OTel SDK ReadableSpans or SpanRecords."""
    analyzer = Analyzer(_topology(topology), keep=keep, source="<spans>")
    items = list(spans)
    records = [s for s in items if isinstance(s, SpanRecord)]
    sdk = [s for s in items if not isinstance(s, SpanRecord)]
    analyzer.add_all(records)
    analyzer.add_all(records_from_readable(sdk))
    return analyzer.finish()


def atomic_write(path: str, write: Callable[[IO[str]], None]) -> None:
    """Write a text file via a temporary file in the same folder and a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=folder)
    try:
        # mkstemp makes the file private (0600); give it the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
