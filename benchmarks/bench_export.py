"""The exporter's sustained rate per process, and where the export defaults start to drop.

    python benchmarks/bench_export.py [--json] [--seconds S]

Measured in one process, as the other benchmarks do, with ratios against
peers from the same run:

1. Costs per span. Encoding a 512-span batch of torch op spans
   (``torch_spans.op_spans``: real attribute sets, values changing from op to
   op) with our OTLP JSON encoder (``otel/otlp_json.py``) against
   OpenTelemetry's (``opentelemetry-exporter-otlp-json-common``, the one
   ``encode_batch`` falls back to), the same JSON; exporting a 512-span batch
   with our JSON-lines exporter (our encoder + one append) against the peer,
   ``opentelemetry-exporter-otlp-json-file``'s FileSpanExporter on the same
   batch; and ending a span with the TempoTrace processor (what one
   application thread can produce). Both share the process's GIL, so
   S = 1e9 / (end ns + export ns) is the sustained rate in spans/s per
   process: ending and exporting faster than S for long, no queue helps.
2. Where drops start. A producer paced at fractions of S for a few seconds
   into a small queue (``ONSET_QUEUE`` spans) *without* back-pressure
   (``block_millis=0``, the SDK's policy): the share dropped at each rate
   shows the onset near S. A queue of Q spans only delays it, by
   Q / (rate - S) seconds; that is reported for the default queue. Then, at
   full speed: the default queue without waiting, the TempoTrace defaults (a
   full queue waits while the exporter progresses) and the SDK's
   BatchSpanProcessor: spans dropped, and spans/s.
3. Memory of a queued span (tracemalloc), so the default queue's cost is a number.

The defaults in ``tempotrace_sdk/otel/batching.py`` cite these numbers.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks.harness import Row, as_json, compare, print_table
from benchmarks.torch_spans import op_spans
from tempotrace_sdk.clocks.select import select_clock
from tempotrace_sdk.otel import TempoTraceSpanProcessor, TempoTraceState
from tempotrace_sdk.otel.appender import AppendStream
from tempotrace_sdk.otel.batching import DEFAULT_MAX_QUEUE_SIZE, TempoTraceBatchProcessor
from tempotrace_sdk.otel.file_export import JsonLinesSpanExporter, encode_batch, encode_batch_upstream
from tempotrace_sdk.otel.loss import LossLedger

BATCH = 512
#: The sweep's queue: the SDK's default size, small enough that the onset shows within seconds.
ONSET_QUEUE = 2048
ATTRIBUTES = {"rank": 3, "step": 1200, "op": "all_reduce"}


class _Null(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _provider(state: TempoTraceState, *processors: SpanProcessor) -> TracerProvider:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    for p in processors:
        provider.add_span_processor(p)
    return provider


def _ended_spans(state: TempoTraceState, n: int) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = _provider(state, SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for i in range(n):
        with tracer.start_as_current_span(f"step-{i}", attributes=ATTRIBUTES):
            pass
    return list(memory.get_finished_spans())


def per_span_costs(state: TempoTraceState, tmp: Path) -> tuple[list[Row], float, float]:
    ops = op_spans(BATCH)
    if json.loads(encode_batch(ops) or b"") != json.loads(encode_batch_upstream(ops) or b""):
        raise SystemExit("bench_export: the two encoders disagree on the op spans")  # a ratio of what, then?
    fast_ns, upstream_ns, encode_ratio = compare(
        lambda: encode_batch(ops), lambda: encode_batch_upstream(ops), min_time=0.6, repeat=9
    )
    spans = _ended_spans(state, BATCH)
    ours = JsonLinesSpanExporter(AppendStream(lambda _pid: str(tmp / "ours.jsonl")), ledger=LossLedger(lambda *_: None))
    peer_stream = open(tmp / "peer.jsonl", "a", encoding="utf-8")
    peer = FileSpanExporter(stream=peer_stream)
    ours_ns, _peer_ns, ratio = compare(lambda: ours.export(spans), lambda: peer.export(spans), min_time=0.6, repeat=9)
    ours.shutdown()
    peer_stream.close()
    queue = TempoTraceBatchProcessor(_Null())
    tracer = _provider(state, queue).get_tracer("bench")

    def end_one() -> None:
        with tracer.start_as_current_span("step", attributes=ATTRIBUTES):
            pass

    def bare() -> None:
        with bare_tracer.start_as_current_span("step", attributes=ATTRIBUTES):
            pass

    bare_tracer = TracerProvider(shutdown_on_exit=False).get_tracer("bench")
    end_ns, _bare_ns, end_ratio = compare(end_one, bare, min_time=0.4, repeat=9)
    queue.shutdown()
    rows = [
        Row("OTLP JSON encode, per torch op span (batch 512)", fast_ns / BATCH, "otlp-json-common", encode_ratio),
        Row("  otlp-json-common's encoder, same batch", upstream_ns / BATCH),
        Row("export, per span (512-span batch)", ours_ns / BATCH, "otlp-json-file", ratio),
        Row("end a span (TempoTrace + queue)", end_ns, "bare SDK span", end_ratio),
    ]
    return rows, ours_ns / BATCH, end_ns


def _run_producer(
    processor: SpanProcessor, state: TempoTraceState, rate: float | None, count: int
) -> tuple[int, float]:
    """End ``count`` spans at ``rate`` per second (None: as fast as possible); (produced, seconds)."""
    tracer = _provider(state, processor).get_tracer("bench")
    start = time.perf_counter()
    for i in range(count):
        with tracer.start_as_current_span("step", attributes=ATTRIBUTES):
            pass
        if rate is not None and i % 32 == 0:
            ahead = start + i / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
    elapsed = time.perf_counter() - start
    processor.shutdown()
    return count, elapsed


def drop_onset(state: TempoTraceState, tmp: Path, rate_s: float, seconds: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def ours(block_ms: int, name: str, queue: int | None = None) -> tuple[TempoTraceBatchProcessor, LossLedger]:
        ledger = LossLedger(lambda *_: None)
        exporter = JsonLinesSpanExporter(AppendStream(lambda _pid: str(tmp / f"{name}.jsonl")), ledger=ledger)
        return TempoTraceBatchProcessor(exporter, block_millis=block_ms, max_queue_size=queue), ledger

    for fraction in (0.5, 0.8, 1.0, 1.25, 1.5, 2.0):
        rate = rate_s * fraction
        processor, ledger = ours(0, f"paced-{fraction}", ONSET_QUEUE)
        produced, elapsed = _run_producer(processor, state, rate, int(rate * seconds))
        rows.append(
            {
                "policy": f"queue {ONSET_QUEUE}, no wait (SDK policy)",
                "offered_x_S": fraction,
                "offered_spans_per_s": round(produced / elapsed),
                "dropped_pct": round(100 * ledger.dropped / produced, 2),
            }
        )
    full = int(rate_s * seconds * 2)
    processor, ledger = ours(0, "full-nowait")
    produced, elapsed = _run_producer(processor, state, None, full)
    rows.append(_full_row("default queue, no wait (SDK policy)", produced, elapsed, ledger.dropped))
    processor, ledger = ours(2000, "full-defaults")
    produced, elapsed = _run_producer(processor, state, None, full)
    rows.append(_full_row("TempoTrace defaults (wait while exporting)", produced, elapsed, ledger.dropped))
    sdk_file = tmp / "sdk.jsonl"
    with open(sdk_file, "a", encoding="utf-8") as stream:
        produced, elapsed = _run_producer(BatchSpanProcessor(FileSpanExporter(stream=stream)), state, None, full)
    written = sum(line.count('"spanId"') for line in sdk_file.read_text().splitlines())
    rows.append(_full_row("SDK BatchSpanProcessor defaults", produced, elapsed, produced - written))
    return rows


def _full_row(policy: str, produced: int, elapsed: float, dropped: int) -> dict[str, Any]:
    return {
        "policy": policy,
        "offered_x_S": "full speed",
        "offered_spans_per_s": round(produced / elapsed),
        "dropped_pct": round(100 * dropped / produced, 2),
    }


def queued_span_bytes(state: TempoTraceState) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    spans = _ended_spans(state, 2000)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del spans
    return (after - before) / 2000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each paced run (default 3)")
    args = parser.parse_args(argv)
    # Drops are the point of part 2: their warnings (ours and the SDK's) would bury the table.
    for name in ("tempotrace_sdk", "opentelemetry"):
        logging.getLogger(name).setLevel(logging.ERROR)
    state = TempoTraceState(clock=select_clock("sim:ptp"), tenant=0, host="bench")
    with tempfile.TemporaryDirectory(prefix="tempotrace-bench-export-") as tmp:
        rows, export_ns, end_ns = per_span_costs(state, Path(tmp))
        rate_s = 1e9 / (end_ns + export_ns)
        onset = drop_onset(state, Path(tmp), rate_s, args.seconds)
    span_bytes = queued_span_bytes(state)
    summary = {
        "sustained_spans_per_s_per_process": round(rate_s),
        "export_alone_spans_per_s": round(1e9 / export_ns),
        "one_thread_end_spans_per_s": round(1e9 / end_ns),
        "queued_span_bytes": round(span_bytes),
        "default_queue_spans": DEFAULT_MAX_QUEUE_SIZE,
        "default_queue_mib": round(DEFAULT_MAX_QUEUE_SIZE * span_bytes / 2**20, 1),
        "default_queue_first_drop_after_s_at_1.25_S": round(DEFAULT_MAX_QUEUE_SIZE / (0.25 * rate_s), 1),
        "default_queue_first_drop_after_s_at_full_speed": round(
            DEFAULT_MAX_QUEUE_SIZE / max(1.0, 1e9 / end_ns - rate_s), 2
        ),
        "no_wait_drops_start_at_x_S": next(
            (r["offered_x_S"] for r in onset if isinstance(r["offered_x_S"], float) and r["dropped_pct"] > 0), None
        ),
    }
    if args.json:
        print(json.dumps({**as_json("export", rows), "onset": onset, "summary": summary}, indent=2))
        return 0
    print_table("export costs per span", rows)
    print("\n## where the export queue drops (per process)")
    for r in onset:
        print(f"  {r['policy']:<44} offered {r['offered_x_S']!s:>10} x S  "
              f"{r['offered_spans_per_s']:>8} spans/s  dropped {r['dropped_pct']:6.2f} %")  # fmt: skip
    print("\n## summary")
    for key, value in summary.items():
        print(f"  {key:<42} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
