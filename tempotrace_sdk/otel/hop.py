"""The two ends of a hop, shared by the text propagator and the gRPC binary helpers.

``send`` is the inject-side event: a stamp (clock reading and Lamport tick,
otel/stamp.py), the sketch of the current span's causal past and the local
tenant, in the wire's binary or text form (``wire.header``'s one definition
of each). Nothing is sent without a valid trace context to go with it: a
header beside no traceparent means nothing to a receiver (issue 14).

``receive`` takes a header the caller has already decoded and validated,
merges its Lamport value and returns the context carrying it. A header whose
counter is more than ``LAMPORT_MAX_AHEAD`` ahead of this process's is not
merged (tt-ext §10.1: one forged header must not push every counter
downstream to 2^63-1): the receive is a plain local tick, counted as
``LAMPORT_AHEAD`` in ``rejection_counts()`` and logged at debug, and the hop
is kept -- the span it parents is still parented and still takes the
sender's sketch -- marked ``merged=False`` so that its ``r`` token of
``tempotrace.stamps`` has no receive lts. The same header received again in this process (a
framework's extract and then the handler's own, in one request) is not a
second receive: no merge, and the context carries the first receive's hop
marked ``repeat`` so only one span records it. A peer's bad bytes never get
that far: the caller counts them with ``reject`` and leaves the context alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar, overload

from opentelemetry import context as context_api
from opentelemetry import trace

from ..errors import HeaderError
from ..stamptext import MAX_SENDS
from ..wire import Sketch, TTExt
from ..wire.header import pack_header
from .context import REMOTE_HOP_KEY, RemoteHop, TempoTraceState, hop_seen, remote_hop

__all__ = ["LAMPORT_AHEAD", "receive", "reject", "send"]

_log = logging.getLogger(__name__)

#: The rejection class of a valid header whose lts was not merged (tt-ext §10.1).
LAMPORT_AHEAD = "LAMPORT_AHEAD"


def _untracked_sketch(state: TempoTraceState, context: context_api.Context | None, span_id: int) -> Sketch:
    sketch = state.sketch_of(span_id)  # an ended span of ours
    if sketch is not None:
        return sketch
    # A span we never saw start (no processor, another provider, or a remote
    # span being forwarded by a proxy): its id, plus what came in.
    hop = remote_hop(context)
    base = hop.header.svc_sketch if hop is not None else Sketch.EMPTY
    return base.with_span(span_id)


_Form = TypeVar("_Form", str, bytes)


@overload
def send(state: TempoTraceState, context: context_api.Context | None = None) -> bytes | None: ...
@overload
def send(state: TempoTraceState, context: context_api.Context | None, form: Callable[..., _Form]) -> _Form | None: ...


def send(
    state: TempoTraceState, context: context_api.Context | None = None, form: Callable[..., Any] = pack_header
) -> Any:
    """Record a send event and return its header in ``form``: ``pack_header`` (the default, the
    53-byte binary form) or ``header_text`` (the propagator's); None when ``context`` (default:
    the current one) holds no valid span context (nothing is sent, nothing ticks).

    The send is remembered on the current span (if we track it and it is
    still open) and written as an ``x`` token of its ``tempotrace.stamps`` when it ends;
    past ``MAX_SENDS`` on one span it is sent but not recorded (counted ``sends_dropped``).
    """
    span_context = trace.get_current_span(context).get_span_context()
    span_id = span_context.span_id
    if not span_id or not span_context.trace_id:  # SpanContext.is_valid, without its two extra lookups
        return None
    # A record is in ``live`` exactly while its span is open (removed at end).
    record = state.live.get(span_id)
    sketch = record.sketch if record is not None else _untracked_sketch(state, context, span_id)
    clock = state._clock
    ptp_ns, uncertainty_ns, source, quality, lts = state.stamp.tick(clock if clock is not None else state.clock)
    if record is not None:
        # Under the lock the end takes the list with (SpanRecord): otherwise an
        # end between reading ``sends`` and appending would write the span
        # without this send while its header still goes out. acquire/release
        # rather than ``with``: half the cost on this path (measured).
        lock = state._sends_lock
        lock.acquire()
        dropped = False
        try:
            if not record.finished:
                sends = record.sends
                if sends is None:
                    record.sends = [(lts, ptp_ns, uncertainty_ns, quality)]
                elif len(sends) < MAX_SENDS:
                    sends.append((lts, ptp_ns, uncertainty_ns, quality))
                else:  # a span that never ends but keeps sending: its record stays bounded
                    dropped = True
        finally:
            lock.release()
        if dropped:
            state.count_error("sends_dropped")
    tenant = state._tenant
    return form(state.tenant if tenant is None else tenant, ptp_ns, source, quality, uncertainty_ns, lts, sketch)


def receive(
    state: TempoTraceState, header: TTExt, context: context_api.Context | None, key: str | bytes | None = None
) -> context_api.Context:
    """Merge a validated header's Lamport value (bounded, tt-ext §10.1) and return ``context`` carrying it.

    ``key`` is the header as received (text or bytes). A key this process has
    already received is a repeat: no merge, the first receive's Lamport value.
    """
    first = state.received.get(key) if key is not None else None
    if first is not None and first.header == header:
        recv_lts, merged, repeat = first.recv_lts, first.merged, True
    else:
        recv_lts, merged = state.lamport.receive(header.lts)
        repeat = False
        if not merged:
            state.count_rejection(LAMPORT_AHEAD)
            _log.debug(
                "tempotrace: received lts %d is more than 2^44 ahead of this process's counter: not merged "
                "(tt-ext §10.1); the hop is kept without Lamport evidence",
                header.lts,
            )
    if context:
        parent = trace.get_current_span(context).get_span_context()
        # A valid remote parent's id (SpanContext.is_valid: trace and span id non-zero), else 0.
        parent_id = parent.span_id if parent.is_remote and parent.trace_id else 0
        ctx = context
    else:  # None or an empty Context (a dict): no span, so no remote parent
        parent_id = 0
        ctx = context if context is not None else context_api.Context()
    hop = RemoteHop(header, recv_lts, parent_id, repeat, merged)
    if key is not None and not repeat:
        state.remember_received(key, hop)
    hop_seen[0] = True
    return context_api.set_value(REMOTE_HOP_KEY, hop, ctx)


def reject(state: TempoTraceState, err: Exception, where: str) -> None:
    """Count and log (at debug) a refused header."""
    error_class = err.error_class if isinstance(err, HeaderError) else type(err).__name__
    state.count_rejection(error_class)
    _log.debug("tempotrace: refused %s: %s", where, err)
