"""The two ends of a hop, shared by the text propagator and the gRPC binary helpers.

``send`` is the inject-side event: Lamport tick, a fresh clock reading, the
sketch of the current span's causal past and the local tenant, packed into
the 53-byte form. ``receive`` takes a header the caller has already decoded
and validated, merges its Lamport value and returns the context carrying
it; a peer's bad bytes never get that far: the caller counts them with
``reject`` and leaves the context alone.
"""

from __future__ import annotations

import binascii
import logging

from opentelemetry import context as context_api
from opentelemetry import trace

from ..clocks.base import Timestamp
from ..errors import HeaderError
from ..wire import Sketch, TTExt
from ..wire._layout import STRUCT, STRUCT_HEAD, VERSION
from .context import REMOTE_HOP_KEY, RemoteHop, TempoTraceState, hop_seen, remote_hop

__all__ = ["receive", "send", "send_text"]

_log = logging.getLogger(__name__)
_b2a = binascii.b2a_base64
_TO_URL = bytes.maketrans(b"+/", b"-_")
_new_tuple = tuple.__new__


def _untracked_sketch(state: TempoTraceState, context: context_api.Context | None, span_id: int) -> Sketch:
    if span_id:
        sketch = state.sketch_of(span_id)  # an ended span of ours
        if sketch is not None:
            return sketch
    # A span we never saw start (no processor, another provider, or a remote
    # span being forwarded by a proxy): its id, plus what came in.
    hop = remote_hop(context)
    base = hop.header.svc_sketch if hop is not None else Sketch.EMPTY
    return base.with_span(span_id) if span_id else base


def _send_event(state: TempoTraceState, context: context_api.Context | None) -> tuple[int, Timestamp, int, Sketch]:
    """Record a send event: (first byte, timestamp, lts, sketch) of the header for it.

    The send is remembered on the current span (if we track it and it is
    still open) and written as ``tempotrace.send.*`` arrays when it ends.
    """
    span_context = trace.get_current_span(context).get_span_context()
    span_id = span_context.span_id
    # A record is in ``live`` exactly while its span is open (removed at end).
    record = state.live.get(span_id) if span_id else None
    if record is not None:
        sketch = record.sketch
    else:
        sketch = _untracked_sketch(state, context, span_id if span_context.is_valid else 0)
    clock = state._clock
    ts = (clock if clock is not None else state.clock).now()
    lts = state.lamport.tick()
    tenant = state._tenant
    if record is not None:
        entry = (lts, ts.ptp_ns, ts.uncertainty_ns)
        # Under the lock the end takes the list with (SpanRecord): otherwise an
        # end between reading ``sends`` and appending would write the span
        # without this send while its header still goes out.
        with state._sends_lock:
            if not record.finished:
                sends = record.sends
                if sends is None:
                    record.sends = [entry]
                else:
                    sends.append(entry)
    return ((state.tenant if tenant is None else tenant) << 4) | VERSION, ts, lts, sketch


def send(state: TempoTraceState, context: context_api.Context | None = None) -> bytes:
    """Record a send event and return the 53-byte header for it."""
    first, ts, lts, sketch = _send_event(state, context)
    # Every field is already valid (Timestamp, LamportClock and the state
    # check their ranges), so pack directly instead of building a TTExt.
    return STRUCT.pack(first, ts.ptp_ns, ts.ts_source, ts.clk_quality, ts.uncertainty_ns, lts, sketch.to_bytes())


def send_text(state: TempoTraceState, context: context_api.Context | None = None) -> str:
    """Record a send event and return the 71-character text header for it.

    Bytes 0..20 are exactly 28 base64 characters (21 = 7 groups of 3), so the
    text is the head's characters followed by the sketch's 43, which the
    sketch caches: a span that sends several times encodes its sketch once
    (the same construction as ``TTExt.to_header``).
    """
    first, ts, lts, sketch = _send_event(state, context)
    head = STRUCT_HEAD.pack(first, ts.ptp_ns, ts.ts_source, ts.clk_quality, ts.uncertainty_ns, lts)
    return _b2a(head, newline=False).translate(_TO_URL).decode() + sketch._text()


def receive(state: TempoTraceState, header: TTExt, context: context_api.Context | None) -> context_api.Context:
    """Merge a validated header's Lamport value and return ``context`` carrying it."""
    recv_lts = state.lamport.merge(header.lts)
    if context:
        parent = trace.get_current_span(context).get_span_context()
        parent_id = parent.span_id if parent.is_remote and parent.is_valid else 0
        ctx = context
    else:  # None or an empty Context (a dict): no span, so no remote parent
        parent_id = 0
        ctx = context if context is not None else context_api.Context()
    hop_seen[0] = True
    # tuple.__new__: RemoteHop's generated __new__ is a Python frame, and
    # every field here is already known good.
    return context_api.set_value(REMOTE_HOP_KEY, _new_tuple(RemoteHop, (header, recv_lts, parent_id)), ctx)


def reject(state: TempoTraceState, err: Exception, where: str) -> None:
    """Count and log (at debug) a refused header."""
    error_class = err.error_class if isinstance(err, HeaderError) else type(err).__name__
    state.count_rejection(error_class)
    _log.debug("tempotrace: refused %s: %s", where, err)
