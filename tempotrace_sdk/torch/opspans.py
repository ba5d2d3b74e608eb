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

Where the op spans go to one file exporter of ours through our batch
processor, native/opcall/tt_opspans.c writes each record's span as those two
would, byte for byte (tests/torch/test_op_spans_json.py), and the processor
queues the bytes: ``json_spans`` builds, once per release, what that pass
needs already encoded (each group's attributes, each op's names, the parent
span's fields, the attributes a span gets from its process and from each
clock epoch). A release it cannot describe (a policy to judge, epochs no
longer told apart, an exporter of another kind) is made the ``ReadableSpan``
way. Why: a ``ReadableSpan`` and its encoding cost about ten times the record.
"""

from __future__ import annotations

import logging
import secrets
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor, sampling
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ..clocks._native import native
from ..clocks.domain import checked_once
from ..clocks.leapseconds import leap_table, tai_to_utc_ns
from ..otel import lifecycle
from ..otel.batching import TempoTraceBatchProcessor
from ..otel.configure import current_handle
from ..otel.context import TempoTraceState, get_state
from ..otel.file_export import JsonLinesSpanExporter
from ..otel.otlp_json import encodes_group, key_values_json
from ..otel.processor import QUALITY_NAMES, TempoTraceSpanProcessor, process_needs
from ..otel.processor import _attributes as stamp_attributes
from ..otel.records import SpanRecord
from ..otel.sdk_internals import processors_of, provider_processor, span_lock
from ..semconv import (
    CLK_QUALITY,
    CLOCK_EPOCH_BOUND_NS,
    CLOCK_EPOCH_NS,
    STAMPS,
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
    UNCERTAINTY_NS,
)
from ..stamptext import TAI_UTC_BASE_NS
from ..torchops import SPECS, Kind, OpSpec
from . import spans as torch_spans
from .counts import count
from .recorder import AMBIGUOUS, BATCHED, COMPLETIONS, ERROR, RELEASE_AT, OpRecord, peer_and_tag, recorder

__all__ = ["JsonSpans", "deliver", "end_op", "error_span", "json_spans", "make_span", "pending_spans", "release",
           "span_id_of"]

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
    # an async receive's SDK span gets its completion at the end, after any mark; a blocking one at its start
    marked = record.flags & AMBIGUOUS
    if marked and spec.asynchronous == "always":
        attrs[TORCH_P2P_AMBIGUOUS] = True
    attrs[TORCH_COMPLETION] = COMPLETIONS[record.completion]
    if marked and spec.asynchronous != "always":
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
                                       SpanKind.INTERNAL, _start_attributes(record))
        return bool(result.decision.is_sampled())
    except Exception:  # a sampler that raises: the SDK would have failed the span; record it, counted
        count("sampler_failed")
        _log.debug("tempotrace.torch: the sampler failed on a root op", exc_info=True)
        return True


#: Completions only an async op's end is seen by (recorder.COMPLETIONS).
_ASYNC_ENDS = frozenset(("future", "wait", "sweep", "unfinished"))


def _start_attributes(record: OpRecord) -> dict[str, Any]:
    """The attributes the SDK path's ``start_span`` had: no ambiguity mark (set while the op is outstanding), a
    blocking op's completion as known at its start, an async op's none (an ``async_op=True`` collective that
    raised or is still pending cannot be told from a blocking one by its record: taken as blocking)."""
    attrs = op_attributes(record)
    attrs.pop(TORCH_P2P_AMBIGUOUS, None)
    completion = attrs.pop(TORCH_COMPLETION)
    if not (SPECS[record.op].asynchronous == "always" or completion in _ASYNC_ENDS):
        attrs[TORCH_COMPLETION] = "return"
    return attrs


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


# -- spans written in C (native/opcall/tt_opspans.c; spec/torch.md §1.4, "Spans from records") -----------
try:
    from .. import _opcall

    _encode_ended = _opcall.encode_ended
except ImportError:  # no native build: every span is made the old way
    _encode_ended = None

_json = msgspec.json.encode
#: The names the quality attribute takes, by ClockQuality (the processor's own list).
_QUALITIES = tuple(_json(q) for q in QUALITY_NAMES)
_COMPLETIONS = tuple(_json(c) for c in COMPLETIONS)


def _shape(spec: OpSpec) -> int:
    """An op's shape, as tt_opspans.c reads it: what its record's seq and root words hold (recorder.py), and for an
    async receive (3) that an ambiguity mark comes before its completion (op_attributes)."""
    if spec.kind is Kind.RECV and spec.asynchronous == "always":
        return 3
    return {Kind.COLLECTIVE: 0, Kind.SEND: 1, Kind.RECV: 2}[spec.kind]


#: Per op index: the span name, the op attribute's value (both as JSON strings), its shape.
_OPS = tuple((_json("torch." + s.name), _json(s.name), _shape(s)) for s in SPECS)
#: The attributes the C pass writes itself (tt_opspans.c KEY_*), and the fragment before each value.
_OP_KEY_NAMES = (TORCH_OP, TORCH_BYTES, TORCH_ROOT, TORCH_SEQ, TORCH_COMPLETION, STAMPS, CLK_QUALITY, UNCERTAINTY_NS,
                 TORCH_TAG, TORCH_PEER, TORCH_SRC, TORCH_DST, TORCH_P2P_SEQ, TORCH_P2P_AMBIGUOUS, TORCH_BATCHED)
_KEYS = tuple(b'{"key":' + _json(k) + b',"value":' for k in _OP_KEY_NAMES)
_OP_KEYS = frozenset(_OP_KEY_NAMES)
#: Roots are sampled without asking these samplers (the SDK's default is DEFAULT_ON).
_ALWAYS = (sampling.ALWAYS_ON, sampling.DEFAULT_ON)


class SpanGroup:
    """The Resource and scope the encoded spans of one release belong to (otel/otlp_json.py groups by them)."""

    __slots__ = ("resource", "scope")

    def __init__(self, resource: Any, scope: Any) -> None:
        self.resource = resource
        self.scope = scope


class JsonSpans:
    """One release's arguments to the C pass; ``processor`` takes what it writes."""

    __slots__ = ("args", "processor")

    def __init__(self, processor: TempoTraceBatchProcessor, args: tuple[Any, ...]) -> None:
        self.processor = processor
        self.args = args

    def take(self, ring: tuple[Any, ...], low: int, last: int) -> tuple[list[Any], list[int], int, int]:
        """(items, numbers left ENDED for Python, first number still waiting or -1, records lost), as
        tt_opspans.h says."""
        assert _encode_ended is not None
        items, left, first_waiting, lost = _encode_ended(ring, low, last, *self.args)
        return items, left, first_waiting, lost


#: Each group's attributes as JSON, by GroupInfo identity (the recorder's groups live as long as the process).
_group_json: dict[int, tuple[Any, bytes]] = {}


def _groups(groups: Sequence[Any], tail_keys: frozenset[str]) -> list[bytes | None]:
    out: list[bytes | None] = []
    for info in groups:
        cached = _group_json.get(id(info))
        if cached is None or cached[0] is not info:
            cached = _group_json[id(info)] = (info, key_values_json(info.attributes))
        keys = info.attributes.keys()
        # a key the op or the stamps write again would keep its first place (dict.update): Python's
        out.append(None if not keys.isdisjoint(tail_keys) or not keys.isdisjoint(_OP_KEYS) else cached[1])
    return out


def _parent_of(context: Any) -> tuple[bytes, bytes] | bool | None:
    """What the C pass writes for the parent in ``context``: (trace id, ``traceState``/``parentSpanId``/
    ``flags`` fields), None when that parent was not sampled (no span), True for none (a root op)."""
    parent = trace.get_current_span(context).get_span_context()
    if parent is None or not parent.is_valid:
        return True
    if not parent.trace_flags.sampled:
        return None
    tail = b""
    if parent.trace_state:
        tail += b',"traceState":' + _json(",".join(f"{k}={v}" for k, v in parent.trace_state.items()))
    tail += b',"parentSpanId":"' + parent.span_id.to_bytes(8, "big").hex().encode() + b'"'
    tail += b',"flags":768' if parent.is_remote else b',"flags":256'
    return parent.trace_id.to_bytes(16, "big").hex().encode(), tail


class _Epochs:
    """The C pass's ``epochs()``: a fresh check of the host clock domain (after the pass has seen every record it
    takes ended, so each reading was taken before the check, as make_spans's ``checked_once`` after its take),
    then (each epoch's window as the pass tests a reading against it, or None without a domain; per epoch, the
    attributes its spans carry besides the stamps, as JSON); None when the domain no longer tells epochs apart
    (Python labels)."""

    __slots__ = ("domain", "needed", "resource")

    def __init__(self, domain: Any, needed: Mapping[str, Any] | None, resource: Any) -> None:
        self.domain = domain
        self.needed = needed
        self.resource = resource

    def __call__(self) -> tuple[Any, tuple[bytes, ...]] | None:
        needed = dict(self.needed or {})
        if self.domain is None:
            return None, (key_values_json(needed),)
        windows = self.domain.label_windows()  # (not inside checked_once: release's take comes first)
        if windows is None:
            return None
        resource = self.resource
        carried = self.needed if self.needed is not None else resource.attributes if resource is not None else {}
        tails = tuple(key_values_json(needed if carried.get(CLOCK_EPOCH_NS) == epoch.mid_ns else {
            **needed, CLOCK_EPOCH_NS: epoch.mid_ns, CLOCK_EPOCH_BOUND_NS: epoch.half_ns}) for epoch, _, _ in windows)
        return tuple((epoch.mid_ns, epoch.half_ns, since, limit) for epoch, since, limit in windows), tails


def json_spans(state: TempoTraceState, resource: Any, scope: Any, processors: Sequence[Any], groups: Sequence[Any],
               sampler: Any, nonce: int, nonce_high: int) -> JsonSpans | None:
    """The C pass for this release, or None where the spans must be made the old way. Not inside
    ``checked_once``: the pass checks the clock itself, after its scan."""
    if _encode_ended is None or len(processors) != 1 or native() is None:  # (TEMPOTRACE_PUREPYTHON)
        return None
    processor = processors[0]
    # exactly ours: the Parquet exporter (a subclass) and a user's exporter read ReadableSpans
    if type(processor) is not TempoTraceBatchProcessor or type(processor.exporter) is not JsonLinesSpanExporter:
        return None
    if state._policy is not None and state.contract is not None:
        return None  # a verdict per span
    if not encodes_group(resource, scope):
        return None  # a Resource or scope value otlp_json leaves to upstream's encoder, which reads ReadableSpans
    needed = process_needs(state, resource)
    # every key a span's tail may carry, whichever epochs the check finds
    tail_keys = frozenset(needed or ()) | {CLOCK_EPOCH_NS, CLOCK_EPOCH_BOUND_NS}
    table = leap_table()
    # every reading a second past the last leap maps by its offset (offset_at_tai compares a float there)
    boundary = (table.starts[-1] + table.offsets[-1] + 1) * 1_000_000_000
    leap = (boundary, table.offsets[-1] * 1_000_000_000, TAI_UTC_BASE_NS)
    args = (SpanGroup(resource, scope), nonce, nonce_high, _groups(groups, tail_keys), [g.rank for g in groups],
            _OPS, _parent_of, sampler is None or any(sampler is s for s in _ALWAYS), leap,
            _Epochs(state.domain, needed, resource), _KEYS, _COMPLETIONS, _QUALITIES)
    return JsonSpans(processor, args)


def end_op(number: int, completion: int = 1) -> bool:
    """End op ``number``'s record (Recorder.end, ``completion`` a COMPLETIONS code); once RELEASE_AT ended ops wait
    under retain="export", make their spans now, as the C call does. False: not ended (as Recorder.end)."""
    if not recorder.end(number, completion):
        return False
    if recorder.ended >= RELEASE_AT and recorder.retain == "export":
        release()
    return True


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
