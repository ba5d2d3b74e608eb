"""The per-process Lamport counter (spec/tt-ext-v3.md §10).

Local events (span start, inject/send) tick; receives merge:
``lts = max(lts, remote) + 1``. A remote value >= 2^63 is refused (a peer
must not be able to push every counter to the end of its range in one hop),
and the counter saturates at 2^63 - 1 instead of wrapping, reporting once.

A remote value more than ``LAMPORT_MAX_AHEAD`` ahead of the local counter is
not merged either (spec §10.1): the receive is then a plain local tick, and
``receive`` says so, so that the caller can record that this hop carries no
Lamport evidence.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref

from ..errors import FieldError
from .layout import LTS_MAX

__all__ = ["LAMPORT_MAX_AHEAD", "LamportClock"]

#: How far a received lts may be ahead of the local counter and still be
#: merged (spec §10.1). 2^44: forging its way to saturation takes a peer about
#: 2^19 (524,288) accepted headers instead of one, while an honest counter
#: needs 203 days at 10^6 events/s (5.6 years at 10^5/s) to get this far ahead
#: of a freshly started process. The reasoning is in the spec.
LAMPORT_MAX_AHEAD = 2**44

_log = logging.getLogger(__name__)

# Every live clock, so one fork hook can renew their locks without keeping
# the clocks alive.
_LIVE: weakref.WeakSet[LamportClock] = weakref.WeakSet()


def _renew_locks_after_fork() -> None:
    # A lock held by another thread at fork time would stay held forever in
    # the child. The value is kept: the child's events come after the
    # parent's so far.
    for clock in list(_LIVE):
        clock._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_locks_after_fork)


class LamportClock:
    """A thread-safe, fork-safe Lamport counter. No tick is ever lost."""

    __slots__ = ("__weakref__", "_lock", "_saturated", "_value")

    def __init__(self, start: int = 0) -> None:
        if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= LTS_MAX:
            raise FieldError("lts", "must be an integer 0..2^63-1", error_class="LTS_RANGE")
        self._value = start
        self._lock = threading.Lock()
        self._saturated = False
        _LIVE.add(self)

    @property
    def value(self) -> int:
        """The current counter value (the lts of the latest event)."""
        return self._value

    @property
    def saturated(self) -> bool:
        """True once the counter has reached 2^63 - 1 and stopped advancing."""
        return self._saturated

    def tick(self) -> int:
        """Record a local event; return its lts."""
        with self._lock:
            value = self._value
            if value >= LTS_MAX:
                return self._saturate()
            value += 1
            self._value = value
            return value

    def receive(self, remote: int) -> tuple[int, bool]:
        """Record a receive of a header carrying ``remote``: ``(lts, merged)``.

        ``lts`` is the receive event's value. ``merged`` is False when
        ``remote`` was more than ``LAMPORT_MAX_AHEAD`` ahead of the counter:
        the receive was then a plain local tick, and the hop carries no
        Lamport evidence (the caller must record that, spec §10.1).

        Raises ``FieldError`` (error class LTS_RANGE) for remote >= 2^63 or
        negative values, leaving the counter untouched.
        """
        if not (type(remote) is int and 0 <= remote <= LTS_MAX) and (
            not isinstance(remote, int) or isinstance(remote, bool) or not 0 <= remote <= LTS_MAX
        ):
            raise FieldError("lts", "remote value must be 0..2^63-1", error_class="LTS_RANGE", remote=True)
        with self._lock:
            value = self._value
            merged = remote - value <= LAMPORT_MAX_AHEAD
            if merged and remote > value:
                value = remote
            if value >= LTS_MAX:
                return self._saturate(), merged
            value += 1
            self._value = value
            return value, merged

    def merge(self, remote: int) -> int:
        """Record a receive of a header carrying ``remote``; return the new lts.

        ``receive`` without the ``merged`` flag: the same bounded rule and the
        same ``FieldError`` (LTS_RANGE) for remote >= 2^63 or negative values.
        Callers that put the receive on record should use ``receive``.
        """
        return self.receive(remote)[0]

    def _saturate(self) -> int:
        # Called with the lock held.
        self._value = LTS_MAX
        if not self._saturated:
            self._saturated = True
            _log.warning("Lamport counter saturated at 2^63-1; later events share this value")
        return LTS_MAX

    def __repr__(self) -> str:
        return f"LamportClock(value={self._value})"
