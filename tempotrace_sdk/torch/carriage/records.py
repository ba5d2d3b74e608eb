"""Carrying tt-ext records between ranks: the records, their merge, and exchanges (spec/torch.md §3).

Every record is a send event of this process (Lamport tick, clock reading,
sketch), recorded on the sending span as an ``x`` token of its
``tempotrace.stamps`` text (semantic-conventions §1.4) like any
inject. The receiving side merges every valid record's Lamport value once
(``recv.lts``) and writes what it merged on its span. A record that is absent,
corrupt, from the wrong rank or for the wrong sequence number is counted by
its error class and left out, never raised: the user's collective already
succeeded and must stay that way.

Traffic goes through the original torch.distributed functions (never our
wrappers), on the group's own backend and device. p2p side messages travel
by side.py and are merged here (``merge_side``). The 95-octet codec itself is
``wire/torchrecord.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed.distributed_c10d as c10d
from opentelemetry import trace
from opentelemetry.trace import Span

from ...otel.context import get_state
from ...otel.hop import LAMPORT_AHEAD
from ...otel.hop import send as send_event
from ...semconv import (
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
from ...wire import Sketch
from ...wire.torchrecord import (
    RECORD_LEN,
    RecordError,
    RecordKind,
    TorchRecord,
    absent_record,
    decode_record,
    pack_record,
)
from ..counts import count
from ..groups import GroupInfo

__all__ = ["Exchange", "device_record", "host_bytes", "make_record", "merge_exchange", "merge_side", "outgoing"]

_log = logging.getLogger(__name__)


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
        raise RecordError("kind", f"expected {kind.name}, got {record.kind.name}", error_class="RECORD_UNEXPECTED_KIND",
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


def device_record(record: bytes, device: torch.device) -> torch.Tensor:
    """``record`` as a uint8 tensor on ``device`` (a host-to-device copy for a GPU group)."""
    t = torch.frombuffer(bytearray(record), dtype=torch.uint8)
    return t if device.type == "cpu" else t.to(device)


def outgoing(info: GroupInfo, record: bytes) -> torch.Tensor:
    """The tensor that carries ``record``: the group's absent record when it cannot be made (counted).

    A local failure never changes what a rank sends, only what the message says (spec/torch.md §3.6).
    """
    try:
        return device_record(record, info.device)
    except Exception:
        if info.absent is None:
            raise
        count("absent_sent")
        _log.debug("tempotrace.torch: record tensor not made; the absent record goes instead", exc_info=True)
        return info.absent


def host_bytes(t: torch.Tensor) -> bytes:
    return bytes(t.cpu().numpy().tobytes())


#: torch 2.13 renamed all_gather_into_tensor (now deprecated, with a warning) to all_gather_single.
_all_gather = getattr(c10d, "all_gather_single", None) or c10d.all_gather_into_tensor


class Exchange:
    """One all_gather of every rank's record in a group; ``finish()`` once it completed (spec/torch.md §3.4).

    Issued whatever failed locally (§3.6): a record tensor that cannot be made is
    replaced by the group's absent record, an output buffer by its scratch buffer
    (then nothing is read: every other rank's record is counted missing). Only
    torch itself can fail the all_gather; then the caller counts ``exchange_failed``.
    """

    __slots__ = ("_in", "_out", "info", "readable", "seq", "work")

    def __init__(self, info: GroupInfo, record: bytes, seq: int, *, async_op: bool) -> None:
        self.info = info
        self.seq = seq
        self._in = outgoing(info, record)
        self.readable = True
        try:
            self._out = torch.empty(RECORD_LEN * info.size, dtype=torch.uint8, device=info.device)
        except Exception:
            if info.scratch is None:
                raise
            count("unread")
            _log.debug("tempotrace.torch: exchange buffer not made; received into scratch", exc_info=True)
            self._out, self.readable = info.scratch, False
        self.work = _all_gather(self._out, self._in, group=info.pg, async_op=async_op)

    def done(self) -> bool:
        """Completed, seen without waiting. A device group's future completes when the work is queued
        (spec/torch.md §1.3), so only the work's own check is trusted there."""
        work = self.work
        if work is None:
            return True
        if self.info.device.type == "cpu":
            try:
                return bool(work.get_future().done())
            except Exception:
                pass
        try:
            return bool(work.is_completed())
        except Exception:
            return True

    def finish(self) -> dict[str, Any]:
        if not self.readable:
            others = tuple(r for i, r in enumerate(self.info.ranks) if i != self.info.group_rank)
            count("missing", len(others))
            return {TORCH_RECV_COUNT: 0, TORCH_RECV_MISSING: others} if others else {TORCH_RECV_COUNT: 0}
        try:
            return merge_exchange(host_bytes(self._out), self.info, self.seq)
        except Exception:
            count("exchange_failed")
            _log.debug("tempotrace.torch: exchange could not be read", exc_info=True)
            return {}
