"""Async ops in flight: their spans end when the work is seen complete, never by blocking the program
(spec/torch.md §1.3).

How completion is seen, in order of preference:
- the work's future (``Work.get_future()``), for work on the host (gloo): a
  callback on the backend's thread ends the span (``completion="future"``).
  A device backend's future (NCCL) completes when the work is *queued*, so
  it is never used there;
- the user's ``wait()`` (``Work.wait`` is wrapped once, at class level, while
  instrumented) once the work reports ``is_completed()``: ``completion="wait"``
  (gloo's send/recv have no future and report completion once waited; a
  device work reports it when its stream got there);
- a sweep (``step()`` exit, ``sweep()``, ``uninstrument()``) that asks
  ``is_completed()`` of what is left: ``completion="sweep"`` (the end stamp
  is then later than the true end: the attribute says so). A gloo p2p work
  reports completion only once waited, so one never waited stays open until
  ``uninstrument()`` ends it as ``"unfinished"``.

A recorded op (an async host op that carries nothing, spec/torch.md §1.4)
is watched the same way, its record in place of a span: the record's end is
read when its data is seen complete, with the same completion.

A receive's side message (spec/torch.md §3.3) is decided by the receive
courier once the data completed; the span keeps the data's completion time
as its end stamp. Side-message sends are seen out by the send courier, so
the program never waits for a receiver.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from opentelemetry.trace import Span

from ..clocks.base import Timestamp
from ..semconv import TORCH_COMPLETION, TORCH_RECV_COUNT
from .carriage.couriers import SIDE_DEADLINE_S, RecvCourier, SendCourier
from .carriage.records import Exchange
from .carriage.side import SideRecv
from .counts import count
from .opspans import end_op
from .recorder import COMPLETION_CODES
from .spans import end_span, now, open_ops

__all__ = ["PendingOp", "registry"]

_log = logging.getLogger(__name__)


def _completed(work: Any) -> bool:
    try:
        return work is None or bool(work.is_completed())
    except Exception:  # an _IllegalWork (inside a coalescing manager) or a broken work: nothing to wait for
        return True


class PendingOp:
    """One traced op whose span is still open, or whose record (``number``; ``span`` None) has not ended."""

    __slots__ = ("attrs", "carried", "completion", "device", "done", "done_ts", "finished", "future_key", "number",
                 "on_done", "span", "works")

    def __init__(self, span: Span | None, works: list[Any], *, carried: Exchange | SideRecv | None = None,
                 attrs: dict[str, Any] | None = None, device: bool = False, number: int = -1,
                 future_key: str | None = None) -> None:
        self.span = span
        #: Works of one kind (a backend's p2p works): once one of them has no future, none is asked for one.
        self.future_key = future_key
        #: The op's record in the ring (recorder.py), ended when its data completed; -1: the op has a span.
        self.number = number
        self.works = works  #: the data works: all must complete
        self.carried = carried  #: the record that must arrive before the span ends
        self.attrs = attrs or {}
        #: The work runs on a device stream: its future completes when it is queued, so it is not used.
        self.device = device
        self.done = False  #: the data works completed (at done_ts, when the clock could be read)
        self.done_ts: Timestamp | None = None
        self.completion = ""
        self.finished = False
        #: Called once when the data completed, before the span may end (an any-source irecv learns its sender).
        self.on_done: Callable[[PendingOp], None] | None = None

    def data_done(self) -> bool:
        return all(_completed(w) for w in self.works)


class Registry:
    """Every open PendingOp, reachable from its works (for the ``wait()`` wrapper) and for sweeps."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_work: dict[int, PendingOp] = {}
        self._open: dict[int, PendingOp] = {}
        self.receiver = RecvCourier(self._finish)
        self.sender = SendCourier()

    def __len__(self) -> int:
        return len(self._open)

    def watch(self, op: PendingOp) -> None:
        """Track ``op``; end it at once if everything already completed."""
        with self._lock:
            self._open[id(op)] = op
            for w in op.works:
                if w is not None:
                    self._by_work[id(w)] = op
        key = op.future_key
        if op.device or (key is not None and key in _no_futures):
            futures = []
        else:
            futures = [f for f in (_future(w) for w in op.works) if f is not None]
            if key is not None and not futures and op.works:
                _no_futures.add(key)  # (gloo's p2p works: asking costs a C++ exception, ~20 µs, every time)
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
        elif op.data_done():  # nothing to wait for: a blocking call returned (on a device stream: queued)
            self.data_completed(op, "queued" if op.device else "return")
        carried = op.carried
        if isinstance(carried, Exchange) and carried.info.device.type == "cpu":
            fut = _future(carried.work)
            if fut is not None:
                fut.add_done_callback(lambda _fut: self._finish_when_ready(op))

    def open_numbers(self) -> list[int]:
        """The records of async ops whose work is not yet seen complete, whether the ring still holds them or not
        (the watchdog's: one whose record the ring lost, past Recorder.aside, is lost to a dump, not to the hang
        it may be)."""
        with self._lock:
            return [op.number for op in self._open.values() if op.number >= 0 and not op.done]

    def keep_send(self, channel: Hashable, tensor: Any, work: Any, blocking: bool) -> None:
        """A side message being sent: its tensor stays alive until the courier has seen it out."""
        self.sender.submit(channel, tensor, work, blocking)

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
        if op.span is not None:
            open_ops.pop(op.span.get_span_context().span_id, None)  # its data completed: no hang, whatever follows
            op.done_ts = now()
        hook = op.on_done
        if hook is not None:
            try:
                hook(op)
            except Exception:
                count("completion_hook_failed")
                _log.debug("tempotrace.torch: completion hook failed", exc_info=True)
        if op.span is None:  # a record: its end read now (after the hook: a receive is released while it can
            # still be marked, as a span is), and the ended records made into spans as a blocking op's end does
            end_op(op.number, COMPLETION_CODES[how])
        carried = op.carried
        if how == "unfinished":  # the data never came: its side message may still; the receive stays posted
            if isinstance(carried, SideRecv):
                carried.give_up(None)
            self._finish(op, unfinished_carriage=True)
        elif isinstance(carried, SideRecv):
            self.receiver.submit(op, time.monotonic() + (0.0 if carried.ordered else SIDE_DEADLINE_S))
        else:
            self._finish_when_ready(op)

    def _finish_when_ready(self, op: PendingOp) -> None:
        carried = op.carried
        if op.done and (not isinstance(carried, Exchange) or carried.done()):
            self._finish(op)

    def _finish(self, op: PendingOp, *, unfinished_carriage: bool = False) -> None:
        with self._lock:
            if op.finished:
                return
            op.finished = True
            self._open.pop(id(op), None)
        if op.span is None:
            return  # a record, ended when its data completed (it carries nothing)
        attrs = dict(op.attrs)
        attrs[TORCH_COMPLETION] = op.completion
        carried = op.carried
        if carried is not None:
            arrived = isinstance(carried, Exchange) and carried.done()
            if unfinished_carriage and isinstance(carried, Exchange) and not arrived:
                count("missing")  # uninstrument() with the record still on its way
                attrs[TORCH_RECV_COUNT] = 0
            else:
                try:
                    attrs.update(carried.finish())
                except Exception:  # e.g. a device record's read-back on a broken GPU: the span still ends
                    count("trace_failed")
                    _log.debug("tempotrace.torch: the carried record could not be read", exc_info=True)
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
                # An op-mode exchange every rank posted right behind the op: on gloo it is in flight, so
                # this is brief; a device exchange is left for a later sweep (no waiting on the GPU).
                if not carried.done() and carried.info.device.type == "cpu":
                    _settle(carried.work)
                self._finish_when_ready(op)
        self.receiver.flush()
        if final:
            with self._lock:
                ops = list(self._open.values())
                self._by_work.clear()
            for op in ops:  # an op-mode exchange still running: its record is counted missing
                self._finish(op, unfinished_carriage=True)


def _settle(work: Any) -> None:
    try:
        work.wait()  # a collective: gloo's algorithm has its own timeout, which fails the work, not the group
    except Exception:
        count("exchange_failed")
        _log.debug("tempotrace.torch: exchange failed", exc_info=True)


#: PendingOp.future_key values whose works have no future.
_no_futures: set[str] = set()


def _future(work: Any) -> Any:
    if work is None:
        return None
    try:
        return work.get_future()
    except Exception:  # gloo send/recv: "Work::getFuture not implemented"
        return None


registry = Registry()
