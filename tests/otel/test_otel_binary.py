"""gRPC tt-ext-bin metadata helpers (spec/tt-ext-v3.md §6)."""

from __future__ import annotations

from typing import Any

import pytest
from _otel_helpers import Pipeline
from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from tempotrace_sdk import semconv as S
from tempotrace_sdk.otel import TempoTraceState, binary_header, extract_binary, inject_binary, remote_hop
from tempotrace_sdk.wire import TTExt


def test_binary_round_trip_is_a_hop(pipe: Pipeline, state: TempoTraceState) -> None:
    with pipe.tracer.start_as_current_span("rpc-client"):
        metadata: list[tuple[str, Any]] = [("authorization", "x"), ("tt-ext-bin", b"stale")]
        inject_binary(metadata, state=state)
    assert [k for k, _ in metadata] == ["authorization", "tt-ext-bin"]
    raw = metadata[1][1]
    assert isinstance(raw, bytes) and len(raw) == 53
    receiver = TempoTraceState(host="server")
    hop = remote_hop(extract_binary(tuple(metadata), state=receiver))
    assert hop is not None and hop.header == TTExt.decode(raw)
    assert hop.recv_lts == hop.header.lts + 1
    assert list(pipe.spans()["rpc-client"].attributes[S.SEND_LTS]) == [hop.header.lts]


@pytest.mark.parametrize(
    ("metadata", "error_class"),
    [
        ([("tt-ext-bin", b"\x03" * 52)], "LENGTH"),
        ([("tt-ext-bin", "text, not bytes")], "BINARY_TYPE"),
        ([("tt-ext-bin", b"a"), ("tt-ext-bin", b"b")], "TEXT_MULTIPLE"),
        ([("tt-ext-bin", bytes([0x04]) + bytes(52))], "VERSION"),
        ([42], "TypeError"),
    ],
    ids=["short", "str", "duplicate", "version", "not-a-pair"],
)
def test_bad_binary_metadata_is_refused_quietly(metadata: list[Any], error_class: str) -> None:
    state = TempoTraceState(host="h")
    ctx = context_api.set_value("k", "v")
    assert extract_binary(metadata, ctx, state=state) is ctx
    assert state.rejections() == {error_class: 1}
    assert state.lamport.value == 0


#: A valid (remote) span context to send from: a header goes out only beside one (issue 14).
_IN_SPAN = trace.set_span_in_context(NonRecordingSpan(SpanContext(0xAB, 0xCD, is_remote=True)))


def test_no_header_without_a_valid_trace_context(state: TempoTraceState) -> None:
    """A tt-ext-bin beside no trace context means nothing to a receiver: none is sent, nothing ticks."""
    metadata: list[tuple[str, Any]] = [("authorization", "x"), ("tt-ext-bin", b"stale")]
    assert inject_binary(metadata, context_api.Context(), state=state) is metadata
    assert metadata == [("authorization", "x")]
    assert binary_header(context_api.Context(), state=state) is None
    assert state.lamport.value == 0 and state.errors() == {}


class _BrokenClock:
    name = "broken"

    def now(self) -> Any:
        raise OSError("PHC vanished")

    def describe(self) -> dict[str, Any]:
        return {}


def test_a_failing_clock_sends_no_binary_header_and_never_raises() -> None:
    # The network path never raises into the program (issue 4): like the text
    # inject, the failure is counted, the stale header removed and none sent.
    state = TempoTraceState(clock=_BrokenClock(), tenant=0, host="h")  # type: ignore[arg-type]
    metadata: list[tuple[str, Any]] = [("authorization", "x"), ("tt-ext-bin", b"stale")]
    assert inject_binary(metadata, _IN_SPAN, state=state) is metadata
    assert metadata == [("authorization", "x")]
    assert binary_header(_IN_SPAN, state=state) is None
    assert state.errors() == {"inject_binary": 1, "binary_header": 1}
    assert state.lamport.value == 0


def test_tuple_metadata_gets_a_new_list_and_is_left_alone(state: TempoTraceState) -> None:
    # The gRPC idiom passes metadata as a tuple of pairs: it cannot be updated in place.
    metadata = (("authorization", "x"), ("tt-ext-bin", b"stale"))
    sent = inject_binary(metadata, _IN_SPAN, state=state)
    assert metadata == (("authorization", "x"), ("tt-ext-bin", b"stale"))
    assert isinstance(sent, list) and [k for k, _ in sent] == ["authorization", "tt-ext-bin"]
    assert TTExt.decode(sent[1][1]).lts == 1
    assert [k for k, _ in inject_binary(None, _IN_SPAN, state=state)] == ["tt-ext-bin"]
    assert [k for k, _ in inject_binary(iter([("a", "1")]), _IN_SPAN, state=state)] == ["a", "tt-ext-bin"]
    assert state.errors() == {}
