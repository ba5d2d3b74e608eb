"""Lamport poisoning contained on the OpenTelemetry side (issue 13 item 5, tt-ext v3 §10.1).

A received header whose lts is more than LAMPORT_MAX_AHEAD (2^44) ahead of
this process's counter is not merged: the receive is a plain local tick,
counted as LAMPORT_AHEAD in ``rejections()``, logged at debug, never raised;
the span it parents is still parented and keeps the sender's sketch, and
writes no ``tempotrace.recv.lts`` (spec/semantic-conventions.md §4). Every
test runs on the native and the pure-Python stamp (conftest's ``stamp_kind``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from _otel_helpers import Pipeline, StepClock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import context as context_api
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tempotrace_sdk import semconv as S
from tempotrace_sdk.otel import TempoTracePropagator, TempoTraceState, extract_binary, remote_hop
from tempotrace_sdk.otel.stamp import NativeLamport
from tempotrace_sdk.wire import LamportClock, Sketch, TsSource, TTExt
from tempotrace_sdk.wire.lamport import LAMPORT_MAX_AHEAD
from tempotrace_sdk.wire.layout import LTS_MAX

M = LAMPORT_MAX_AHEAD
#: The local counter before the receive in these tests.
L = 1_000
PARENT_SPAN = 0xB7AD6B7169203331
TRACEPARENT = f"00-0af7651916cd43dd8448eb211c80319c-{PARENT_SPAN:016x}-01"
SENDER_SKETCH = Sketch.of(0x1111, 0x2222, PARENT_SPAN)


def _state(stamp_kind: str, clock: StepClock, start: int = L) -> TempoTraceState:
    lamport = NativeLamport(start) if stamp_kind == "native" else LamportClock(start)
    return TempoTraceState(clock=clock, tenant=5, host="node-b", lamport=lamport)


def _header(lts: int) -> TTExt:
    return TTExt(1_800_000_000_000_000_000, TsSource.GTE, 0, 40, lts, SENDER_SKETCH, 3)


def _receive_in_a_span(state: TempoTraceState, carrier: dict[str, Any], *, binary: bool = False) -> dict[str, Any]:
    """Extract as a server does, start the server span in that context; its attributes."""
    pipe = Pipeline(state)
    try:
        ctx = TraceContextTextMapPropagator().extract({"traceparent": TRACEPARENT})
        if binary:
            ctx = extract_binary(list(carrier.items()), ctx, state=state)
        else:
            ctx = pipe.propagator.extract(carrier, ctx)
        with pipe.tracer.start_as_current_span("server", context=ctx) as server:
            assert server.parent is not None and server.parent.span_id == PARENT_SPAN  # still parented
        return dict(pipe.spans()["server"].attributes)
    finally:
        pipe.provider.shutdown()


CASES = [
    pytest.param(L + M, True, id="at-the-bound"),
    pytest.param(L + M + 1, False, id="just-over"),
    pytest.param(L + 2 * M, False, id="twice-the-bound"),
    pytest.param(LTS_MAX, False, id="far-over-2^63-1"),
]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize(("remote", "merged"), CASES)
def test_a_header_too_far_ahead_is_kept_but_not_merged(
    stamp_kind: str, clock: StepClock, remote: int, merged: bool, binary: bool
) -> None:
    """§10.1: R = L + 2^44 merges; anything further is a plain tick, counted, the hop kept."""
    state = _state(stamp_kind, clock)
    header = _header(remote)
    carrier: dict[str, Any] = {"tt-ext-bin": header.encode()} if binary else {"tt-ext": header.to_header()}
    attrs = _receive_in_a_span(state, carrier, binary=binary)

    recv_lts = remote + 1 if merged else L + 1
    assert state.lamport.value == recv_lts + 2  # the receive, then the span's start and end
    assert not state.lamport.saturated
    assert state.rejections() == ({} if merged else {"LAMPORT_AHEAD": 1})
    assert state.errors() == {}
    # The hop is recorded either way: the sender's fields, and its sketch within the span's own.
    assert attrs[S.REMOTE_LTS] == remote
    own = Sketch.from_bytes(bytes.fromhex(attrs[S.SVC_SKETCH]))
    assert SENDER_SKETCH.issubset(own) and own.contains(PARENT_SPAN)
    assert attrs[S.LTS] == recv_lts + 1
    if merged:
        assert attrs[S.RECV_LTS] == recv_lts and attrs[S.REMOTE_LTS] < attrs[S.RECV_LTS] < attrs[S.LTS]
    else:  # no Lamport evidence for this hop: recv.lts is absent, and remote.lts > lts shows why
        assert S.RECV_LTS not in attrs
        assert attrs[S.LTS] < attrs[S.REMOTE_LTS]


def test_the_refusal_is_logged_at_debug_and_the_hop_says_so(
    stamp_kind: str, clock: StepClock, caplog: pytest.LogCaptureFixture
) -> None:
    state = _state(stamp_kind, clock)
    with caplog.at_level(logging.DEBUG, logger="tempotrace_sdk.otel.hop"):
        ctx = TempoTracePropagator(state=state).extract({"tt-ext": _header(LTS_MAX).to_header()})
    hop = remote_hop(ctx)
    assert hop is not None and not hop.merged and hop.recv_lts == L + 1 and hop.header.lts == LTS_MAX
    (record,) = [r for r in caplog.records if "not merged" in r.getMessage()]
    assert record.levelno == logging.DEBUG and str(LTS_MAX) in record.getMessage()


def test_a_repeated_hostile_header_is_one_refusal(stamp_kind: str, clock: StepClock) -> None:
    """A second extract of the same header (issue 14) is not a second receive, so not a second refusal."""
    state = _state(stamp_kind, clock)
    prop = TempoTracePropagator(state=state)
    carrier = {"tt-ext": _header(LTS_MAX).to_header()}
    first, again = remote_hop(prop.extract(carrier)), remote_hop(prop.extract(carrier))
    assert first is not None and again is not None
    assert again.repeat and not again.merged and again.recv_lts == first.recv_lts
    assert state.rejections() == {"LAMPORT_AHEAD": 1} and state.lamport.value == L + 1


def test_what_the_receiver_sends_on_is_not_poisoned(stamp_kind: str, clock: StepClock) -> None:
    """The receiver's own next header carries its own small counter, not 2^63-1 (the downstream half)."""
    state = _state(stamp_kind, clock)
    pipe = Pipeline(state)
    ctx = pipe.propagator.extract({"tt-ext": _header(LTS_MAX).to_header()})
    with pipe.tracer.start_as_current_span("server", context=ctx):
        out: dict[str, str] = {}
        pipe.propagator.inject(out)
    pipe.provider.shutdown()
    assert TTExt.from_header(out["tt-ext"]).lts == L + 3  # receive, span start, send
    assert state.rejections() == {"LAMPORT_AHEAD": 1}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(local=st.integers(0, LTS_MAX - 1), remote=st.integers(0, LTS_MAX))
def test_extract_never_raises_and_counts_exactly_the_refusals(stamp_kind: str, local: int, remote: int) -> None:
    state = _state(stamp_kind, StepClock(), start=local)
    ctx = TempoTracePropagator(state=state).extract({"tt-ext": _header(remote).to_header()}, context_api.Context())
    hop = remote_hop(ctx)
    ahead = remote - local > M
    assert hop is not None and hop.merged is not ahead
    assert state.rejections() == ({"LAMPORT_AHEAD": 1} if ahead else {})
    assert state.lamport.value == min((local if ahead else max(local, remote)) + 1, LTS_MAX)
