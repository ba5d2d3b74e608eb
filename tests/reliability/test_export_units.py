"""The export pipeline's pieces in one process: drop records, failing exporters, shutdown, settings.

spec/reliability.md §1-§3 and semantic-conventions.md §10.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from _rel_helpers import FileContents
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from tempotrace_sdk.otel.appender import AppendStream
from tempotrace_sdk.otel.batching import DEFAULT_MAX_QUEUE_SIZE, TempoTraceBatchProcessor
from tempotrace_sdk.otel.file_export import JsonLinesSpanExporter
from tempotrace_sdk.otel.loss import LossLedger, drop_record_line, read_drop_records


class Counts:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, where: str, n: int) -> None:
        self.counts[where] += n


class Raising(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("collector went away")
        return SpanExportResult.FAILURE if self.calls == 2 else SpanExportResult.SUCCESS


@pytest.fixture
def counts() -> Counts:
    return Counts()


def _tracer(processor: TempoTraceBatchProcessor) -> Tracer:
    provider = TracerProvider(shutdown_on_exit=False, resource=Resource.create({"service.name": "unit"}))
    provider.add_span_processor(processor)
    return provider.get_tracer("unit")


def _end(tracer: Tracer, n: int, prefix: str = "s") -> None:
    for i in range(n):
        with tracer.start_as_current_span(f"{prefix}{i}"):
            pass


def _ended_spans(n: int) -> Sequence[ReadableSpan]:
    """``n`` ended SDK spans named s0, s1, ... to hand to an exporter directly."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(TempoTraceBatchProcessor(memory, schedule_delay_millis=600_000))
    _end(provider.get_tracer("unit"), n)
    provider.force_flush()
    return memory.get_finished_spans()


def test_the_drop_record_is_the_contract_line(tmp_path: Path) -> None:
    """One OTLP JSON line: the resource's attributes, then the two loss attributes; no spans."""
    line = drop_record_line({"service.name": "trainer", "host.name": "n7"}, 812, "n7/4121/9f3a0c11")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    doc = json.loads(line)
    (rs,) = doc["resourceSpans"]
    assert rs["scopeSpans"] == []
    assert rs["resource"]["attributes"] == [
        {"key": "service.name", "value": {"stringValue": "trainer"}},
        {"key": "host.name", "value": {"stringValue": "n7"}},
        {"key": "tempotrace.export.dropped_spans", "value": {"intValue": "812"}},
        {"key": "tempotrace.export.writer_id", "value": {"stringValue": "n7/4121/9f3a0c11"}},
    ]
    later = drop_record_line({}, 900, "n7/4121/9f3a0c11")
    other = drop_record_line({}, 5, "n8/1/00000000")
    assert read_drop_records([line, later, other, b'{"resourceSpans":[{"reso']) == {
        "n7/4121/9f3a0c11": 900,
        "n8/1/00000000": 5,
    }


def test_a_ledger_is_a_new_writer_after_fork(counts: Counts) -> None:
    ledger = LossLedger(counts)
    ledger.drop(3, "queue_full")
    parent_id = ledger.writer_id
    assert parent_id.split("/")[1] == str(os.getpid())
    ledger.after_fork_in_child()
    assert ledger.writer_id != parent_id and ledger.dropped == 0
    assert counts.counts == {"export_dropped": 3, "export_dropped_queue_full": 3}


def test_a_failing_collector_exporter_is_counted_and_the_worker_carries_on(counts: Counts) -> None:
    exporter = Raising()
    processor = TempoTraceBatchProcessor(exporter, max_export_batch_size=10, ledger=LossLedger(counts))
    tracer = _tracer(processor)
    for round_ in range(3):
        _end(tracer, 10, f"r{round_}-")
        assert processor.force_flush(10_000)
    processor.shutdown()
    assert exporter.calls == 3
    assert counts.counts["export_dropped_export_failed"] == 20  # raised, then FAILURE
    assert counts.counts["export_dropped"] == 20


def test_spans_ended_after_shutdown_are_not_reported_as_loss(counts: Counts) -> None:
    """configure() called again shuts the old pipeline down, but the provider keeps calling it: no false loss."""
    memory = InMemorySpanExporter()
    processor = TempoTraceBatchProcessor(memory, ledger=LossLedger(counts))
    tracer = _tracer(processor)
    _end(tracer, 5)
    processor.shutdown()
    _end(tracer, 2, "late")
    assert len(memory.get_finished_spans()) == 5
    assert counts.counts == {}
    assert processor.force_flush() is False  # honest: nothing can be flushed any more


class Gated(JsonLinesSpanExporter):
    """Holds its first export until ``release`` is set: the queue behind it fills."""

    def __init__(self, stream: AppendStream, ledger: LossLedger) -> None:
        super().__init__(stream, ledger=ledger)
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(30)
        return super().export(spans)


def test_the_file_exporter_writes_a_drop_record_at_flush(tmp_path: Path, counts: Counts) -> None:
    """A stuck exporter, a 4-span queue, no waiting: 20 spans, at most 8 absorbed, every other one counted."""
    path = tmp_path / "spans.jsonl"
    ledger = LossLedger(counts)
    exporter = Gated(AppendStream(lambda _pid: str(path)), ledger)
    exporter.resource = Resource.create({"service.name": "unit"})
    processor = TempoTraceBatchProcessor(exporter, max_queue_size=4, block_millis=0)
    tracer = _tracer(processor)
    _end(tracer, 20)
    exporter.release.set()
    assert processor.force_flush(10_000)
    processor.shutdown()
    lines = path.read_bytes().splitlines()
    names = [s["name"] for line in lines for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]  # fmt: skip
    assert ledger.dropped >= 12 and len(names) + ledger.dropped == 20
    assert read_drop_records(lines) == {ledger.writer_id: ledger.dropped}
    assert counts.counts["export_dropped_queue_full"] == counts.counts["export_dropped"] == ledger.dropped
    record = next(json.loads(line) for line in lines if b"dropped_spans" in line)
    keys = [a["key"] for a in record["resourceSpans"][0]["resource"]["attributes"]]
    assert "service.name" in keys


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "lots")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "250")
    with caplog.at_level(logging.WARNING):
        processor = TempoTraceBatchProcessor(InMemorySpanExporter())
    processor.shutdown()
    assert processor.max_queue_size == DEFAULT_MAX_QUEUE_SIZE and processor.schedule_delay_s == 0.25
    assert "OTEL_BSP_MAX_QUEUE_SIZE='lots'" in caplog.text
    monkeypatch.setenv("TEMPOTRACE_EXPORT_BLOCK_MS", "soon")
    with pytest.raises(ValueError, match="TEMPOTRACE_EXPORT_BLOCK_MS must be an integer"):
        TempoTraceBatchProcessor(InMemorySpanExporter())


class Slow(SpanExporter):
    """Takes ``seconds`` per batch, either computing (busy) or sleeping (a stalled collector)."""

    def __init__(self, seconds: float, busy: bool) -> None:
        self.seconds, self.busy, self.exported = seconds, busy, 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        end = time.monotonic() + self.seconds
        if self.busy:
            while time.monotonic() < end:
                pass
        else:
            time.sleep(self.seconds)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


@pytest.mark.parametrize(("busy", "drops"), [(True, False), (False, True)], ids=["computing", "sleeping"])
def test_a_slow_exporter_that_computes_is_waited_for_and_a_sleeping_one_is_not(
    counts: Counts, busy: bool, drops: bool
) -> None:
    """Batches take 0.6 s, the wait is 0.2 s: a worker using CPU is slow, not stalled (spec/reliability.md §2)."""
    exporter = Slow(0.6, busy)
    processor = TempoTraceBatchProcessor(
        exporter, max_queue_size=10, max_export_batch_size=10, block_millis=200, ledger=LossLedger(counts)
    )
    _end(_tracer(processor), 30)
    assert processor.force_flush(30_000)
    processor.shutdown()
    assert exporter.exported + counts.counts["export_dropped"] == 30
    assert (counts.counts["export_dropped_queue_full"] > 0) is drops


class Held(SpanExporter):
    """A collector that does not answer: export() returns only when released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(60)
        return SpanExportResult.SUCCESS


def test_handle_force_flush_flushes_every_pipeline_when_one_hangs(tmp_path: Path) -> None:
    """A collector down must not keep the file from being flushed (spec/reliability.md §5: os._exit users).

    Before the fix the handle flushed its pipelines one by one and stopped at the first
    that did not finish: the file pipeline after a hung collector was never flushed.
    """
    from tempotrace_sdk.otel.configure import TempoTraceHandle
    from tempotrace_sdk.otel.context import get_state
    from tempotrace_sdk.otel.processor import TempoTraceSpanProcessor

    path = tmp_path / "spans.jsonl"
    held = Held()
    collector = TempoTraceBatchProcessor(held, schedule_delay_millis=600_000)
    to_file = TempoTraceBatchProcessor(
        JsonLinesSpanExporter(AppendStream(lambda _pid: str(path))), schedule_delay_millis=600_000
    )
    provider = TracerProvider(shutdown_on_exit=False)
    for p in (collector, to_file):
        provider.add_span_processor(p)
    handle = TempoTraceHandle(provider, TempoTraceSpanProcessor(), [collector, to_file], str(path), get_state())
    try:
        _end(provider.get_tracer("unit"), 5)
        result: list[bool] = []
        flusher = threading.Thread(target=lambda: result.append(handle.force_flush(1000)), daemon=True)
        flusher.start()
        flusher.join(30)
        assert result == [False], "force_flush must return within its timeout, saying not everything was flushed"
        assert sorted(FileContents(path).names) == [f"s{i}" for i in range(5)]
    finally:
        held.release.set()
        handle.shutdown()


class Down(SpanExporter):
    """A collector exporter whose collector is down: every batch FAILURE, or an exception."""

    def __init__(self, raises: bool = False) -> None:
        self.raises = raises

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.raises:
            raise ConnectionError("connection refused")
        return SpanExportResult.FAILURE


@pytest.mark.parametrize("raises", [False, True], ids=["failure", "raises"])
def test_sync_export_counts_every_span_its_exporter_loses(counts: Counts, raises: bool) -> None:
    """TEMPOTRACE_EXPORT_SYNC=1: before the fix a FAILURE was ignored and an exception only logged."""
    from tempotrace_sdk.otel.export import SyncSpanProcessor

    processor = SyncSpanProcessor(Down(raises), ledger=LossLedger(counts))
    _end(_tracer(processor), 7)
    assert counts.counts == {"export_dropped": 7, "export_dropped_export_failed": 7}


def test_sync_export_is_quiet_after_shutdown(counts: Counts, caplog: pytest.LogCaptureFixture) -> None:
    """configure() again shuts the old processor down but the provider keeps calling it: no warning per span."""
    from tempotrace_sdk.otel.export import SyncSpanProcessor

    memory = InMemorySpanExporter()
    processor = SyncSpanProcessor(memory, ledger=LossLedger(counts))
    tracer = _tracer(processor)
    _end(tracer, 3)
    processor.shutdown()
    with caplog.at_level(logging.DEBUG):
        _end(tracer, 50, "late")
    assert [s.name for s in memory.get_finished_spans()] == ["s0", "s1", "s2"]
    assert caplog.records == [] and counts.counts == {}


def test_sync_export_through_our_file_exporter_counts_nothing_twice(tmp_path: Path, counts: Counts) -> None:
    """Our exporter's FAILURE means "kept to retry", counted by itself: the processor adds nothing."""
    from tempotrace_sdk.otel.export import SyncSpanProcessor

    blocker = tmp_path / "file"
    blocker.write_text("")
    exporter = JsonLinesSpanExporter(AppendStream(lambda _pid: str(blocker / "spans.jsonl")), ledger=LossLedger(counts))
    processor = SyncSpanProcessor(exporter)
    assert processor.ledger is exporter.ledger
    _end(_tracer(processor), 5)
    assert "export_dropped" not in counts.counts  # kept (8 MiB) to retry, not lost yet
    processor.shutdown()
    assert counts.counts["export_dropped"] == counts.counts["export_dropped_unavailable"] == 5


class StuckStream(AppendStream):
    """Its first write waits (a hung file system) with the descriptor in hand, until ``release``."""

    def __init__(self, path: Path) -> None:
        super().__init__(lambda _pid: str(path))
        self.writing = threading.Event()
        self.release = threading.Event()
        self.writes = 0

    def _append_locked(self, fd: int, record: bytes) -> None:
        self.writes += 1
        if self.writes == 1:
            self.writing.set()
            self.release.wait(60)
        super()._append_locked(fd, record)


def test_shutdown_without_the_lock_touches_neither_the_kept_lines_nor_the_stream(
    tmp_path: Path, counts: Counts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export still writing when shutdown gives up waiting for it (spec/reliability.md §4).

    Before the fix shutdown wrote the kept line itself (the line was then in the file twice) and
    closed the descriptor under the write in progress (a reused number would have taken span JSON
    into an unrelated file). Now the kept spans are counted as shutdown_timeout, the write in
    progress finishes on its own descriptor, and whoever holds the lock closes the stream.
    """
    import tempotrace_sdk.otel.file_export as file_export

    monkeypatch.setattr(file_export, "_SHUTDOWN_LOCK_TIMEOUT_S", 0.2)
    path = tmp_path / "spans.jsonl"
    stream = StuckStream(path)
    exporter = JsonLinesSpanExporter(stream, ledger=LossLedger(counts))
    spans = _ended_spans(3)
    worker = threading.Thread(target=exporter.export, args=(spans,), daemon=True)
    worker.start()
    try:
        assert stream.writing.wait(30)
        exporter.shutdown()  # gives up waiting for the lock after 0.2 s
        assert not stream.closed, "the descriptor was closed under a write in progress"
        assert counts.counts["export_dropped_shutdown_timeout"] == 3
        assert stream.writes == 1, "shutdown wrote a line the stuck export still holds"
    finally:
        stream.release.set()
        worker.join(30)
    assert not worker.is_alive()
    # The write in progress arrived, once (and was counted: it might not have).
    assert FileContents(path).names == ["s0", "s1", "s2"]
    assert stream.closed, "the export that held the lock closes the stream on its way out"


def test_export_open_failed_counts_open_attempts_not_batches(
    tmp_path: Path, counts: Counts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spec/reliability.md §3: ``export_open_failed`` counts failed open attempts (at most one a second).

    Before the fix every batch within the retry interval re-raised the cached error and was
    counted as another failed open.
    """
    import tempotrace_sdk.otel.appender as appender

    blocker = tmp_path / "file"
    blocker.write_text("")
    exporter = JsonLinesSpanExporter(AppendStream(lambda _pid: str(blocker / "spans.jsonl")), ledger=LossLedger(counts))
    batch = _ended_spans(1)
    monkeypatch.setattr(appender, "REOPEN_INTERVAL_S", 3600.0)  # no new attempt during the first batches
    for _ in range(20):
        exporter.export(batch)
    assert counts.counts["export_open_failed"] == 1, "one attempt (at construction) was made"
    monkeypatch.setattr(appender, "REOPEN_INTERVAL_S", 0.0)  # now every batch tries again
    for _ in range(3):
        exporter.export(batch)
    assert counts.counts["export_open_failed"] == 4
    assert "export_write_failed" not in counts.counts
