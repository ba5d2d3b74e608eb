"""Where spans go: OTLP JSON lines in a local file by default, a collector when asked.

The file exporter (``file_export.JsonLinesSpanExporter``) appends each export
batch as one JSON line with a single ``write(2)`` on an ``O_APPEND`` file
descriptor (``appender.AppendStream``), so several processes (a multi-worker
job, a forked child) may share one file without ever interleaving lines.
With a directory instead of a file, every process writes its own
``spans-<pid>.jsonl`` (re-chosen after fork). Runs of different jobs do not
share a file: the default file is named after the job the launcher names,
and a file another job wrote is not appended to (jobfile.py). What is
guaranteed about loss, torn lines, rotation, fork and SIGTERM:
spec/reliability.md. ``TEMPOTRACE_EXPORT_FORMAT=parquet`` makes the file exporter
write Parquet parts instead, one per batch, in ``<the path without extension>.parquet.d``
(parquet_export.py, spec/parquet.md §4).
"""

from __future__ import annotations

import importlib
import os

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, Context, attach, detach, set_value
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import lifecycle
from .appender import AppendStream
from .batching import TempoTraceBatchProcessor
from .file_export import JsonLinesSpanExporter
from .jobfile import DEFAULT_STEM, default_path, for_job
from .loss import LossLedger

__all__ = [
    "DEFAULT_EXPORT_PATH",
    "EXPORT_DIR_ENV",
    "EXPORT_FORMAT_ENV",
    "EXPORT_PATH_ENV",
    "AppendStream",
    "JsonLinesSpanExporter",
    "SyncSpanProcessor",
    "export_format",
    "export_processor",
    "file_exporter",
    "select_exporter",
]

EXPORT_PATH_ENV = "TEMPOTRACE_EXPORT_PATH"
EXPORT_DIR_ENV = "TEMPOTRACE_EXPORT_DIR"
EXPORT_FORMAT_ENV = "TEMPOTRACE_EXPORT_FORMAT"
#: The OTEL_TRACES_EXPORTER names understood.
_EXPORTER_NAMES = ("otlp", "console", "otlp_json_file", "none")
#: Used when neither a path, a directory nor a collector is configured, outside a named job (within one:
#: ``tempotrace-spans-<job>.jsonl``, jobfile.default_path).
DEFAULT_EXPORT_PATH = f"{DEFAULT_STEM}.jsonl"


def _job() -> str | None:
    """The job the launcher names (TEMPOTRACE_JOB_ID, else TORCHELASTIC_RUN_ID unless torchrun's "none")."""
    from ..launch import job_id_from_env  # imports neither torch nor OpenTelemetry

    return job_id_from_env()


def export_format() -> str:
    """TEMPOTRACE_EXPORT_FORMAT: ``jsonl`` (unset or empty too) or ``parquet``; anything else is a ValueError."""
    from .parquet_export import FORMATS  # imports no pyarrow

    raw = os.environ.get(EXPORT_FORMAT_ENV, "")
    value = raw.strip().lower() or "jsonl"
    if value not in FORMATS:
        raise ValueError(f"{EXPORT_FORMAT_ENV}={raw!r}: must be one of {', '.join(FORMATS)}")
    return value


def file_exporter(
    path: str | os.PathLike[str] | None = None, directory: str | os.PathLike[str] | None = None
) -> tuple[SpanExporter, str]:
    """An OTLP JSON-lines file exporter and the path it writes (for this process).

    Without a path, the file is named after the job the launcher names, if
    any (``tempotrace-spans-<job>.jsonl``); a file that holds another job's
    spans is not appended to: this job writes ``<name>-<job>.jsonl`` beside
    it (jobfile.py). A path that cannot be opened (read-only, missing
    permission) does not raise: the exporter warns, counts it in
    ``errors()`` and keeps trying. With ``TEMPOTRACE_EXPORT_FORMAT=parquet``: Parquet parts in the
    path's ``.parquet.d`` directory (parquet_export.py).
    """
    if export_format() == "parquet":
        return _parquet_exporter(path, directory)
    job = _job()
    if directory is not None:
        base = os.fspath(directory)

        def per_process(pid: int) -> str:
            return for_job(os.path.join(base, f"spans-{pid}.jsonl"), job)  # a pid reused by an earlier run

        stream = AppendStream(per_process)
    else:
        fixed = os.fspath(path) if path is not None else default_path(job)
        stream = AppendStream(lambda _pid: for_job(fixed, job))
    return JsonLinesSpanExporter(stream), stream.path


def _parquet_exporter(
    path: str | os.PathLike[str] | None, directory: str | os.PathLike[str] | None
) -> tuple[SpanExporter, str]:
    """file_exporter's Parquet form: the JSON file it would write, as a directory of parts."""
    try:
        import pyarrow  # noqa: F401  (the parts are written by it: say so now, not at the first batch)
    except ImportError as err:
        raise ImportError(f"{EXPORT_FORMAT_ENV}=parquet needs pyarrow: pip install 'tempotrace-sdk[analysis]'") from err
    from .parquet_export import ParquetSpanExporter, PartDirectory, parts_directory

    job = _job()
    if directory is not None:
        base = os.fspath(directory)
        sink = PartDirectory(lambda pid: parts_directory(for_job(os.path.join(base, f"spans-{pid}.jsonl"), job)))
    else:
        fixed = os.fspath(path) if path is not None else default_path(job)
        sink = PartDirectory(lambda _pid: parts_directory(for_job(fixed, job)))
    return ParquetSpanExporter(sink), sink.path


class SyncSpanProcessor(SpanProcessor):
    """Exports each span as it ends, on the thread that ends it (TEMPOTRACE_EXPORT_SYNC=1).

    Unlike the SDK's SimpleSpanProcessor: a span the exporter loses (FAILURE
    from an exporter that does not count its own losses, or an exception) is
    counted in ``ledger`` (``export_dropped_export_failed``, spec/reliability.md
    §3); after ``shutdown()`` spans are ignored quietly (``configure()`` again
    shuts this one down, but OpenTelemetry keeps handing it every span); and
    ``force_flush`` asks the exporter too: it may hold lines whose write failed.
    """

    def __init__(self, span_exporter: SpanExporter, *, ledger: LossLedger | None = None) -> None:
        self.span_exporter = span_exporter
        own_ledger = getattr(span_exporter, "ledger", None)
        self.ledger: LossLedger = ledger or (own_ledger if isinstance(own_ledger, LossLedger) else LossLedger())
        self._exporter_counts_loss = getattr(span_exporter, "counts_own_loss", False) is True
        self._shutdown = False

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled or self._shutdown:
            return
        exporter = self.span_exporter
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            result = exporter.export((span,))
            if result is not SpanExportResult.SUCCESS and not self._exporter_counts_loss:
                self.ledger.drop(1, "export_failed", f"{type(exporter).__name__} failed a span")
        except Exception as err:  # the span path never raises into the application
            self.ledger.drop(1, "export_failed", f"{type(exporter).__name__} raised {type(err).__name__}: {err}")
        finally:
            detach(token)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        if self._shutdown:
            return False
        try:
            return self.span_exporter.force_flush(timeout_millis) is not False  # the SDK's base returns None
        except Exception:
            return False

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        self.span_exporter.shutdown()


def export_processor(
    exporter: SpanExporter, *, batch: bool, resource: Resource | None = None, block_millis: float | None = None
) -> SpanProcessor:
    """The processor that feeds ``exporter`` (batched, or each span as it ends), flushed on SIGTERM and exit."""
    if isinstance(exporter, JsonLinesSpanExporter) and resource is not None:
        exporter.resource = resource
    processor: SpanProcessor = (
        TempoTraceBatchProcessor(exporter, block_millis=block_millis) if batch else SyncSpanProcessor(exporter)
    )
    lifecycle.flush_on_exit(processor)
    return processor


def _otlp_exporter() -> SpanExporter:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    package = "grpc" if protocol.strip() == "grpc" else "http"
    try:
        module = importlib.import_module(f"opentelemetry.exporter.otlp.proto.{package}.trace_exporter")
    except ImportError as err:
        raise ImportError(
            f"OTLP export ({protocol}) needs the collector exporter: "
            f"pip install opentelemetry-exporter-otlp-proto-{package}"
        ) from err
    exporter: SpanExporter = module.OTLPSpanExporter()  # reads the standard OTEL_EXPORTER_OTLP_* variables
    return exporter


def select_exporter(
    path: str | os.PathLike[str] | None, directory: str | os.PathLike[str] | None
) -> tuple[list[SpanExporter], str | None]:
    """Exporters from arguments and the environment, and the local file path if any.

    Order: an explicit path/directory (argument or TEMPOTRACE_EXPORT_PATH /
    TEMPOTRACE_EXPORT_DIR); else OTEL_TRACES_EXPORTER (``otlp``, ``console``,
    ``none``, ``otlp_json_file``); else OTLP when OTEL_EXPORTER_OTLP_ENDPOINT
    or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; else the default file.
    """
    export_format()  # a wrong TEMPOTRACE_EXPORT_FORMAT is an error whichever exporter is chosen
    path = path if path is not None else (os.environ.get(EXPORT_PATH_ENV) or None)
    directory = directory if directory is not None else (os.environ.get(EXPORT_DIR_ENV) or None)
    if path is not None or directory is not None:
        exporter, where = file_exporter(path, directory)
        return [exporter], where
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    unknown = [n for n in names if n not in _EXPORTER_NAMES]
    if unknown:  # before building any: a file exporter built first would create its file
        raise ValueError(
            f"OTEL_TRACES_EXPORTER: unknown exporter {unknown[0]!r} ({', '.join(_EXPORTER_NAMES)})"
        )
    if names:
        exporters: list[SpanExporter] = []
        file_path: str | None = None
        for name in names:
            if name == "none":
                continue
            if name == "otlp":
                exporters.append(_otlp_exporter())
            elif name == "console":
                from opentelemetry.sdk.trace.export import ConsoleSpanExporter

                exporters.append(ConsoleSpanExporter())
            else:  # otlp_json_file
                exporter, file_path = file_exporter()
                exporters.append(exporter)
        return exporters, file_path
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return [_otlp_exporter()], None
    exporter, where = file_exporter()
    return [exporter], where
