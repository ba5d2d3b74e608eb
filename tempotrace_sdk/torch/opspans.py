"""Op records into spans: the one place a record becomes the span it stands for (spec/torch.md §1.4).

A record's span is the span an SDK span of that op would have been -- its
name, parent, attributes, ``tempotrace.stamps`` (the stamping processor's own
``_attributes``, so the text, the quality, the per-process attributes, the
clock epoch and a policy verdict are written by the same code), its Lamport
places -- built as a ``ReadableSpan`` straight from the record: no SDK
``Span``, no attribute cleaning (the values are ours and typed), no processor
hooks. It goes to the export processors only (configure()'s; for a provider
set up by hand, every processor but the stamping one), at ``on_end``: a
provider's other processors do not see op spans unless ``instrument(
sdk_spans=True)``.

Span ids are derived from this process's nonce and the op's number (a Weyl
sequence), so an op has one id however its span is made; a root op's trace id
likewise.
"""

from __future__ import annotations

import logging
import secrets
import time
import traceback
from collections.abc import Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ..clocks.domain import checked_once
from ..clocks.leapseconds import tai_to_utc_ns
from ..otel import lifecycle
from ..otel.configure import current_handle
from ..otel.context import TempoTraceState, get_state
from ..otel.processor import TempoTraceSpanProcessor
from ..otel.processor import _attributes as stamp_attributes
from ..otel.records import SpanRecord
from ..otel.sdk_internals import processors_of, provider_processor, span_lock
from ..semconv import (
    TORCH_BATCHED,
    TORCH_BYTES,
    TORCH_COMPLETION,
    TORCH_DST,
    TORCH_OP,
    TORCH_P2P_AMBIGUOUS,
    TORCH_P2P_SEQ,
    TORCH_PEER,
    TORCH_ROOT,
    TORCH_SEQ,
    TORCH_SRC,
    TORCH_TAG,
)
from ..torchops import SPECS, Kind
from . import spans as torch_spans
from .counts import count
from .opjson import json_spans
from .recorder import AMBIGUOUS, BATCHED, COMPLETIONS, ERROR, OpRecord, peer_and_tag, recorder

__all__ = ["deliver", "error_span", "make_span", "pending_spans", "release", "span_id_of"]

_log = logging.getLogger(__name__)

_MASK64 = (1 << 64) - 1
_UNSET = Status(StatusCode.UNSET)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


class _Nonce:
    value = secrets.randbits(64)
    high = secrets.randbits(64)

    def after_fork_in_child(self) -> None:
        # the child's op numbers start again: its ids must not repeat the parent's
        _Nonce.value, _Nonce.high = secrets.randbits(64), secrets.randbits(64)


#: Held here: the after-fork registry keeps its objects weakly.
_nonce = _Nonce()
lifecycle.renew_after_fork(_nonce)


#: How long a dump waits for an open op span's lock (its attributes being set) before it leaves the span out.
SPAN_LOCK_WAIT_S = 0.05

#: An odd constant (2^64 / golden ratio): number -> number * _WEYL is a bijection of 64-bit integers.
_WEYL = 0x9E3779B97F4A7C15


def span_id_of(number: int) -> int:
    """The span id of op ``number`` in this process: a Weyl sequence from the process's random nonce, so
    distinct ops get distinct ids (never 0) at one multiply each."""
    return ((_Nonce.value + number * _WEYL) & _MASK64) or 1


def _trace_id_of(number: int) -> int:
    """A root op's trace id: its span id, above 64 further random bits of the process."""
    return (_Nonce.high << 64) | span_id_of(number)


class _StartOf:
    """What the stamping processor's ``_attributes`` reads of a span: its start time and its Resource."""

    __slots__ = ("resource", "start_time")

    def __init__(self, start_time: int, resource: Any) -> None:
        self.start_time = start_time
        self.resource = resource


def op_attributes(record: OpRecord) -> dict[str, Any]:
    """The op's own attributes, exactly as the SDK path writes them, in its order (wrappers.attributes, then a
    collective's seq or a point-to-point op's peer, tag and p2p seq as p2p.py writes them, the completion)."""
    spec = SPECS[record.op]
    attrs = dict(record.group.attributes)
    attrs[TORCH_OP] = spec.name
    if record.flags & BATCHED:
        return _batched_attributes(attrs, record)
    if record.nbytes >= 0:
        attrs[TORCH_BYTES] = record.nbytes
    kind = spec.kind
    if kind is Kind.COLLECTIVE:
        if record.root >= 0:
            attrs[TORCH_ROOT] = record.root
        attrs[TORCH_SEQ] = record.seq
    else:
        peer, tag = peer_and_tag(record.root)
        rank = record.group.rank
        attrs[TORCH_TAG] = tag
        attrs[TORCH_PEER] = peer
        if kind is Kind.SEND:
            attrs[TORCH_SRC], attrs[TORCH_DST] = rank, peer
        else:
            attrs[TORCH_DST], attrs[TORCH_SRC] = rank, peer
        attrs[TORCH_P2P_SEQ] = record.seq
    attrs[TORCH_COMPLETION] = COMPLETIONS[record.completion]
    if record.flags & AMBIGUOUS:
        attrs[TORCH_P2P_AMBIGUOUS] = True
    return attrs


def _batched_attributes(attrs: dict[str, Any], record: OpRecord) -> dict[str, Any]:
    """A ``batch_isend_irecv`` op's own attributes after its op, in p2p.py's order (_plan_each, then the end's)."""
    peer, tag = peer_and_tag(record.root)
    rank = record.group.rank
    attrs[TORCH_BATCHED] = True
    attrs[TORCH_PEER] = peer
    attrs[TORCH_SRC], attrs[TORCH_DST] = (rank, peer) if SPECS[record.op].kind is Kind.SEND else (peer, rank)
    attrs[TORCH_TAG] = tag
    attrs[TORCH_P2P_SEQ] = record.seq
    if record.nbytes >= 0:
        attrs[TORCH_BYTES] = record.nbytes
    if record.flags & AMBIGUOUS:
        attrs[TORCH_P2P_AMBIGUOUS] = True
    attrs[TORCH_COMPLETION] = COMPLETIONS[record.completion]
    return attrs


def make_span(state: TempoTraceState, record: OpRecord, resource: Any, scope: Any, dump_utc: int = 0,
              error: BaseException | None = None) -> ReadableSpan:
    """The span of ``record``; an open op (a dump) is ``pending``, its stamps without an end, its end time the
    dump's. ``error``: the op raised it (its status and exception event, as the SDK's ``record_exception``)."""
    span_id = span_id_of(record.number)
    parent = record.parent
    if parent is not None:
        context = SpanContext(parent.trace_id, span_id, False, parent.trace_flags, parent.trace_state)
    else:
        context = SpanContext(_trace_id_of(record.number), span_id, False, _SAMPLED)
    ptp, unc, source, quality, lts = record.start
    start_utc = tai_to_utc_ns(ptp)
    end = record.end
    if end is not None:
        eptp, eunc, esource, equality, elts = end
        end_utc = tai_to_utc_ns(eptp)
        stamps = stamp_attributes(state, _StartOf(start_utc, resource),  # type: ignore[arg-type]
                                  SpanRecord(lts, ptp, unc, quality, source, span_id), (elts, eptp, eunc, equality),
                                  esource, end_utc, ())
    else:
        end_utc = max(dump_utc, start_utc)
        stamps = stamp_attributes(state, _StartOf(start_utc, resource),  # type: ignore[arg-type]
                                  SpanRecord(lts, ptp, unc, quality, source, span_id), None, 0, 0, ())
    attrs = op_attributes(record)
    attrs.update(stamps)
    events, status = ((), _UNSET) if error is None else (
        (_exception_event(error),), Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    return ReadableSpan("torch." + SPECS[record.op].name, context, parent, resource, attrs, kind=SpanKind.INTERNAL,
                        start_time=start_utc, end_time=end_utc, instrumentation_scope=scope, events=events,
                        status=status)


def _pending_of_open(state: TempoTraceState, sp: Any, dump_utc: int) -> ReadableSpan | None:
    """What a dump shows of an op whose SDK span is still open: the span so far, ``pending``, its stamps without
    an end (as make_span writes an open record). Its own end follows under the same span id."""
    context = sp.get_span_context()
    record = state.live.get(context.span_id)
    if record is None or not sp.is_recording():
        return None  # ended meanwhile, or never stamped: nothing a dump can add
    lock: Any = span_lock(sp)  # the SDK span's threading.Lock
    # the op's thread may be setting its attributes right now -- or be the thread this dump interrupted
    if lock is not None and not lock.acquire(timeout=SPAN_LOCK_WAIT_S):
        count("dump_span_busy")
        return None
    try:
        attrs = dict(sp.attributes or {})
    finally:
        if lock is not None:
            lock.release()
    attrs[TORCH_COMPLETION] = "pending"
    start_utc = sp.start_time or dump_utc
    attrs.update(stamp_attributes(state, sp, record, None, 0, 0, ()))
    return ReadableSpan(sp.name, context, sp.parent, sp.resource, attrs, kind=sp.kind, start_time=start_utc,
                        end_time=max(dump_utc, start_utc), instrumentation_scope=sp.instrumentation_scope)


def pending_spans(state: TempoTraceState, open_spans: Sequence[Any], dump_utc: int) -> list[ReadableSpan]:
    """``_pending_of_open`` of each of ``open_spans``; one that cannot be made is counted and left out."""
    out = []
    with checked_once(state.domain):
        for sp in open_spans:
            try:
                made = _pending_of_open(state, sp, dump_utc)
            except Exception:
                count("trace_failed")
                _log.debug("tempotrace.torch: an open op's span not dumped", exc_info=True)
                continue
            if made is not None:
                out.append(made)
    return out


def _exception_event(err: BaseException) -> Event:
    """The event the SDK's ``Span.record_exception`` adds, with the same attributes."""
    module, qualname = type(err).__module__, type(err).__qualname__
    return Event("exception", {
        "exception.type": f"{module}.{qualname}" if module and module != "builtins" else qualname,
        "exception.message": str(err),
        "exception.stacktrace": "".join(traceback.format_exception(err)),
        "exception.escaped": "False",
    }, time.time_ns())


def error_span(number: int, err: BaseException) -> None:
    """Op ``number`` raised ``err``: its end and its span now, in either retention mode, under the op's own
    span id (a dump that showed it pending shows the same op). Never raises."""
    try:
        with recorder.lock:  # no release or dump takes the record between its end and its error span
            if not recorder.end(number, ERROR):
                return
            record = recorder.take_one(number)
            if record is None or not sampled(record, _sampler()):
                return
            state = get_state()
            resource, scope, processors = destination()
            with checked_once(state.domain):
                span = make_span(state, record, resource, scope, error=err)
            deliver([span], processors)
    except Exception:
        count("trace_failed")
        _log.debug("tempotrace.torch: the span of a failed op was not made", exc_info=True)


def destination() -> tuple[Any, Any, Sequence[SpanProcessor]]:
    """(resource, scope, processors) op spans go to: configure()'s export processors when it set up the provider
    our tracer comes from, else every processor of that provider but the stamping one."""
    # the tracer is looked up each time: tests (and a user) may replace it
    resource, scope, multi, processors = processors_of(torch_spans.tracer())
    handle = current_handle()
    if handle is not None and multi is not None and provider_processor(handle.provider) is multi:
        return resource, scope, handle.export_processors
    return resource, scope, [p for p in processors if not isinstance(p, TempoTraceSpanProcessor)]


def deliver(spans: Sequence[ReadableSpan], processors: Sequence[SpanProcessor]) -> None:
    """Each span to each processor's ``on_end``; a processor that raises is counted, never passed on."""
    for processor in processors:
        try:
            for sp in spans:
                processor.on_end(sp)
        except Exception:
            count("export_failed")
            _log.debug("tempotrace.torch: a processor refused op spans", exc_info=True)


def sampled(record: OpRecord, sampler: Any) -> bool:
    """Would the SDK path have recorded this op? Its parent's flag; a root op (no span around it) is asked of
    the provider's sampler, with the trace id its span gets, as ``start_span`` would have asked it."""
    parent = record.parent
    if parent is not None:
        return bool(parent.trace_flags.sampled)
    if sampler is None:
        return True
    try:
        # an empty context: the op had no span around it (a ParentBased sampler given None would read the
        # releasing thread's current span instead)
        result = sampler.should_sample(Context(), _trace_id_of(record.number), "torch." + SPECS[record.op].name,
                                       SpanKind.INTERNAL, op_attributes(record))
        return bool(result.decision.is_sampled())
    except Exception:  # a sampler that raises: the SDK would have failed the span; record it, counted
        count("sampler_failed")
        _log.debug("tempotrace.torch: the sampler failed on a root op", exc_info=True)
        return True


def _sampler() -> Any:
    return getattr(torch_spans.tracer(), "sampler", None)  # an SDK Tracer's (public); None for another


def make_spans(state: TempoTraceState, records: Sequence[OpRecord], resource: Any, scope: Any,
               dump_utc: int = 0) -> list[ReadableSpan]:
    """The spans of the sampled ``records``; one that cannot be made is counted (``trace_failed``) and left out,
    the others are made all the same."""
    spans = []
    sampler = _sampler()
    with checked_once(state.domain):  # every reading was taken before this check
        for r in records:
            if not sampled(r, sampler):
                continue
            try:
                spans.append(make_span(state, r, resource, scope, dump_utc))
            except Exception:
                count("trace_failed")
                _log.debug("tempotrace.torch: an op span not made", exc_info=True)
    return spans


def release(*, since: int | None = None, force: bool = False) -> None:
    """Make the span of every ended op (numbered ``since`` or later) and hand them on; open ops wait. Under
    retain="ring" only when ``since`` is given (a sampled step). Never raises."""
    if since is None and (recorder.retain != "export" or not (force or recorder.holding())):
        return
    try:
        with recorder.lock:
            state = get_state()
            resource, scope, processors = destination()
            # no checked_once around the take: the clock is checked after it (the C pass's epochs(), make_spans)
            try:
                native = json_spans(state, resource, scope, processors, recorder.groups, _sampler(),
                                    _Nonce.value, _Nonce.high)
            except Exception:  # (a value its encoder refuses): this release the old way
                count("trace_failed")
                _log.debug("tempotrace.torch: op spans not writable in C", exc_info=True)
                native = None
            try:
                items, records = recorder.take_ended(since, native)
            except Exception:  # the C pass failed: what it had taken is lost (counted), the rest goes on
                if native is None:
                    raise
                count("trace_failed")
                _log.debug("tempotrace.torch: op spans not written in C", exc_info=True)
                items, records = recorder.take_ended(since)
            if items:
                try:
                    native.processor.on_end_encoded(items)  # type: ignore[union-attr]
                except Exception:  # counted as deliver() counts a refusal: the records Python took still go
                    count("export_failed")
                    _log.debug("tempotrace.torch: the processor refused op spans", exc_info=True)
            if records:
                deliver(make_spans(state, records, resource, scope), processors)
    except Exception:
        count("trace_failed")
        _log.debug("tempotrace.torch: op spans not made", exc_info=True)


def step_entered(step: Any) -> None:
    step.first_op = recorder.mark()


def step_left(step: Any) -> None:
    """A step's exit: its op spans are made (retain="export"; under "ring" every ``export_every``-th step's)."""
    if recorder.retain == "export":
        release(force=True)
        return
    every = recorder.export_every
    if every and step.number is not None and step.number % every == 0:
        release(since=step.first_op)


lifecycle.release_before_flush(release, recorder.holding)
