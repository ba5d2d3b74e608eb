"""Point-to-point bodies: send/recv/isend/irecv, the ``*_object_list`` forms and ``batch_isend_irecv``
(spec/torch.md §1, §2, §3.3).

Every carried message has a side message with the sender's record, posted
*before* the data on both sides (in a batch, right before its data op), and
the decision to carry it is made from the mode, the tag and the peer alone,
on both sides alike (§3.6): a span or record that cannot be made sends the
absent record, never nothing. An any-source receive posts its side receive
once its sender is known. A receive is tracked while outstanding (at the end):
an any-source and a specific one outstanding together on one (group, tag) are
marked ambiguous (spec/torch.md §2).
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from opentelemetry.trace import Span

from ..semconv import (
    TORCH_BATCHED,
    TORCH_BYTES,
    TORCH_COMPLETION,
    TORCH_DST,
    TORCH_OP,
    TORCH_P2P_AMBIGUOUS,
    TORCH_P2P_SEQ,
    TORCH_PEER,
    TORCH_SRC,
    TORCH_TAG,
)
from ..torchops import SPEC_INDEX, Kind, OpSpec, Reader, tensor_bytes
from ..wire.torchrecord import RecordKind
from .carriage import SIDE_MODES, records
from .carriage.owed import pay
from .carriage.side import SideRecv, post_side_send, side_buffer, side_tag, take_spare
from .counts import count
from .groups import GroupInfo, group_info
from .opspans import error_span
from .pending import PendingOp, registry
from .recorder import AMBIGUOUS, BATCHED, p2p_word, recorder
from .spans import end_span
from .wrappers import (
    OP_ERROR_ATTR,
    ORIGINAL_ATTR,
    attributes,
    begin,
    blocking_completion,
    call,
    call_recorded,
    call_recorded_async,
    failed,
    hide_our_frames,
    inside,
    on_device,
    op_facts,
    peer_of,
    register_native,
    settings,
    unwrap,
)

__all__ = ["Markable", "OpenReceives", "Posted", "RecordMark", "posted", "receive", "released", "send", "traced_batch"]

try:
    from .. import _opcall
except ImportError:  # not built: every op through the Python wrapper
    _opcall = None

_log = logging.getLogger(__name__)


def _carried_tag(info: GroupInfo, tag: int, peer: int) -> int | None:
    """The side message's tag, or None: not carried (the receiving side decides the same, §3.6)."""
    return side_tag(info, tag) if settings.carriage in SIDE_MODES and peer >= 0 else None


def _accepting(info: GroupInfo, channel: tuple[str, int, int]) -> bool:
    """A gloo channel whose side messages nobody takes stops carrying (counted); a device one never may."""
    if not info.tags or registry.sender.accepting(channel):
        return True
    count("side_backlog")
    return False


def send(spec: OpSpec, reader: Reader, original: Callable[..., Any], info: GroupInfo,
         args: Any, kwargs: dict[str, Any], seq: int | None = None) -> Any:
    """A send traced (``seq``: taken already by the C call, whose record failed: an SDK span)."""
    try:
        dst, tag = peer_of(spec, reader, info, args, kwargs), int(reader.get(args, kwargs, "tag") or 0)
    except Exception:  # arguments torch will refuse
        count("untraced")
        return original(*args, **kwargs)
    recording = seq is None
    if seq is None:
        seq = info.next_p2p(info.rank, dst, tag)
    device = on_device(spec, reader, info, args, kwargs)
    stag = _carried_tag(info, tag, dst)
    if stag is not None and not _accepting(info, (info.key, dst, stag)):
        stag = None
    if recording and stag is None and not (device or settings.sdk_spans):
        number = _record(spec, reader, info, seq, dst, tag, args, kwargs)
        if number >= 0:
            if spec.asynchronous == "always":
                return call_recorded_async(original, number, spec, args, kwargs, future_key=_p2p_kind(info))
            return call_recorded(original, number, spec, args, kwargs)

    def span_attributes() -> dict[str, Any]:
        attrs = attributes(spec, reader, info, args, kwargs)
        attrs.update({TORCH_TAG: tag, TORCH_PEER: dst, TORCH_SRC: info.rank, TORCH_DST: dst, TORCH_P2P_SEQ: seq})
        if spec.asynchronous != "always":
            attrs[TORCH_COMPLETION] = blocking_completion(spec, device)
        return attrs

    begun = begin(spec.name, info, span_attributes, record=(RecordKind.P2P, seq) if stag is not None else None)
    if stag is not None:
        _post_side_send(info, begun.record, dst, stag)  # before the data (§3.3)
    result = call(original, begun.span, args, kwargs, spec.name)
    try:
        if spec.asynchronous == "always" and result is not None:
            registry.watch(PendingOp(begun.span, [result], device=device, future_key=_p2p_kind(info)))
        else:
            end_span(begun.span, None if spec.asynchronous != "always" else {TORCH_COMPLETION: "return"})
    except Exception:
        failed(spec.name, begun.span)
    return result


def _post_side_send(info: GroupInfo, record: bytes, dst: int, stag: int) -> None:
    try:
        tensor, work = post_side_send(info, record, dst, stag)
        registry.keep_send((info.key, dst, stag), tensor, work, info.tags)
    except Exception:  # torch refused the send itself
        count("side_send_failed")
        _log.debug("tempotrace.torch: side message not sent", exc_info=True)


def receive(spec: OpSpec, reader: Reader, original: Callable[..., Any], info: GroupInfo,
            args: Any, kwargs: dict[str, Any], seq: int | None = None) -> Any:
    """A receive traced (``seq`` as for ``send``)."""
    try:
        src, tag = peer_of(spec, reader, info, args, kwargs), int(reader.get(args, kwargs, "tag") or 0)
    except Exception:
        count("untraced")
        return original(*args, **kwargs)
    recording = seq is None
    if seq is None:
        seq = info.next_p2p(src, info.rank, tag) if src >= 0 else -1
    device = on_device(spec, reader, info, args, kwargs)
    stag = side_tag(info, tag) if settings.carriage in SIDE_MODES else None  # any source: once the sender is known
    if recording and stag is None and src >= 0 and not (device or settings.sdk_spans):
        number = _record(spec, reader, info, seq, src, tag, args, kwargs)
        if number >= 0:
            return _recorded_receive(spec, original, info, number, tag, args, kwargs)

    def span_attributes() -> dict[str, Any]:
        attrs = attributes(spec, reader, info, args, kwargs)
        attrs.update({TORCH_TAG: tag, TORCH_PEER: src, TORCH_DST: info.rank})
        if src >= 0:
            attrs.update({TORCH_SRC: src, TORCH_P2P_SEQ: seq})
        if spec.asynchronous != "always":
            attrs[TORCH_COMPLETION] = blocking_completion(spec, device)
        return attrs

    begun = begin(spec.name, info, span_attributes)
    outstanding = _outstanding(info, begun.span, tag, src < 0)  # before torch posts it
    side = None
    if stag is not None and src >= 0:  # before the data (§3.3)
        side = _post_side_recv(info, src, stag, seq, ordered=info.tags)
    try:
        result = call(original, begun.span, args, kwargs, spec.name)
    except BaseException:
        released(outstanding)
        raise
    try:
        _received(spec, info, begun.span, (src, tag, seq), stag, side, result, device, outstanding)
    except Exception:
        released(outstanding)
        failed(spec.name, begun.span)
    return result


def _p2p_kind(info: GroupInfo) -> str:
    """PendingOp.future_key of this group's p2p works: its backend's (gloo's have no future)."""
    return "p2p " + info.backend


def _record(spec: OpSpec, reader: Reader, info: GroupInfo, seq: int, peer: int, tag: int, args: Any,
            kwargs: dict[str, Any]) -> int:
    """A host op that carries nothing, with its peer known: ``_begin_record`` with its bytes (op_facts)."""
    try:
        nbytes, _ = op_facts(spec, reader, info, args, kwargs,
                             reader.get(args, kwargs, spec.data) if spec.data is not None else None)
    except Exception:
        _log.debug("tempotrace.torch: %s not recorded; its span is made now", spec.name, exc_info=True)
        return -1
    return _begin_record(spec.name, info, seq, nbytes, peer, tag)


def _begin_record(name: str, info: GroupInfo, seq: int, nbytes: int, peer: int, tag: int, flags: int = 0) -> int:
    """A point-to-point op's start recorded (recorder.py), its peer and tag in the root's place, with ``flags``
    (BATCHED): its number; -1 where its span is made the SDK's way (a peer or tag no record holds, a record not
    made). The group's next blocking ops are the C call's (wrappers.native_wrapper)."""
    word = p2p_word(peer, tag)
    if word is None:
        return -1
    try:
        number = recorder.begin(SPEC_INDEX[name], info, seq, nbytes, word, flags)
    except Exception:
        _log.debug("tempotrace.torch: %s not recorded; its span is made now", name, exc_info=True)
        return -1
    if number >= 0 and not info.native_registered and info.device.type == "cpu":  # (a host group, as collective())
        register_native(info)
    return number


# -- what the C call of a blocking send or receive calls (native/opcall/tt_opcall.c p2p_call; handed to it at
# the end of this module): the rest of the Python body where it made no record, and a recorded receive's
# ambiguity tracking, as ``_recorded_receive`` does it.
def _native_tail(spec: OpSpec, reader: Reader, original: Callable[..., Any], info: GroupInfo, seq: int,
                 args: Any, kwargs: dict[str, Any]) -> Any:
    body = send if spec.kind is Kind.SEND else receive
    try:
        return body(spec, reader, original, info, args, kwargs, seq)
    except BaseException as err:
        hide_our_frames(err)  # (the C call has no frame of its own to hide ours behind)
        raise


def _native_posted(info: GroupInfo, number: int, tag: int) -> Posted | None:
    return _outstanding(info, RecordMark(number), tag, False)


def _recorded_receive(spec: OpSpec, original: Callable[..., Any], info: GroupInfo, number: int, tag: int,
                      args: Any, kwargs: dict[str, Any]) -> Any:
    """A recorded receive, tracked for ambiguity while outstanding as the SDK path tracks its span."""
    outstanding = _outstanding(info, RecordMark(number), tag, False)  # before torch posts it
    if spec.asynchronous == "always":
        try:
            return call_recorded_async(original, number, spec, args, kwargs,
                                       functools.partial(_release_when_done, outstanding), _p2p_kind(info))
        except BaseException:
            released(outstanding)
            raise
    try:  # released once it returned, before its record ends (while it can still be marked, as a span is)
        return call_recorded(original, number, spec, args, kwargs, functools.partial(_completed, outstanding))
    except BaseException:
        released(outstanding)  # it raised: it overlaps nothing more
        raise


class RecordMark:
    """What ``posted`` marks for a recorded receive: its record's AMBIGUOUS flag, as a span's attribute."""

    __slots__ = ("number",)

    def __init__(self, number: int) -> None:
        self.number = number

    def is_recording(self) -> bool:
        return True  # the record is open while the receive is outstanding; ``set_attribute`` tells if it left

    def set_attribute(self, key: str, value: Any) -> None:
        if not recorder.flag(self.number, AMBIGUOUS):
            raise LookupError("the receive's record left the ring")  # _mark: a mark that could not be set


def _outstanding(info: GroupInfo, sp: Markable, tag: int, any_source: bool) -> Posted | None:
    """Track a receive until its completion is seen; an overlap of the two kinds is marked and counted."""
    try:
        receive, found = posted(info.open_recvs, sp, tag, any_source)
    except Exception:
        count("trace_failed")
        _log.debug("tempotrace.torch: receive not tracked for ambiguity", exc_info=True)
        return None
    _count_ambiguous(found)
    return receive


def _completed(receive: Posted | None) -> None:
    """The receive was seen complete: it no longer overlaps anything (an any-source one may end an overlap)."""
    _count_ambiguous(released(receive, completed=True))


def _count_ambiguous(found: Found) -> None:
    if found[0]:
        count("p2p_ambiguous", found[0])
    if found[1]:
        count("p2p_ambiguous_unmarked", found[1])


def _release_when_done(receive: Posted | None, _op: PendingOp) -> None:
    _completed(receive)


def _received(spec: OpSpec, info: GroupInfo, sp: Span, message: tuple[int, int, int], stag: int | None,
              side: SideRecv | None, result: Any, device: bool, outstanding: Posted | None) -> None:
    """After the data receive returned: the span ends once the data and its side message are in."""
    src, tag, _ = message
    if spec.asynchronous == "always":
        op = PendingOp(sp, [result] if result is not None else [], carried=side, device=device,
                       future_key=_p2p_kind(info))
        op.on_done = functools.partial(_any_source_done, info, tag, stag, outstanding) if src < 0 else \
            functools.partial(_release_when_done, outstanding)
        registry.watch(op)
        return
    _completed(outstanding)  # a blocking receive completed
    extra: dict[str, Any] = {}
    if src < 0 and isinstance(result, int) and result >= 0:  # any source: now we know who sent it
        extra = _any_source_known(info, result, tag)
        if stag is not None:
            side = _post_side_recv(info, result, stag, extra[TORCH_P2P_SEQ])
    registry.watch(PendingOp(sp, [], carried=side, attrs=extra, device=device))


def _any_source_known(info: GroupInfo, src: int, tag: int) -> dict[str, Any]:
    return {TORCH_PEER: src, TORCH_SRC: src, TORCH_P2P_SEQ: info.next_p2p(src, info.rank, tag)}


def _any_source_done(info: GroupInfo, tag: int, stag: int | None, outstanding: Posted | None,
                     op: PendingOp) -> None:
    """An any-source irecv completed: number it and fetch its side message from the sender now known."""
    _completed(outstanding)
    group_src = op.works[0]._source_rank()
    src = info.ranks[group_src]
    op.attrs.update(_any_source_known(info, src, tag))
    if stag is not None:
        op.carried = _post_side_recv(info, src, stag, op.attrs[TORCH_P2P_SEQ])


def _post_side_recv(info: GroupInfo, src: int, stag: int, seq: int, *, ordered: bool = False) -> SideRecv | None:
    try:
        return SideRecv.post(info, src, stag, seq, ordered=ordered)
    except Exception:  # torch refused the receive itself
        count("side_recv_failed")
        _log.debug("tempotrace.torch: side message not received", exc_info=True)
        return None


def traced_batch(original: Callable[..., Any]) -> Callable[..., Any]:
    """``batch_isend_irecv``: a span per P2POp, each side message right before its op in the same batch."""

    @functools.wraps(original)
    def batch_isend_irecv(p2p_op_list: Any) -> Any:
        try:
            if not settings.active or inside.get():
                return original(p2p_op_list)
            pay()  # a step's owed exchange first (spec/torch.md §4.2)
            try:
                ops, plans, info = _batch_plan(list(p2p_op_list))
            except Exception:  # arguments torch will refuse
                count("untraced")
                _log.debug("tempotrace.torch: batch_isend_irecv not traced", exc_info=True)
                return original(p2p_op_list)
            token = inside.set(True)
            try:
                works = original(ops)
            except BaseException as err:
                try:
                    setattr(err, OP_ERROR_ATTR, "batch_isend_irecv")
                except Exception:
                    pass
                for plan in plans:
                    released(plan.outstanding)
                    if plan.span is not None:
                        end_span(plan.span, {TORCH_COMPLETION: "error"}, error=err)
                    else:
                        error_span(plan.number, err)
                raise
            finally:
                inside.reset(token)
            try:
                return _batch_done(plans, info, works, len(ops))
            except Exception:  # the ops were issued: hand the program its works whatever happened here
                for plan in plans:
                    released(plan.outstanding)
                count("trace_failed")
                _log.debug("tempotrace.torch: tracing batch_isend_irecv failed after the op", exc_info=True)
                n = len(p2p_op_list)
                return [works[p.index] for p in plans] if len(works) == len(ops) and len(plans) == n else works
        except BaseException as err:
            hide_our_frames(err)  # torch's error, with the traceback the untraced call gives (hide_our_frames)
            raise

    setattr(batch_isend_irecv, ORIGINAL_ATTR, original)
    return batch_isend_irecv


class _Planned:
    """One user P2POp of a batch: its span or record, its place in the list handed to torch, its side message."""

    __slots__ = ("channel", "device", "index", "number", "outstanding", "peer", "seq", "side_index", "side_recv",
                 "side_tensor", "span")

    def __init__(self, span: Span | None, peer: int, seq: int, device: bool, number: int = -1) -> None:
        self.span, self.peer, self.seq, self.device = span, peer, seq, device
        self.number = number  #: its record (recorder.py); -1: it has a span
        self.index = -1
        self.side_index = -1  #: the side op's place in the list (-1: none posted here)
        self.side_tensor: Any = None  #: a send's record tensor
        self.side_recv: SideRecv | None = None  #: a receive's side receive (a spare taken over, or filled in later)
        self.channel: tuple[str, int, int] | None = None
        self.outstanding: Posted | None = None  #: a receive, tracked until it completed (posted)


def _batch_plan(user_ops: list[Any]) -> tuple[list[Any], list[_Planned], GroupInfo]:
    """The op list handed to torch (each user op preceded by its side op) and a plan per user op."""
    info = group_info(user_ops[0].group if user_ops else None)
    ops: list[Any] = []
    plans: list[_Planned] = []
    try:
        _plan_each(info, user_ops, ops, plans)
    except BaseException:  # the batch runs untraced: its receives are not outstanding here, its records go
        for plan in plans:
            released(plan.outstanding)
            if plan.number >= 0:
                recorder.discard(plan.number)
        raise
    return ops, plans, info


def _plan_each(info: GroupInfo, user_ops: list[Any], ops: list[Any], plans: list[_Planned]) -> None:
    isend, irecv = c10d.isend, c10d.irecv
    for op in user_ops:
        is_send = unwrap(op.op) is isend
        if op.op is not isend and op.op is not irecv:  # e.g. .op reassigned by hand: torch checks identity
            op = _copy_p2p(op, isend if is_send else irecv)
        peer, tag = int(op.peer), int(op.tag)
        src, dst = (info.rank, peer) if is_send else (peer, info.rank)
        seq = info.next_p2p(src, dst, tag)
        device = getattr(getattr(op.tensor, "device", None), "type", "cpu") != "cpu"
        stag = _carried_tag(info, tag, peer)
        if stag is not None and is_send and not _accepting(info, (info.key, peer, stag)):
            stag = None
        name = "isend" if is_send else "irecv"

        nbytes = tensor_bytes(op.tensor, False)
        number = -1
        if stag is None and not (device or settings.sdk_spans):  # carrying nothing, on the host: a record
            number = _begin_record(name, info, seq, -1 if nbytes is None else nbytes, peer, tag, BATCHED)
        if number >= 0:
            plan = _Planned(None, peer, seq, device, number)
        else:
            attrs = dict(info.attributes)
            attrs.update({TORCH_OP: name, TORCH_BATCHED: True, TORCH_PEER: peer, TORCH_SRC: src, TORCH_DST: dst,
                          TORCH_TAG: tag, TORCH_P2P_SEQ: seq})
            if nbytes is not None:
                attrs[TORCH_BYTES] = nbytes
            begun = begin(name, info, functools.partial(dict, attrs),
                          record=(RecordKind.P2P, seq) if stag is not None and is_send else None)
            plan = _Planned(begun.span, peer, seq, device)
        plans.append(plan)
        if not is_send:
            plan.outstanding = _outstanding(info, plan.span if plan.span is not None else RecordMark(number), tag,
                                            False)
        if stag is not None and is_send:  # the side message goes right before its data (§3.3)
            plan.side_tensor, plan.channel = records.outgoing(info, begun.record), (info.key, peer, stag)
            plan.side_index = len(ops)
            ops.append(dist.P2POp(isend, plan.side_tensor, peer, op.group, stag))
        elif stag is not None:
            spare = take_spare(info, peer, stag)
            if spare is not None:  # gloo: the spare is posted already, before this data
                plan.side_recv = SideRecv(info, spare.buffer, peer, stag, seq, spare.work, ordered=True)
            else:
                buffer, readable = side_buffer(info)
                plan.side_index = len(ops)
                plan.side_recv = SideRecv(info, buffer, peer, stag, seq, None, readable=readable, ordered=info.tags)
                ops.append(dist.P2POp(irecv, buffer, peer, op.group, stag))
        plan.index = len(ops)
        ops.append(op)


def _batch_done(plans: list[_Planned], info: GroupInfo, works: list[Any], issued: int) -> list[Any]:
    per_op = len(works) == issued  # gloo: one work per op; a coalescing backend (NCCL): one for all
    for plan in plans:
        data = [works[plan.index]] if per_op else list(works)
        side_work = (works[plan.side_index] if per_op else (works[0] if works else None)) \
            if plan.side_index >= 0 else None
        if plan.side_tensor is not None and plan.channel is not None:  # a send's side message: keep it until out
            registry.keep_send(plan.channel, plan.side_tensor, side_work, info.tags)
        side = plan.side_recv
        if side is not None and side.work is None:
            side.work = side_work
        pending = PendingOp(plan.span, data, carried=side, device=plan.device, number=plan.number,
                            future_key=_p2p_kind(info))
        pending.on_done = functools.partial(_release_when_done, plan.outstanding)
        registry.watch(pending)
    return [works[plan.index] for plan in plans] if per_op else works


def _copy_p2p(op: Any, func: Any) -> Any:
    copy = object.__new__(type(op))
    copy.__dict__.update(op.__dict__)
    copy.op = func
    return copy

# -- ambiguous receives (spec/torch.md §2) ----------------------------------------------------------------
# Receives whose pairing the sequence numbers cannot vouch for (spec/torch.md §2).
#
# A specific receive is numbered when it is posted, an any-source one when it
# is seen complete. Which message each took is torch's choice (gloo: a
# channel's messages go to its receives in posting order), so the numbers can
# name another message than the one a receive got, and the side messages
# follow the numbers, so no record says so (no ``RECORD_SEQ``). That happens
# only when, on one (group, tag) of this rank:
#
# - an any-source and a specific receive are outstanding together (either was
#   posted while the other was outstanding); or
# - an any-source receive is seen complete while an any-source receive posted
#   before it is still outstanding (a later one numbered first).
#
# Every receive involved is marked ``tempotrace.torch.p2p_ambiguous`` and
# counted ``p2p_ambiguous``; the analysis pairs none of them.
#
# *Outstanding* is what this rank can know: from just before torch is asked to
# post the receive until its completion is seen (§1.3: the blocking call's
# return, the future, the user's wait, a sweep) or its call raised. Both ends
# err towards more overlap, never less. The count of receives per (group, src,
# dst, tag) stays exact, so receives after an overlap pair as usual.
#
# One small lock guards the per-(group, tag) sets; it is never held across a
# torch call, only while a receive is added, removed or marked. A receive is
# removed before its span ends, so a receive found ambiguous has its span still
# open, except one whose torch call raised (its span ended with the error just
# before its removal): the callers (p2p.py) count those
# ``p2p_ambiguous_unmarked``. The sets live on each group's ``GroupInfo.open_recvs``.

_lock = threading.Lock()
_order = itertools.count()  #: posting order (drawn under the lock)


class Markable(Protocol):
    """What a receive's ambiguity is marked on: its SDK span, or its record (RecordMark)."""

    def is_recording(self) -> bool: ...

    def set_attribute(self, key: str, value: Any) -> None: ...


class OpenReceives:
    """The receives outstanding on one (group, tag) of this rank, by kind."""

    __slots__ = ("any_source", "specific")

    def __init__(self) -> None:
        self.any_source: set[Posted] = set()
        self.specific: set[Posted] = set()


class Posted:
    """One receive while it is outstanding (identity-hashed)."""

    __slots__ = ("ambiguous", "any_source", "open", "order", "recording", "span", "tag")

    def __init__(self, span: Markable, tag: int, any_source: bool) -> None:
        self.span = span
        self.tag = tag
        self.any_source = any_source
        self.recording = span.is_recording()  #: a span that can carry the mark (an untraced one cannot)
        self.ambiguous = False
        self.order = -1
        self.open: dict[int, OpenReceives] | None = None  #: the group's table while outstanding


Found = tuple[int, int]  #: receives found ambiguous now, and how many of them could not be marked


def posted(table: dict[int, OpenReceives], span: Markable, tag: int, any_source: bool) -> tuple[Posted, Found]:
    """Record a receive about to be posted on (the group of ``table``, ``tag``); mark the overlap it makes."""
    receive = Posted(span, tag, any_source)
    with _lock:
        receive.order = next(_order)
        receive.open = table
        entry = table.get(tag)
        if entry is None:
            entry = table[tag] = OpenReceives()
        mine, other = (entry.any_source, entry.specific) if any_source else (entry.specific, entry.any_source)
        mine.add(receive)
        found = _mark_all(other, receive) if other else (0, 0)
    return receive, found


def released(receive: Posted | None, *, completed: bool = False) -> Found:
    """The receive no longer overlaps anything: seen ``completed`` (an any-source one completing before one
    posted earlier marks both), or its call raised. Idempotent."""
    if receive is None:
        return 0, 0
    with _lock:
        table, receive.open = receive.open, None
        entry = None if table is None else table.get(receive.tag)
        if table is None or entry is None:
            return 0, 0
        found = (0, 0)
        if receive.any_source:
            entry.any_source.discard(receive)
            if completed and entry.any_source:
                earlier = [r for r in entry.any_source if r.order < receive.order]
                if earlier:
                    found = _mark_all(earlier, receive)
        else:
            entry.specific.discard(receive)
        if not entry.any_source and not entry.specific:
            del table[receive.tag]
    return found


def _mark_all(others: set[Posted] | list[Posted], receive: Posted) -> Found:
    """Under the lock: ``receive`` and ``others`` are ambiguous."""
    fresh = [r for r in others if not r.ambiguous]
    if not receive.ambiguous:
        fresh.append(receive)
    return len(fresh), sum(not _mark(r) for r in fresh)


def _mark(receive: Posted) -> bool:
    """Under the lock: the receive is outstanding (or completing), so its span is open unless its call just
    raised. False: a span that could carry the mark but no longer can."""
    receive.ambiguous = True
    if not receive.recording:
        return True  # untraced or not sampled: there is no span to mark, nothing is lost
    try:
        if receive.span.is_recording():
            receive.span.set_attribute(TORCH_P2P_AMBIGUOUS, True)
            return True
    except Exception:  # an SDK span that refused: the same as an ended one
        pass
    return False


if _opcall is not None:
    _opcall.configure_p2p(_native_tail, _native_posted, _completed, released)
