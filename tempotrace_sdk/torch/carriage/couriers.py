"""The threads that see p2p side messages out and in, so the program never waits for them (spec/torch.md §3.3).

``SendCourier`` keeps each side send (its tensor alive) until it completed.
gloo says a send completed only to a ``wait()``, and a gloo wait that times
out closes every connection of the group, so the wait has no deadline. A side
message nobody takes (its receiver received through a function bound before
``instrument()``, §1.1) then holds its thread for good: every channel (group,
peer, tag) is seen out by its own thread, so it holds up no other, and a gloo
channel with ``SIDE_BACKLOG`` side messages not seen out takes no more (the
sender counts ``side_backlog``; a receiver that does take them counts
``side_absent``). Device backends (NCCL) are polled and never skip a side
message: their receiver would take the next message for the record.

A thread still in such a wait when the interpreter shuts down is woken when
the peer's process exits and closes its connection; if that happens while
this interpreter finalizes, Python ends the thread inside torch's C++ frames
and the process aborts. So at exit, while such waits remain, the sender
waits (at most ``EXIT_WAIT_S``) for them to end first: its peer exiting ends
them with an error, which is counted (``side_failed``).

``RecvCourier`` polls the side receives of receives whose data completed,
without blocking (``SideRecv.arrived()``), and finishes each when its message
is in, or when it is overdue: at once for a receive posted before its data on
gloo's ordered connection (the message, if sent, came first), else
``SIDE_DEADLINE_S`` after the data. A sweep waits for it to be done, which
is therefore bounded by those deadlines and never waits twice for one item.
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from ..counts import count
from ..spans import end_span
from .side import FOREVER, SideRecv

__all__ = ["FLUSH_TIMEOUT_S", "SIDE_BACKLOG", "SIDE_DEADLINE_S", "RecvCourier", "SendCourier"]

_log = logging.getLogger(__name__)

#: How long after its data completed a side message that may travel behind it (an any-source
#: receive's, posted once its sender is known; a device stream's) can still come.
SIDE_DEADLINE_S = 10.0
#: A sweep's wait for the receive courier: a safety net beyond every item's own deadline.
FLUSH_TIMEOUT_S = SIDE_DEADLINE_S + 5.0
#: Side messages of one gloo channel not yet seen out, beyond which the sender sends no more.
SIDE_BACKLOG = 256
#: Threads seeing sends out at once; more channels wait for one to be free.
SEND_THREADS_MAX = 32
#: A send thread whose channel is empty waits this long for more before it ends.
SEND_LINGER_S = 1.0
#: At exit, how long to wait for threads still waiting for a side message to be taken.
EXIT_WAIT_S = 10.0
#: Polling backs off from the first to the second while nothing changes.
POLL_MIN_S, POLL_MAX_S = 50e-6, 2e-3


def see_out(work: Any, blocking: bool) -> None:
    """Return once ``work`` completed: gloo's wait (no deadline), else a poll of ``is_completed()``."""
    try:
        if work is None:
            return
        if blocking:
            work.wait(FOREVER)
            return
        delay = POLL_MIN_S
        while not work.is_completed():
            time.sleep(delay)
            delay = min(2 * delay, POLL_MAX_S)
    except Exception:
        count("side_failed")
        _log.debug("tempotrace.torch: side message failed", exc_info=True)


class SendCourier:
    """Keeps every side send until it completed: one thread per channel with sends in flight."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queues: dict[Hashable, deque[tuple[Any, Any, bool]]] = {}
        self._served: set[Hashable] = set()
        self._waiting = 0  # threads inside a wait for a side send
        atexit.register(self.drain, EXIT_WAIT_S)

    def drain(self, timeout_s: float) -> bool:
        """Wait (at most ``timeout_s``) until no thread waits for a side send; False if one still does."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._waiting:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def accepting(self, channel: Hashable) -> bool:
        """Fewer than SIDE_BACKLOG side sends of ``channel`` wait to be seen out."""
        with self._cond:
            queue = self._queues.get(channel)
            return queue is None or len(queue) < SIDE_BACKLOG

    def in_flight(self) -> int:
        with self._cond:
            return sum(len(q) for q in self._queues.values())

    def submit(self, channel: Hashable, tensor: Any, work: Any, blocking: bool) -> None:
        with self._cond:
            self._queues.setdefault(channel, deque()).append((tensor, work, blocking))
            if channel in self._served or len(self._served) >= SEND_THREADS_MAX:
                self._cond.notify_all()
                return
            self._served.add(channel)
        try:
            threading.Thread(target=self._serve, args=(channel,), name="tempotrace-side-send", daemon=True).start()
        except Exception:  # no thread to be had: the send stays kept; the channel's next send tries again
            with self._cond:
                self._served.discard(channel)
            count("side_failed")
            _log.debug("tempotrace.torch: no thread to see side sends out", exc_info=True)

    def _has_work(self, channel: Hashable) -> bool:
        return bool(self._queues.get(channel))

    def _serve(self, channel: Hashable) -> None:
        while True:
            with self._cond:
                queue = self._queues.get(channel)
                if not queue:
                    self._cond.wait_for(functools.partial(self._has_work, channel), timeout=SEND_LINGER_S)
                    queue = self._queues.get(channel)
                if not queue:
                    self._queues.pop(channel, None)
                    self._served.discard(channel)
                    waiting = next((c for c, q in self._queues.items() if q and c not in self._served), None)
                    if waiting is None:
                        return
                    channel = waiting  # a channel left without a thread at the cap
                    self._served.add(channel)
                    continue
                _, work, blocking = queue[0]  # stays counted until seen out
                self._waiting += 1
            try:
                see_out(work, blocking)
            finally:
                with self._cond:
                    self._waiting -= 1
                    queue.popleft()  # the tensor goes with it
                    self._cond.notify_all()


class RecvCourier:
    """Polls side receives whose data completed and hands each op to ``finish`` once decided."""

    def __init__(self, finish: Callable[[Any], None]) -> None:
        self._finish = finish
        self._cond = threading.Condition()
        self._items: list[tuple[Any, float]] = []  # (PendingOp, monotonic deadline)
        self._busy = 0
        self._thread: threading.Thread | None = None

    def submit(self, op: Any, deadline: float) -> None:
        with self._cond:
            self._items.append((op, deadline))
            self._cond.notify_all()
            if self._thread is not None and self._thread.is_alive():
                return
            try:
                self._thread = threading.Thread(target=self._run, name="tempotrace-side-recv", daemon=True)
                self._thread.start()
                return
            except Exception:  # no thread to be had: decide now, without waiting, rather than leave it to flush
                self._thread = None
                items, self._items = self._items, []
                count("side_failed")
                _log.debug("tempotrace.torch: no thread to decide side receives", exc_info=True)
        for item in items:
            self._decided(item[0], 0.0)

    def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> bool:
        """Wait until every op submitted so far is finished; False (counted) after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._items or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    count("flush_timeout")
                    _log.warning("tempotrace.torch: side receives still undecided after %.0f s", timeout_s)
                    return False
                self._cond.wait(left)
        return True

    def _run(self) -> None:
        delay = POLL_MIN_S
        while True:
            with self._cond:
                while not self._items:
                    self._cond.wait()
                items, self._items, self._busy = self._items, [], len(self._items)
            kept: list[tuple[Any, float]] = []
            try:
                kept = [item for item in items if not self._decided(*item)]
            finally:  # whatever happened, a flush must not wait for items no thread holds any more
                with self._cond:
                    self._items[:0] = kept
                    self._busy = 0
                    self._cond.notify_all()
            with self._cond:
                if len(kept) == len(items):  # nothing changed: back off (a new item wakes us)
                    self._cond.wait(delay)
                    delay = min(2 * delay, POLL_MAX_S)
                else:
                    delay = POLL_MIN_S

    def _decided(self, op: Any, deadline: float) -> bool:
        """``_decide``, never raising: a failure while finishing one receive (its record's read-back on a
        broken device...) is counted ``trace_failed`` and ends its span, and the courier goes on."""
        try:
            return self._decide(op, deadline)
        except Exception:
            count("trace_failed")
            _log.debug("tempotrace.torch: finishing a receive failed", exc_info=True)
            end_span(op.span)
            return True

    def _decide(self, op: Any, deadline: float) -> bool:
        """Finish ``op`` if its side message is in or overdue; False to look again later."""
        side = op.carried
        try:
            if isinstance(side, SideRecv):
                if side.arrived():
                    side.take()
                elif time.monotonic() >= deadline:
                    side.give_up("side_absent" if side.ordered else "side_timeout")
                else:
                    return False
        except Exception:
            _log.debug("tempotrace.torch: side receive check failed", exc_info=True)
            side.keep()  # gloo holds only a weak reference to a posted buffer
        self._finish(op)
        return True
