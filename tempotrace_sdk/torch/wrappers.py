"""The bodies of the wrapped entry points: one span per op per rank (spec/torch.md §1, §2, §3).

A wrapper passes the call straight to torch when nothing is instrumented,
when it runs inside another traced op of this thread (re-entrancy: no op is
traced twice), or when this rank is not in the group. Tracing itself never
raises into the program (§1.1): a span that cannot be started leaves the op
untraced (counted ``untraced``), a GPU timer that fails leaves it CPU-timed
(``gpu_failed``), a failure after the op is counted (``trace_failed``). None
of these changes what the rank sends (§3.6): whether an op carries a record
depends only on what every rank sees alike, and a record that cannot be made
travels as the absent record. The op's own exceptions propagate unchanged,
marked so that ``step()`` knows they came out of torch.distributed (§4.2),
with our frames kept out of their tracebacks (``hide_our_frames``, at the end).

Point-to-point bodies: p2p.py; which body an entry point gets: install.py (``make_wrapper``).
"""

from __future__ import annotations

import contextvars
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch.distributed.distributed_c10d as c10d
from opentelemetry import trace
from opentelemetry.trace import Span

from ..clocks._native import native
from ..semconv import TORCH_BYTES, TORCH_COMPLETION, TORCH_OP, TORCH_ROOT, TORCH_SEQ
from ..torchops import SPEC_INDEX, Kind, OpSpec, Reader, tensor_bytes
from ..wire.torchrecord import RecordKind, absent_record
from .carriage.records import Exchange, make_record
from .counts import count
from .groups import GroupInfo
from .opspans import end_op, error_span, release
from .pending import PendingOp, registry
from .recorder import RELEASE_AT, recorder
from .spans import end_span, start_span, track

__all__ = ["ORIGINAL_ATTR", "Begun", "Settings", "begin", "call", "call_recorded", "call_recorded_async",
           "collective", "forget_native_groups", "hide_our_frames", "inside", "native_wrapper", "on_device",
           "op_facts", "ours", "raised_by_op", "settings", "traced", "unwrap"]

_log = logging.getLogger(__name__)

#: A wrapper's attribute naming the function it wraps.
ORIGINAL_ATTR = "__tempotrace_original__"
#: Set on an exception that came out of a traced op (the name of the op).
OP_ERROR_ATTR = "_tempotrace_torch_op"

try:
    from .. import _opcall
except ImportError:  # a source tree never built, or not Linux: the Python wrapper does it all
    _opcall = None

#: True while this thread runs a traced op: calls made inside it are not traced again. Where the C call is
#: built, its thread-local flag (get/set/reset as a ContextVar's, but without the allocations a set and a reset
#: cost an op); else a ContextVar. An op is one synchronous call: its thread runs no other context meanwhile.
inside: Any = (_opcall.Inside() if _opcall is not None
               else contextvars.ContextVar("tempotrace_torch_inside", default=False))


@dataclass
class Settings:
    carriage: str = "step"
    active: bool = False
    #: A ``GpuTimer`` when collectives on CUDA tensors are timed with events (spec/torch.md §6).
    gpu: Any = None
    #: "export" (every op's span exported) or "ring" (the last ops kept, exported when dumped; spec/torch.md §8.1).
    retain: str = "export"
    #: True: every op gets an SDK span at once, which a provider's other processors see (spec/torch.md §1.4).
    sdk_spans: bool = False

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if _opcall is not None:  # the C call reads a copy of the fields it needs (an op then reads no attribute)
            _opcall.settings_changed()


settings = Settings()


def unwrap(func: Any) -> Any:
    return getattr(func, ORIGINAL_ATTR, func)


@dataclass(slots=True)
class Begun:
    """What tracing prepared before an op: its span, the record it carries, the GPU timer's start mark."""

    span: Span  #: INVALID_SPAN when tracing failed: the op runs untraced, its carriage goes all the same
    record: bytes  #: the absent record when there is nothing to carry or no span to make it on
    mark: Any = None


def begin(name: str, info: GroupInfo, attributes: Callable[[], dict[str, Any]], *,
          record: tuple[RecordKind, int] | None = None, timed: tuple[Any, ...] | None = None) -> Begun:
    """Start the op's span, make its record (``record``: kind and seq) and, for a ``timed`` op (the GPU
    timer's arguments: reader, spec, args, kwargs), its GPU start mark. Never raises."""
    try:
        sp = start_span("torch." + name, attributes())
        track(sp)  # seen by the hang watchdog and a dump until it ends
    except Exception:
        count("untraced")
        _log.debug("tempotrace.torch: %s runs untraced: its span could not start", name, exc_info=True)
        return Begun(trace.INVALID_SPAN, absent_record())
    made = make_record(record[0], info.rank, record[1], sp) if record is not None else absent_record()
    mark = None
    gpu = settings.gpu
    if timed is not None and gpu is not None:
        try:
            mark = gpu.begin(*timed)
        except Exception:  # e.g. an event record refused: the span stays, timed on the CPU
            count("gpu_failed")
            _log.debug("tempotrace.torch: GPU timing of %s failed", name, exc_info=True)
    return Begun(sp, made, mark)


def call(original: Callable[..., Any], sp: Span, args: Any, kwargs: dict[str, Any], name: str) -> Any:
    """Run the op with re-entrancy off; its exception ends the span, is marked as an op's, and propagates."""
    return _run_op(original, args, kwargs, name, lambda err: end_span(sp, {TORCH_COMPLETION: "error"}, error=err))


def _run_op(original: Callable[..., Any], args: Any, kwargs: dict[str, Any], name: str,
            on_error: Callable[[BaseException], None]) -> Any:
    """The op with re-entrancy off; its exception is marked as an op's, given to ``on_error`` (which ends its
    span) and propagates."""
    token = inside.set(True)
    try:
        return original(*args, **kwargs)
    except BaseException as err:
        try:
            setattr(err, OP_ERROR_ATTR, name)
        except Exception:
            pass
        on_error(err)
        raise
    finally:
        inside.reset(token)


def raised_by_op(err: BaseException) -> bool:
    """``err`` came out of a traced op."""
    return getattr(err, OP_ERROR_ATTR, None) is not None


def on_device(spec: OpSpec, reader: Reader, info: GroupInfo, args: Any, kwargs: dict[str, Any]) -> bool:
    """The op runs on a device stream: its data is on a GPU (no data: the group's records' device)."""
    try:
        data = reader.get(args, kwargs, spec.data) if spec.data is not None else None
        if isinstance(data, (list, tuple)):
            data = data[0] if data else None
        device = getattr(data, "device", None)
        return (device.type if device is not None else info.device.type) != "cpu"
    except Exception:
        return False


def blocking_completion(spec: OpSpec, device: bool) -> str:
    """How a blocking call's end is known (§1.3): on a device stream a return says only that the op is queued,
    except for ``barrier``, which c10d synchronises with the host."""
    return "queued" if device and spec.name != "barrier" else "return"


def _root(spec: OpSpec, reader: Reader, info: GroupInfo, args: Any, kwargs: dict[str, Any]) -> int | None:
    root = reader.get(args, kwargs, spec.root)
    if root is not None:
        return int(root)
    group_root = reader.get(args, kwargs, spec.group_root)
    return None if group_root is None else info.ranks[int(group_root)]


def peer_of(spec: OpSpec, reader: Reader, info: GroupInfo, args: Any, kwargs: dict[str, Any]) -> int:
    """A p2p op's peer (global rank); -1 when none is given (any source; a send torch will refuse)."""
    root = _root(spec, reader, info, args, kwargs)
    return -1 if root is None else root


def op_facts(spec: OpSpec, reader: Reader, info: GroupInfo, args: Any, kwargs: dict[str, Any],
             data: Any) -> tuple[int, int]:
    """(bytes, root) of an op whose ``data`` argument was read already, -1 for absent: the one rule for
    TORCH_BYTES / TORCH_ROOT, whether a record keeps them or ``attributes`` writes them (§9.3)."""
    root = _root(spec, reader, info, args, kwargs) if spec.root else None
    nbytes = -1
    if spec.data is not None and not (spec.root_data_only and root != info.rank):
        found = tensor_bytes(data, spec.data_list)
        if found is not None:
            nbytes = found
    elif spec.root_data_only:
        nbytes = 0
    return nbytes, (root if spec.kind is Kind.COLLECTIVE and root is not None else -1)


def _data(spec: OpSpec, reader: Reader, args: Any, kwargs: dict[str, Any]) -> Any:
    return reader.get(args, kwargs, spec.data) if spec.data is not None else None


def attributes(spec: OpSpec, reader: Reader, info: GroupInfo, args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The attributes every op span has: the group, the op, its root and bytes (semantic-conventions §9.2)."""
    attrs = dict(info.attributes)
    attrs[TORCH_OP] = spec.name
    nbytes, root = op_facts(spec, reader, info, args, kwargs, _data(spec, reader, args, kwargs))
    if nbytes >= 0:
        attrs[TORCH_BYTES] = nbytes
    if root >= 0:
        attrs[TORCH_ROOT] = root
    return attrs


def _is_async(spec: OpSpec, reader: Reader, args: Any, kwargs: dict[str, Any]) -> bool:
    return spec.asynchronous == "always" or (
        spec.asynchronous == "async_op" and bool(reader.get(args, kwargs, "async_op"))
    )


def collective(spec: OpSpec, reader: Reader, original: Callable[..., Any], info: GroupInfo,
                args: Any, kwargs: dict[str, Any]) -> Any:
    seq = int(next(info.coll_seq))  # counted traced or not: the numbers must stay equal on every rank
    asynchronous = _is_async(spec, reader, args, kwargs)
    # The common case first, reading each argument once: a blocking op on a host group, carrying nothing.
    if not (asynchronous or settings.sdk_spans or settings.carriage == "op" or info.device.type != "cpu"):
        number = _record_host_op(spec, reader, info, seq, args, kwargs)
        if number >= 0:
            if not info.native_registered:
                register_native(info)  # its next ops are recorded by the C call (native_wrapper)
            return call_recorded(original, number, spec, args, kwargs)
    return traced(spec, reader, original, info, seq, asynchronous, args, kwargs)


def traced(spec: OpSpec, reader: Reader, original: Callable[..., Any], info: GroupInfo, seq: int,
           asynchronous: bool, args: Any, kwargs: dict[str, Any]) -> Any:
    """A collective not recorded (an async op, a device op, one carried or given an SDK span, one whose record
    could not be made): its span the SDK's way, seq taken already."""
    device = on_device(spec, reader, info, args, kwargs)
    carry = settings.carriage == "op" and not _coalescing(info)  # alike on every rank (§3.6)
    if settings.carriage == "op" and not carry:
        count("coalesced_not_carried")

    def span_attributes() -> dict[str, Any]:
        attrs = attributes(spec, reader, info, args, kwargs)
        attrs[TORCH_SEQ] = seq
        if not asynchronous:  # known now: one attribute call fewer at the end (an error or GPU timing overwrites it)
            attrs[TORCH_COMPLETION] = blocking_completion(spec, device)
        return attrs

    if not (carry or device or settings.sdk_spans):  # nothing carried or GPU-timed: a record
        number = _record(spec, reader, info, seq, args, kwargs)
        if number >= 0:
            if asynchronous:
                return call_recorded_async(original, number, spec, args, kwargs)
            return call_recorded(original, number, spec, args, kwargs)
    begun = begin(spec.name, info, span_attributes, record=(RecordKind.EXCHANGE, seq) if carry else None,
                  timed=(reader, spec, args, kwargs))
    result = call(original, begun.span, args, kwargs, spec.name)
    exchange = _exchange(info, begun.record, seq, asynchronous) if carry else None
    try:  # the op succeeded: nothing after this may fail the program
        _collective_end(begun, exchange, asynchronous, device, result)
    except Exception:
        failed(spec.name, begun.span)
    return result


def _record(spec: OpSpec, reader: Reader, info: GroupInfo, seq: int, args: Any, kwargs: dict[str, Any]) -> int:
    """The op's start recorded (recorder.py): its number, or -1 (its span is then made the SDK's way)."""
    try:
        nbytes, root = op_facts(spec, reader, info, args, kwargs, _data(spec, reader, args, kwargs))
        return recorder.begin(SPEC_INDEX[spec.name], info, seq, nbytes, root)
    except Exception:
        _log.debug("tempotrace.torch: %s not recorded; its span is made now", spec.name, exc_info=True)
        return -1


def _record_host_op(spec: OpSpec, reader: Reader, info: GroupInfo, seq: int, args: Any,
                    kwargs: dict[str, Any]) -> int:
    """``_record`` for an op of a host group: -1 when its data is on a device after all (a CUDA tensor on gloo:
    timed and ended as a device op) or the record could not be made."""
    try:
        data = _data(spec, reader, args, kwargs)
        first = data[0] if isinstance(data, (list, tuple)) and data else data
        device = getattr(first, "device", None)
        if device is not None and device.type != "cpu":
            return -1
        nbytes, root = op_facts(spec, reader, info, args, kwargs, data)
        return recorder.begin(SPEC_INDEX[spec.name], info, seq, nbytes, root)
    except Exception:
        _log.debug("tempotrace.torch: %s not recorded; its span is made now", spec.name, exc_info=True)
        return -1


def _run_recorded(original: Callable[..., Any], number: int, spec: OpSpec, args: Any,
                  kwargs: dict[str, Any]) -> Any:
    """``call`` for a recorded op: its exception makes its span at once (with the error) and propagates."""
    token = inside.set(True)
    try:
        return original(*args, **kwargs)
    except BaseException as err:
        try:
            setattr(err, OP_ERROR_ATTR, spec.name)
        except Exception:
            pass
        error_span(number, err)  # its span now, with the error
        raise
    finally:
        inside.reset(token)


def call_recorded_async(original: Callable[..., Any], number: int, spec: OpSpec, args: Any,
                        kwargs: dict[str, Any], on_done: Callable[[PendingOp], None] | None = None,
                        future_key: str | None = None) -> Any:
    """A recorded async op: its record ends when its work is seen complete (pending.py), ``on_done`` then."""
    work = _run_recorded(original, number, spec, args, kwargs)
    # (no work: "return" at once)
    op = PendingOp(None, [work] if work is not None else [], number=number, future_key=future_key)
    op.on_done = on_done
    try:  # the op was issued: nothing after this may fail the program
        registry.watch(op)
    except Exception:  # not watched: ended now rather than left open (a hang to the watchdog), its receive released
        count("trace_failed")
        _log.debug("tempotrace.torch: tracing %s failed after the op", spec.name, exc_info=True)
        try:
            if on_done is not None:
                on_done(op)
            end_op(number)
        except Exception:
            _log.debug("tempotrace.torch: %s's record not ended", spec.name, exc_info=True)
    return work


def call_recorded(original: Callable[..., Any], number: int, spec: OpSpec, args: Any,
                  kwargs: dict[str, Any], returned: Callable[[], None] | None = None) -> Any:
    """``call`` for a recorded blocking op: a return ends the record (after ``returned``, when given)."""
    result = _run_recorded(original, number, spec, args, kwargs)
    if returned is not None:
        try:
            returned()
        except Exception:
            count("trace_failed")
            _log.debug("tempotrace.torch: tracing %s failed after the op", spec.name, exc_info=True)
    try:  # the op succeeded: nothing after this may fail the program
        end_op(number)
    except Exception:
        count("trace_failed")
        _log.debug("tempotrace.torch: tracing %s failed after the op", spec.name, exc_info=True)
    return result


def _exchange(info: GroupInfo, record: bytes, seq: int, asynchronous: bool) -> Exchange | None:
    try:
        return Exchange(info, record, seq, async_op=asynchronous)
    except Exception:  # torch refused the all_gather itself (a broken group): nothing local can fix that
        count("exchange_failed")
        _log.debug("tempotrace.torch: exchange failed", exc_info=True)
        return None


def _collective_end(begun: Begun, exchange: Exchange | None, asynchronous: bool, device: bool, result: Any) -> None:
    sp, mark, gpu = begun.span, begun.mark, settings.gpu
    if mark is not None and gpu is not None and gpu.end(mark, sp, exchange, work=result if asynchronous else None):
        return
    if asynchronous and result is not None:
        registry.watch(PendingOp(sp, [result], carried=exchange, device=device))
    elif asynchronous:  # async_op=True, yet no work came back
        end_span(sp, {TORCH_COMPLETION: "return"})
    else:
        end_span(sp, exchange.finish() if exchange is not None else None)


def failed(name: str, sp: Span) -> None:
    """Tracing failed after the op: counted, and the span ends (it would otherwise stay open for good)."""
    count("trace_failed")
    _log.debug("tempotrace.torch: tracing %s failed after the op", name, exc_info=True)
    if sp.is_recording():
        end_span(sp)


# -- the common case in C (native/opcall/tt_opcall.c) -------------------------------------------------------
#
# A blocking collective on a host group, its data plain CPU tensors, nothing
# carried, no SDK span: the C call reads the arguments, takes the seq, writes
# the record into the recorder's ring and calls torch, with no Python frame of
# ours (issue 23: the Python around a record cost a rank several times the
# record). Every other case, and any it is unsure of, it hands to the Python
# wrapper before taking anything. It knows only the groups this module has
# registered (a group's first op always runs here).

#: The C call is used (tests turn it off to compare the two).
NATIVE_CALL = True
_configured = False


def native_wrapper(spec: OpSpec, original: Callable[..., Any], slow: Callable[..., Any],
                   reader: Reader) -> Callable[..., Any] | None:
    """The C call wrapping ``original`` (``slow``: the Python wrapper, for every case it does not take), or None
    when there is none: the op is not a collective or point-to-point op that can block, or the module is not
    built or not wanted (``TEMPOTRACE_PUREPYTHON``)."""
    if (_opcall is None or not NATIVE_CALL or spec.objects or spec.asynchronous == "always"
            or not _configure()):
        return None
    p2p = _P2P_KINDS.get(spec.kind)
    if p2p is None:
        return None

    def where(name: str | None) -> tuple[int, str, Any] | None:
        return None if name is None else reader.where(name)

    fast = _opcall.HostOp(
        original, slow, spec, reader, spec.name, SPEC_INDEX[spec.name], where("group"), where(spec.data),
        spec.data_list, where("async_op") if spec.asynchronous == "async_op" else None, where(spec.root),
        where(spec.group_root), spec.root_data_only, p2p, where("tag") if p2p else None)
    return fast  # type: ignore[no-any-return]


#: The C call's kinds of op (native/opcall/tt_opcall.c P2P_SEND, P2P_RECV; 0: a collective).
_P2P_KINDS = {Kind.COLLECTIVE: 0, Kind.SEND: 1, Kind.RECV: 2}


def _configure() -> bool:
    global _configured
    if _configured:
        return True
    loaded = native()
    if loaded is None:  # no native stamp (TEMPOTRACE_PUREPYTHON, a stale build): nothing for the C call to write with
        return False
    lib, ffi = loaded
    import torch
    from opentelemetry.context import get_current

    from ..otel.context import get_state
    from ..otel.sdk_internals import context_var
    from .carriage import owed

    def target(stamp: Any, mapping: Any) -> tuple[int, int, object] | None:
        op_target = getattr(stamp, "op_target", None)
        return None if op_target is None else op_target(mapping)

    _opcall.configure(
        settings=settings, inside=inside, owed_due=owed.due, get_state=get_state, get_current=get_current,
        recorder=recorder, error_span=error_span, release=release, count=count, tail=_tail,
        world=weakref.ref(c10d._world), target=target, tensor_type=torch.Tensor, parameter_type=torch.nn.Parameter,
        context_var=context_var(), release_at=RELEASE_AT,
        start=int(ffi.cast("uintptr_t", ffi.addressof(lib, "tt_oprec_start"))),
        end=int(ffi.cast("uintptr_t", ffi.addressof(lib, "tt_oprec_end"))))
    _configured = True
    return True


def register_native(info: GroupInfo) -> None:
    """Hand a host group to the C call (where it is built): from its next op on, it records them."""
    if _opcall is None:
        return
    try:
        pg = info.pg
        if pg is not None:
            _opcall.register(pg, info, info.coll_seq, recorder.group_index(info), info.rank, tuple(info.ranks))
            info.native_registered = True
    except Exception:  # a group the C call cannot key: its ops stay with the Python wrapper
        _log.debug("tempotrace.torch: group %s not handed to the C call", info.key, exc_info=True)


def forget_native_groups() -> None:
    """The C call forgets every group (uninstrument: a new instrument() starts their sequence numbers again)."""
    if _opcall is not None:
        _opcall.forget_groups()


def _tail(spec: OpSpec, reader: Reader, original: Callable[..., Any], info: GroupInfo, seq: int,
          asynchronous: bool, args: Any, kwargs: dict[str, Any]) -> Any:
    """``traced`` for the C call, which has no frame of its own to hide ours behind."""
    try:
        return traced(spec, reader, original, info, seq, asynchronous, args, kwargs)
    except BaseException as err:
        hide_our_frames(err)
        raise


def _coalescing(info: GroupInfo) -> bool:
    """Inside torch's coalescing manager for this group: ops are deferred, an exchange would join them."""
    try:
        return info.pg in c10d._world.pg_coalesce_state
    except Exception:
        return False

# -- the tracer kept out of the program's tracebacks (spec/torch.md §1.1) --------------------------------
#
# An exception torch raises inside a traced op passes through our wrapper
# frames on its way up; printed, they make the tracer look guilty of a failure
# that is torch's (issue 21: a failed all-reduce "in" ``tempotrace_sdk/torch``).
# CPython's import machinery does the same for its own frames
# (``_call_with_frames_removed``); here: the outermost frame of ours that an
# exception passes through calls ``hide_our_frames(err)`` and re-raises with a
# bare ``raise``, which on Python 3.11+ adds no frame, so the traceback is the
# one the untraced program prints. (On 3.10 a bare ``raise`` restores the
# traceback it caught, so our frames stay there.)
#
# Only an exception that came from elsewhere loses our frames: one raised by
# our own code (its innermost frame is ours) keeps them, so a bug of ours still
# shows where it is. A function implemented in C (``Work.wait``) leaves no frame
# of its own, so what it raises ends in the frame of ours that called it: that
# caller says so (``from_call=True``).

#: Modules whose frames are hidden: the torch integration's (``tempotrace_sdk.torch.*``).
_PACKAGE = __name__.rpartition(".")[0] + "."


def ours(tb: TracebackType) -> bool:
    """The traceback entry is a frame of one of our modules."""
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith(_PACKAGE)


def hide_our_frames(err: BaseException, *, from_call: bool = False) -> None:
    """Drop our frames from ``err``'s traceback, unless ``err`` was raised in one of them (``from_call``: the
    caller knows it came out of the torch function it called). Never raises."""
    try:
        tb = err.__traceback__
        entries: list[TracebackType] = []
        while tb is not None:
            entries.append(tb)
            tb = tb.tb_next
        if not entries or (ours(entries[-1]) and not from_call) or not any(ours(t) for t in entries):
            return
        rebuilt: TracebackType | None = None
        for t in reversed(entries):
            if not ours(t):
                rebuilt = TracebackType(rebuilt, t.tb_frame, t.tb_lasti, t.tb_lineno)
        err.__traceback__ = rebuilt
    except Exception:  # a traceback we cannot rebuild: it keeps our frames, the program loses nothing
        pass
