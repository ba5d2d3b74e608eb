"""Point-to-point side messages: each send's record travels just before its data (spec/torch.md §3.3).

Whether a message is carried depends only on what both sides know alike (the
mode, the tag, the peer), so the sender sends a side message exactly when the
receiver posts a side receive; a local failure sends the absent record instead
(§3.6), never nothing. The side message goes first, on both sides, so on gloo
(one ordered connection per peer) a receive's side message, if its sender
sent one, is in before the data completes.

No receive is ever waited for with a timeout: a gloo wait that times out
closes every connection of the group. A gloo receive therefore shows that its
message is in by its buffer: it is filled with 0xFF when posted, and no record
(valid or absent) starts with that octet. Other backends say so through
``is_completed()``, which does not block. A side receive whose message did
not come (the sender sent through a function bound before ``instrument()``,
§1.1) stays posted, as its channel's spare, and the next receive on that
channel (group, source, tag) takes it over instead of posting another: gloo
hands a channel's messages to its receives in the order they were posted, so
the spare takes the next side message, which is the next receive's, and
spares never pile up.
"""

from __future__ import annotations

import collections
import datetime
import logging
import threading
import weakref
from typing import Any

import torch
import torch.distributed.distributed_c10d as c10d

from ...semconv import TORCH_RECV_COUNT, TORCH_RECV_MISSING
from ...wire.torchrecord import RECORD_LEN
from ..counts import count
from ..groups import GroupInfo
from . import records

__all__ = ["FOREVER", "SIDE_TAG_BASE", "SideRecv", "post_side_send", "side_buffer", "side_tag", "take_spare"]

_log = logging.getLogger(__name__)

#: p2p side messages on a backend that honours tags (gloo) travel on ``tag + SIDE_TAG_BASE``, so
#: they never meet the user's own messages; tags at or above it are not carried (spec/torch.md §3.3).
SIDE_TAG_BASE = 1 << 30
#: A gloo side buffer's fill when posted: no record starts with it (version 1, or 0 for the absent record).
SENTINEL = 0xFF
_EMPTY = bytes([SENTINEL]) * RECORD_LEN
#: The wait given to gloo when a message is known to be in or on its way: never reached. gloo's own
#: default is the group's timeout, and a gloo wait that times out closes every connection of the group.
FOREVER = datetime.timedelta(days=365)


def side_tag(info: GroupInfo, tag: int) -> int | None:
    """The tag a side message of a ``tag`` message travels on; None when it cannot be carried."""
    if not info.tags:
        return tag  # NCCL: one ordered stream per peer, the side message right before its data
    if 0 <= tag < SIDE_TAG_BASE:
        return tag + SIDE_TAG_BASE
    return None


def post_side_send(info: GroupInfo, record: bytes, dst: int, tag: int) -> tuple[torch.Tensor, Any]:
    """Post the side message of a send to ``dst``: (tensor, work), both to keep until it is seen out."""
    tensor = records.outgoing(info, record)
    return tensor, c10d.isend(tensor, group=info.pg, tag=tag, group_dst=info.group_rank_of(dst))


#: Posted side receives whose message never came, per group and (source, tag): oldest first, as gloo
#: hands messages to receives in the order they were posted.
_spares: weakref.WeakKeyDictionary[Any, dict[tuple[int, int], collections.deque[SideRecv]]] = (
    weakref.WeakKeyDictionary())
#: Receives that must stay alive (gloo keeps only a weak reference to a posted buffer) but will never be read.
_parked: list[SideRecv] = []
_spares_lock = threading.Lock()


class SideRecv:
    """The receive of one p2p side message from ``src``, posted beside its data receive."""

    __slots__ = ("buffer", "by_content", "info", "ordered", "readable", "seq", "src", "tag", "taken", "work")

    def __init__(self, info: GroupInfo, buffer: torch.Tensor, src: int, tag: int, seq: int, work: Any, *,
                 readable: bool = True, ordered: bool = False) -> None:
        self.info = info
        self.buffer = buffer
        self.src = src
        self.tag = tag
        self.seq = seq
        self.work = work
        #: gloo reports a p2p work complete only once waited: its arrival is read from the buffer.
        self.by_content = info.tags
        self.readable = readable  #: False: received into the group's scratch buffer, never read
        #: Posted before its data on one ordered connection: in (if sent at all) when the data completes.
        self.ordered = ordered
        self.taken = False  #: the message is in and its work completed

    @classmethod
    def post(cls, info: GroupInfo, src: int, tag: int, seq: int, *, ordered: bool = False) -> SideRecv:
        """Post (or take over the channel's spare) the side receive of message ``seq`` from ``src``."""
        spare = take_spare(info, src, tag)
        if spare is not None:
            return cls(info, spare.buffer, src, tag, seq, spare.work, ordered=ordered)
        buffer, readable = side_buffer(info)
        work = c10d.irecv(buffer, group=info.pg, tag=tag, group_src=info.group_rank_of(src))
        return cls(info, buffer, src, tag, seq, work, readable=readable, ordered=ordered)

    def arrived(self) -> bool:
        """The message is in (without waiting)."""
        if self.taken:
            return True
        if self.by_content:
            return self.readable and host_view(self.buffer) != _EMPTY
        try:
            return bool(self.work.is_completed())
        except Exception:
            return True  # a failed work: take() says so

    def take(self) -> bool:
        """Complete the work of an arrived message (gloo: a wait that returns at once); False if it failed."""
        if self.taken:
            return True
        try:
            if self.by_content:
                self.work.wait(FOREVER)
            self.taken = True
            return True
        except Exception:
            count("side_failed")
            _log.debug("tempotrace.torch: side message failed", exc_info=True)
            return False

    def finish(self) -> dict[str, Any]:
        """The receive span's attributes, once the message is in (``take()``) or given up (``give_up()``)."""
        if not (self.taken and self.readable):
            count("missing")
            return {TORCH_RECV_COUNT: 0, TORCH_RECV_MISSING: (self.src,)}
        return records.merge_side(records.host_bytes(self.buffer), self.src, self.seq)

    def give_up(self, why: str | None) -> None:
        """The message did not come (``why``: the counter, if any): the receive stays posted for a later one."""
        if why is not None:
            count(why)
            _warn(why, self)
        with _spares_lock:
            if self.by_content and self.readable:
                pg = self.info.pg
                if pg is not None:
                    _spares.setdefault(pg, {}).setdefault((self.src, self.tag), collections.deque()).append(self)
                    return
            _parked.append(self)  # a device stream holds it in place; nothing may reuse it

    def keep(self) -> None:
        """Never read, never dropped while posted: gloo holds only a weak reference to a posted buffer."""
        if not self.taken:
            with _spares_lock:
                _parked.append(self)


def side_buffer(info: GroupInfo) -> tuple[torch.Tensor, bool]:
    """A buffer for one side message (gloo: filled with SENTINEL), or the group's scratch buffer when it cannot
    be made (then False: never read)."""
    try:
        if info.tags:
            return torch.full((RECORD_LEN,), SENTINEL, dtype=torch.uint8), True
        return torch.empty(RECORD_LEN, dtype=torch.uint8, device=info.device), True
    except Exception:
        if info.scratch is None:
            raise
        count("unread")
        _log.debug("tempotrace.torch: side buffer not made; received into scratch", exc_info=True)
        return info.scratch[:RECORD_LEN], False


def host_view(buffer: torch.Tensor) -> bytes:
    return bytes(buffer.numpy().tobytes()) if buffer.device.type == "cpu" else records.host_bytes(buffer)


def take_spare(info: GroupInfo, src: int, tag: int) -> SideRecv | None:
    """The channel's oldest spare receive, taken over by a new receive on that channel.

    What it holds, or will hold, is the next side message the sender sent on the channel: the one
    for the new receive (a sender ahead of its receiver posts it before the receive exists). Should it
    be a record that came too late for the spare's own receive instead, its sequence number says so
    (``RECORD_SEQ``), as any mismatch does.
    """
    with _spares_lock:
        channels = _spares.get(info.pg) if info.pg is not None else None
        queue = channels.get((src, tag)) if channels else None
        return queue.popleft() if queue else None


_warned: collections.Counter[str] = collections.Counter()


def _warn(why: str, side: SideRecv) -> None:
    """Log the 1st, 10th, 100th... time, so a peer that never sends side messages does not flood the log."""
    _warned[why] += 1
    n = _warned[why]
    if str(n).strip("0") == "1":
        _log.warning("tempotrace.torch: no side message from rank %d (tag %d) for a receive: %s, %d time(s); is "
                     "every rank instrumented alike and sending through torch.distributed's own functions?",
                     side.src, side.tag, why, n)
