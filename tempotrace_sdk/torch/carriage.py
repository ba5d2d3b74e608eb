"""Carrying tt-ext records between ranks: exchanges (all_gather) and p2p side messages (spec/torch.md §3).

Every record is a send event of this process (Lamport tick, clock reading,
sketch), recorded on the sending span as ``tempotrace.send.*`` like any
inject. The receiving side merges every valid record's Lamport value once
(``recv.lts``) and writes what it merged on its span. A record that is absent,
corrupt, from the wrong rank or for the wrong sequence number is counted by
its error class and left out, never raised: the user's collective already
succeeded and must stay that way.

Traffic goes through the original torch.distributed functions (never our
wrappers), on the group's own backend and device.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed.distributed_c10d as c10d
from opentelemetry import trace
from opentelemetry.trace import Span

from ..otel.context import get_state
from ..otel.hop import LAMPORT_AHEAD
from ..otel.hop import send as send_event
from ..semconv import (
    TORCH_RECV_COUNT,
    TORCH_RECV_LTS,
    TORCH_RECV_MISSING,
    TORCH_RECV_SKETCH,
    TORCH_REMOTE_CLK_QUALITY,
    TORCH_REMOTE_LTS,
    TORCH_REMOTE_PTP_NS,
    TORCH_REMOTE_SPAN_ID,
    TORCH_REMOTE_UNCERTAINTY_NS,
)
from ..wire import Sketch
from .groups import GroupInfo
from .record import RECORD_LEN, RecordError, RecordKind, TorchRecord, absent_record, decode_record, pack_record

__all__ = ["MODES", "SIDE_TAG_BASE", "Exchange", "SideRecv", "carriage_counts", "count", "make_record", "side_tag"]

_log = logging.getLogger(__name__)

MODES = ("none", "step", "op")

#: p2p side messages on a backend that honours tags (gloo) travel on ``tag + SIDE_TAG_BASE``, so
#: they never meet the user's own messages; tags at or above it are not carried (spec/torch.md §3.3).
SIDE_TAG_BASE = 1 << 30

_counts: Counter[str] = Counter()
_counts_lock = threading.Lock()


def count(what: str, n: int = 1) -> None:
    with _counts_lock:
        _counts[what] += n


def carriage_counts() -> dict[str, int]:
    """Records sent and merged, and those refused or missing by error class, since the process started."""
    with _counts_lock:
        return dict(_counts)


def side_tag(info: GroupInfo, tag: int) -> int | None:
    """The tag a side message of a ``tag`` message travels on; None when it cannot be carried."""
    if not info.tags:
        return tag  # NCCL: one ordered stream per peer, the side message right behind its data
    if 0 <= tag < SIDE_TAG_BASE:
        return tag + SIDE_TAG_BASE
    return None


#: Test hook (tests/torch): a function applied to every outgoing record; None in production.
corrupt_outgoing: Callable[[bytes], bytes] | None = None


def make_record(kind: RecordKind, rank: int, seq: int, sp: Span | None) -> bytes:
    """A send event on ``sp`` (recorded as its send.*), packed as a record; the absent record on failure."""
    state = get_state()
    try:
        context = trace.set_span_in_context(sp) if sp is not None else None
        header = send_event(state, context)
        if header is None:  # no valid trace context: no send event, nothing to carry (semantic-conventions §8)
            count("no_context")
            return absent_record()
        sc = sp.get_span_context() if sp is not None else None
        trace_id, span_id = (sc.trace_id, sc.span_id) if sc is not None and sc.is_valid else (0, 0)
        record = pack_record(kind, rank, seq, trace_id, span_id, header)
        count("sent")
    except Exception:
        count("record_failed")
        _log.debug("tempotrace.torch: no record could be made", exc_info=True)
        return absent_record()
    hook = corrupt_outgoing
    return hook(record) if hook is not None else record


def _check(raw: bytes, kind: RecordKind, rank: int, seq: int) -> TorchRecord:
    record = decode_record(raw)
    if record.kind is not kind:
        raise RecordError("kind", f"expected {kind.name}, got {record.kind.name}", error_class="RECORD_KIND",
                          remote=True)
    if record.rank != rank:
        raise RecordError("rank", f"expected rank {rank}, got {record.rank}", error_class="RECORD_RANK", remote=True)
    if record.seq != seq:
        raise RecordError("seq", f"expected {seq}, got {record.seq}", error_class="RECORD_SEQ", remote=True)
    return record


def _refused(err: Exception) -> None:
    cls = err.error_class if isinstance(err, RecordError) else type(err).__name__
    count(cls)
    if cls != "RECORD_ABSENT":
        count("invalid")
    _log.debug("tempotrace.torch: record refused: %s", err)


def merge_exchange(raw: bytes, info: GroupInfo, seq: int) -> dict[str, Any]:
    """Merge an all_gather of every rank's record (``raw``: group-rank order); the span attributes."""
    state = get_state()
    missing: list[int] = []
    valid: list[tuple[int, TorchRecord]] = []
    for i, rank in enumerate(info.ranks):
        if i == info.group_rank:
            continue
        try:
            valid.append((rank, _check(raw[i * RECORD_LEN:(i + 1) * RECORD_LEN], RecordKind.EXCHANGE, rank, seq)))
        except Exception as err:
            _refused(err)
            missing.append(rank)
    # One receive of the highest counter; a counter too far ahead of ours is not merged
    # (tt-ext §10.1): its rank joins the missing ones and the next highest is tried.
    recv_lts: int | None = None
    for rank, record in sorted(valid, key=lambda rv: rv[1].header.lts, reverse=True):
        lts, merged_it = state.lamport.receive(record.header.lts)
        if merged_it:
            recv_lts = lts
            break
        _lamport_ahead(rank, record.header.lts)
        missing.append(rank)
    merged = [record for rank, record in valid if rank not in missing]
    attrs: dict[str, Any] = {TORCH_RECV_COUNT: len(merged)}
    if recv_lts is not None:
        sketch = Sketch.EMPTY
        for record in merged:
            sketch = sketch.union(record.header.svc_sketch)
        attrs[TORCH_RECV_LTS] = recv_lts
        attrs[TORCH_RECV_SKETCH] = sketch.to_bytes().hex()
        count("merged", len(merged))
    if missing:
        attrs[TORCH_RECV_MISSING] = tuple(sorted(missing))
        count("missing", len(missing))
    return attrs


def _lamport_ahead(rank: int, lts: int) -> None:
    """A valid record whose counter is too far ahead to merge (tt-ext §10.1): counted, never raised."""
    count(LAMPORT_AHEAD)
    _log.debug("tempotrace.torch: record from rank %d not merged: lts %d too far ahead", rank, lts)


def merge_side(raw: bytes, src: int, seq: int) -> dict[str, Any]:
    """Merge one p2p side message from ``src``; the receive span's attributes."""
    try:
        record = _check(raw, RecordKind.P2P, src, seq)
    except Exception as err:
        _refused(err)
        count("missing")
        return {TORCH_RECV_COUNT: 0, TORCH_RECV_MISSING: (src,)}
    h = record.header
    lts, merged = get_state().lamport.receive(h.lts)
    attrs: dict[str, Any] = {TORCH_RECV_COUNT: 1}
    if merged:
        count("merged")
        attrs[TORCH_RECV_LTS] = lts
    else:  # the message is still described (remote.*); only its counter carries no evidence
        _lamport_ahead(src, h.lts)
        attrs[TORCH_RECV_COUNT] = 0
    return attrs | {
        TORCH_RECV_SKETCH: h.svc_sketch.to_bytes().hex(),
        TORCH_REMOTE_PTP_NS: h.ptp_ns,
        TORCH_REMOTE_UNCERTAINTY_NS: h.uncertainty_ns,
        TORCH_REMOTE_CLK_QUALITY: h.clk_quality.name,
        TORCH_REMOTE_LTS: h.lts,
        TORCH_REMOTE_SPAN_ID: f"{record.span_id:016x}",
    }


def _tensor(record: bytes, device: torch.device) -> torch.Tensor:
    t = torch.frombuffer(bytearray(record), dtype=torch.uint8)
    return t if device.type == "cpu" else t.to(device)


def _bytes(t: torch.Tensor) -> bytes:
    return bytes(t.cpu().numpy().tobytes())


#: torch 2.13 renamed all_gather_into_tensor (now deprecated, with a warning) to all_gather_single.
_all_gather = getattr(c10d, "all_gather_single", None) or c10d.all_gather_into_tensor


class Exchange:
    """One all_gather of every rank's record in a group; ``finish()`` once it completed."""

    __slots__ = ("_in", "_out", "info", "seq", "work")

    def __init__(self, info: GroupInfo, record: bytes, seq: int, *, async_op: bool) -> None:
        self.info = info
        self.seq = seq
        self._in = _tensor(record, info.device)
        self._out = torch.empty(RECORD_LEN * info.size, dtype=torch.uint8, device=info.device)
        self.work = _all_gather(self._out, self._in, group=info.pg, async_op=async_op)

    def finish(self) -> dict[str, Any]:
        try:
            return merge_exchange(_bytes(self._out), self.info, self.seq)
        except Exception:
            count("exchange_failed")
            _log.debug("tempotrace.torch: exchange could not be read", exc_info=True)
            return {}


class SideRecv:
    """The receive of one p2p side message from ``src``, posted beside its data receive."""

    __slots__ = ("blocking", "buffer", "ok", "seq", "src", "work")

    def __init__(self, buffer: torch.Tensor, src: int, seq: int, work: Any, blocking: bool) -> None:
        self.buffer = buffer
        self.src = src
        self.seq = seq
        self.work = work
        #: gloo reports a p2p work complete only once waited: the courier waits (else it polls)
        self.blocking = blocking
        self.ok = True  #: False when the receive failed: the record is missing

    @classmethod
    def post(cls, info: GroupInfo, src: int, tag: int, seq: int) -> SideRecv:
        buffer = side_buffer(info)
        work = c10d.irecv(buffer, group=info.pg, tag=tag, group_src=info.group_rank_of(src))
        return cls(buffer, src, seq, work, info.tags)

    def finish(self) -> dict[str, Any]:
        if not self.ok:
            count("missing")
            return {TORCH_RECV_COUNT: 0, TORCH_RECV_MISSING: (self.src,)}
        return merge_side(_bytes(self.buffer), self.src, self.seq)


def side_buffer(info: GroupInfo) -> torch.Tensor:
    return torch.empty(RECORD_LEN, dtype=torch.uint8, device=info.device)


def record_tensor(info: GroupInfo, record: bytes) -> torch.Tensor:
    return _tensor(record, info.device)


def side_send(info: GroupInfo, record: bytes, dst: int, tag: int) -> Any:
    """Post the side message of a send; returns (tensor, work): keep both alive until it completes."""
    tensor = _tensor(record, info.device)
    return tensor, c10d.isend(tensor, group=info.pg, tag=tag, group_dst=info.group_rank_of(dst))

