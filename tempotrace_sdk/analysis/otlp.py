"""One OTLP JSON trace line -> span records: the typed decoder (spec/analysis.md §5).

The shape is OTLP's ``TracesData`` in the protobuf JSON mapping, as our
exporter (``opentelemetry-exporter-otlp-json-file``) and the OpenTelemetry
Collector's file exporter write it: lowerCamelCase field names, ids as hex
(OTLP/JSON) or base64 (the plain protobuf mapping), 64-bit integers as strings
or numbers, enums as numbers or names. msgspec decodes a line straight into
the Structs below, checking the JSON and the shape; parts the analysis never
reads (scopes, links, attribute kinds other than string / int / array / bool)
are skipped by msgspec without building objects; a span's events are kept
unparsed and read only when its status is ERROR (its exception event). Each span is kept
as ``msgspec.Raw`` (a view of its bytes) by the line's decode and decoded on
its own afterwards: the objects of one span are made, read and freed while
they are in cache, which at 10^6 spans is a fifth faster than decoding the
whole line's spans first. The value rules (values.py) turn each span into a
SpanRecord.

A line that is not such JSON raises ``BadLine`` with the reason; a span that is
malformed or breaks a value rule is reported (``LineResult.bad``) and the rest
of its line is kept.
"""

from __future__ import annotations

import msgspec

from .clockdomain import Domain, domain_of
from .events import SpanRecord
from .values import FIXED64_MAX, RESOURCE, SPAN, AttributeRuleError, build_record, norm_id, span_kind, unix_nanos

__all__ = ["BadLine", "LineResult", "decode_line", "error_text", "not_utf8", "shard_of"]


class AnyValue(msgspec.Struct, frozen=True, gc=False):
    """An attribute value: only the kinds the analysis reads are kept (double, bytes and kvlist values are
    checked as JSON and skipped)."""

    stringValue: str | None = None
    intValue: int | None = None
    arrayValue: ArrayValue | None = None
    boolValue: bool | None = None


class ArrayValue(msgspec.Struct, frozen=True, gc=False):
    values: list[AnyValue] = []


class KeyValue(msgspec.Struct, frozen=True, gc=False):
    key: str
    value: AnyValue = AnyValue()


class Status(msgspec.Struct, frozen=True, gc=False):
    """A span's status: its code as the enum's number or its ``STATUS_CODE_*`` name, and its message."""

    code: int | str = 0
    message: str = ""


class SpanEvent(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    attributes: list[KeyValue] = []


class Span(msgspec.Struct, frozen=True, gc=False):
    traceId: str = ""
    spanId: str = ""
    parentSpanId: str = ""
    name: str = ""
    kind: int | str = 0
    startTimeUnixNano: int = 0
    endTimeUnixNano: int = 0
    attributes: list[KeyValue] = []
    status: Status | None = None
    events: msgspec.Raw = msgspec.Raw()  # read only for a span whose status is ERROR (its exception event)


class ScopeSpans(msgspec.Struct, frozen=True, gc=False):
    spans: list[msgspec.Raw] = []  # each decoded on its own (SPAN_DECODER): its objects freed while hot


class Resource(msgspec.Struct, frozen=True, gc=False):
    attributes: list[KeyValue] = []


class ResourceSpans(msgspec.Struct, frozen=True, gc=False):
    resource: Resource = Resource()
    scopeSpans: list[ScopeSpans] = []


class TracesData(msgspec.Struct, frozen=True, gc=False):
    resourceSpans: list[ResourceSpans]


# strict=False: 64-bit integers as JSON strings or numbers (the protobuf JSON mapping allows both).
_DECODER = msgspec.json.Decoder(TracesData, strict=False)
_KEYS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_SPAN = msgspec.json.Decoder(Span, strict=False)
_EVENTS = msgspec.json.Decoder(list[SpanEvent], strict=False)
#: OTLP StatusCode ERROR, as its number and its name (the protobuf JSON mapping may write either).
STATUS_ERROR = (2, "STATUS_CODE_ERROR")
#: The longest error text kept from a span (the report lists a few; the rest of a traceback is in the trace).
MAX_ERROR = 1024


class BadLine(Exception):
    """A line that is not an OTLP JSON trace line; ``reason`` says why, in words."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class LineResult(msgspec.Struct, gc=False):
    """What one line held: its records (of the owned traces), how many span objects it had, the spans
    refused by a value rule (index in the line, reason), and exporter loss records (writer id, dropped
    so far)."""

    records: list[SpanRecord]
    spans: int = 0
    bad: list[tuple[int, str]] | None = None
    loss: list[tuple[str, int]] | None = None


def shard_of(trace_id: str, shards: int) -> int:
    """Which of ``shards`` partitions owns a trace (lower-case hex trace id)."""
    return int(trace_id[-8:], 16) % shards


def _why_not_traces(data: bytes | memoryview) -> str:
    """The reason a JSON line is not OTLP traces, named as precisely as its keys allow."""
    try:
        keys = sorted(_KEYS.decode(data))
    except (msgspec.DecodeError, RecursionError):
        return "not an OTLP trace line: not a JSON object"
    hint = ""
    if "resourceMetrics" in keys or "resourceLogs" in keys:
        hint = " (this is OTLP metrics/logs, not traces)"
    elif "resource_spans" in keys:
        hint = " (proto field names; OTLP JSON uses lowerCamelCase: resourceSpans)"
    return f"not an OTLP trace line: no 'resourceSpans' key (found {keys[:4]}){hint}"


def not_utf8(data: bytes | memoryview) -> BadLine | None:
    """The BadLine of a line holding bytes that are not UTF-8 (None when it is UTF-8 text): a binary file, or a
    string msgspec's decode of the line passed over (in a span kept as Raw) that a span's decode then refuses;
    either way the line, not one span, is what cannot be read."""
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as bad:
        return BadLine(f"not UTF-8 text (byte {bad.start}): a binary file?")
    return None


def parse(data: bytes | memoryview) -> TracesData:
    """Decode one line (bytes, without its newline) or raise BadLine."""
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError as err:
        text = str(err)
        if "missing required field `resourceSpans`" in text:
            raise BadLine(_why_not_traces(data)) from None
        if text.startswith("Expected `object`") and " - at `" not in text:  # the line itself, not a part
            raise BadLine("not an OTLP trace line: not a JSON object") from None
        raise BadLine(f"malformed OTLP: {text}") from None
    except msgspec.DecodeError as err:
        raise not_utf8(data) or BadLine(f"not JSON ({err})") from None
    except RecursionError:
        raise BadLine("not an OTLP trace line: JSON nested too deep") from None


def decode_line(data: bytes | memoryview, line: int, pos: int, shard: tuple[int, int] | None = None) -> LineResult:
    """The records of one line; ``pos`` is the input position of its first span (each span object takes
    one position, kept or refused); ``shard=(k, n)`` keeps only the traces partition k of n owns (and
    the refusals of those spans; a span without a readable trace id belongs to partition 0)."""
    doc = parse(data)
    out = LineResult([])
    records = out.records
    read, decode_span = SPAN.read_otlp, _SPAN.decode
    # consecutive spans often share a trace: its id is checked once (None: none checked yet, so "" is too)
    last_raw: str | None = None
    trace_id = ""
    n = 0
    for rs in doc.resourceSpans:
        host: str | None = None
        rank: int | None = None
        clock: str | None = None
        job: str | None = None
        restart: int | None = None
        domain: Domain | None = None
        refused: str | None = None
        if rs.resource.attributes:
            try:
                host, rank, clock, job, restart, domain = _resource(rs.resource.attributes, out)
            except AttributeRuleError as err:
                refused = f"resource: {err}"  # every span of this resource is refused with it
        for ss in rs.scopeSpans:
            for raw_span in ss.spans:
                n += 1
                try:
                    span = decode_span(raw_span)
                except msgspec.ValidationError as err:  # the line is JSON (checked whole): one span is bad
                    _refuse(out, n - 1, f"span: malformed OTLP: {err}")
                    continue
                except msgspec.DecodeError:  # bytes not UTF-8 in a string (the line's decode passed over them)
                    raise not_utf8(data) or BadLine("malformed OTLP: a span that is not JSON") from None
                except RecursionError:
                    _refuse(out, n - 1, "span: nested too deep")
                    continue
                # The hot loop: the common cases of values.span_kind / unix_nanos inline, the functions
                # for the rest (names, and the errors); a trace id shared by consecutive spans checked once.
                raw = span.traceId
                if raw != last_raw:
                    try:
                        trace_id = norm_id(raw, 16, "traceId")
                    except AttributeRuleError as err:
                        if shard is None or shard[0] == 0:
                            _refuse(out, n - 1, f"span {span.spanId or '?'}: {err}")
                        continue
                    last_raw = raw
                if shard is not None and int(trace_id[-8:], 16) % shard[1] != shard[0]:  # shard_of, inline
                    continue
                if refused is not None:
                    _refuse(out, n - 1, f"span {span.spanId or '?'}: {refused}")
                    continue
                try:
                    span_id, parent, kind = span.spanId, span.parentSpanId, span.kind
                    start, end = span.startTimeUnixNano, span.endTimeUnixNano
                    span_id = norm_id(span_id, 8, "spanId")
                    if parent:
                        parent = norm_id(parent, 8, "parentSpanId")
                    if kind.__class__ is not int or not 0 <= kind <= 5:
                        kind = span_kind(kind)
                    if not (0 <= start <= FIXED64_MAX and 0 <= end <= FIXED64_MAX):
                        start, end = unix_nanos(start, "startTimeUnixNano"), unix_nanos(end, "endTimeUnixNano")
                    record = build_record(trace_id, span_id, parent, span.name, kind, read(span.attributes),
                                          start, end, host, rank, line, pos + n - 1, clock, job, restart, domain)
                    status = span.status
                    if status is not None and status.code in STATUS_ERROR:
                        record.error = error_text(status.message, span.events)
                    records.append(record)
                except AttributeRuleError as err:
                    _refuse(out, n - 1, f"span {span.spanId or '?'}: {err}")
    out.spans = n
    return out


def _refuse(out: LineResult, index: int, reason: str) -> None:
    if out.bad is None:
        out.bad = []
    out.bad.append((index, reason))


def _resource(attrs: list[KeyValue], out: LineResult) -> tuple[str | None, int | None, str | None, str | None,
                                                                 int | None, Domain | None]:
    """The resource's host, rank, clock, job id, restart and clock domain (fallbacks for its spans); notes an
    exporter loss record."""
    host, host_name, rank, dropped, writer, clock, job, restart, *domain = RESOURCE.read_otlp(attrs)
    if writer is not None and dropped is not None:
        if out.loss is None:
            out.loss = []
        out.loss.append((writer, dropped))
    return host or host_name, rank, clock, job, restart, domain_of(*domain)


def error_text(message: str, events: msgspec.Raw | None = None) -> str:
    """What an ERROR span says went wrong: its status message (the SDK writes "Type: message"), else its
    ``exception`` event's type and message, else that it failed; cut to MAX_ERROR characters."""
    text = message
    if not text and events is not None and len(events):
        try:
            found = _EVENTS.decode(events)
        except (msgspec.DecodeError, RecursionError):  # the line is JSON (checked whole): the shape is wrong
            found = []
        for event in found:
            if event.name == "exception":
                values = {kv.key: kv.value.stringValue for kv in event.attributes}
                kind, said = values.get("exception.type"), values.get("exception.message")
                text = ": ".join(part for part in (kind, said) if part)
                break
    text = text or "status ERROR (no message)"
    return text if len(text) <= MAX_ERROR else text[:MAX_ERROR - 3] + "..."
