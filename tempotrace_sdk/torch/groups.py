"""What the instrumentation needs to know about a process group, worked out once per group.

The key names the member global ranks (``wire.torchkeys.group_key``), so subgroups stay
distinct; a group other than the default one also carries torch's group name
(the same on every rank, because every rank creates groups in the same order),
so two groups with the same members keep separate sequence numbers.

Each group also gets, when first seen, two small tensors on its device for
the day a record's own tensor cannot be made (a CUDA allocator out of
memory, a stream being captured): the absent record, sent instead, and a
scratch buffer that receives what nobody will read. With them a local
failure never changes which messages a rank sends (spec/torch.md §3.6).
"""

from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from ..semconv import TORCH_BACKEND, TORCH_GROUP, TORCH_GROUP_RANK, TORCH_GROUP_SIZE
from ..wire.torchkeys import group_key
from ..wire.torchrecord import RECORD_LEN

if TYPE_CHECKING:  # an annotation only: a group holds the receive tables; tracking them is p2p.py's concern
    from .p2p import OpenReceives

__all__ = ["GroupInfo", "group_info"]


@dataclass(eq=False)
class GroupInfo:
    key: str
    ranks: tuple[int, ...]  #: global ranks, in group-rank order
    group_rank: int
    rank: int  #: this process's global rank
    backend: str
    device: torch.device  #: where carried records travel (CPU when the group has a CPU backend)
    #: The backend honours p2p tags (gloo does, NCCL ignores them): side messages get their own tag.
    tags: bool
    attributes: dict[str, Any]  #: the span attributes every op in this group carries
    pg_ref: Any  #: weakref to the process group (the cache is keyed weakly by it)
    coll_seq: Any = field(default_factory=itertools.count)  #: next() gives the collective seq (atomic under the GIL)
    p2p_seq: dict[tuple[int, int, int], Any] = field(default_factory=dict)  #: (src, dst, tag) -> count
    #: tag -> the receives outstanding on this rank (p2p.py: overlaps of any-source and specific ones)
    open_recvs: dict[int, OpenReceives] = field(default_factory=dict)
    #: The absent record (95 zero octets) on ``device``: sent when a record's own tensor cannot be made.
    absent: torch.Tensor | None = None
    #: RECORD_LEN x size octets on ``device`` nobody reads: receives whose own buffer cannot be made.
    scratch: torch.Tensor | None = None

    #: This group's index in the op recorder's group table (recorder.py); -1 until its first record.
    record_index: int = -1
    #: Handed to the C call of a traced op (wrappers.native_wrapper): its ops may be recorded there.
    native_registered: bool = False

    _positions: dict[int, int] | None = None

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def pg(self) -> Any:
        return self.pg_ref()

    def group_rank_of(self, global_rank: int) -> int:
        positions = self._positions
        if positions is None:
            positions = self._positions = {r: i for i, r in enumerate(self.ranks)}
        return positions[global_rank]

    def next_p2p(self, src: int, dst: int, tag: int) -> int:
        counter = self.p2p_seq.get((src, dst, tag))
        if counter is None:
            counter = self.p2p_seq.setdefault((src, dst, tag), itertools.count())
        return int(next(counter))

    def global_rank(self, group_rank: int) -> int:
        return self.ranks[group_rank]


_cache: weakref.WeakKeyDictionary[Any, GroupInfo] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _device(backend: str) -> tuple[torch.device, bool]:
    names = backend.lower()
    if "gloo" in names or "mpi" in names:
        return torch.device("cpu"), "gloo" in names
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device()), False
    return torch.device("cpu"), False


def group_info(group: Any) -> GroupInfo:
    """The info of ``group`` (None: the default group), computed once per group object."""
    pg = group if group is not None else dist.group.WORLD
    info = _cache.get(pg)
    if info is not None:
        return info
    with _lock:
        info = _cache.get(pg)
        if info is None:
            info = _make(pg)
            _cache[pg] = info
    return info


def _make(pg: Any) -> GroupInfo:
    ranks = tuple(dist.get_process_group_ranks(pg))
    key = group_key(ranks)
    if pg is not dist.group.WORLD:
        key = f"{key}#{pg.group_name}"
    backend = str(dist.get_backend(pg))
    device, tags = _device(backend)
    group_rank = pg.rank()
    attributes = {
        TORCH_GROUP: key,
        TORCH_GROUP_RANK: group_rank,
        TORCH_GROUP_SIZE: len(ranks),
        TORCH_BACKEND: backend,
    }
    return GroupInfo(key, ranks, group_rank, ranks[group_rank], backend, device, tags, attributes, weakref.ref(pg),
                     absent=torch.zeros(RECORD_LEN, dtype=torch.uint8, device=device),
                     scratch=torch.empty(RECORD_LEN * len(ranks), dtype=torch.uint8, device=device))


def forget_groups() -> None:
    """Drop every cached group (uninstrument(): sequence numbers restart with the next instrument())."""
    with _lock:
        _cache.clear()
