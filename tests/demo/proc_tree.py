"""The processes below a process, read from /proc (shared by the demo's end-to-end tests; Linux only)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def _stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """The direct children of ``pid``."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and (f := _stat_fields(int(e))) and int(f[1]) == pid]


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (torchrun puts its ranks in sessions of their own, still its children)."""
    out, frontier = [], [pid]
    while frontier:
        frontier = [kid for parent in frontier for kid in children(parent)]
        out += frontier
    return out


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie has exited)."""
    return [pid for pid in pids if (f := _stat_fields(pid)) is not None and f[0] != "Z"]


def wait_gone(pids: list[int], timeout_s: float = 30.0) -> list[int]:
    """Wait up to ``timeout_s`` for every one of ``pids`` to exit; return those still running."""
    deadline = time.monotonic() + timeout_s
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(pids)
