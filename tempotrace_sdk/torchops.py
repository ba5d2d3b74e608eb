"""The torch.distributed ops we trace: how to read each one's arguments, what each guarantees (spec/torch.md §1.1).

One ``OpSpec`` per function: which argument is the group, the root (global or
group rank), the peer and tag of a point-to-point op, whether it can be
async, which tensors count as the bytes this rank passes
(spec/semantic-conventions.md §9.3), and a collective's claim: what it
guarantees of its members' events (spec/analysis.md §1.3). Argument positions
come from the installed function's own signature, so positional and keyword
calls read alike.

The one table: adding an op is one line here. It imports nothing (not torch),
so the analysis and ``semconv.TORCH_CLAIMS`` read the claims from it without
the torch integration, which wraps every entry point listed here.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CLAIMS", "SPECS", "SPEC_INDEX", "Kind", "OpSpec", "Reader", "tensor_bytes"]

#: A collective's claim: "all", every start precedes every end; "root_start", the root's start precedes every
#: end; "root_end", every start precedes the root's end.
CLAIMS = ("all", "root_start", "root_end")


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
    #: A collective's claim (one of CLAIMS; rooted exactly when it has a root); None for point-to-point ops.
    claim: str | None = None

    def __post_init__(self) -> None:
        if self.kind is Kind.COLLECTIVE:
            rooted = self.claim in ("root_start", "root_end")
            if self.claim not in CLAIMS or rooted != (self.root is not None):
                raise ValueError(f"{self.name}: a collective's claim is one of {CLAIMS}, rooted exactly when it has "
                                 f"a root; got {self.claim!r} with root {self.root!r}")
        elif self.claim is not None:
            raise ValueError(f"{self.name}: only a collective makes a claim; got {self.claim!r}")


_C, _S, _R = Kind.COLLECTIVE, Kind.SEND, Kind.RECV

SPECS: tuple[OpSpec, ...] = (
    OpSpec("all_reduce", _C, data="tensor", claim="all"),
    OpSpec("all_gather", _C, data="tensor", claim="all"),
    OpSpec("all_gather_into_tensor", _C, data="input_tensor", claim="all"),
    OpSpec("all_gather_single", _C, data="input_tensor", claim="all"),
    OpSpec("reduce_scatter", _C, data="input_list", data_list=True, claim="all"),
    OpSpec("reduce_scatter_tensor", _C, data="input", claim="all"),
    OpSpec("reduce_scatter_single", _C, data="input", claim="all"),
    OpSpec("all_to_all", _C, data="input_tensor_list", data_list=True, claim="all"),
    OpSpec("all_to_all_single", _C, data="input", claim="all"),
    OpSpec("broadcast", _C, root="src", group_root="group_src", data="tensor", claim="root_start"),
    OpSpec("reduce", _C, root="dst", group_root="group_dst", data="tensor", claim="root_end"),
    OpSpec("gather", _C, root="dst", group_root="group_dst", data="tensor", claim="root_end"),
    OpSpec("scatter", _C, root="src", group_root="group_src", data="scatter_list", data_list=True,
           root_data_only=True, claim="root_start"),
    OpSpec("barrier", _C, claim="all"),
    OpSpec("all_gather_object", _C, asynchronous=None, objects=True, claim="all"),
    OpSpec("gather_object", _C, asynchronous=None, root="dst", group_root="group_dst", objects=True,
           claim="root_end"),
    OpSpec("broadcast_object_list", _C, asynchronous=None, root="src", group_root="group_src", objects=True,
           claim="root_start"),
    OpSpec("scatter_object_list", _C, asynchronous=None, root="src", group_root="group_src", objects=True,
           claim="root_start"),
    OpSpec("send_object_list", _S, asynchronous=None, root="dst", group_root="group_dst", objects=True),
    OpSpec("recv_object_list", _R, asynchronous=None, root="src", group_root="group_src", objects=True),
    OpSpec("send", _S, asynchronous=None, root="dst", group_root="group_dst", data="tensor"),
    OpSpec("recv", _R, asynchronous=None, root="src", group_root="group_src", data="tensor"),
    OpSpec("isend", _S, asynchronous="always", root="dst", group_root="group_dst", data="tensor"),
    OpSpec("irecv", _R, asynchronous="always", root="src", group_root="group_src", data="tensor"),
)

#: An op's index in SPECS by name: what a record keeps (torch/recorder.py).
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

    def where(self, name: str) -> tuple[int, str, Any]:
        """How ``get`` finds ``name``: (its position, -1 if it has none; the name; its default)."""
        return self._index.get(name, -1), name, self._defaults.get(name)


def tensor_bytes(value: Any, is_list: bool) -> int | None:
    """Bytes of a tensor or a list of tensors; None when they are not tensors."""
    try:
        if is_list:
            return sum(int(t.nbytes) for t in value) if value is not None else 0
        return int(value.nbytes)
    except (AttributeError, TypeError):
        return None
