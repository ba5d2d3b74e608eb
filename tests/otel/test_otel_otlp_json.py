"""otel/otlp_json.py against OpenTelemetry's own OTLP JSON encoder (spec/reliability.md §4).

The exporter's lines are built by our encoder; the format is upstream's
(``opentelemetry-exporter-otlp-json-common``: ``encode_spans(spans).to_dict()``).
Every test here makes real SDK spans through the public API and compares the
two encoders' JSON, value for value; the fast path is called directly, so a
fallback cannot make a difference pass unseen.
"""

from __future__ import annotations

import enum
import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from tempotrace_sdk.otel import AppendStream
from tempotrace_sdk.otel.file_export import JsonLinesSpanExporter, encode_batch, encode_batch_upstream
from tempotrace_sdk.otel.loss import LossLedger
from tempotrace_sdk.otel.otlp_json import UnsupportedValue, encode_request

SCHEMA = "https://opentelemetry.io/schemas/1.21.0"
#: One value of every kind an attribute can hold, and the edges of each (named for what they show).
VALUES: dict[str, Any] = {
    "str": "all_reduce",
    "str.empty": "",
    "str.unicode": "ünïcødé ✓ 🚀 \u2028 \"quoted\" \\ \n\t\x00",
    "bool.true": True,
    "bool.false": False,
    "int.zero": 0,
    "int.negative": -17,
    "int.max64": 2**63 - 1,
    "int.min64": -(2**63),
    "int.beyond64": 2**64 + 5,
    "int.ns": 1_796_067_801_065_492_495,
    "float": 1.5,
    "float.negzero": -0.0,
    "float.big": 1.5e300,
    "float.tiny": 5e-324,
    "float.integral": 1e16,
    "float.nan": math.nan,
    "float.inf": math.inf,
    "float.neginf": -math.inf,
    "bytes": b"\x00\xff\x10tempo",
    "bytes.empty": b"",
    "list.empty": [],
    "tuple.empty": (),
    "list.str": ["a", "", "ü"],
    "list.int": [1, -2, 2**63 - 1],
    "list.bool": [True, False],
    "list.float": [0.5, math.nan, -math.inf],
    "list.mixed": [1, "a", True, 2.5, None, b"x"],
    "list.none": [None, None],
    "list.nested": [[1, 2], ["a"], []],
    "none": None,
    "dict": {"a": 1, "b": {"c": [1, "x"]}, "d": None, "e": {}},
    "dict.empty": {},
}


def _spans(provider: TracerProvider, memory: InMemorySpanExporter) -> list[ReadableSpan]:
    provider.force_flush()
    return list(memory.get_finished_spans())


def _provider(resource: Resource, limits: SpanLimits | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=resource, span_limits=limits or SpanLimits(), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, memory


def _remote_parent() -> otel_context.Context:
    state = TraceState([("vendor", "v1"), ("tempo", "s4.0-e1")])
    parent = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, True, TraceFlags(1), state)
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


def _rich_batch() -> list[ReadableSpan]:
    """Spans from three providers (two with equal resources), several scopes, interleaved."""
    resource = {"service.name": "trainer", "tempotrace.rank": 3, "host.ids": ("a", "b"), "ok": True}
    first, first_mem = _provider(Resource(resource, SCHEMA))
    twin, twin_mem = _provider(Resource(dict(resource), SCHEMA))  # equal to first's, another object
    limited, limited_mem = _provider(
        Resource({}),
        SpanLimits(max_span_attributes=4, max_events=2, max_links=1, max_event_attributes=1, max_link_attributes=1),
    )
    scoped = first.get_tracer("tempotrace.torch", "2.1", schema_url=SCHEMA, attributes={"scope.k": "v", "n": 2})
    plain = first.get_tracer("plain")
    same_scope = twin.get_tracer("tempotrace.torch", "2.1", schema_url=SCHEMA, attributes={"scope.k": "v", "n": 2})
    variant = first.get_tracer("tempotrace.torch", "2.1", schema_url=SCHEMA, attributes={"other": 1})
    other = limited.get_tracer("limited", "")
    remote = SpanContext(0x5B8EFFF798038103D269B633813FC60C, 0xEEE19B7EC3C1B174, True, TraceFlags(1))
    local = SpanContext(0x5B8EFFF798038103D269B633813FC60C, 0x00000000000000AB, False)

    for i, kind in enumerate(SpanKind):
        tracer = (scoped, plain, same_scope, variant)[i % 4]
        with tracer.start_as_current_span(f"op-{kind.name}", kind=kind, attributes=VALUES) as outer:
            outer.add_event("issued", {"bytes": 16, "peers": [0, 1, 2]}, timestamp=1_796_067_801_000_000_000 + i)
            outer.add_event("bare")
            outer.set_attribute("equal.values", (1, True, 1.0, 0, False)[i])  # equal as dict keys, not as JSON
            with tracer.start_as_current_span("", links=[Link(remote, {"why": "recv", "n": i}), Link(local)]) as inner:
                inner.set_status(Status(StatusCode.ERROR, "collective timed out: rank 2"))
        with scoped.start_as_current_span("served", context=_remote_parent(), kind=SpanKind.SERVER) as served:
            served.set_status(Status(StatusCode.OK))
        with same_scope.start_as_current_span("error-no-description") as bare:
            bare.set_status(StatusCode.ERROR)
    span = other.start_span("dropping", attributes={f"k{n}": n for n in range(9)},
                            links=[Link(remote, {"a": 1, "b": 2}), Link(local), Link(remote)])  # fmt: skip
    for n in range(5):
        span.add_event(f"e{n}", {"x": n, "y": "z"})
    span.end()
    other.start_span("explicit times", start_time=1).end(end_time=2)
    spans = _spans(first, first_mem) + _spans(twin, twin_mem) + _spans(limited, limited_mem)
    return [spans[i] for i in _interleaving(len(spans))]


def _interleaving(n: int) -> Iterator[int]:
    """Every index once, in an order that mixes the providers' spans (groups must keep span order)."""
    return iter(sorted(range(n), key=lambda i: (i * 7) % n))


def _both(spans: list[ReadableSpan]) -> tuple[Any, Any]:
    upstream = encode_batch_upstream(spans)
    assert upstream is not None
    return json.loads(encode_request(spans)), json.loads(upstream)


def test_a_rich_batch_encodes_as_upstream_does() -> None:
    """Every field upstream writes, with the same values, grouped and ordered as upstream groups them."""
    spans = _rich_batch()
    ours, upstream = _both(spans)
    assert ours == upstream
    # The batch is not degenerate: what the comparison covered is in it (bytes and mappings where
    # the SDK keeps them: 1.40 decodes bytes to str and drops a mapping).
    text = json.dumps(upstream)
    kept = {type(v) for span in spans for v in (span.attributes or {}).values()}
    for field in ("stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", '"NaN"', '"-Infinity"',
                  "traceState", "parentSpanId", "droppedAttributesCount", "droppedEventsCount", "droppedLinksCount",
                  "timeUnixNano", "message", '"code": 2', '"flags": 768', "schemaUrl", '"version": "2.1"', "scope.k",
                  *(["bytesValue"] if bytes in kept else []), *(["kvlistValue"] if dict in kept else [])):  # fmt: skip
        assert field in text, field
    # Equal resources and equal scopes (other objects) are one group each; a scope's attributes count.
    assert [len(r["scopeSpans"]) for r in upstream["resourceSpans"]] == [3, 1]
    assert sum(len(s["spans"]) for r in ours["resourceSpans"] for s in r["scopeSpans"]) == len(spans)


def test_the_line_is_compact_json_with_one_newline() -> None:
    spans = _rich_batch()
    line = encode_batch(spans)
    assert line is not None and line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == json.loads(encode_batch_upstream(spans) or b"")
    assert encode_batch([]) is None


@pytest.mark.parametrize("name", list(VALUES))
def test_each_attribute_value_is_upstream_s_any_value(name: str) -> None:
    """One attribute per span, so a difference names its value; as resource and scope attribute too."""
    provider, memory = _provider(Resource({"r": VALUES[name]}))
    tracer = provider.get_tracer("t", "1", attributes={"s": VALUES[name]})
    with tracer.start_as_current_span("x", attributes={"a": VALUES[name]}) as span:
        span.add_event("e", {"a": VALUES[name]})
    ours, upstream = _both(_spans(provider, memory))
    assert ours == upstream


# Attribute values as an application may pass them (the SDK cleans them first, as in a real export).
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.binary(max_size=8)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(min_size=1, max_size=6), _values, max_size=5))
def test_any_attribute_set_encodes_as_upstream_does(attributes: dict[str, Any]) -> None:
    provider, memory = _provider(Resource({}))
    provider.get_tracer("h").start_span("h", attributes=attributes).end()
    ours, upstream = _both(_spans(provider, memory))
    assert ours == upstream


class Rank(enum.IntEnum):
    ZERO = 0
    ONE = 1


FALLBACKS = {
    # A value the fast path does not write itself (an int subclass: the SDK keeps it as it is).
    "int subclass": {"rank": Rank.ONE},
    # A value msgspec refuses (a lone surrogate: not UTF-8); upstream's json.dumps escapes it.
    "lone surrogate": {"name": "bad \ud800 text"},
}


@pytest.mark.parametrize("name", list(FALLBACKS))
def test_a_batch_the_fast_path_refuses_is_written_by_upstream_s_encoder(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Such a batch is not lost: the exporter writes upstream's line for it, and says so at debug."""
    provider, memory = _provider(Resource({"service.name": "x"}))
    with provider.get_tracer("t").start_as_current_span("odd", attributes=FALLBACKS[name]):
        pass
    spans = _spans(provider, memory)
    with pytest.raises((UnsupportedValue, UnicodeEncodeError)):
        encode_request(spans)
    ledger = LossLedger(lambda *_: None)
    exporter = JsonLinesSpanExporter(AppendStream(lambda _pid: str(tmp_path / "t.jsonl")), ledger=ledger)
    with caplog.at_level(logging.DEBUG, logger="tempotrace_sdk.otel.file_export"):
        exporter.export(spans)
    exporter.shutdown()
    assert (tmp_path / "t.jsonl").read_bytes() == encode_batch_upstream(spans)
    assert ledger.dropped == 0
    assert "encoded by upstream's encoder" in caplog.text
