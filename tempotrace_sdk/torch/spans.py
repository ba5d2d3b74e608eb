"""Spans for ops whose end is known later (async work, DDP buckets): start now, end from any thread.

Built on the public OpenTelemetry API and the two hooks the span processor
exports for this (``pending_start``: the processor stamps the start with the
very clock reading whose UTC form became the span's start time;
``stamp_end``: the end stamp written before ``end()``), exactly as
``@traced`` / ``span()`` do for spans that end where they started.

The SDK spans of traced ops still open are kept too (``open_ops``): the hang
watchdog and a dump see an op that is not a record (spec/torch.md §8.3).

A span started in a callback (DDP's reducer, autograd's engine) runs on a
thread that may not have our context: ``callback_context()`` gives it the
open step's span as parent (spec/torch.md §4.3). The open steps are
therefore kept here (``open_steps``, pushed and popped by ``step()``), below
everything that starts such spans (ddp.py, compute.py), so that none of them
imports steps.py.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ..clocks.base import Timestamp
from ..clocks.leapseconds import tai_to_utc_ns
from ..otel import lifecycle
from ..otel.context import TempoTraceState, get_state
from ..otel.processor import pending_start, stamp_end
from .counts import count

__all__ = [
    "callback_context",
    "current_step",
    "end_span",
    "now",
    "open_ops",
    "open_steps",
    "start_or_invalid",
    "start_span",
    "tracer",
    "track",
]

_log = logging.getLogger(__name__)

INSTRUMENTATION = "tempotrace_sdk.torch"
_tracer_cache: tuple[object, trace.Tracer] | None = None


def tracer() -> trace.Tracer:
    global _tracer_cache
    provider = trace.get_tracer_provider()
    cached = _tracer_cache
    if cached is not None and cached[0] is provider:
        return cached[1]
    made = provider.get_tracer(INSTRUMENTATION)
    _tracer_cache = (provider, made)
    return made


def now(state: TempoTraceState | None = None) -> Timestamp | None:
    """A clock reading, or None (counted) when the clock fails: tracing never fails the op."""
    st = state if state is not None else get_state()
    try:
        return st.clock.now()
    except Exception:
        st.count_error("torch_clock")
        _log.debug("tempotrace.torch: clock read failed", exc_info=True)
        return None


#: Open steps, innermost last: process-wide (a DDP hook runs on autograd's threads, not in our context).
#: ``step()`` pushes and pops them.
open_steps: list[tuple[int, Span]] = []


#: Op spans kept open at once, at most: a span nobody ends (a work never waited) is dropped from view first.
OPEN_OPS_MAX = 65536


#: The SDK spans of traced ops still open (async, device, point-to-point and carried ops: spec/torch.md §1.2):
#: span id -> (span, monotonic time it started), oldest first. ``end_span`` takes a span out.
open_ops: dict[int, tuple[Span, float]] = {}


class _OpenOpsAfterFork:
    def after_fork_in_child(self) -> None:
        open_ops.clear()  # the parent's ops, not the child's


#: Held here: the after-fork registry keeps its objects weakly.
_open_ops_after_fork = _OpenOpsAfterFork()
lifecycle.renew_after_fork(_open_ops_after_fork)


def track(sp: Span) -> None:
    """Keep op span ``sp`` in ``open_ops`` until it ends. Never raises."""
    try:
        if sp.is_recording():
            if len(open_ops) >= OPEN_OPS_MAX:
                open_ops.pop(next(iter(open_ops)), None)
                count("open_ops_dropped")
            open_ops[sp.get_span_context().span_id] = (sp, time.monotonic())
    except Exception:
        _log.debug("tempotrace.torch: an open op not tracked", exc_info=True)


def current_step() -> tuple[int, Span] | None:
    """(step number, step span) of the innermost open step, from any thread; None outside one."""
    return open_steps[-1] if open_steps else None


def callback_context() -> context_api.Context | None:
    """The parent for a span started in a callback (DDP's reducer, autograd's engine), whose thread may not
    have our context: the current span when there is one (None: the current context), else the open step's."""
    if trace.get_current_span().get_span_context().is_valid:
        return None
    open_step = current_step()
    return trace.set_span_in_context(open_step[1]) if open_step is not None else None

def start_span(name: str, attributes: dict[str, Any], context: context_api.Context | None = None, *,
               at: tuple[Timestamp, int] | None = None) -> Span:
    """A span started now by our clock (parent: ``context``, default the current one); or started ``at`` a
    reading taken earlier with its Lamport tick (a held op, compute.py)."""
    ts, lts = (now(), None) if at is None else at
    if ts is None:
        return tracer().start_span(name, context=context, kind=SpanKind.INTERNAL, attributes=attributes)
    start_utc = tai_to_utc_ns(ts.ptp_ns)
    token = pending_start.set((start_utc, ts, lts))
    try:
        return tracer().start_span(
            name, context=context, kind=SpanKind.INTERNAL, attributes=attributes, start_time=start_utc
        )
    finally:
        pending_start.reset(token)


def start_or_invalid(name: str, attributes: dict[str, Any], context: context_api.Context | None = None) -> Span:
    """``start_span``, or ``INVALID_SPAN`` (counted ``untraced``) when it fails (a span processor raising):
    what the span would have covered runs all the same (spec/torch.md §1.1). Never raises."""
    try:
        return start_span(name, attributes, context)
    except Exception:
        count("untraced")
        _log.debug("tempotrace.torch: %s runs untraced: its span could not start", name, exc_info=True)
        return trace.INVALID_SPAN


def end_span(
    sp: Span, attributes: dict[str, Any] | None = None, error: BaseException | None = None, ts: Timestamp | None = None,
    lts: int | None = None,
) -> None:
    """Set ``attributes``, stamp the end (``ts``, default now; ``lts``: the Lamport value ticked with ``ts``,
    default ticked now) and end the span. Never raises."""
    state = get_state()
    try:
        if open_ops:
            open_ops.pop(sp.get_span_context().span_id, None)
        if ts is None:
            ts = now(state)
        if sp.is_recording():
            if attributes:
                sp.set_attributes(attributes)
            if error is not None:
                sp.record_exception(error)
                sp.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            span_id = sp.get_span_context().span_id
            if ts is not None and span_id in state.live:
                stamp_end(state, sp, span_id, ts, lts)  # type: ignore[arg-type]  # an SDK span: it is in live
        sp.end(end_time=None if ts is None else tai_to_utc_ns(ts.ptp_ns))
    except Exception:
        state.count_error("torch_span_end")
        _log.debug("tempotrace.torch: ending a span failed", exc_info=True)
