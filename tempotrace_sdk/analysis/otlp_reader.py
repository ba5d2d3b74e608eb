"""Stream spans out of OTLP JSON lines (spec/analysis.md §5).

The format is what ``opentelemetry-exporter-otlp-json-file`` writes: one
``{"resourceSpans": [...]}`` object per line (one export batch), attribute
values wrapped as ``{"intValue": "123"}`` / ``{"stringValue": ...}`` /
``{"arrayValue": {"values": [...]}}``. Ids are hex in that exporter and base64
in protobuf's canonical JSON mapping; both are accepted and normalised to hex.

One line is parsed at a time: memory here is one line, whatever the file size.
Every problem is a ``TraceFileError`` naming the line and the rule broken.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any

from .. import semconv as S
from ..errors import TempoTraceError
from ..wire._layout import UNCERTAINTY_SATURATED
from .events import QUALITIES, SpanRecord, Stamp
from .fastpath import parse_line_fast

__all__ = ["TraceFileError", "iter_spans", "iter_spans_from_lines", "record_from_attrs", "shard_of", "span_from_dict"]

_PREFIX = S.PREFIX


class TraceFileError(TempoTraceError, ValueError):
    """The trace file cannot be read as OTLP JSON trace lines.

    ``line`` is the 1-based line number (0 when the file could not be opened),
    ``reason`` says what is wrong in words.
    """

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[type[TraceFileError], tuple[str, int, str]]:
        # Rebuilt from its fields when it crosses a process boundary (analyze --jobs).
        return (TraceFileError, (self.path, self.line, self.reason))


def _norm_id(raw: object, size: int, what: str) -> str:
    """Hex (2*size chars) or base64 (size bytes) id -> lowercase hex."""
    if not isinstance(raw, str):
        raise ValueError(f"{what} must be a string")
    if len(raw) == 2 * size:
        try:
            int(raw, 16)
            return raw.lower()
        except ValueError:
            pass
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        data = b""
    if len(data) != size:
        raise ValueError(f"{what} must be {2 * size} hex chars or base64 of {size} bytes, got {raw!r}")
    return data.hex()


def _value(v: dict[str, Any]) -> Any:
    """Unwrap one OTLP AnyValue."""
    for key, inner in v.items():
        if key == "intValue":
            return int(inner)
        if key == "stringValue" or key == "doubleValue" or key == "boolValue":
            return inner
        if key == "arrayValue":
            return [_value(x) for x in inner.get("values", ())]
        if key == "bytesValue":
            return inner
    return None


def _int(attrs: dict[str, Any], name: str, lo: int = 0, hi: int = 2**63 - 1) -> int | None:
    value = attrs.get(name)
    if value is None:
        return None
    if value.__class__ is not int or not lo <= value <= hi:  # exact int: bool is not a number here
        raise ValueError(f"attribute {name} must be an integer {lo}..{hi}, got {value!r}")
    return value


def _quality(attrs: dict[str, Any], name: str) -> str:
    value = attrs.get(name, "UNKNOWN")
    if value not in QUALITIES:
        raise ValueError(f"attribute {name} must be one of {'/'.join(QUALITIES)}, got {value!r}")
    return str(value)


def _sketch(attrs: dict[str, Any], name: str) -> int | None:
    value = attrs.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) != 64:
        raise ValueError(f"attribute {name} must be 64 hex chars")
    try:
        return int(value, 16)
    except ValueError:
        raise ValueError(f"attribute {name} must be 64 hex chars") from None


def _stamp(attrs: dict[str, Any], ptp: str, unc: str, quality: str, lts: str) -> Stamp | None:
    ptp_ns = _int(attrs, ptp)
    lts_v = _int(attrs, lts)
    if ptp_ns is None and lts_v is None:
        return None
    u = _int(attrs, unc, 0, UNCERTAINTY_SATURATED)
    return Stamp(ptp_ns, UNCERTAINTY_SATURATED if u is None else u, _quality(attrs, quality), lts_v)


def _int_list(attrs: dict[str, Any], name: str) -> list[int | None]:
    value = attrs.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        raise ValueError(f"attribute {name} must be an array of integers")
    return list(value)


def span_from_dict(span: dict[str, Any], resource_host: str | None, line: int) -> SpanRecord:
    """Build a SpanRecord from one OTLP span object (raises ValueError naming the field)."""
    attrs: dict[str, Any] = {}
    for kv in span.get("attributes", ()):
        key = kv["key"]
        if key.startswith(_PREFIX):
            attrs[key] = _value(kv["value"])
    parent = span.get("parentSpanId") or ""
    return record_from_attrs(
        _norm_id(span.get("traceId"), 16, "traceId"),
        _norm_id(span.get("spanId"), 8, "spanId"),
        _norm_id(parent, 8, "parentSpanId") if parent else "",
        str(span.get("name", "")),
        _kind(span.get("kind", 0)),
        attrs,
        int(span.get("startTimeUnixNano", 0)),
        int(span.get("endTimeUnixNano", 0)),
        resource_host,
        line,
    )


def record_from_attrs(
    trace_id: str,
    span_id: str,
    parent_id: str,
    name: str,
    kind: int,
    attrs: dict[str, Any],
    otel_start_ns: int,
    otel_end_ns: int,
    resource_host: str | None = None,
    line: int = 0,
) -> SpanRecord:
    """Build a SpanRecord from hex ids and the span's tempotrace.* attributes."""
    start = _stamp(attrs, S.PTP_NS, S.UNCERTAINTY_NS, S.CLK_QUALITY, S.LTS) or Stamp(None)
    end = _stamp(attrs, S.END_PTP_NS, S.END_UNCERTAINTY_NS, S.END_CLK_QUALITY, S.END_LTS)
    remote = _stamp(attrs, S.REMOTE_PTP_NS, S.REMOTE_UNCERTAINTY_NS, S.REMOTE_CLK_QUALITY, S.REMOTE_LTS)
    send_lts = _int_list(attrs, S.SEND_LTS)
    send_ptp = _int_list(attrs, S.SEND_PTP_NS)
    send_unc = _int_list(attrs, S.SEND_UNCERTAINTY_NS)
    sends = tuple(
        (lts, send_ptp[i] if i < len(send_ptp) else None, send_unc[i] if i < len(send_unc) else None)
        for i, lts in enumerate(send_lts)
        if lts is not None
    )
    host = attrs.get(S.HOST) or resource_host or "?"
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name,
        kind=kind,
        host=str(host),
        start=start,
        end=end,
        otel_start_ns=otel_start_ns,
        otel_end_ns=otel_end_ns,
        sketch=_sketch(attrs, S.SVC_SKETCH),
        rank=_int(attrs, S.RANK),
        clock=str(attrs.get(S.CLOCK, "")),
        profile=str(attrs.get(S.CLOCK_PROFILE, "")),
        sends=sends,
        remote=remote,
        remote_sketch=_sketch(attrs, S.REMOTE_SVC_SKETCH),
        recv_lts=_int(attrs, S.RECV_LTS),
        line=line,
    )


_KINDS = {"SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3, "SPAN_KIND_PRODUCER": 4}
_KINDS["SPAN_KIND_CONSUMER"] = 5


def _kind(raw: object) -> int:
    """OTLP SpanKind as its proto number (1 internal, 2 server, 3 client, 4 producer, 5 consumer)."""
    if isinstance(raw, str):
        return _KINDS.get(raw, 0)
    return int(raw) if isinstance(raw, int) else 0


def _resource_host(resource: dict[str, Any]) -> str | None:
    for kv in resource.get("attributes", ()):
        if kv.get("key") in (S.HOST, "host.name"):
            value = _value(kv.get("value", {}))
            if isinstance(value, str):
                return value
    return None


def shard_of(trace_id: str, shards: int) -> int:
    """Which of ``shards`` workers owns a trace (hex trace id, any case)."""
    return int(trace_id[-8:], 16) % shards


def iter_spans_from_lines(
    lines: Iterable[str],
    path: str = "<stream>",
    *,
    fast_path: bool = True,
    shard: tuple[int, int] | None = None,
) -> Iterator[SpanRecord]:
    """Spans from OTLP JSON lines, in file order. Blank lines are skipped.

    Lines in the exporter's exact shape take the regex fast path (fastpath.py);
    every other line, and every line the fast path finds invalid, is parsed
    with ``json.loads`` (``fast_path=False`` forces that for all lines).
    ``shard=(k, n)`` yields only the traces worker k of n owns (``shard_of``)."""
    seen_any = False
    owns = None
    if shard is not None:
        k, n = shard

        def owns(trace_id: str) -> bool:
            return shard_of(trace_id, n) == k

    for number, text in enumerate(lines, 1):
        fast = parse_line_fast(text.rstrip("\r\n"), number, owns) if fast_path else None
        if fast is not None:
            seen_any = True
            yield from fast
            continue
        if not text.strip():
            continue
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise TraceFileError(path, number, f"not JSON ({err.msg} at column {err.colno})") from err
        if not isinstance(doc, dict) or "resourceSpans" not in doc:
            found = sorted(doc)[:4] if isinstance(doc, dict) else type(doc).__name__
            hint = ""
            if isinstance(doc, dict) and ("resourceMetrics" in doc or "resourceLogs" in doc):
                hint = " (this is OTLP metrics/logs, not traces)"
            raise TraceFileError(path, number, f"not an OTLP trace line: no 'resourceSpans' key (found {found}){hint}")
        seen_any = True
        try:
            for rs in doc["resourceSpans"]:
                host = _resource_host(rs.get("resource", {}))
                for ss in rs.get("scopeSpans", ()):
                    for span in ss.get("spans", ()):
                        record = span_from_dict(span, host, number)
                        if owns is None or owns(record.trace_id):
                            yield record
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            what = f"missing key {err}" if isinstance(err, KeyError) else str(err)
            raise TraceFileError(path, number, f"malformed span: {what}") from err
    if not seen_any:
        raise TraceFileError(path, 0, "no OTLP trace lines in the file (empty?)")


def _decoded_lines(stream: IO[bytes], path: str) -> Iterator[str]:
    for number, raw in enumerate(stream, 1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise TraceFileError(path, number, f"not UTF-8 text (byte {err.start}): a binary file?") from err


def iter_spans(path: str, *, fast_path: bool = True, shard: tuple[int, int] | None = None) -> Iterator[SpanRecord]:
    """Stream the spans of an OTLP JSON lines file ("-" reads stdin)."""
    if path == "-":
        yield from iter_spans_from_lines(_decoded_lines(sys.stdin.buffer, "<stdin>"), "<stdin>", fast_path=fast_path)
        return
    try:
        stream = open(path, "rb")
    except OSError as err:
        raise TraceFileError(path, 0, f"cannot open: {err.strerror or err}") from err
    with stream:
        yield from iter_spans_from_lines(_decoded_lines(stream, path), path, fast_path=fast_path, shard=shard)
