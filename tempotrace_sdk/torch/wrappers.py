"""The bodies of the wrapped entry points: one span per op per rank (spec/torch.md §1, §2, §3).

A wrapper passes the call straight to torch when nothing is instrumented,
when it runs inside another traced op of this thread (re-entrancy: no op is
traced twice), or when this rank is not in the group. Tracing itself never
raises into the program: a failure to build attributes is counted and the
op runs untraced; the op's own exceptions propagate unchanged.
"""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from ..semconv import (
    TORCH_BATCHED,
    TORCH_BYTES,
    TORCH_COMPLETION,
    TORCH_DST,
    TORCH_OP,
    TORCH_P2P_SEQ,
    TORCH_PEER,
    TORCH_ROOT,
    TORCH_SEQ,
    TORCH_SRC,
    TORCH_TAG,
)
from .carriage import Exchange, SideRecv, count, make_record, record_tensor, side_buffer, side_send, side_tag
from .groups import GroupInfo, group_info
from .ops import Kind, OpSpec, Reader, tensor_bytes
from .pending import PendingOp, registry
from .record import RecordKind
from .spans import end_span, start_span

__all__ = ["ORIGINAL_ATTR", "Settings", "inside", "make_wrapper", "settings", "traced_batch", "unwrap"]

_log = logging.getLogger(__name__)

#: A wrapper's attribute naming the function it wraps.
ORIGINAL_ATTR = "__tempotrace_original__"

#: True while this thread runs a traced op: calls made inside it are not traced again.
inside: contextvars.ContextVar[bool] = contextvars.ContextVar("tempotrace_torch_inside", default=False)


@dataclass
class Settings:
    carriage: str = "step"
    active: bool = False
    #: A ``GpuTimer`` when collectives on CUDA tensors are timed with events (spec/torch.md §6).
    gpu: Any = None


settings = Settings()

def unwrap(func: Any) -> Any:
    return getattr(func, ORIGINAL_ATTR, func)


def make_wrapper(spec: OpSpec, original: Callable[..., Any]) -> Callable[..., Any]:
    reader = Reader(original)
    body = {Kind.COLLECTIVE: _collective, Kind.SEND: _send, Kind.RECV: _recv}[spec.kind]

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not settings.active or inside.get():
            return original(*args, **kwargs)
        group = reader.get(args, kwargs, "group")
        if group is dist.GroupMember.NON_GROUP_MEMBER:
            return original(*args, **kwargs)
        try:
            info = group_info(group)
            attrs = _attributes(spec, reader, info, args, kwargs)
        except Exception:  # not initialised, a group torch will refuse, ...: torch says what is wrong
            count("untraced")
            _log.debug("tempotrace.torch: %s not traced", spec.name, exc_info=True)
            return original(*args, **kwargs)
        return body(spec, reader, original, info, attrs, args, kwargs)

    setattr(wrapper, ORIGINAL_ATTR, original)
    return wrapper


def _root(spec: OpSpec, reader: Reader, info: GroupInfo, args: Any, kwargs: dict[str, Any]) -> int | None:
    root = reader.get(args, kwargs, spec.root)
    if root is not None:
        return int(root)
    group_root = reader.get(args, kwargs, spec.group_root)
    return None if group_root is None else info.ranks[int(group_root)]


def _attributes(spec: OpSpec, reader: Reader, info: GroupInfo, args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    attrs = dict(info.attributes)
    attrs[TORCH_OP] = spec.name
    root = _root(spec, reader, info, args, kwargs) if spec.root else None
    if spec.data is not None and not (spec.root_data_only and root != info.rank):
        nbytes = tensor_bytes(reader.get(args, kwargs, spec.data), spec.data_list)
        if nbytes is not None:
            attrs[TORCH_BYTES] = nbytes
    elif spec.root_data_only:
        attrs[TORCH_BYTES] = 0
    if spec.kind is Kind.COLLECTIVE:
        if root is not None:
            attrs[TORCH_ROOT] = root
        return attrs
    tag = int(reader.get(args, kwargs, "tag") or 0)
    attrs[TORCH_TAG] = tag
    if spec.kind is Kind.SEND:
        dst = root if root is not None else -1  # torch refuses it; the span records the error
        attrs.update({TORCH_PEER: dst, TORCH_SRC: info.rank, TORCH_DST: dst})
        attrs[TORCH_P2P_SEQ] = info.next_p2p(info.rank, dst, tag)
    else:
        attrs.update({TORCH_PEER: -1 if root is None else root, TORCH_DST: info.rank})
        if root is not None:
            attrs[TORCH_SRC] = root
            attrs[TORCH_P2P_SEQ] = info.next_p2p(root, info.rank, tag)
    return attrs


def _is_async(spec: OpSpec, reader: Reader, args: Any, kwargs: dict[str, Any]) -> bool:
    return spec.asynchronous == "always" or (
        spec.asynchronous == "async_op" and bool(reader.get(args, kwargs, "async_op"))
    )


def _call(original: Callable[..., Any], sp: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    token = inside.set(True)
    try:
        return original(*args, **kwargs)
    except BaseException as err:
        end_span(sp, {TORCH_COMPLETION: "error"}, error=err)
        raise
    finally:
        inside.reset(token)


def _collective(spec: OpSpec, reader: Reader, original: Callable[..., Any], info: GroupInfo,
                attrs: dict[str, Any], args: Any, kwargs: dict[str, Any]) -> Any:
    seq = int(next(info.coll_seq))
    attrs[TORCH_SEQ] = seq
    asynchronous = _is_async(spec, reader, args, kwargs)
    if not asynchronous:  # known now: one attribute call fewer at the end (an error or GPU timing overwrites it)
        attrs[TORCH_COMPLETION] = "return"
    sp = start_span("torch." + spec.name, attrs)
    record = None
    if settings.carriage == "op":
        if _coalescing(info):
            count("coalesced_not_carried")
        else:
            record = make_record(RecordKind.EXCHANGE, info.rank, seq, sp)
    gpu = settings.gpu
    mark = gpu.begin(reader, spec, args, kwargs) if gpu is not None else None
    result = _call(original, sp, args, kwargs)
    try:  # the op succeeded: nothing after this may fail the program
        exchange = None
        if record is not None:
            try:
                exchange = Exchange(info, record, seq, async_op=asynchronous)
            except Exception:
                count("exchange_failed")
                _log.debug("tempotrace.torch: exchange failed", exc_info=True)
        if mark is not None:
            gpu.end(mark, sp, exchange)
        elif asynchronous and result is not None:
            registry.watch(PendingOp(sp, [result], carried=exchange))
        elif asynchronous:  # async_op=True, yet no work came back
            end_span(sp, {TORCH_COMPLETION: "return"})
        else:
            end_span(sp, exchange.finish() if exchange is not None else None)
    except Exception:
        _failed(spec.name)
    return result


def _failed(name: str) -> None:
    count("trace_failed")
    _log.debug("tempotrace.torch: tracing %s failed after the op", name, exc_info=True)


def _coalescing(info: GroupInfo) -> bool:
    """Inside torch's coalescing manager for this group: ops are deferred, an exchange would join them."""
    try:
        return info.pg in c10d._world.pg_coalesce_state
    except Exception:
        return False


def _send(spec: OpSpec, reader: Reader, original: Callable[..., Any], info: GroupInfo,
          attrs: dict[str, Any], args: Any, kwargs: dict[str, Any]) -> Any:
    dst, tag = attrs[TORCH_DST], attrs[TORCH_TAG]
    if spec.asynchronous != "always":
        attrs[TORCH_COMPLETION] = "return"
    sp = start_span("torch." + spec.name, attrs)
    stag = side_tag(info, tag) if settings.carriage != "none" and dst >= 0 else None
    record = make_record(RecordKind.P2P, info.rank, attrs[TORCH_P2P_SEQ], sp) if stag is not None else None
    result = _call(original, sp, args, kwargs)
    try:
        if record is not None:
            _post_side_send(info, record, dst, stag)  # type: ignore[arg-type]
        if spec.asynchronous == "always" and result is not None:
            registry.watch(PendingOp(sp, [result]))
        else:
            end_span(sp, None if spec.asynchronous != "always" else {TORCH_COMPLETION: "return"})
    except Exception:
        _failed(spec.name)
    return result


def _post_side_send(info: GroupInfo, record: bytes, dst: int, stag: int) -> None:
    try:
        tensor, work = side_send(info, record, dst, stag)
        registry.keep_send(tensor, work, info.tags)
    except Exception:
        count("side_send_failed")
        _log.debug("tempotrace.torch: side message not sent", exc_info=True)


def _recv(spec: OpSpec, reader: Reader, original: Callable[..., Any], info: GroupInfo,
          attrs: dict[str, Any], args: Any, kwargs: dict[str, Any]) -> Any:
    src, tag = attrs[TORCH_PEER], attrs[TORCH_TAG]
    sp = start_span("torch." + spec.name, attrs)
    carry = settings.carriage != "none"
    stag = side_tag(info, tag) if carry else None
    side = None
    if stag is not None and src >= 0 and info.tags:  # own tag: post it first, so a blocking recv finds it ready
        side = _post_side_recv(info, src, stag, attrs[TORCH_P2P_SEQ])
    result = _call(original, sp, args, kwargs)
    try:
        _recv_done(spec, info, sp, (src, tag, attrs.get(TORCH_P2P_SEQ, -1)), stag, side, result)
    except Exception:
        _failed(spec.name)
    return result


def _recv_done(spec: OpSpec, info: GroupInfo, sp: Any, message: tuple[int, int, int], stag: int | None,
               side: SideRecv | None, result: Any) -> None:
    """After the data receive returned: post (NCCL) or await the side message, then let the span end."""
    src, tag, seq = message
    if stag is not None and src >= 0 and not info.tags:  # one stream per peer (NCCL): right behind the data
        side = _post_side_recv(info, src, stag, seq)
    if spec.asynchronous == "always":
        if result is not None:
            op = PendingOp(sp, [result], carried=side)
            if src < 0:
                op.on_done = functools.partial(_any_source_done, info, tag, stag)
            registry.watch(op)
        return
    extra: dict[str, Any] = {}
    if src < 0 and isinstance(result, int) and result >= 0:  # any source: now we know who sent it
        extra = _any_source_known(info, result, tag)
        if stag is not None:
            side = _post_side_recv(info, result, stag, extra[TORCH_P2P_SEQ])
    registry.watch(PendingOp(sp, [], carried=side, attrs=extra))


def _any_source_known(info: GroupInfo, src: int, tag: int) -> dict[str, Any]:
    return {TORCH_PEER: src, TORCH_SRC: src, TORCH_P2P_SEQ: info.next_p2p(src, info.rank, tag)}


def _any_source_done(info: GroupInfo, tag: int, stag: int | None, op: PendingOp) -> None:
    """An any-source irecv completed: number it and fetch its side message from the sender now known."""
    group_src = op.works[0]._source_rank()
    src = info.ranks[group_src]
    op.attrs.update(_any_source_known(info, src, tag))
    if stag is not None:
        op.carried = _post_side_recv(info, src, stag, op.attrs[TORCH_P2P_SEQ])


def _post_side_recv(info: GroupInfo, src: int, stag: int, seq: int) -> SideRecv | None:
    try:
        return SideRecv.post(info, src, stag, seq)
    except Exception:
        count("side_recv_failed")
        _log.debug("tempotrace.torch: side message not received", exc_info=True)
        return None


def traced_batch(original: Callable[..., Any]) -> Callable[..., Any]:
    """``batch_isend_irecv``: a span per P2POp, each side message right behind its op in the same batch."""

    @functools.wraps(original)
    def batch_isend_irecv(p2p_op_list: Any) -> Any:
        if not settings.active or inside.get():
            return original(p2p_op_list)
        try:
            plan = _batch_plan(list(p2p_op_list))
        except Exception:
            count("untraced")
            _log.debug("tempotrace.torch: batch_isend_irecv not traced", exc_info=True)
            return original(p2p_op_list)
        ops, spans, info = plan
        token = inside.set(True)
        try:
            works = original(ops)
        except BaseException as err:
            for sp, _, _ in spans:
                end_span(sp, {TORCH_COMPLETION: "error"}, error=err)
            raise
        finally:
            inside.reset(token)
        try:
            return _batch_done(ops, spans, info, works)
        except Exception:  # the ops were issued: hand the program its works whatever happened here
            _failed("batch_isend_irecv")
            n = len(p2p_op_list)
            return [works[i] for _, i, _ in spans] if len(works) == len(ops) and len(spans) == n else works

    setattr(batch_isend_irecv, ORIGINAL_ATTR, original)
    return batch_isend_irecv


def _batch_done(ops: list[Any], spans: list[tuple[Any, int, Any]], info: GroupInfo, works: list[Any]) -> list[Any]:
    per_op = len(works) == len(ops)  # gloo: one work per op; a coalescing backend (NCCL): one for all
    for sp, index, side in spans:
        data = [works[index]] if per_op else list(works)
        carried = None
        side_work = works[index + 1] if per_op and side is not None else None
        if isinstance(side, tuple):  # a receive's side message: the span ends once it is in
            buffer, src, seq = side
            carried = SideRecv(buffer, src, seq, side_work, info.tags)
        elif side is not None:  # a send's side message: keep its tensor until it is out
            registry.keep_send(side, side_work, info.tags)
        registry.watch(PendingOp(sp, data, carried=carried))
    return [works[index] for _, index, _ in spans] if per_op else works


def _batch_plan(user_ops: list[Any]) -> tuple[list[Any], list[tuple[Any, int, Any]], GroupInfo]:
    """The op list handed to torch (user ops, each followed by its side op) and (span, index, side) per op.

    ``side`` is None (not carried), a send's record tensor, or a receive's (buffer, src, seq).
    """
    info = group_info(user_ops[0].group if user_ops else None)
    isend, irecv = c10d.isend, c10d.irecv
    ops: list[Any] = []
    spans: list[tuple[Any, int, Any]] = []
    for op in user_ops:
        is_send = unwrap(op.op) is isend
        if op.op is not isend and op.op is not irecv:  # e.g. .op reassigned by hand: torch checks identity
            op = _copy_p2p(op, isend if is_send else irecv)
        peer, tag = int(op.peer), int(op.tag)
        src, dst = (info.rank, peer) if is_send else (peer, info.rank)
        attrs = dict(info.attributes)
        attrs.update({
            TORCH_OP: "isend" if is_send else "irecv", TORCH_BATCHED: True,
            TORCH_PEER: peer, TORCH_SRC: src, TORCH_DST: dst, TORCH_TAG: tag,
            TORCH_P2P_SEQ: info.next_p2p(src, dst, tag),
        })
        nbytes = tensor_bytes(op.tensor, False)
        if nbytes is not None:
            attrs[TORCH_BYTES] = nbytes
        sp = start_span("torch.isend" if is_send else "torch.irecv", attrs)
        index = len(ops)
        ops.append(op)
        stag = side_tag(info, tag) if settings.carriage != "none" else None
        side: Any = None
        if stag is not None:
            if is_send:
                side = record_tensor(info, make_record(RecordKind.P2P, info.rank, attrs[TORCH_P2P_SEQ], sp))
                ops.append(dist.P2POp(isend, side, peer, op.group, stag))
            else:
                buffer = side_buffer(info)
                ops.append(dist.P2POp(irecv, buffer, peer, op.group, stag))
                side = (buffer, peer, attrs[TORCH_P2P_SEQ])
        spans.append((sp, index, side))
    return ops, spans, info


def _copy_p2p(op: Any, func: Any) -> Any:
    copy = object.__new__(type(op))
    copy.__dict__.update(op.__dict__)
    copy.op = func
    return copy
