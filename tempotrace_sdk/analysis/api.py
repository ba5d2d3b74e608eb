"""The library entry points: analyse trace inputs or in-memory spans, write the outputs.

Writers are atomic: they write a temporary file beside the target and rename
it into place, so a failure never leaves a partial output file (spec §6).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING

from .analyzer import DEFAULT_DEDUP, DEFAULT_KEEP, DEFAULT_WINDOW, Analyzer
from .clockdomain import domain_of
from .engine import Options, Outcome, run
from .events import SpanRecord
from .inputs import DEFAULT_MAX_LINE, expand
from .merge import merge_reports
from .otlp import error_text
from .progress import Progress
from .reader import check_found
from .report import AnalysisReport
from .topology import Topology, load_topology
from .values import RESOURCE, SPAN, build_record

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["ENGINES", "analyze", "analyze_file", "analyze_spans", "atomic_write", "columnar_installed",
           "records_from_readable"]

#: where and how: "auto" (columnar where it is installed, else reference), "reference" (the per-span engine,
#: local processes; "local" is its former name), "columnar" (local processes, lines and span tables decoded as
#: columns: spec/analysis.md §5.6), "dask" (the columnar decode and the analysis over a cluster)
ENGINES = ("auto", "reference", "local", "columnar", "dask")
IN_MEMORY_WINDOW = 2**62


def columnar_installed() -> bool:
    """Whether the columnar engine runs here at its speed: pyarrow and numpy (the ``analysis`` extra) and the
    native columns module (built on Linux); without the module it would run, slower than the reference."""
    try:
        import numpy  # noqa: F401
        import pyarrow  # noqa: F401

        from .. import _columns  # noqa: F401
        from .columnar import lines  # noqa: F401
    except Exception:  # (not installed, or broken: an import that raises anything)
        return False
    return True


def _topology(topology: Topology | str | None) -> Topology | None:
    if isinstance(topology, str):
        return load_topology(topology)
    return topology


def analyze(
    inputs: str | list[str],
    topology: Topology | str | None = None,
    *,
    keep: int = DEFAULT_KEEP,
    window_spans: int = DEFAULT_WINDOW,
    dedup_spans: int = DEFAULT_DEDUP,
    strict: bool = False,
    max_line: int = DEFAULT_MAX_LINE,
    jobs: int = 1,
    engine: str = "auto",
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> AnalysisReport:
    """Analyse OTLP JSON trace lines: files, directories, globs or "-" (stdin), as one input.

    Bad lines are skipped and counted in the report (``strict=True`` raises
    TraceFileError at the first). ``jobs > 1`` splits the work by trace over
    that many local processes; ``engine="dask"`` over a Dask cluster
    (``scheduler`` address, or a local cluster of ``jobs`` workers);
    ``engine="columnar"`` decodes lines and span tables as columns (dask's
    workers too); ``"auto"`` (the default) is columnar where pyarrow, numpy and
    the native columns module are installed, else reference. The report is the same
    whichever way. Raises TraceFileError / TopologyError."""
    t0 = time.monotonic()
    if engine == "auto":
        engine = "columnar" if columnar_installed() else "reference"
    sources = expand([inputs] if isinstance(inputs, str) else list(inputs))
    # (dask decodes as columns too: its workers run the columnar stages, spec/analysis.md §5.3)
    options = Options(window_spans, keep, dedup_spans, strict, max_line, columnar=engine in ("columnar", "dask"))
    topo = _topology(topology)
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}")
    if options.columnar:
        from .columnar import lines  # noqa: F401 (ImportError here, without pyarrow: not mid-input)
    if engine == "dask":
        from .dask_engine import analyze_dask

        outcomes = analyze_dask(sources, topo, options, scheduler=scheduler, workers=max(jobs, 2), progress=progress)
    elif jobs > 1 and sources[0].size is not None:  # stdin and FIFOs can be read once only: one process
        from .parallel import analyze_parallel

        outcomes = analyze_parallel(sources, topo, options, jobs)
    else:
        outcomes = [run(sources, topo, options, progress=progress)]
        if progress is not None:
            progress.close()
    report = _one_report(outcomes, keep)
    check_found(sources, report, outcomes[0].trace_lines, report.spans)
    report.elapsed_s = time.monotonic() - t0
    return report


def _one_report(outcomes: list[Outcome], keep: int) -> AnalysisReport:
    if len(outcomes) == 1:
        return outcomes[0].partial[0]
    return merge_reports([o.partial for o in outcomes], keep)


def analyze_file(path: str, topology: Topology | str | None = None, **options: object) -> AnalysisReport:
    """``analyze`` of one input (a file, a directory, a glob or "-"); the same keyword options."""
    return analyze(path, topology, **options)  # type: ignore[arg-type]


_KIND_NUMBERS = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}


def records_from_readable(spans: Iterable[ReadableSpan]) -> Iterable[SpanRecord]:
    """SpanRecords from finished OpenTelemetry SDK spans (e.g. an in-memory exporter), checked by the same
    value rules as the file reader (values.py): a span that breaks one raises AttributeRuleError."""
    for span in spans:
        ctx = span.context
        if ctx is None:
            continue
        values = SPAN.read_plain((span.attributes or {}).items())
        parent = span.parent
        # The per-process fallbacks the file reader takes from the Resource (semantic-conventions §1.2).
        resource = span.resource.attributes.items() if span.resource is not None else ()
        host, host_name, rank, _dropped, _writer, clock, job, restart, *domain = RESOURCE.read_plain(resource)
        record = build_record(
            f"{ctx.trace_id:032x}",
            f"{ctx.span_id:016x}",
            f"{parent.span_id:016x}" if parent is not None else "",
            span.name,
            _KIND_NUMBERS.get(span.kind.name, 0),
            values,
            span.start_time or 0,
            span.end_time or 0,
            host or host_name,
            resource_rank=rank,
            resource_clock=clock,
            resource_job=job,
            resource_restart=restart,
            resource_domain=domain_of(*domain),
        )
        if span.status is not None and span.status.status_code.name == "ERROR":  # no OpenTelemetry import here
            record.error = _error_of(span)
        yield record


def _error_of(span: ReadableSpan) -> str:
    """An ERROR span's status description, else its exception event's type and message (as the file reader)."""
    described = span.status.description or ""
    if described:
        return error_text(described)
    for event in span.events or ():
        if event.name == "exception":
            attrs = event.attributes or {}
            said = ": ".join(str(attrs[k]) for k in ("exception.type", "exception.message") if attrs.get(k))
            return error_text(said)
    return error_text("")


def analyze_spans(
    spans: Iterable[ReadableSpan | SpanRecord],
    topology: Topology | str | None = None,
    *,
    keep: int = DEFAULT_KEEP,
) -> AnalysisReport:
    """Analyse in-memory spans: OTel SDK ReadableSpans or SpanRecords, in the order given."""
    # Everything is in memory already: one window holds it all, so no trace is analysed in parts.
    analyzer = Analyzer(_topology(topology), keep=keep, source="<spans>", window_spans=IN_MEMORY_WINDOW)
    analyzer.add_all(s if isinstance(s, SpanRecord) else next(iter(records_from_readable([s]))) for s in spans)
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
        # A file name that is no UTF-8 reaches the report as lone surrogates (os.fsdecode): written as the
        # escape "\udcff", as the terminal shows it, where strict UTF-8 would fail the whole write.
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
