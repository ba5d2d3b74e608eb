"""SDK spans as one OTLP JSON ExportTraceServiceRequest, built as msgspec Structs and dicts, encoded by msgspec.

What ``opentelemetry-exporter-otlp-json-common``'s ``encode_spans(spans).to_dict()``
gives, field for field (tests/otel/test_otel_otlp_json.py compares the two on
real SDK spans), at a fraction of its cost: the upstream encoder builds a
dataclass per value, then a dict per dataclass, then ``json.dumps`` walks
them; here each span becomes its Structs once (a batch's repeated str and
int attributes share theirs) and one ``msgspec.json.encode`` writes the
batch. The representation is upstream's (Proto3 JSON):

- trace and span ids as lowercase hex; 64-bit integers (timestamps,
  ``intValue``) as decimal strings; uint32 counts and flags as numbers;
- ``kind`` and ``status.code`` as the enum's number (``SPAN_KIND_INTERNAL``
  = 1; status UNSET = 0 is left out);
- ``doubleValue`` NaN / ±inf as the strings ``NaN`` / ``Infinity`` /
  ``-Infinity``; bytes as base64; None as an empty AnyValue ``{}``;
- a field whose value is the proto default (empty string, 0, empty list) is
  left out, except the messages upstream always writes: ``resource``,
  ``scope``, ``value`` and ``status`` (possibly ``{}``);
- spans grouped by Resource, then by InstrumentationScope (and its schema
  URL), with the SDK's equality for both (another object with equal content
  is the same group), groups and spans in order of first appearance.

Values of any other type (a str or int subclass, a set, an object) raise
``UnsupportedValue``: the caller encodes that batch with upstream's encoder.
"""

from __future__ import annotations

import math
from base64 import b64encode
from collections.abc import Sequence
from typing import Any

import msgspec
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanKind

from .sdk_internals import attributes_for_reading

__all__ = ["UnsupportedValue", "encode_request"]

#: opentelemetry.proto.trace.v1.Span.SpanKind, as upstream maps the SDK's kinds.
_SPAN_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
#: SpanFlags: SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK, and with CONTEXT_IS_REMOTE_MASK (upstream
#: writes no trace flags in this field).
_FLAGS_LOCAL = 0x100
_FLAGS_REMOTE = 0x100 | 0x200

_encode_json = msgspec.json.Encoder().encode


class UnsupportedValue(TypeError):
    """A value this encoder does not write exactly as upstream does; encode the batch upstream's way."""


# The messages of every span as msgspec Structs: half the cost of dicts to build, and their keys are
# encoded once. Field order is upstream's; a field left at its default is left out, as upstream
# leaves out a proto default (the callers pass "" / 0 / [] / None for it, never another falsy value).
class _Span(msgspec.Struct, frozen=True, gc=False, omit_defaults=True, rename="camel"):
    trace_id: str
    span_id: str
    trace_state: str = ""
    parent_span_id: str = ""
    flags: int = 0
    name: str = ""
    kind: int = 0
    start_time_unix_nano: str = ""
    end_time_unix_nano: str = ""
    attributes: list[Any] = []
    dropped_attributes_count: int = 0
    events: list[Any] = []
    dropped_events_count: int = 0
    links: list[Any] = []
    dropped_links_count: int = 0
    status: Any = None


class _KeyValue(msgspec.Struct, frozen=True, gc=False):
    key: str
    value: Any


class _StringValue(msgspec.Struct, frozen=True, gc=False, rename={"value": "stringValue"}):
    value: str


class _IntValue(msgspec.Struct, frozen=True, gc=False, rename={"value": "intValue"}):
    value: str


def _any_value(value: Any) -> dict[str, Any]:
    """An AnyValue, as upstream's ``_encode_value`` and ``AnyValue.to_dict`` write it (bool before int)."""
    kind = type(value)
    if kind is str:
        return {"stringValue": value}
    if kind is int:
        return {"intValue": str(value)}
    if kind is bool:
        return {"boolValue": value}
    if kind is float:
        if math.isfinite(value):
            return {"doubleValue": value}
        if value != value:
            return {"doubleValue": "NaN"}
        return {"doubleValue": "Infinity" if value > 0 else "-Infinity"}
    if value is None:
        return {}
    if kind is bytes:
        return {"bytesValue": b64encode(value).decode("ascii")}
    if kind is tuple or kind is list:
        return {"arrayValue": {"values": [_any_value(v) for v in value]} if value else {}}
    if kind is dict:
        pairs = [_key_value(str(k), v) for k, v in value.items()]
        return {"kvlistValue": {"values": pairs} if pairs else {}}
    raise UnsupportedValue(f"an attribute value of type {kind.__name__}")


def _key_value(key: str, value: Any) -> _KeyValue | dict[str, Any]:
    return _KeyValue(key, _any_value(value)) if key else {"value": _any_value(value)}


#: A batch's KeyValues by (key, value), for values of type str and int only: op spans repeat most
#: of theirs (group, backend, op, rank...), and a hit costs half a new pair. Only these two types
#: are looked up, so no other value equal to one of them (True == 1 == 1.0) meets its entry.
_Seen = dict[tuple[str, Any], _KeyValue | dict[str, Any]]


def _attributes(owner: object, seen: _Seen) -> list[Any]:
    """The KeyValues of a span's, event's, link's, resource's or scope's attributes (upstream's order)."""
    attributes = attributes_for_reading(owner)
    if not attributes:
        return []
    out = []
    get = seen.get
    for item in attributes.items():
        key, value = item
        kind = type(value)
        if kind is str or kind is int:
            pair = get(item)
            if pair is None:
                encoded = _StringValue(value) if kind is str else _IntValue(str(value))
                pair = seen[item] = _KeyValue(key, encoded) if key else {"value": encoded}
        else:
            pair = _key_value(key, value)
        out.append(pair)
    return out


def _hex(value: int, length: int) -> str:
    """An id as upstream writes it: its ``length`` big-endian bytes in hex (OverflowError outside them)."""
    return value.to_bytes(length, "big").hex()


def _span(span: ReadableSpan, seen: _Seen) -> _Span:
    context = span.context
    if context is None:
        raise UnsupportedValue("a span without a context")
    trace_state = context.trace_state
    parent = span.parent
    events = span.events
    links = span.links
    status = span.status
    start, end = span.start_time, span.end_time
    return _Span(
        _hex(context.trace_id, 16),
        _hex(context.span_id, 8),
        ",".join([f"{k}={v}" for k, v in trace_state.items()]) if trace_state else "",
        _hex(parent.span_id, 8) if parent is not None else "",
        _FLAGS_REMOTE if parent is not None and parent.is_remote else _FLAGS_LOCAL,
        span.name or "",
        _SPAN_KIND[span.kind],
        str(start) if start else "",
        str(end) if end else "",
        _attributes(span, seen),
        span.dropped_attributes or 0,
        [_event(e, seen) for e in events] if events else [],
        span.dropped_events or 0,
        [_link(link, seen) for link in links] if links else [],
        span.dropped_links or 0,
        _status(status.description, status.status_code.value) if status is not None else None,
    )


def _status(message: str | None, code: int) -> dict[str, Any]:
    if not message:
        return _STATUS_BY_CODE[code] if code in _STATUS_BY_CODE else {"code": code}
    return {"message": message, "code": code} if code else {"message": message}


#: A Status without a message, by code (shared: read only).
_STATUS_BY_CODE: dict[int, dict[str, Any]] = {0: {}, 1: {"code": 1}, 2: {"code": 2}}


def _event(event: Event, seen: _Seen) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if event.timestamp:
        out["timeUnixNano"] = str(event.timestamp)
    if event.name:
        out["name"] = event.name
    attributes = _attributes(event, seen)
    if attributes:
        out["attributes"] = attributes
    if event.dropped_attributes:
        out["droppedAttributesCount"] = event.dropped_attributes
    return out


def _link(link: Link, seen: _Seen) -> dict[str, Any]:
    context = link.context
    out: dict[str, Any] = {"traceId": _hex(context.trace_id, 16), "spanId": _hex(context.span_id, 8)}
    attributes = _attributes(link, seen)
    if attributes:
        out["attributes"] = attributes
    if link.dropped_attributes:
        out["droppedAttributesCount"] = link.dropped_attributes
    out["flags"] = _FLAGS_REMOTE if context.is_remote else _FLAGS_LOCAL
    return out


def _resource(resource: Resource, seen: _Seen) -> dict[str, Any]:
    attributes = _attributes(resource, seen)
    return {"attributes": attributes} if attributes else {}


def _scope_spans(scope: InstrumentationScope | None, spans: list[Any], seen: _Seen) -> dict[str, Any]:
    if scope is None:
        return {"scope": {}, "spans": spans}
    encoded: dict[str, Any] = {}
    if scope.name:
        encoded["name"] = scope.name
    if scope.version:
        encoded["version"] = scope.version
    attributes = _attributes(scope, seen)
    if attributes:
        encoded["attributes"] = attributes
    out = {"scope": encoded, "spans": spans}
    if scope.schema_url:
        out["schemaUrl"] = scope.schema_url
    return out


#: Encoded spans by resource, then by scope.
_Groups = dict[Resource, dict[InstrumentationScope | None, list[Any]]]


def _grouped(spans: Sequence[Any], seen: _Seen) -> _Groups:
    """Encoded spans by resource and scope, as upstream groups them (dicts keyed by the SDK objects).

    A Resource's hash serialises its attributes, so the lookup is made once per
    distinct object, not per span; spans from one tracer usually come in runs.
    """
    groups: _Groups = {}
    by_identity: dict[tuple[int, int], list[Any]] = {}
    last: tuple[object, object] | None = None
    current: list[Any] = []
    for span in spans:
        if type(span) is tuple:  # a span torch/opspans.py had written: (its group, its JSON)
            group, encoded = span
            resource, scope = group.resource, group.scope
        else:
            resource, scope = span.resource, span.instrumentation_scope
            encoded = None
        if last is None or last[0] is not resource or last[1] is not scope:
            identity = (id(resource), id(scope))  # both live as long as the batch: the ids are theirs
            found = by_identity.get(identity)
            if found is None:
                found = groups.setdefault(resource, {}).setdefault(scope, [])
                by_identity[identity] = found
            current, last = found, (resource, scope)
        current.append(_span(span, seen) if encoded is None else msgspec.Raw(encoded))
    return groups


def key_values_json(attributes: dict[str, Any]) -> bytes:
    """The KeyValues of ``attributes`` as a span's are written here, comma-separated, without brackets: what
    torch/opspans.py puts into the op spans it writes itself."""
    return _encode_json([_key_value(k, v) for k, v in attributes.items()])[1:-1]


def encodes_group(resource: Resource, scope: InstrumentationScope | None) -> bool:
    """Whether this encoder writes ``resource`` and ``scope`` itself (no UnsupportedValue among their values)."""
    try:
        _resource(resource, {})
        _scope_spans(scope, [], {})
    except Exception:
        return False
    return True


def encode_request(spans: Sequence[Any]) -> bytes:
    """The ExportTraceServiceRequest for ``spans`` (ReadableSpans, and (group, JSON) pairs from
    ``TempoTraceBatchProcessor.on_end_encoded``) as compact JSON (no newline).

    Raises UnsupportedValue (or whatever a value's own methods raise) where
    upstream's encoder must be used instead.
    """
    seen: _Seen = {}
    resource_spans = []
    for resource, scopes in _grouped(spans, seen).items():
        entry: dict[str, Any] = {
            "resource": _resource(resource, seen),
            "scopeSpans": [_scope_spans(scope, encoded, seen) for scope, encoded in scopes.items()],
        }
        if resource.schema_url:
            entry["schemaUrl"] = resource.schema_url
        resource_spans.append(entry)
    return _encode_json({"resourceSpans": resource_spans} if resource_spans else {})
