"""TempoTraceSpanProcessor: stamps every span with tt-ext fields (spec/semantic-conventions.md).

on_start makes one stamp event (otel/stamp.py: the clock reading, a Lamport
tick and the span's sketch -- the parent's plus the span's own id -- in one
native call where the module is built) and writes the ``tempotrace.*`` start
attributes, the remote header's fields when the parent came over the wire,
and the local tenant's policy verdict.

The end of a span: our decorators and ``span()`` stamp ``tempotrace.end.*``
before ``span.end()``. For any other span the SDK's on-ending hook (called
after the end time is fixed and before any exporter's ``on_end``) stamps
them. Either way exporters see the end stamp, whatever the processor order.
Every use of SDK internals (the direct attribute store, the span lock, the
hook's name) is in otel/sdk_internals.py, with the public API as fallback.

Hooks never block and never raise: failures are counted (``errors()``) and
logged at debug.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as context_api
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.util import types

from ..clocks.base import Timestamp
from ..semconv import (
    CLK_QUALITY,
    CLOCK,
    END_CLK_QUALITY,
    END_LTS,
    END_PTP_NS,
    END_UNCERTAINTY_NS,
    HOST,
    LTS,
    POLICY_REASON,
    POLICY_RETENTION_DAYS,
    POLICY_TIER,
    POLICY_VERDICT,
    PTP_NS,
    RECV_LTS,
    REMOTE_CLK_QUALITY,
    REMOTE_LTS,
    REMOTE_PTP_NS,
    REMOTE_SVC_SKETCH,
    REMOTE_TENANT_ID,
    REMOTE_TS_SOURCE,
    REMOTE_UNCERTAINTY_NS,
    SEND_LTS,
    SEND_PTP_NS,
    SEND_UNCERTAINTY_NS,
    SVC_SKETCH,
    TENANT_ID,
    TS_SOURCE,
    UNCERTAINTY_NS,
)
from ..wire import Sketch
from ..wire._layout import ClockQuality, TsSource
from .context import LIVE_SPANS_MAX, REMOTE_HOP_KEY, RemoteHop, SpanRecord, TempoTraceState, get_state, hop_seen
from .sdk_internals import PROBE, attribute_store, on_ending_hook, set_after_end, span_lock

__all__ = ["TempoTraceSpanProcessor", "end_attributes", "pending_start", "stamp_end"]

_log = logging.getLogger(__name__)

#: Set by our decorators around start_span so on_start uses the very reading
#: whose UTC form became the span's start time (one clock read, not two).
pending_start: contextvars.ContextVar[tuple[int, Timestamp] | None] = contextvars.ContextVar(
    "tempotrace_pending_start", default=None
)


#: The SDK calls on_ending before on_end on every span (probed): on_end has nothing left to do.
_ON_ENDING_CALLED = PROBE["on_ending"]

_SOURCE_NAMES = ("GTE", "SW_GCC", "CPU")
_QUALITY_NAMES = ("OK", "DEGRADED", "UNKNOWN")


def end_attributes(state: TempoTraceState, span_id: int, ts: Timestamp, start_verdict: Any) -> dict[str, Any]:
    """The ``tempotrace.end.*`` stamp (and pending send arrays) for a span ending now."""
    fields = (ts.ptp_ns, ts.uncertainty_ns, ts.ts_source, ts.clk_quality, state.lamport.tick())
    return _end_attrs(state, state.live.get(span_id), fields, start_verdict, finish=False)


def stamp_end(state: TempoTraceState, span: Span, span_id: int, ts: Timestamp) -> None:
    """Write the end stamp on a span still recording (our decorators, just before ``end()``).

    Under the span's own lock, the one ``set_attributes`` takes, so no other
    writer and no ``end()`` can interleave; the values skip the SDK's
    per-value cleaning when the direct store allows it. Otherwise the public,
    validating path.
    """
    record = state.live.get(span_id)
    fields = (ts.ptp_ns, ts.uncertainty_ns, ts.ts_source, ts.clk_quality, state.lamport.tick())
    store = attribute_store(span, _END_ATTRS_MAX)
    lock = span_lock(span) if store is not None else None
    if store is not None and lock is not None:
        with lock:
            if span.is_recording():
                store.update(_end_attrs(state, record, fields, store.get(POLICY_VERDICT), finish=False))
                return
    attributes = getattr(span, "attributes", None) or {}
    span.set_attributes(_end_attrs(state, record, fields, attributes.get(POLICY_VERDICT), finish=False))


#: The most attributes _end_attrs writes (4 end fields, 3 send arrays, 2 policy).
_END_ATTRS_MAX = 9


def _send_arrays(sends: Sequence[tuple[int, int, int]]) -> dict[str, tuple[int, ...]]:
    """The span's send.* attributes: one entry per injected header, in send order."""
    return {
        SEND_LTS: tuple(s[0] for s in sends),
        SEND_PTP_NS: tuple(s[1] for s in sends),
        SEND_UNCERTAINTY_NS: tuple(s[2] for s in sends),
    }


def _reading(ptp_ns: int, uncertainty_ns: int, source: int, quality: int) -> Timestamp:
    """A stamp's clock fields as a Timestamp (for the policy, which judges readings)."""
    return Timestamp(ptp_ns, TsSource(source), ClockQuality(quality), uncertainty_ns)


def _end_attrs(
    state: TempoTraceState,
    record: SpanRecord | None,
    fields: tuple[int, int, int, int, int],
    start_verdict: Any,
    *,
    finish: bool,
) -> dict[str, Any]:
    """The end stamp from an event's (ptp_ns, uncertainty_ns, ts_source, clk_quality, lts).

    ``finish`` when no later hook will collect sends (the SDK's on-ending
    hook). A stamp written before ``end()`` (our decorators) leaves the record
    open: sends between the stamp and ``end()`` are collected by the hook.
    """
    ptp_ns, uncertainty_ns, source, quality, lts = fields
    attrs: dict[str, Any] = {
        END_PTP_NS: ptp_ns,
        END_UNCERTAINTY_NS: uncertainty_ns,
        END_CLK_QUALITY: _QUALITY_NAMES[quality],
        END_LTS: lts,
    }
    # Without finish and no sends yet, skip the lock: a send racing us lands
    # in the still-open record and the hook collects it.
    sends = state.take_sends(record, finish) if record is not None and (finish or record.sends) else None
    if sends:
        attrs.update(_send_arrays(sends))
    if state.policy is not None and start_verdict == "pass":
        contract = state.contract
        if contract is not None:
            verdict, reason = contract.verdict(_reading(ptp_ns, uncertainty_ns, source, quality))
            if verdict != "pass":  # the start kept the contract, the end did not
                attrs[POLICY_VERDICT] = verdict
                attrs[POLICY_REASON] = "end: " + reason
    return attrs


@on_ending_hook("on_ending")
class TempoTraceSpanProcessor(SpanProcessor):
    """Adds tt-ext start/end stamps, hop fields and policy verdicts to SDK spans."""

    def __init__(self, *, state: TempoTraceState | None = None) -> None:
        self._state = state
        self._shut = False

    @property
    def state(self) -> TempoTraceState:
        return self._state if self._state is not None else get_state()

    def errors(self) -> dict[str, int]:
        """Internal errors swallowed by the hooks, by hook name."""
        return self.state.errors()

    # -- start ------------------------------------------------------------------
    # The hooks run once per span on the user's thread, so they are written
    # flat: one frame per hook, each piece of state looked up once, and the
    # state's lazily resolved properties read through their backing fields.
    def on_start(self, span: Span, parent_context: context_api.Context | None = None) -> None:
        if self._shut:
            return
        state = self._state
        try:
            if state is None:
                state = get_state()
            clock = state._clock
            if clock is None:
                clock = state.clock
            pending = pending_start.get()
            reading = pending[1] if pending is not None and pending[0] == span.start_time else None
            own = span.get_span_context().span_id
            parent = span.parent
            hop: RemoteHop | None = None
            # Only a context that went through receive() can hold a hop: skip
            # the context lookup in a process that never received one.
            if (parent is None or parent.is_remote) and hop_seen[0]:
                ctx = parent_context if parent_context is not None else context_api.get_current()
                found = ctx.get(REMOTE_HOP_KEY)
                if isinstance(found, RemoteHop) and found.applies_to(parent):
                    hop = found
            if parent is None:
                sketch = Sketch.EMPTY if hop is None else hop.header.svc_sketch
            elif parent.is_remote:
                sketch = (hop.header.svc_sketch if hop is not None else Sketch.EMPTY).with_span(parent.span_id)
            else:
                record = state.live.get(parent.span_id)
                if record is not None:
                    sketch = record.sketch
                else:
                    known = state.ended.get(parent.span_id)
                    if known is None:  # parent from before this process's tracking (or evicted)
                        state.count_error("parent_sketch_missing")
                        known = Sketch.EMPTY.with_span(parent.span_id)
                    sketch = known
            ptp_ns, uncertainty_ns, source, quality, lts, sketch = state.stamp.start(clock, reading, sketch, own)
            live = state.live
            if len(live) >= LIVE_SPANS_MAX:  # spans that never ended: evict the oldest
                state.make_room()
            live[own] = SpanRecord(sketch)
            tenant = state._tenant
            attrs: dict[str, types.AttributeValue] = {
                PTP_NS: ptp_ns,
                UNCERTAINTY_NS: uncertainty_ns,
                CLK_QUALITY: _QUALITY_NAMES[quality],
                TS_SOURCE: _SOURCE_NAMES[source],
                LTS: lts,
                TENANT_ID: state.tenant if tenant is None else tenant,
                SVC_SKETCH: sketch.to_bytes().hex(),
                CLOCK: clock.name,
                HOST: state.host,
            }
            if hop is not None and not hop.repeat:
                h = hop.header
                attrs[REMOTE_PTP_NS] = h.ptp_ns
                attrs[REMOTE_UNCERTAINTY_NS] = h.uncertainty_ns
                attrs[REMOTE_CLK_QUALITY] = h.clk_quality.name
                attrs[REMOTE_TS_SOURCE] = h.ts_source.name
                attrs[REMOTE_LTS] = h.lts
                attrs[REMOTE_TENANT_ID] = h.tenant_id
                attrs[REMOTE_SVC_SKETCH] = h.svc_sketch.to_bytes().hex()
                if hop.merged:  # an unmerged receive carries no Lamport evidence (tt-ext §10.1)
                    attrs[RECV_LTS] = hop.recv_lts
            if state.policy is not None:
                contract = state.contract  # the local tenant's, never the remote header's
                if contract is not None:
                    verdict, reason = contract.verdict(_reading(ptp_ns, uncertainty_ns, source, quality))
                    attrs[POLICY_VERDICT] = verdict
                    attrs[POLICY_REASON] = reason
                    attrs[POLICY_TIER] = contract.tier
                    if contract.retention_days is not None:
                        attrs[POLICY_RETENTION_DAYS] = contract.retention_days
            store = attribute_store(span, len(attrs))
            if store is not None:
                store.update(attrs)
            else:
                span.set_attributes(attrs)
        except Exception:
            self._failed(state, "on_start")

    # -- end ----------------------------------------------------------------------
    def on_ending(self, span: Span) -> None:
        """Stamp the end of a span the SDK is ending (bound to the SDK's hook by ``on_ending_hook``)."""
        if self._shut:
            return
        state = self._state
        try:
            if state is None:
                state = get_state()
            own = span.get_span_context().span_id
            record = state.live.get(own)
            if record is None:  # started before this processor was added, or by another state
                return
            try:
                store = attribute_store(span, _END_ATTRS_MAX)
                attributes: Mapping[str, Any] = store if store is not None else (span.attributes or {})
                if END_PTP_NS in attributes:
                    extra: dict[str, Any] = {}
                    sends = state.take_sends(record, True)
                    if sends:  # sends after our decorator stamped the end: rare, keep them
                        extra = _send_arrays(sends)
                else:
                    clock = state._clock
                    fields = state.stamp.tick(clock if clock is not None else state.clock)
                    extra = _end_attrs(state, record, fields, attributes.get(POLICY_VERDICT), finish=True)
            finally:  # the record goes whatever failed: the open-span table stays bounded
                state.close_span(own)
            if not extra:
                return
            if store is not None:
                store.update(extra)
            elif not set_after_end(span, extra):
                state.count_error("end_stamp_lost")
        except Exception:
            self._failed(state, "on_ending")

    def _failed(self, state: TempoTraceState | None, where: str) -> None:
        # Called from a hook's except clause: must not raise in turn.
        try:
            (state if state is not None else self.state).count_error(where)
            _log.debug("tempotrace: %s failed", where, exc_info=True)
        except Exception:  # pragma: no cover - the state itself is broken
            pass

    def on_end(self, span: ReadableSpan) -> None:
        # Everything happened in on_ending, before any exporter saw the span,
        # and it releases the record whatever happens. An SDK without that
        # hook leaves the record live: release it here so the table stays
        # bounded, and count it (no end stamp was possible).
        if self._shut or _ON_ENDING_CALLED:
            return
        state = self._state
        try:
            if state is None:
                state = get_state()
            context = span.get_span_context()
            if context is not None and context.span_id in state.live:
                state.close_span(context.span_id)
                state.count_error("no_end_hook")
        except Exception:
            self._failed(state, "on_end")

    def shutdown(self) -> None:
        """Stop stamping. Nothing is buffered here, so nothing is lost."""
        self._shut = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered in this processor: always done."""
        return True
