"""TempoTraceSpanProcessor: stamps every span with tt-ext readings (spec/semantic-conventions.md).

on_start makes the span's start event (otel/stamp.py: a clock reading and a
Lamport tick, two native calls where the module is built) and keeps it, with
the header the span's remote parent came with and what its sketch is built
on, in the state's open-span table. Nothing is written on the span then:
every attribute is written once, when the span ends -- ``tempotrace.stamps``
(start, end, received header, the sketch of a span that received one, the
sends; stamptext.py), the queryable ``clk_quality`` and ``uncertainty_ns``,
the per-process attributes where the span's Resource lacks them
(otel/process.py) and a policy verdict other than "pass": one dict update of
three attributes for most spans.

The end: our decorators and ``span()`` call ``stamp_end`` just before
``span.end()``; for any other span the SDK's on-ending hook (called after the
end time is fixed and before any exporter's ``on_end``) does it. Either way
exporters see every attribute, whatever the processor order. On an SDK
without that hook, or whose end-time freeze cannot be lifted (probed; none
we support), the start is written at on_start as well, and an end stamp
that cannot be written is counted (``no_end_hook``, ``end_stamp_lost``). Every use of
SDK internals (the direct attribute store, the span lock, the hook's name)
is in otel/sdk_internals.py, with the public API as fallback.

Hooks never block and never raise: failures are counted (``errors()``) and
logged at debug.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Sequence
from typing import Any

from opentelemetry import context as context_api
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from ..clocks.base import Timestamp
from ..clocks.leapseconds import tai_to_utc_ns
from ..semconv import (
    CLK_QUALITY,
    CLOCK_EPOCH_BOUND_NS,
    CLOCK_EPOCH_NS,
    CLOCK_STEPPED,
    POLICY_REASON,
    POLICY_VERDICT,
    STAMPS,
    UNCERTAINTY_NS,
)
from ..stamptext import encode, send_tokens
from ..wire.layout import ClockQuality, TsSource
from .context import LIVE_SPANS_MAX, REMOTE_HOP_KEY, TempoTraceState, get_state, hop_seen
from .lifecycle import EXIT_FLUSH_TIMEOUT_S, release_held_within
from .process import ProcessAttributes
from .records import SKETCH_CHAIN_MAX, RemoteHop, Sent, SpanRecord
from .sdk_internals import PROBE, attribute_store, on_ending_hook, set_after_end, span_lock, value_length_limit

__all__ = ["TempoTraceSpanProcessor", "pending_start", "stamp_end"]

_log = logging.getLogger(__name__)

#: Set by our decorators around start_span so on_start uses the very reading
#: whose UTC form became the span's start time (one clock read, not two):
#: (start time in UTC ns, the reading, the Lamport value ticked with it or None
#: to tick now). A span made after its op happened (torch's held op spans,
#: torch/compute.py) brings the value ticked when the op started, so its place in
#: this process's Lamport order is the op's, not the moment it was made.
pending_start: contextvars.ContextVar[tuple[int, Timestamp, int | None] | None] = contextvars.ContextVar(
    "tempotrace_pending_start", default=None
)

#: The SDK calls on_ending before on_end on every span (probed): on_end has nothing left to do.
_ON_ENDING_CALLED = PROBE["on_ending"]
#: Every attribute can wait for the end: the hook is called and any span can be written there (the SDK's
#: freeze can be lifted). Otherwise a span the end might not be able to write gets its start at on_start.
_LATE_WRITE = _ON_ENDING_CALLED and PROBE["immutable_flag"]

QUALITY_NAMES = ("OK", "DEGRADED", "UNKNOWN")

#: The most attributes one span gets: stamps, clk_quality, uncertainty_ns, 9 per-process, 2 policy, and a
#: clock epoch (2) or the stepped mark.
_ATTRS_MAX = 16

#: The end event: (lts, ptp_ns, uncertainty_ns, clk_quality).
End = tuple[int, int, int, int]

#: Per-process attributes are decided per Resource once, for every processor (otel/process.py).
_PROCESS = ProcessAttributes()


def stamp_end(state: TempoTraceState, span: Span, span_id: int, ts: Timestamp, lts: int | None = None) -> None:
    """Write a span's attributes, its end read as ``ts``, while it still records (our decorators and torch's
    spans, just before ``span.end(end_time=tai_to_utc_ns(ts.ptp_ns))``). ``lts``: the end's Lamport value
    when it was ticked with the reading (a held op span); else it is ticked now.

    Under the span's own lock, the one ``set_attributes`` takes, so no other
    writer and no ``end()`` can interleave; the values skip the SDK's
    per-value cleaning when the direct store allows it. Otherwise the public,
    validating path. Sends after this are added by the end hook.
    """
    record = state.live.get(span_id)
    if record is None:
        return
    end = (state.lamport.tick() if lts is None else lts, ts.ptp_ns, ts.uncertainty_ns, ts.clk_quality)
    end_ns = tai_to_utc_ns(ts.ptp_ns)
    store = attribute_store(span, _ATTRS_MAX)
    lock = span_lock(span) if store is not None else None
    if store is not None and lock is not None:
        with lock:
            if span.is_recording():
                sends = state.take_sends(record, False)
                store.update(_attributes(state, span, record, end, ts.ts_source, end_ns, sends))
                record.written = len(sends)
            return
    sends = state.take_sends(record, False)
    span.set_attributes(_fit(state, span, _attributes(state, span, record, end, ts.ts_source, end_ns, sends)))
    record.written = len(sends)


def _reading(ptp_ns: int, uncertainty_ns: int, source: int, quality: int) -> Timestamp:
    """A stamp's clock fields as a Timestamp (for the policy, which judges readings)."""
    return Timestamp(ptp_ns, TsSource(source), ClockQuality(quality), uncertainty_ns)


def _attributes(
    state: TempoTraceState,
    span: Span,
    record: SpanRecord,
    end: End | None,
    end_source: int,
    end_ns: int,
    sends: Sequence[Sent],
) -> dict[str, Any]:
    """Every attribute of a span (semantic-conventions §1.2): its stamps text, the queryable start quality
    and bound, the per-process attributes its Resource lacks, a policy verdict other than pass."""
    hop = record.hop
    remote = recv = sketch = None
    if hop is not None:
        if not hop.repeat:  # a repeat takes the sender's sketch but records no receive (§8)
            h = hop.header
            remote = (h.ptp_ns, h.uncertainty_ns, h.clk_quality, h.ts_source, h.tenant_id, h.lts)
            if hop.merged:  # an unmerged receive carries no Lamport evidence (tt-ext §10.1)
                recv = hop.recv_lts
        sketch = record.sketch.to_bytes()  # the header brought a causal past the trace may not hold
    quality, unc = record.clk_quality, record.uncertainty_ns
    attrs: dict[str, Any] = {
        STAMPS: encode(record.lts, record.ptp_ns, unc, quality, record.ts_source, span.start_time or 0, end, end_ns,
                       remote, recv, sketch, sends),
        CLK_QUALITY: QUALITY_NAMES[quality],
        UNCERTAINTY_NS: unc,
    }  # fmt: skip
    resource = span.resource
    cache = _PROCESS.cache  # ProcessAttributes.for_span's answer, checked inline (once per span)
    if cache[0] is resource and cache[1] is state and cache[2] == state.version:
        needed = cache[3]
    else:
        needed = _PROCESS.for_span(state, resource)
    if needed is not None:
        attrs.update(needed)
    domain = state.domain
    if domain is not None:  # which epoch of the host clock its readings were taken in (clocks/domain.py)
        epoch = domain.label((record.ptp_ns,) if end is None else (record.ptp_ns, end[1]))
        if epoch is None:
            attrs[CLOCK_STEPPED] = True
        elif (needed if needed is not None else resource.attributes if resource is not None else {}).get(
                CLOCK_EPOCH_NS) != epoch.mid_ns:
            # After a step; or a Resource made by another state of this process (the zero-code distro's,
            # then configure()'s), whose measurement of the same epoch is not the one checked here. (The
            # per-process attributes a span carries itself already say the start's.)
            attrs[CLOCK_EPOCH_NS] = epoch.mid_ns
            attrs[CLOCK_EPOCH_BOUND_NS] = epoch.half_ns
    if state._policy is not None:
        contract = state.contract  # the local tenant's, never the remote header's
        if contract is not None:
            verdict, reason = contract.verdict(_reading(record.ptp_ns, unc, record.ts_source, quality))
            if verdict == "pass" and end is not None:  # the start kept the contract; did the end?
                verdict, reason = contract.verdict(_reading(end[1], end[2], end_source, end[3]))
                reason = "end: " + reason
            if verdict != "pass":
                attrs[POLICY_VERDICT] = verdict
                attrs[POLICY_REASON] = reason
    return attrs


def process_needs(state: TempoTraceState, resource: Any) -> dict[str, Any] | None:
    """The per-process attributes a span of ``resource`` carries itself (those its Resource lacks; None: none),
    as ``_attributes`` adds them (for torch's op spans written in C, torch/opspans.py)."""
    return _PROCESS.for_span(state, resource)


def _fit(state: TempoTraceState, span: Span, attrs: dict[str, Any]) -> dict[str, Any]:
    """``attrs`` for the public path: a stamps text longer than the span's value-length limit
    (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT) loses whole tokens from its end (counted), never cut mid-token."""
    limit = value_length_limit(span)
    text = attrs.get(STAMPS)
    if limit is not None and isinstance(text, str) and len(text) > limit:
        cut = text.rfind(" ", 0, limit + 1)
        if cut > 0:
            attrs[STAMPS] = text[:cut]
        else:  # not even the start token fits
            del attrs[STAMPS]
        state.count_error("stamps_truncated")
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
            own = span.context.span_id
            parent = span.parent
            hop: RemoteHop | None = None
            # Only a context that went through receive() can hold a hop: skip
            # the context lookup in a process that never received one.
            if (parent is None or parent.is_remote) and hop_seen[0]:
                ctx = parent_context if parent_context is not None else context_api.get_current()
                found = ctx.get(REMOTE_HOP_KEY)
                if isinstance(found, RemoteHop) and found.applies_to(parent):
                    hop = found
            pending = pending_start.get()
            source: int
            quality: int
            if pending is not None and pending[0] == span.start_time:
                ts = pending[1]
                ptp, unc, source, quality = ts.ptp_ns, ts.uncertainty_ns, ts.ts_source, ts.clk_quality
                ticked = pending[2]
                lts = state.lamport.tick() if ticked is None else ticked
            else:
                clock = state._clock
                ptp, unc, source, quality, lts = state.stamp.tick(clock if clock is not None else state.clock)
            live = state.live
            if parent is None:  # a root: its sketch starts from the header's, if one came
                record = SpanRecord(lts, ptp, unc, quality, source, own, None if hop is None else hop.header.svc_sketch,
                                    0, hop)  # fmt: skip
            elif parent.is_remote:  # the header's sketch (if one came) and the remote parent's id
                record = SpanRecord(lts, ptp, unc, quality, source, own, None if hop is None else hop.header.svc_sketch,
                                    parent.span_id, hop)  # fmt: skip
            else:
                base = live.get(parent.span_id)
                if base is None:
                    base = state.ended.get(parent.span_id)
                if base is None:  # parent from before this process's tracking (or evicted)
                    state.count_error("parent_sketch_missing")
                    record = SpanRecord(lts, ptp, unc, quality, source, own, None, parent.span_id)
                else:
                    depth = 0 if base.known is not None else base.depth + 1
                    if depth > SKETCH_CHAIN_MAX:  # resolve the parent now: no long chain of records kept alive
                        base.sketch  # noqa: B018 (the property computes and keeps it)
                        depth = 0
                    record = SpanRecord(lts, ptp, unc, quality, source, own, base, 0, None, depth)
            if len(live) >= LIVE_SPANS_MAX:  # spans that never ended: evict the oldest
                state.make_room()
            live[own] = record
            if not (_LATE_WRITE or (_ON_ENDING_CALLED and attribute_store(span, _ATTRS_MAX) is not None)):
                # The end might not be able to write this span (no hook, or a freeze it cannot lift):
                # what the start knows goes on now, and the end rewrites it whole if it can.
                attrs = _attributes(state, span, record, None, 0, 0, ())
                store = attribute_store(span, len(attrs))
                if store is not None:
                    store.update(attrs)
                else:
                    span.set_attributes(_fit(state, span, attrs))
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
            own = span.context.span_id
            record = state.live.get(own)
            if record is None:  # started before this processor was added, or by another state
                return
            late = ""
            attrs = None
            try:
                written = record.written
                if written < 0:
                    clock = state._clock
                    ptp, unc, source, quality, lts = state.stamp.tick(clock if clock is not None else state.clock)
                # state.take_sends(record, True), inline: under the lock a send appends with, so a send
                # is on the span or sees it finished (acquire/release: half the cost of ``with``).
                lock = state._sends_lock
                lock.acquire()
                try:
                    sends = record.sends
                    record.finished = True
                finally:
                    lock.release()
                if written < 0:
                    end = (lts, ptp, unc, quality)
                    attrs = _attributes(state, span, record, end, source, span.end_time or 0, sends or ())
                elif sends and len(sends) > written:  # sends after our decorator wrote everything (rare)
                    late = send_tokens(sends[written:], record.lts, record.ptp_ns, record.uncertainty_ns,
                                       record.clk_quality)  # fmt: skip
            finally:  # the record goes whatever failed: the open-span table stays bounded
                state.close_span(own)
            if attrs is None and not late:
                return
            store = attribute_store(span, _ATTRS_MAX)
            if attrs is None:
                text = (store if store is not None else (span.attributes or {})).get(STAMPS)
                if not isinstance(text, str):  # limits dropped the text: the late sends are lost with it
                    state.count_error("end_stamp_lost")
                    return
                attrs = {STAMPS: text + late}
            if store is not None:
                store.update(attrs)
            elif not set_after_end(span, _fit(state, span, attrs)):
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
        """Stop stamping. Nothing is buffered here; spans held to be made later are made first (lifecycle)."""
        release_held_within(EXIT_FLUSH_TIMEOUT_S)
        self._shut = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered in this processor; spans held to be made later are made now (lifecycle), so that the
        export processors after this one (a provider flushes its processors in order) export them."""
        release_held_within(timeout_millis / 2000)
        return True
