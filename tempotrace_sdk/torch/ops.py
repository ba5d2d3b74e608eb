"""The torch.distributed entry points we wrap, and how to read each one's arguments (spec/torch.md §1).

One ``OpSpec`` per function: which argument is the group, the root (global or
group rank), the peer and tag of a point-to-point op, whether it can be
async, and which tensors count as the bytes this rank passes
(spec/semantic-conventions.md §9.3). Argument positions come from the
installed function's own signature, so positional and keyword calls read alike.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SPECS", "SPEC_INDEX", "Kind", "OpSpec", "Reader"]


class Kind(enum.Enum):
    COLLECTIVE = "collective"
    SEND = "send"
    RECV = "recv"
    BATCH = "batch"


@dataclass(frozen=True)
class OpSpec:
    name: str
    kind: Kind
    #: "async_op" when the caller chooses; "always" for isend/irecv; None for blocking-only functions
    asynchronous: str | None = "async_op"
    root: str | None = None  #: global-rank root argument (src / dst)
    group_root: str | None = None  #: group-rank root argument (group_src / group_dst)
    data: str | None = None  #: the argument whose tensor bytes this rank passes
    data_list: bool = False  #: ``data`` is a list of tensors
    root_data_only: bool = False  #: only the root passes ``data`` (scatter)
    objects: bool = False  #: a *_object variant: its bytes are not known before pickling


_C, _S, _R = Kind.COLLECTIVE, Kind.SEND, Kind.RECV

SPECS: tuple[OpSpec, ...] = (
    OpSpec("all_reduce", _C, data="tensor"),
    OpSpec("all_gather", _C, data="tensor"),
    OpSpec("all_gather_into_tensor", _C, data="input_tensor"),
    OpSpec("all_gather_single", _C, data="input_tensor"),
    OpSpec("reduce_scatter", _C, data="input_list", data_list=True),
    OpSpec("reduce_scatter_tensor", _C, data="input"),
    OpSpec("reduce_scatter_single", _C, data="input"),
    OpSpec("all_to_all", _C, data="input_tensor_list", data_list=True),
    OpSpec("all_to_all_single", _C, data="input"),
    OpSpec("broadcast", _C, root="src", group_root="group_src", data="tensor"),
    OpSpec("reduce", _C, root="dst", group_root="group_dst", data="tensor"),
    OpSpec("gather", _C, root="dst", group_root="group_dst", data="tensor"),
    OpSpec("scatter", _C, root="src", group_root="group_src", data="scatter_list", data_list=True,
           root_data_only=True),
    OpSpec("barrier", _C),
    OpSpec("all_gather_object", _C, asynchronous=None, objects=True),
    OpSpec("gather_object", _C, asynchronous=None, root="dst", group_root="group_dst", objects=True),
    OpSpec("broadcast_object_list", _C, asynchronous=None, root="src", group_root="group_src", objects=True),
    OpSpec("scatter_object_list", _C, asynchronous=None, root="src", group_root="group_src", objects=True),
    OpSpec("send_object_list", _S, asynchronous=None, root="dst", group_root="group_dst", objects=True),
    OpSpec("recv_object_list", _R, asynchronous=None, root="src", group_root="group_src", objects=True),
    OpSpec("send", _S, asynchronous=None, root="dst", group_root="group_dst", data="tensor"),
    OpSpec("recv", _R, asynchronous=None, root="src", group_root="group_src", data="tensor"),
    OpSpec("isend", _S, asynchronous="always", root="dst", group_root="group_dst", data="tensor"),
    OpSpec("irecv", _R, asynchronous="always", root="src", group_root="group_src", data="tensor"),
)

#: An op's index in SPECS by name: what a record keeps (recorder.py).
SPEC_INDEX: dict[str, int] = {spec.name: i for i, spec in enumerate(SPECS)}


class Reader:
    """Reads named arguments of one installed function from (args, kwargs) without ``bind``."""

    __slots__ = ("_defaults", "_index")

    def __init__(self, func: Callable[..., Any]) -> None:
        params = list(inspect.signature(func).parameters.values())
        self._index = {p.name: i for i, p in enumerate(params)}
        self._defaults = {p.name: (None if p.default is inspect.Parameter.empty else p.default) for p in params}

    def get(self, args: Sequence[Any], kwargs: dict[str, Any], name: str | None) -> Any:
        if name is None:
            return None
        if name in kwargs:
            return kwargs[name]
        i = self._index.get(name)
        if i is not None and i < len(args):
            return args[i]
        return self._defaults.get(name)

    def knows(self, name: str) -> bool:
        return name in self._index


def tensor_bytes(value: Any, is_list: bool) -> int | None:
    """Bytes of a tensor or a list of tensors; None when they are not tensors."""
    try:
        if is_list:
            return sum(int(t.nbytes) for t in value) if value is not None else 0
        return int(value.nbytes)
    except (AttributeError, TypeError):
        return None
