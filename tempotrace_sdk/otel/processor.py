"""TempoTraceSpanProcessor: stamps every span with tt-ext fields (spec/semantic-conventions.md).

on_start reads the clock, ticks the Lamport counter, builds the span's sketch
(the parent's sketch plus the span's own id) and writes the ``tempotrace.*``
start attributes, the remote header's fields when the parent came over the
wire, and the local tenant's policy verdict.

The end of a span: our decorators and ``span()`` stamp ``tempotrace.end.*``
with public API before ``span.end()``. For any other span the SDK's
``_on_ending`` hook (called after the end time is fixed and before any
exporter's ``on_end``) stamps them; the SDK has already frozen the
attributes by then, so we lift the freeze for our own keys only and restore
it. Either way exporters see the end stamp, whatever the processor order.

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
from .context import LIVE_SPANS_MAX, REMOTE_HOP_KEY, RemoteHop, SpanRecord, TempoTraceState, get_state, hop_seen

__all__ = ["TempoTraceSpanProcessor", "end_attributes", "pending_start", "stamp_end"]

_log = logging.getLogger(__name__)

#: Set by our decorators around start_span so on_start uses the very reading
#: whose UTC form became the span's start time (one clock read, not two).
pending_start: contextvars.ContextVar[tuple[int, Timestamp] | None] = contextvars.ContextVar(
    "tempotrace_pending_start", default=None
)


_SOURCE_NAMES = ("GTE", "SW_GCC", "CPU")
_QUALITY_NAMES = ("OK", "DEGRADED", "UNKNOWN")


def end_attributes(state: TempoTraceState, span_id: int, ts: Timestamp, start_verdict: Any) -> dict[str, Any]:
    """The ``tempotrace.end.*`` stamp (and pending send arrays) for a span ending now."""
    return _end_attrs(state, state.live.get(span_id), ts, start_verdict, finish=False)


def stamp_end(state: TempoTraceState, span: Span, span_id: int, ts: Timestamp) -> None:
    """Write the end stamp on a span still recording (our decorators, just before ``end()``).

    Under the span's own lock, the one ``set_attributes`` takes, so no other
    writer and no ``end()`` can interleave; the values skip the SDK's
    per-value cleaning when ``_direct_store`` allows it. Otherwise, or on an
    SDK without those fields, the public validating path.
    """
    record = state.live.get(span_id)
    store = _direct_store(span, _END_ATTRS_MAX)
    lock = getattr(span, "_lock", None) if store is not None else None
    if store is not None and lock is not None:
        with lock:
            if getattr(span, "_end_time", 0) is None:  # still recording
                store.update(_end_attrs(state, record, ts, store.get(POLICY_VERDICT), finish=False))
                return
    attributes = getattr(span, "attributes", None) or {}
    span.set_attributes(_end_attrs(state, record, ts, attributes.get(POLICY_VERDICT), finish=False))


#: The most attributes _end_attrs writes (4 end fields, 3 send arrays, 2 policy).
_END_ATTRS_MAX = 9


def _send_arrays(sends: Sequence[tuple[int, int, int]]) -> dict[str, tuple[int, ...]]:
    """The span's send.* attributes: one entry per injected header, in send order."""
    return {
        SEND_LTS: tuple(s[0] for s in sends),
        SEND_PTP_NS: tuple(s[1] for s in sends),
        SEND_UNCERTAINTY_NS: tuple(s[2] for s in sends),
    }


def _end_attrs(
    state: TempoTraceState, record: SpanRecord | None, ts: Timestamp, start_verdict: Any, *, finish: bool
) -> dict[str, Any]:
    """The end stamp; ``finish`` when no later hook will collect sends (the SDK's _on_ending).

    A stamp written before ``end()`` (our decorators) leaves the record open:
    sends between the stamp and ``end()`` are collected by ``_on_ending``.
    """
    attrs: dict[str, Any] = {
        END_PTP_NS: ts.ptp_ns,
        END_UNCERTAINTY_NS: ts.uncertainty_ns,
        END_CLK_QUALITY: _QUALITY_NAMES[ts.clk_quality],
        END_LTS: state.lamport.tick(),
    }
    # Without finish and no sends yet, skip the lock: a send racing us lands
    # in the still-open record and _on_ending collects it.
    sends = state.take_sends(record, finish) if record is not None and (finish or record.sends) else None
    if sends:
        attrs.update(_send_arrays(sends))
    if state.policy is not None and start_verdict == "pass":
        contract = state.contract
        if contract is not None:
            verdict, reason = contract.verdict(ts)
            if verdict != "pass":  # the start kept the contract, the end did not
                attrs[POLICY_VERDICT] = verdict
                attrs[POLICY_REASON] = "end: " + reason
    return attrs


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
            ts = pending[1] if pending is not None and pending[0] == span.start_time else clock.now()
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
            sketch = sketch.with_span(own)
            live = state.live
            if len(live) >= LIVE_SPANS_MAX:  # spans that never ended: evict the oldest
                state.make_room()
            live[own] = SpanRecord(sketch)
            tenant = state._tenant
            attrs: dict[str, types.AttributeValue] = {
                PTP_NS: ts.ptp_ns,
                UNCERTAINTY_NS: ts.uncertainty_ns,
                CLK_QUALITY: _QUALITY_NAMES[ts.clk_quality],
                TS_SOURCE: _SOURCE_NAMES[ts.ts_source],
                LTS: state.lamport.tick(),
                TENANT_ID: state.tenant if tenant is None else tenant,
                SVC_SKETCH: sketch.to_bytes().hex(),
                CLOCK: clock.name,
                HOST: state.host,
            }
            if hop is not None:
                h = hop.header
                attrs[REMOTE_PTP_NS] = h.ptp_ns
                attrs[REMOTE_UNCERTAINTY_NS] = h.uncertainty_ns
                attrs[REMOTE_CLK_QUALITY] = h.clk_quality.name
                attrs[REMOTE_TS_SOURCE] = h.ts_source.name
                attrs[REMOTE_LTS] = h.lts
                attrs[REMOTE_TENANT_ID] = h.tenant_id
                attrs[REMOTE_SVC_SKETCH] = h.svc_sketch.to_bytes().hex()
                attrs[RECV_LTS] = hop.recv_lts
            if state.policy is not None:
                contract = state.contract  # the local tenant's, never the remote header's
                if contract is not None:
                    verdict, reason = contract.verdict(ts)
                    attrs[POLICY_VERDICT] = verdict
                    attrs[POLICY_REASON] = reason
                    attrs[POLICY_TIER] = contract.tier
                    if contract.retention_days is not None:
                        attrs[POLICY_RETENTION_DAYS] = contract.retention_days
            store = _direct_store(span, len(attrs))
            if store is not None:
                store.update(attrs)
            else:
                span.set_attributes(attrs)
        except Exception:
            self._failed(state, "on_start")

    # -- end ----------------------------------------------------------------------
    def _on_ending(self, span: Span) -> None:
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
            store = _direct_store(span, _END_ATTRS_MAX)
            attributes: Mapping[str, Any] = store if store is not None else (span.attributes or {})
            if END_PTP_NS in attributes:
                extra: dict[str, Any] = {}
                sends = state.take_sends(record, True)
                if sends:  # sends after our decorator stamped the end: rare, keep them
                    extra = _send_arrays(sends)
            else:
                clock = state._clock
                ts = (clock if clock is not None else state.clock).now()
                extra = _end_attrs(state, record, ts, attributes.get(POLICY_VERDICT), finish=True)
            state.close_span(own)
            if not extra:
                return
            if store is not None:
                store.update(extra)
            else:
                _set_on_ending_span(span, extra)
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
        # Everything happened in _on_ending, before any exporter saw the span.
        # An SDK without that hook leaves the record live: release it here so
        # the table stays bounded, and count it (no end stamp was possible).
        if self._shut:
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


def _direct_store(span: Span, adding: int) -> dict[str, Any] | None:
    """The span's attribute dict when ours may be stored without the SDK's checks; else None.

    Our values are ints, short ASCII strings and int tuples that the SDK's
    cleaning would leave unchanged, and validating a dozen of them costs more
    than the rest of a span's start. The direct store is used only when the
    span's configured limits cannot apply (no value-length limit, room for
    ``adding`` more under the count limit); otherwise the public, validating
    path is. No lock is needed: in on_start the span is not yet visible to
    other threads, and in _on_ending the SDK has already refused every other
    writer (_end_time set).
    """
    try:
        bounded = span._attributes
        store = bounded._dict  # type: ignore[union-attr]
        if type(store) is dict and bounded.max_value_len is None:  # type: ignore[union-attr]
            maxlen = bounded.maxlen  # type: ignore[union-attr]
            if maxlen is None or len(store) + adding <= maxlen:
                return store
    except AttributeError:  # another SDK's span, or a changed SDK: the public path
        pass
    return None


def _set_on_ending_span(span: Span, attrs: Mapping[str, Any]) -> None:
    # The SDK (up to at least 1.45) froze the span's BoundedAttributes before
    # calling _on_ending (open-telemetry/opentelemetry-python#5614). Used only
    # when the direct store is not safe (attribute limits configured): lift
    # the freeze for our keys, each __setitem__ validating and locking as
    # usual, then restore it.
    bounded = getattr(span, "_attributes", None)
    if bounded is None or not hasattr(bounded, "_immutable"):
        return
    was_immutable = bounded._immutable  # a later SDK may keep spans mutable here (otel-python #5613)
    bounded._immutable = False
    try:
        for key, value in attrs.items():
            bounded[key] = value
    finally:
        bounded._immutable = was_immutable
