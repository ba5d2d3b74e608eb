"""``JsonLinesSpanExporter``: OTLP JSON lines in an ``AppendStream``, with every loss counted.

Each export batch becomes one line, OTLP JSON as OpenTelemetry's own encoder
(``opentelemetry-exporter-otlp-json-common``, what
``opentelemetry-exporter-otlp-json-file`` writes) gives it, appended with one
write. The line is built by ``otlp_json`` (the same JSON at a fraction of the
CPU: a test compares the two); a batch holding a value that encoder does not
write exactly as upstream does is encoded by upstream's. Unlike that exporter
(spec/reliability.md §4):

- a failed write keeps the line and retries it whole before the next one
  (up to ``MAX_PENDING_BYTES``; older lines beyond that are dropped and
  counted), so a full disk that frees up loses nothing;
- a failure is a rate-limited warning and a count, not a traceback per span;
- an export file that cannot be opened (read-only path) is reported the same
  way, and the application runs on; opening is retried;
- when spans were dropped (here or in the batch queue sharing the ledger), a
  drop record line says how many (``loss.drop_record_line``);
- after fork the child starts with a fresh lock and no pending lines.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import lifecycle, otlp_json
from .lifecycle import FlushLock
from .loss import LossLedger, drop_record_line

__all__ = ["MAX_PENDING_BYTES", "JsonLinesSpanExporter", "RecordSink", "encode_batch", "encode_batch_upstream"]

_log = logging.getLogger(__name__)

#: Lines kept for a retry after failed writes: ~8,000 spans at ~1 KB each,
#: a queue's worth; beyond it the oldest lines are dropped (and counted).
MAX_PENDING_BYTES = 8 * 1024 * 1024
#: How long shutdown waits for an export in progress on another thread.
_SHUTDOWN_LOCK_TIMEOUT_S = 5.0


def encode_batch(spans: Sequence[Any]) -> bytes | None:
    """One OTLP JSON line (ExportTraceServiceRequest) for ``spans``; None when there is nothing to write.

    ``otlp_json`` encodes it; where it cannot (a value of a type it does not
    write exactly as upstream does, or anything else it did not expect),
    upstream's encoder does, so no batch is lost to the faster one.
    """
    if not spans:
        return None
    try:
        return otlp_json.encode_request(spans) + b"\n"
    except Exception as err:  # never lose a batch to the fast path: upstream's encoder writes every value
        _log.debug("tempotrace: OTLP JSON batch encoded by upstream's encoder: %s: %s", type(err).__name__, err)
    written = [s for s in spans if type(s) is tuple]  # op spans torch wrote as JSON: a line of their own
    if not written:
        return encode_batch_upstream(spans)
    rest = encode_batch_upstream([s for s in spans if type(s) is not tuple])
    # (their Resource and scope were checked encodable here when they were written: torch/opspans.py)
    return otlp_json.encode_request(written) + b"\n" + (rest or b"")


def encode_batch_upstream(spans: Sequence[ReadableSpan]) -> bytes | None:
    """``encode_batch`` by OpenTelemetry's own encoder (``encode_spans(spans).to_dict()``): fallback, reference."""
    request = encode_spans(spans)
    if not request.resource_spans:
        return None
    return json.dumps(request.to_dict(), separators=(",", ":")).encode("utf-8") + b"\n"


class RecordSink(Protocol):
    """Where an exporter's records go: ``AppendStream`` (lines in a file), ``parquet_export.PartDirectory``
    (one file per record). ``append`` raises OSError when the record did not arrive whole."""

    open_failures: int

    @property
    def path(self) -> str: ...

    @property
    def open_error(self) -> OSError | None: ...

    def append(self, record: bytes) -> None: ...

    def close(self) -> None: ...

    def after_fork_in_child(self) -> None: ...


def _describe(err: OSError) -> str:
    return f"[Errno {err.errno}] {err.strerror}" if err.strerror else f"{type(err).__name__}: {err}"


class JsonLinesSpanExporter(SpanExporter):
    """Writes batches as OTLP JSON lines into ``stream``; never raises into the export path."""

    #: Tells TempoTraceBatchProcessor that FAILURE means "kept to retry", already accounted for.
    counts_own_loss = True

    def __init__(
        self, stream: RecordSink, *, ledger: LossLedger | None = None, resource: Resource | None = None
    ) -> None:
        self.stream = stream
        self.ledger = ledger or LossLedger()
        #: The resource a drop record carries (configure() sets the provider's);
        #: otherwise that of the first span exported.
        self.resource = resource
        self._lock = FlushLock()
        self._pending: deque[tuple[bytes, int]] = deque()
        self._pending_bytes = 0
        self._shutdown = False
        #: shutdown() gave up waiting for the lock: its holder writes nothing more and closes the stream.
        self._abandoned = False
        lifecycle.renew_after_fork(self)
        self._open_failures_counted = stream.open_failures
        error = stream.open_error
        if error is not None:
            self.ledger.failure(
                "export_open_failed",
                f"cannot open the export file {stream.path}: {_describe(error)}; the application runs on, "
                "spans are kept briefly and then dropped (counted) until the file can be opened",
            )

    @property
    def path(self) -> str:
        return self.stream.path

    def after_fork_in_child(self) -> None:
        self._lock = FlushLock()
        self._open_failures_counted = self.stream.open_failures
        self._pending.clear()
        self._pending_bytes = 0
        self.ledger.after_fork_in_child()
        self.stream.after_fork_in_child()

    def export(self, spans: Sequence[Any]) -> SpanExportResult:  # (ReadableSpans, and on_end_encoded's pairs)
        if self._shutdown:  # shut down on purpose (configure() replaced it): not a loss to report
            return SpanExportResult.FAILURE
        try:
            line = self.encode(spans)
        except Exception as err:  # a value the encoder cannot represent: lose this batch, not the process
            self.ledger.drop(len(spans), "encode_failed", f"cannot encode a batch: {type(err).__name__}: {err}")
            return SpanExportResult.FAILURE
        if line is None:
            return SpanExportResult.SUCCESS
        if self.resource is None:
            first = spans[0]
            self.resource = first[0].resource if type(first) is tuple else first.resource
        if not self._lock.acquire():  # re-entered from a signal handler mid-write on this thread
            self.ledger.drop(len(spans), "write_failed", "export re-entered from a signal handler")
            return SpanExportResult.FAILURE
        try:
            if self._abandoned:  # waited here while shutdown gave up on the export ahead of us
                self.ledger.drop(len(spans), "shutdown_timeout", f"{self.path}: ended while shutdown ran")
                return SpanExportResult.FAILURE
            self._keep(line, len(spans))
            ok = self._write_pending()
            if ok:
                self._write_drop_record(force=False)
        finally:
            self._release()
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def encode(self, spans: Sequence[ReadableSpan]) -> bytes | None:
        """One record (here an OTLP JSON line) for a batch; None when there is nothing to write. The encoding
        is all a subclass changes (otel/parquet_export.py): keeping, retrying and counting stay here."""
        return encode_batch(spans)

    def encode_drop_record(self, resource_attributes: dict[str, Any], count: int) -> bytes:
        """The record that says ``count`` spans were dropped so far (loss.drop_record_line)."""
        return drop_record_line(resource_attributes, count, self.ledger.writer_id)

    def _release(self) -> None:
        """Release the lock; first, if shutdown gave up waiting for it, finish what shutdown could not."""
        if self._abandoned:
            self._finish_abandoned()
        self._lock.release()

    def _unavailable(self) -> bool:
        """True while the file cannot even be opened (the loss reason is then ``unavailable``)."""
        return self.stream.open_error is not None

    def _loss_reason(self) -> str:
        return "unavailable" if self._unavailable() else "write_failed"

    def _keep(self, line: bytes, spans: int) -> None:
        self._pending.append((line, spans))
        self._pending_bytes += len(line)
        while self._pending_bytes > MAX_PENDING_BYTES and len(self._pending) > 1:
            old, count = self._pending.popleft()
            self._pending_bytes -= len(old)
            why = f"{self.path}: writes keep failing; the oldest kept batch is lost"
            self.ledger.drop(count, self._loss_reason(), why)

    def _write_pending(self) -> bool:
        """Write the kept lines in order; False (and the rest kept) at the first failure."""
        pending = self._pending
        while pending:
            if self._abandoned:  # shutdown has counted the kept lines as lost: write none of them
                return False
            line, _count = pending[0]
            try:
                self.stream.append(line)
            except (OSError, ValueError) as err:
                why = _describe(err) if isinstance(err, OSError) else str(err)
                detail = f"{self.path}: {why}; {sum(n for _, n in pending)} span(s) kept to retry"
                if not self._unavailable():
                    self.ledger.failure("export_write_failed", f"cannot write to {detail}")
                    return False
                # Open attempts, not batches: within the retry interval no attempt was made.
                attempts = self.stream.open_failures - self._open_failures_counted
                self._open_failures_counted = self.stream.open_failures
                if attempts > 0:
                    self.ledger.failure("export_open_failed", f"cannot open {detail}", attempts)
                return False
            pending.popleft()
            self._pending_bytes -= len(line)
        return True

    def _write_drop_record(self, *, force: bool) -> None:
        count = self.ledger.record_due(force=force)
        if count is None:
            return
        attributes = dict(self.resource.attributes) if self.resource is not None else {}
        try:
            self.stream.append(self.encode_drop_record(attributes, count))
        except (OSError, ValueError):
            return  # the failure that caused the drops is already counted; the next flush tries again
        self.ledger.recorded(count)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Retry kept lines and write a due drop record; False when lines are still kept."""
        if self._shutdown:
            return not self._pending
        if not self._lock.acquire(max(0.0, timeout_millis / 1000)):
            return False
        try:
            ok = self._write_pending()
            self._write_drop_record(force=True)
            return ok
        finally:
            self._release()

    def shutdown(self, timeout_millis: float = 30_000, **_kwargs: object) -> None:
        if self._shutdown:
            return
        self._shutdown = True  # export() returns at once from now on
        if self._lock.acquire(min(_SHUTDOWN_LOCK_TIMEOUT_S, timeout_millis / 1000)):
            try:
                self._write_pending()
                lost = sum(n for _, n in self._pending)
                self._pending.clear()
                self._pending_bytes = 0
                why = f"{self.path}: {lost} kept span(s) could not be written by shutdown"
                self.ledger.drop(lost, self._loss_reason(), why)
                self._write_drop_record(force=True)
                self._close_stream()
            finally:
                self._lock.release()
            return
        # Another thread is inside export() or force_flush(), in a write that does
        # not return (a hung file system), and owns the kept lines and the stream.
        # Writing them here would put a line in the file twice; closing the stream
        # would close the descriptor under its write, and a reused number would take
        # span JSON into an unrelated file. So: count what is kept as lost now (the
        # write in progress may yet arrive: at most that batch is then both in the
        # file and counted); the holder writes nothing more and closes the stream.
        self._abandoned = True
        kept = sum(n for _, n in list(self._pending))  # list(): one copy under the GIL
        self.ledger.drop(kept, "shutdown_timeout", f"{self.path}: shutdown could not wait for a write in progress")
        if self._lock.acquire(0):  # the holder left meanwhile, perhaps before it saw _abandoned
            self._release()

    def _finish_abandoned(self) -> None:
        """Under the lock, after shutdown gave up on it: the kept lines are counted already."""
        self._pending.clear()
        self._pending_bytes = 0
        self._close_stream()

    def _close_stream(self) -> None:
        try:
            self.stream.close()
        except (OSError, ValueError):
            _log.debug("tempotrace: closing %s failed", self.path, exc_info=True)
