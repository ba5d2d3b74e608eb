"""Refreshing sync state off the hot path, at most once a second.

``now()`` must not block on a syscall storm or a socket round trip, so each
source keeps an immutable snapshot of its sync state that ``now()`` reads
without locking (a single attribute load is atomic in CPython), and one
daemon thread per process refreshes every registered source once per
``PERIOD_S``. Sources are held weakly: a dropped source stops being
refreshed. After ``fork()`` the child's thread is gone, so it is restarted
lazily there.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Protocol

__all__ = ["PERIOD_S", "Refreshable", "register"]

#: The issue's "at most once a second".
PERIOD_S = 1.0

_log = logging.getLogger(__name__)


class Refreshable(Protocol):
    def refresh(self) -> None: ...


class _Refresher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: weakref.WeakSet[Refreshable] = weakref.WeakSet()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def register(self, source: Refreshable) -> None:
        with self._lock:
            self._sources.add(source)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="tempotrace-clock-refresh", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait(PERIOD_S)
            with self._lock:
                sources = list(self._sources)
            if not sources:
                with self._lock:
                    if not self._sources:  # nothing left: let the thread end
                        self._thread = None
                        return
            for source in sources:
                try:
                    source.refresh()
                except Exception:  # a source's refresh must never kill the others'
                    _log.debug("clock refresh failed for %r", source, exc_info=True)

    def after_fork(self) -> None:
        self._lock = threading.Lock()
        self._thread = None
        with self._lock:
            alive = list(self._sources)
        if alive:
            self.register(alive[0])


_REFRESHER = _Refresher()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_REFRESHER.after_fork)


def register(source: Refreshable) -> None:
    """Refresh ``source`` about once per PERIOD_S from the background thread."""
    _REFRESHER.register(source)
