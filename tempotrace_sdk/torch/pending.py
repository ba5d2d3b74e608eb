"""Async ops in flight: their spans end when the work is seen complete, never by blocking the program
(spec/torch.md §1.3).

How completion is seen, in order of preference:
- the work's future (``Work.get_future()``: gloo and NCCL collectives): a
  callback on the backend's thread ends the span (``completion="future"``);
- the user's ``wait()`` (``Work.wait`` is wrapped once, at class level, while
  instrumented; gloo's send/recv have no future): ``completion="wait"``;
- a sweep (``step()`` exit, ``sweep()``, ``uninstrument()``) that asks
  ``is_completed()`` of what is left: ``completion="sweep"`` (the end stamp
  is then later than the true end: the attribute says so). A gloo p2p work
  reports completion only once waited, so one never waited stays open until
  ``uninstrument()`` ends it as ``"unfinished"``.

A receive whose side message (spec/torch.md §3.3) is still on its way keeps
the data's completion time as its end stamp and is finished by the
``Courier`` thread once the record is in: the sender posts it right behind
the data, so it is in flight by then, and gloo only reports a receive done
after a ``wait()``, which must not be the program's. Side-message sends are
waited out on a second courier, so the program never waits for a receiver.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import Span

from ..clocks.base import Timestamp
from ..semconv import TORCH_COMPLETION, TORCH_RECV_COUNT
from .carriage import Exchange, SideRecv, count
from .spans import end_span, now

__all__ = ["Courier", "PendingOp", "registry"]

_log = logging.getLogger(__name__)

#: A courier polls a work that has no blocking wait of its own (NCCL: is_completed() reads CUDA events).
POLL_S = 50e-6
#: How long a sweep waits for side messages in flight (normally microseconds: they follow their data).
FLUSH_TIMEOUT_S = 10.0


def _completed(work: Any) -> bool:
    try:
        return work is None or bool(work.is_completed())
    except Exception:  # an _IllegalWork (inside a coalescing manager) or a broken work: nothing to wait for
        return True


def _exchange_done(exchange: Exchange) -> bool:
    """The future says it first: a backend may flag the work complete only after running callbacks."""
    fut = _future(exchange.work)
    if fut is not None:
        try:
            return bool(fut.done())
        except Exception:
            pass
    return _completed(exchange.work)


def settle(work: Any, blocking_wait: bool) -> bool:
    """Wait (gloo: ``wait()``; otherwise poll) until ``work`` completed; False if it failed."""
    try:
        if work is None:
            return True
        if blocking_wait:
            work.wait()
        else:
            while not work.is_completed():
                time.sleep(POLL_S)
        return True
    except Exception:
        count("side_failed")
        _log.debug("tempotrace.torch: side message failed", exc_info=True)
        return False


class PendingOp:
    """One traced op whose span is still open."""

    __slots__ = ("attrs", "carried", "completion", "done", "done_ts", "finished", "on_done", "span", "works")

    def __init__(self, span: Span, works: list[Any], *, carried: Exchange | SideRecv | None = None,
                 attrs: dict[str, Any] | None = None) -> None:
        self.span = span
        self.works = works  #: the data works: all must complete
        self.carried = carried  #: the record that must arrive before the span ends
        self.attrs = attrs or {}
        self.done = False  #: the data works completed (at done_ts, when the clock could be read)
        self.done_ts: Timestamp | None = None
        self.completion = ""
        self.finished = False
        #: Called once when the data completed, before the span may end (an any-source irecv learns its sender).
        self.on_done: Callable[[PendingOp], None] | None = None

    def data_done(self) -> bool:
        return all(_completed(w) for w in self.works)


class Courier:
    """A daemon thread that works through a queue: waits out side messages, then finishes what needs them."""

    def __init__(self, name: str, handle: Callable[[Any], None]) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()
        self._handle = handle
        self._name = name
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, item: Any) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._queue.put(item)

    def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> bool:
        """Wait until everything submitted so far has been handled; False (counted) after ``timeout_s``.

        Bounded: a side message that never comes (a peer not instrumented alike) must not
        hang the program at a step's end; its span then ends whenever the message does.
        """
        if self._thread is None:
            return True
        deadline = time.monotonic() + timeout_s
        q = self._queue
        with q.all_tasks_done:
            while q.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    count("flush_timeout")
                    _log.warning("tempotrace.torch: %s still waiting after %.0f s (are all ranks instrumented "
                                 "with the same carriage?)", self._name, timeout_s)
                    return False
                q.all_tasks_done.wait(left)
        return True

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                self._handle(item)
            except Exception:
                _log.debug("tempotrace.torch: %s failed", self._name, exc_info=True)
            finally:
                self._queue.task_done()


class Registry:
    """Every open PendingOp, reachable from its works (for the ``wait()`` wrapper) and for sweeps."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_work: dict[int, PendingOp] = {}
        self._open: dict[int, PendingOp] = {}
        self.receiver = Courier("tempotrace-side-recv", self._receive)
        self.sender = Courier("tempotrace-side-send", _see_out)

    def __len__(self) -> int:
        return len(self._open)

    def watch(self, op: PendingOp) -> None:
        """Track ``op``; end it at once if everything already completed."""
        with self._lock:
            self._open[id(op)] = op
            for w in op.works:
                if w is not None:
                    self._by_work[id(w)] = op
        futures = [f for f in (_future(w) for w in op.works) if f is not None]
        if futures and len(futures) == sum(w is not None for w in op.works):
            remaining = [len(futures)]
            lock = threading.Lock()

            def one_done(_fut: Any) -> None:
                with lock:
                    remaining[0] -= 1
                    last = remaining[0] == 0
                if last:
                    self.data_completed(op, "future")

            for fut in futures:
                fut.add_done_callback(one_done)
        elif op.data_done():
            self.data_completed(op, "return")
        carried = op.carried
        if isinstance(carried, Exchange):
            fut = _future(carried.work)
            if fut is not None:
                fut.add_done_callback(lambda _fut: self._finish_when_ready(op))

    def keep_send(self, tensor: Any, work: Any, blocking_wait: bool) -> None:
        """A side message being sent: its tensor stays alive until the courier has seen it out."""
        self.sender.submit((tensor, work, blocking_wait))

    def on_wait(self, work: Any) -> None:
        """The user's wait() on ``work`` returned."""
        op = self._by_work.get(id(work))
        if op is not None and op.data_done():
            self.data_completed(op, "wait")

    def data_completed(self, op: PendingOp, how: str) -> None:
        with self._lock:
            if op.done or op.finished:
                return
            op.done = True
            op.completion = how
            for w in op.works:
                self._by_work.pop(id(w), None)
        op.done_ts = now()
        hook = op.on_done
        if hook is not None:
            try:
                hook(op)
            except Exception:
                count("completion_hook_failed")
                _log.debug("tempotrace.torch: completion hook failed", exc_info=True)
        if how == "unfinished":  # the data never came: neither will its side message
            self._finish(op, unfinished_carriage=True)
        elif isinstance(op.carried, SideRecv):
            self.receiver.submit(op)
        else:
            self._finish_when_ready(op)

    def _receive(self, op: PendingOp) -> None:
        side = op.carried
        assert isinstance(side, SideRecv)
        side.ok = settle(side.work, side.blocking)
        self._finish(op)

    def _finish_when_ready(self, op: PendingOp) -> None:
        carried = op.carried
        if op.done and (not isinstance(carried, Exchange) or _exchange_done(carried)):
            self._finish(op)

    def _finish(self, op: PendingOp, *, unfinished_carriage: bool = False) -> None:
        with self._lock:
            if op.finished:
                return
            op.finished = True
            self._open.pop(id(op), None)
        attrs = dict(op.attrs)
        attrs[TORCH_COMPLETION] = op.completion
        carried = op.carried
        if carried is not None:
            arrived = isinstance(carried, Exchange) and _exchange_done(carried)
            if unfinished_carriage and not arrived:  # uninstrument() with the record still on its way
                count("missing")
                attrs[TORCH_RECV_COUNT] = 0
            else:
                attrs.update(carried.finish())
        end_span(op.span, attrs, ts=op.done_ts)

    def sweep(self, *, final: bool = False) -> None:
        """End what has completed since; ``final``: end everything (uninstrument)."""
        with self._lock:
            ops = list(self._open.values())
        for op in ops:
            if not op.done:
                if op.data_done():
                    self.data_completed(op, "sweep")
                elif final:
                    self.data_completed(op, "unfinished")
            carried = op.carried
            if op.done and not op.finished and isinstance(carried, Exchange):
                # An op-mode exchange every rank posted right behind the op: in flight, so this is brief.
                settle(carried.work, carried.info.tags)
                self._finish_when_ready(op)
        self.receiver.flush()
        if final:
            with self._lock:
                ops = list(self._open.values())
                self._by_work.clear()
            for op in ops:  # an op-mode exchange still running: its record is counted missing
                self._finish(op, unfinished_carriage=True)


def _see_out(item: tuple[Any, Any, bool]) -> None:
    settle(item[1], item[2])  # the tensor (item[0]) is released when the courier drops the item


def _future(work: Any) -> Any:
    if work is None:
        return None
    try:
        return work.get_future()
    except Exception:  # gloo send/recv: "Work::getFuture not implemented"
        return None


registry = Registry()
