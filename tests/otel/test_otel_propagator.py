"""The ``tempotrace`` propagator: inject is a send event, extract a strict receive (spec §5, §6)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from _otel_helpers import Pipeline, StepClock, subprocess_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tempotrace_sdk.otel import TempoTracePropagator, TempoTraceState, remote_hop
from tempotrace_sdk.wire import Sketch, TsSource, TTExt, encode_text

TC = TraceContextTextMapPropagator()
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _valid_header(**over: Any) -> TTExt:
    fields: dict[str, Any] = dict(
        ptp_ns=1_700_000_000_000_000_000,
        ts_source=TsSource.GTE,
        clk_quality=0,
        uncertainty_ns=80,
        lts=41,
        svc_sketch=Sketch.of(7),
        tenant_id=2,
    )
    fields.update(over)
    return TTExt(**fields)


def test_inject_writes_a_send_event_of_the_current_span(pipe: Pipeline, clock: StepClock) -> None:
    """inject: Lamport tick, fresh reading, current span's sketch, local tenant; recorded as tempotrace.send.*."""
    with pipe.tracer.start_as_current_span("parent") as parent:
        with pipe.tracer.start_as_current_span("client") as client:
            lts_before = pipe.state.lamport.value
            reading = len(clock.readings)
            carrier: dict[str, str] = {}
            pipe.propagator.inject(carrier)
    assert set(carrier) == {"tt-ext"}
    assert len(carrier["tt-ext"]) == 71
    header = TTExt.from_header(carrier["tt-ext"])
    assert header.lts == lts_before + 1
    assert header.ptp_ns == clock.readings[reading].ptp_ns  # a fresh reading, taken by inject
    assert header.tenant_id == 5
    assert header.svc_sketch.contains(client.get_span_context().span_id)
    assert header.svc_sketch.contains(parent.get_span_context().span_id)
    attrs = pipe.spans()["client"].attributes
    assert list(attrs["tempotrace.send.lts"]) == [header.lts]
    assert list(attrs["tempotrace.send.ptp_ns"]) == [header.ptp_ns]
    assert list(attrs["tempotrace.send.uncertainty_ns"]) == [header.uncertainty_ns]


def test_every_inject_is_its_own_send(pipe: Pipeline) -> None:
    with pipe.tracer.start_as_current_span("client"):
        headers = []
        for _ in range(3):
            carrier: dict[str, str] = {}
            pipe.propagator.inject(carrier)
            headers.append(TTExt.from_header(carrier["tt-ext"]))
    sends = list(pipe.spans()["client"].attributes["tempotrace.send.lts"])
    assert sends == [h.lts for h in headers]
    assert sends == sorted(set(sends))


def test_inject_without_a_valid_trace_context_sends_nothing(state: TempoTraceState) -> None:
    """A tt-ext beside no traceparent means nothing to a receiver (issue 14: under
    opentelemetry-instrument without the tracecontext propagator it went out alone):
    no header, no send event, no tick."""
    prop = TempoTracePropagator(state=state)
    carrier: dict[str, str] = {}
    prop.inject(carrier, context=context_api.Context())
    invalid = trace.set_span_in_context(trace.INVALID_SPAN)
    prop.inject(carrier, context=invalid)
    assert carrier == {} and state.lamport.value == 0 and state.errors() == {}
    remote = trace.set_span_in_context(trace.NonRecordingSpan(trace.SpanContext(7, 9, is_remote=True)))
    prop.inject(carrier, context=remote)  # a proxy forwarding a remote span sends, with that span's id
    assert TTExt.from_header(carrier["tt-ext"]).lts == 1
    assert TTExt.from_header(carrier["tt-ext"]).svc_sketch == Sketch.of(9)


def test_extract_merges_lamport_and_stores_the_hop(state: TempoTraceState) -> None:
    prop = TempoTracePropagator(state=state)
    header = _valid_header(lts=1000)
    ctx = prop.extract({"tt-ext": header.to_header()})
    hop = remote_hop(ctx)
    assert hop is not None
    assert hop.header == header
    assert hop.recv_lts == 1001 == state.lamport.value


def test_extract_after_tracecontext_remembers_the_remote_parent(state: TempoTraceState) -> None:
    carrier = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tt-ext": _valid_header().to_header(),
    }
    ctx = TempoTracePropagator(state=state).extract(carrier, TC.extract(carrier))
    hop = remote_hop(ctx)
    assert hop is not None and hop.parent_span_id == 0xB7AD6B7169203331
    assert trace.get_current_span(ctx).get_span_context().span_id == 0xB7AD6B7169203331


GOOD = _valid_header().to_header()
BAD_CARRIERS = [
    ("duplicate values", ["tt-ext"], [GOOD, GOOD], "TEXT_MULTIPLE"),
    ("comma-joined", ["tt-ext"], [GOOD + "," + GOOD], "TEXT_MULTIPLE"),
    ("oversized", ["tt-ext"], ["A" * 10_000], "TEXT_LENGTH"),
    ("one char short", ["tt-ext"], [GOOD[:-1]], "TEXT_LENGTH"),
    ("padding", ["tt-ext"], [GOOD + "="], "TEXT_PADDING"),
    ("non-canonical last char", ["tt-ext"], [GOOD[:-1] + "B"], "TEXT_NON_CANONICAL"),
    ("not base64url", ["tt-ext"], [GOOD[:-2] + "+A"], "TEXT_ALPHABET"),
    ("bytes value", ["tt-ext"], [GOOD.encode()], "TEXT_TYPE"),
    ("version 2", ["tt-ext"], [encode_text(bytes([0x22]) + _valid_header().encode()[1:])], "VERSION"),
]


@pytest.mark.parametrize(("why", "keys", "values", "error_class"), BAD_CARRIERS, ids=[c[0] for c in BAD_CARRIERS])
def test_extract_refuses_bad_input_and_leaves_context_alone(
    state: TempoTraceState, why: str, keys: list[str], values: list[Any], error_class: str
) -> None:
    """Spec §7: refuse, count by errorClass, never raise, never store, keep the Lamport counter."""

    class ListGetter(Getter[dict[str, list[Any]]]):
        def get(self, carrier: dict[str, list[Any]], key: str) -> list[str] | None:
            return carrier.get(key)

        def keys(self, carrier: dict[str, list[Any]]) -> list[str]:
            return list(carrier)

    prop = TempoTracePropagator(state=state)
    ctx = context_api.set_value("user-key", "kept")
    out = prop.extract({keys[0]: values}, ctx, getter=ListGetter())
    assert out is ctx
    assert remote_hop(out) is None
    assert state.lamport.value == 0
    assert state.rejections() == {error_class: 1}


def test_extract_refuses_a_poisoned_lamport_value(state: TempoTraceState) -> None:
    raw = bytearray(_valid_header().encode())
    raw[13:21] = (2**63).to_bytes(8, "big")
    ctx = context_api.Context()
    assert TempoTracePropagator(state=state).extract({"tt-ext": encode_text(bytes(raw))}, ctx) is ctx
    assert state.lamport.value == 0
    assert state.rejections() == {"LTS_RANGE": 1}


def test_absent_header_is_not_a_rejection(state: TempoTraceState) -> None:
    ctx = context_api.Context()
    assert TempoTracePropagator(state=state).extract({"other": "x"}, ctx) is ctx
    assert state.rejections() == {}


def test_a_getter_that_raises_is_contained(state: TempoTraceState) -> None:
    class Broken(Getter[Any]):
        def get(self, carrier: Any, key: str) -> list[str] | None:
            raise RuntimeError("boom")

        def keys(self, carrier: Any) -> list[str]:
            return []

    ctx = context_api.Context()
    assert TempoTracePropagator(state=state).extract({}, ctx, getter=Broken()) is ctx
    assert state.rejections() == {"RuntimeError": 1}


hostile_values = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=80),
    st.integers(),
    st.none(),
    st.lists(st.one_of(st.text(max_size=80), st.binary(max_size=60), st.integers()), max_size=4),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_ \t,=", min_size=60, max_size=80),
    st.text(alphabet="AQgw048_-z \t,=", min_size=0, max_size=90).map(lambda t: "a=b,tt=" + t),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=hostile_values,
    tracestate=hostile_values,
    fallback=st.booleans(),
)
def test_hostile_carriers_never_raise_and_never_change_the_context(value: Any, tracestate: Any, fallback: bool) -> None:
    state = TempoTraceState(clock=StepClock(), tenant=0, host="h")
    prop = TempoTracePropagator(state=state, tracestate_fallback=fallback)
    # A valid remote parent, so the tracestate path is taken too.
    ctx = context_api.set_value("user-key", "kept", TC.extract({"traceparent": TRACEPARENT}))
    carrier = {"tt-ext": value, "tracestate": tracestate}
    out = prop.extract(carrier, ctx)
    if remote_hop(out) is None:
        assert out is ctx
        assert state.lamport.value == 0
    else:  # hypothesis built a valid header (tt-ext or a tt= member): then it must really be one
        assert remote_hop(out).header.to_header() in str(carrier)  # type: ignore[union-attr]


def test_tracestate_fallback_merges_and_is_read_back(state: TempoTraceState, pipe: Pipeline) -> None:
    prop = TempoTracePropagator(state=pipe.state, tracestate_fallback=True)
    assert prop.fields == {"tt-ext", "tracestate"}
    upstream = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=abc,tt=old",
    }
    ctx = TC.extract(upstream)
    with pipe.tracer.start_as_current_span("client", context=ctx):
        carrier: dict[str, str] = {}
        TC.inject(carrier)
        prop.inject(carrier)
    members = dict(m.split("=", 1) for m in carrier["tracestate"].split(","))
    assert members["vendor"] == "abc"  # merged, never overwritten
    assert members["tt"] == carrier["tt-ext"]  # ours replaced, moved to the front
    assert carrier["tracestate"].startswith("tt=")
    # A receiver whose proxy stripped tt-ext still gets the header from tracestate.
    del carrier["tt-ext"]
    receiver = TempoTraceState(clock=StepClock(), tenant=0, host="b")
    reader = TempoTracePropagator(state=receiver, tracestate_fallback=True)
    hop = remote_hop(reader.extract(carrier, TC.extract(carrier)))
    assert hop is not None and hop.header.to_header() == members["tt"]
    # Without a valid traceparent the tracestate means nothing (W3C) and is not read.
    del carrier["traceparent"]
    assert remote_hop(reader.extract(carrier)) is None
    assert receiver.rejections() == {}


def test_several_tt_members_are_refused(state: TempoTraceState) -> None:
    carrier = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": f"tt={GOOD},a=b,tt={GOOD}",
    }
    ctx = TC.extract(carrier)
    assert TempoTracePropagator(state=state, tracestate_fallback=True).extract(carrier, ctx) is ctx
    assert state.rejections() == {"TEXT_MULTIPLE": 1}


def test_tracestate_limits_keep_our_member(pipe: Pipeline) -> None:
    """Spec §6: at most 32 members and 512 characters; long foreign members go first, ours stays."""
    from opentelemetry.trace.span import TraceState

    from tempotrace_sdk.otel.propagator import _merged_tracestate

    many = TraceState([(f"v{i}", "x") for i in range(32)])
    merged = _merged_tracestate(many, GOOD).split(",")
    assert len(merged) == 32 and merged[0] == f"tt={GOOD}" and merged[1] == "v0=x"
    big = TraceState([("small", "1"), ("big", "y" * 200), ("mid", "z" * 120), ("mid2", "w" * 120)])
    header = _merged_tracestate(big, GOOD)
    assert len(header) <= 512
    assert header.split(",")[0] == f"tt={GOOD}"
    assert "big=" not in header and "small=1" in header


def test_separate_header_wins_over_tracestate(state: TempoTraceState) -> None:
    a, b = _valid_header(lts=1), _valid_header(lts=2)
    carrier = {"tt-ext": a.to_header(), "tracestate": f"tt={b.to_header()}"}
    hop = remote_hop(TempoTracePropagator(state=state, tracestate_fallback=True).extract(carrier))
    assert hop is not None and hop.header == a


def test_fields_without_fallback() -> None:
    assert TempoTracePropagator(tracestate_fallback=False).fields == {"tt-ext"}


def test_entry_point_loads_in_a_fresh_process() -> None:
    """OTEL_PROPAGATORS=tracecontext,baggage,tempotrace builds a composite holding our class."""
    code = (
        "from opentelemetry.propagate import get_global_textmap as g\n"
        "from tempotrace_sdk.otel import TempoTracePropagator as T\n"
        "p = g()\n"
        "assert any(isinstance(x, T) for x in p._propagators), p._propagators\n"
        "print(sorted(p.fields))\n"
    )
    env = subprocess_env(OTEL_PROPAGATORS="tracecontext,baggage,tempotrace")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "tt-ext" in out.stdout and "traceparent" in out.stdout


def test_unsampled_spans_keep_causality(state: TempoTraceState) -> None:
    """tt-ext §10: the counter advances and the sketch names the span even when nothing is recorded."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from tempotrace_sdk.otel import TempoTraceSpanProcessor

    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    with provider.get_tracer("t").start_as_current_span("dropped") as dropped:
        carrier: dict[str, str] = {}
        TempoTracePropagator(state=state).inject(carrier)
    header = TTExt.from_header(carrier["tt-ext"])
    assert header.lts == 1
    assert header.svc_sketch.contains(dropped.get_span_context().span_id)


def test_repeated_header_lines_from_http_server_are_refused(state: TempoTraceState) -> None:
    """http.server hands handlers an email.message.Message; .get() would hide the second line (spec §5.3)."""
    from email.message import Message

    headers = Message()
    headers["tt-ext"] = GOOD
    headers["tt-ext"] = GOOD
    ctx = context_api.Context()
    assert TempoTracePropagator(state=state).extract(headers, ctx) is ctx
    assert state.rejections() == {"TEXT_MULTIPLE": 1}
    single = Message()
    single["TT-Ext"] = GOOD  # field names are case-insensitive
    assert remote_hop(TempoTracePropagator(state=state).extract(single)) is not None


def test_a_huge_tracestate_is_not_scanned(state: TempoTraceState) -> None:
    carrier = {"traceparent": TRACEPARENT, "tracestate": "a=b," * 2000 + f"tt={GOOD}"}
    ctx = TC.extract(carrier)
    assert TempoTracePropagator(state=state, tracestate_fallback=True).extract(carrier, ctx) is ctx
    assert state.rejections() == {"TEXT_LENGTH": 1}


def test_injected_text_is_the_canonical_form_of_its_header(pipe: Pipeline) -> None:
    """Spec §5.1: inject's text (head encoded, span sketch's cached text appended) is exactly
    the base64url of the 53 bytes, every time the same span sends."""
    with pipe.tracer.start_as_current_span("client") as client:
        texts = []
        for _ in range(3):
            carrier: dict[str, str] = {}
            pipe.propagator.inject(carrier)
            texts.append(carrier["tt-ext"])
    for text in texts:
        header = TTExt.from_header(text)
        assert text == encode_text(header.encode()) == header.to_header()
        assert header.svc_sketch.contains(client.get_span_context().span_id)


@pytest.mark.parametrize(
    ("value", "error_class"),
    [
        (_valid_header().to_header()[:-1] + "!", "TEXT_ALPHABET"),
        (_valid_header().to_header()[:-1] + "B", "TEXT_NON_CANONICAL"),
        (_valid_header().to_header() + "=", "TEXT_PADDING"),
        ("A" * 300, "TEXT_LENGTH"),
        (5, "TEXT_TYPE"),
        (["a", "b"], "TEXT_MULTIPLE"),
    ],
    ids=["alphabet", "non_canonical", "padding", "too_long", "int", "two_values"],
)
def test_plain_dict_carrier_refuses_like_the_general_path(state: TempoTraceState, value: Any, error_class: str) -> None:
    """The default getter on a plain dict (extract's direct read) judges values as any other carrier."""

    class MappingCarrier(dict[str, Any]):  # not exactly dict: takes the general path
        pass

    prop = TempoTracePropagator(state=state)
    ctx = context_api.Context()
    assert prop.extract({"tt-ext": value}, ctx) is ctx
    assert prop.extract(MappingCarrier({"tt-ext": value}), ctx) is ctx
    assert state.rejections() == {error_class: 2}
    assert state.lamport.value == 0


@pytest.mark.parametrize("value", [b"A" * 10_000_000, bytearray(71), memoryview(b"x" * 71), 12345])
def test_a_non_str_carrier_value_is_a_type_error_before_any_copy(state: TempoTraceState, value: object) -> None:
    """Issue 13 item 8: a 10 MB bytes value became ten million ints (56 ms) and was classed
    TEXT_MULTIPLE. It is TEXT_TYPE, judged by its type before anything is copied."""
    import tracemalloc

    prop = TempoTracePropagator(state=state)
    tracemalloc.start()
    try:
        ctx = prop.extract({"tt-ext": value})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert remote_hop(ctx) is None and state.rejections() == {"TEXT_TYPE": 1}
    assert peak < 1_000_000 and state.lamport.value == 0


def test_a_repeated_extract_of_one_header_is_one_receive(pipe: Pipeline) -> None:
    """Issue 14: a framework's extract and the handler's own of the same headers: one merge,
    one span recording the hop; the second context still carries the causal past."""
    with pipe.tracer.start_as_current_span("client"):
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
        pipe.propagator.inject(carrier)
    receiver = TempoTracePropagator(state=TempoTraceState(clock=StepClock(), host="b"))
    first = receiver.extract(carrier, TraceContextTextMapPropagator().extract(carrier))
    lts_after_first = receiver.state.lamport.value
    second = receiver.extract(carrier, TraceContextTextMapPropagator().extract(carrier))
    hop1, hop2 = remote_hop(first), remote_hop(second)
    assert hop1 is not None and hop2 is not None and not hop1.repeat and hop2.repeat
    assert receiver.state.lamport.value == lts_after_first and hop2.recv_lts == hop1.recv_lts
    assert hop2.header == hop1.header
