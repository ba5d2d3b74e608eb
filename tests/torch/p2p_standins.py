"""Stand-ins for a blocking point-to-point op's peer, shared by the p2p record tests: a group of one cannot
send to itself, so torch's send and recv are replaced by these (their signatures), and an any-source
receive's open span by ``OpenRecv`` (what p2p.posted marks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Peer:
    """Stand-ins for dist.send / dist.recv: what they were asked (op, peer, tag), ``during`` run inside a
    receive (another thread's receive posted meanwhile), ``fail`` raised."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any]] = []
        self.during: Callable[[], None] | None = None
        self.fail: BaseException | None = None

    def send(self, tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0,
             group_dst: int | None = None) -> None:
        self.calls.append(("send", dst, tag))
        if self.fail is not None:
            raise self.fail

    def recv(self, tensor: Any, src: int | None = None, group: Any = None, tag: int = 0,
             group_src: int | None = None) -> int:
        self.calls.append(("recv", src, tag))
        if self.during is not None:
            self.during()
        if self.fail is not None:
            raise self.fail
        return 0 if src is None else src


class OpenRecv:
    """An any-source receive's open span: ``marked`` once p2p marks it ambiguous."""

    def __init__(self) -> None:
        self.marked = False

    def is_recording(self) -> bool:
        return True

    def set_attribute(self, key: str, value: Any) -> None:
        self.marked = True
