"""The exporter's own OTLP JSON encoder (otel/otlp_json.py) and the reader (spec/analysis.md §5,
spec/reliability.md §4): a file it writes reads exactly as one OpenTelemetry's encoder writes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan

from tempotrace_sdk.analysis import analyze_file, iter_spans
from tempotrace_sdk.otel.file_export import encode_batch, encode_batch_upstream
from tempotrace_sdk.otel.otlp_json import encode_request

from .tracegen import trace_spans

#: Spans per line: several lines, and batches that mix hosts (resources) and cut through traces.
BATCH = 7


def _write(path: Path, spans: list[ReadableSpan], encode: Callable[[Sequence[ReadableSpan]], bytes | None]) -> None:
    with open(path, "wb") as out:
        for i in range(0, len(spans), BATCH):
            line = encode(spans[i : i + BATCH])
            assert line is not None
            out.write(line)


def test_a_file_from_the_fast_encoder_reads_as_one_from_upstream_s(tmp_path: Path) -> None:
    spans = trace_spans({"c": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp"}, steps=2)
    for i in range(0, len(spans), BATCH):  # the fast path itself wrote every line, no fallback
        assert encode_batch(spans[i : i + BATCH]) == encode_request(spans[i : i + BATCH]) + b"\n"
    fast, upstream = tmp_path / "fast.jsonl", tmp_path / "upstream.jsonl"
    _write(fast, spans, encode_batch)
    _write(upstream, spans, encode_batch_upstream)

    records = list(iter_spans(str(fast)))
    assert len(records) == len(spans)
    assert records == list(iter_spans(str(upstream)))
    assert {r.host for r in records} == {"c", "w1", "w2", "w3"} and any(r.remote is not None for r in records)

    report, expected = analyze_file(str(fast)).to_dict(), analyze_file(str(upstream)).to_dict()
    assert (report.pop("source"), expected.pop("source")) == (str(fast), str(upstream))
    report.pop("elapsed_s"), expected.pop("elapsed_s")  # the analysis' own run time
    assert report == expected
    assert report["faults"], "the liar's clock is named from either file"
