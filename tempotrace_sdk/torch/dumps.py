"""Flight-recorder dumps: the ring's ops as spans, on demand and when a rank hangs (spec/torch.md §8.2, §8.3).

``dump(reason)`` takes every op the ring holds that was never exported --
open ones become ``pending`` spans with no end stamp -- and one ``torch.dump``
record (reason, ops, pending, ops overwritten unexported, which the export
pipeline's loss ledger counts), and hands them to the export processors,
flushing them, on the calling thread. It never raises, never takes a lock a
collective takes, and is bounded: the ring bounds its work, ``DUMP_TIMEOUT_S``
its flushes.

The watchdog thread (``hang_timeout`` > 0) looks at the open ops every
``POLL_S``: an op open longer than ``hang_timeout`` dumps this rank and asks
every rank to dump, by a key in the default process group's store -- a
TCPStore request, which works while the stuck ranks can take part in no
collective. Each rank's watchdog polls that key. Where the store is gone (its
host died), a rank dumps alone. Automatic dumps also come from an exception
leaving ``step()``, SIGTERM and interpreter exit (under ``retain="ring"``, or
when an op is open), and from the opt-in ``dump_signal``.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from ..clocks.leapseconds import tai_to_utc_ns
from ..otel import lifecycle
from ..otel.context import get_state
from ..otel.processor import _attributes as stamp_attributes
from ..otel.records import SpanRecord
from ..semconv import (
    TORCH_COMPLETION,
    TORCH_DUMP_OPS,
    TORCH_DUMP_OVERWRITTEN,
    TORCH_DUMP_PENDING,
    TORCH_DUMP_REASON,
    TORCH_DUMP_REQUESTED_BY,
)
from .counts import count
from .opspans import _StartOf, deliver, destination, make_spans, pending_spans
from .pending import registry
from .recorder import DEFAULT_HANG_TIMEOUT_S, recorder
from .spans import open_ops

__all__ = ["DEFAULT_HANG_TIMEOUT_S", "DUMP_KEY", "DUMP_TIMEOUT_S", "POLL_S", "Watchdog", "dump", "watchdog"]

_log = logging.getLogger(__name__)

#: How often the watchdog looks at this rank's open ops.
POLL_S = 0.5
#: How often every rank reads the store's dump key (at least once a second; a job of thousands of ranks
#: makes that many requests a second to the store's host).
STORE_POLL_S = 1.0
#: A rank that dumped this recently does not dump again for another rank's ask: its dump covers it.
PEER_QUIET_S = 5.0
#: SIGTERM and exit: the dump leaves the rest of the exit flush time to the other pipelines.
EXIT_DUMP_TIMEOUT_S = 2.0
#: The longest a dump spends flushing what it handed to the export processors.
DUMP_TIMEOUT_S = 5.0
#: Spans handed to an export processor between two of its flushes: well under its queue (8,192 by default), so
#: a dump from the watchdog thread, which may not wait for room, drops nothing.
CHUNK = 2048
#: The store key a hang dump sets ("<request number>:<rank>"), and the counter numbering requests.
DUMP_KEY = "tempotrace/dump"
_DUMP_COUNTER = "tempotrace/dump-counter"

#: How long a dump waits for a release that holds the ring's lock before it gives up (counted ``dump_busy``).
LOCK_WAIT_S = 2.0


class _DumpState:
    """One dump at a time (a second asked meanwhile is skipped, counted ``dump_busy``: the first covers it);
    overwritten ops already counted in the loss ledger; when this process last dumped; open op spans dumped."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counted = 0
        self.last_at = -1e18
        self.pid = os.getpid()
        #: span ids of open SDK op spans a dump wrote pending: the next dump skips them while they stay open,
        #: as the ring's DUMPED records (their real end follows under the same id)
        self.dumped_open: set[int] = set()

    def after_fork_in_child(self) -> None:
        # a fork during a dump would leave the child's lock held for ever; its ring and counts start again
        self.__init__()  # type: ignore[misc]


_state = _DumpState()
lifecycle.renew_after_fork(_state)


def _rank() -> int:
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def dump(reason: str = "request", *, requested_by: int | None = None, timeout_s: float = DUMP_TIMEOUT_S) -> int:
    """Export every op the ring holds that was never exported, open ones as ``pending``, and a dump record;
    flushed before it returns (at most ``timeout_s``). Returns the op spans written, -1 when another dump was
    running, the ring's lock could not be had, or this one failed. Never raises."""
    if not _state.lock.acquire(blocking=False):
        count("dump_busy")
        return -1
    try:
        deadline = time.monotonic() + timeout_s
        state = get_state()
        clock = state._clock
        # the dump's own reading first: a clock that fails now loses no record
        ptp, unc, source, quality, lts = state.stamp.tick(clock if clock is not None else state.clock)
        dump_utc = tai_to_utc_ns(ptp)
        resource, scope, processors = destination()
        if not recorder.lock.acquire(timeout=min(LOCK_WAIT_S, timeout_s)):  # a release stuck on a full queue
            count("dump_busy")
            return -1
        try:  # records are taken under it; spans are made and flushed after it is let go
            records = recorder.take_all()
        finally:
            recorder.lock.release()
        _state.last_at = time.monotonic()
        written = pending = 0
        # the ring's records, then the ops that are no records (async, device, point-to-point, carried: SDK
        # spans) open now, oldest first; an open span a dump already wrote is not written again (§8.3), so the
        # ids of those written are remembered while they stay open
        still_open = list(open_ops.items())
        dumped = _state.dumped_open
        dumped &= {span_id for span_id, _ in still_open}
        opened = [sp for span_id, (sp, _) in still_open if span_id not in dumped]
        makers: tuple[tuple[Sequence[Any], Callable[[Sequence[Any]], list[ReadableSpan]], set[int] | None], ...] = (
            (records, lambda chunk: make_spans(state, chunk, resource, scope, dump_utc), None),
            (opened, lambda chunk: pending_spans(state, chunk, dump_utc), dumped))
        for items, make, remember in makers:
            for i in range(0, len(items), CHUNK):  # made a chunk at a time: memory bounded by the chunk
                _flush(processors, deadline)  # room first: the queue may hold the application's spans
                if time.monotonic() >= deadline:
                    count("dump_flush_timeout")
                    break
                spans = make(items[i:i + CHUNK])
                deliver(spans, processors)
                if remember is not None:
                    remember.update(sp.context.span_id for sp in spans if sp.context is not None)
                written += len(spans)
                pending += sum(1 for sp in spans if (sp.attributes or {}).get(TORCH_COMPLETION) == "pending")
        attrs: dict[str, Any] = {
            TORCH_DUMP_REASON: reason,
            TORCH_DUMP_OPS: written,
            TORCH_DUMP_PENDING: pending,
            TORCH_DUMP_OVERWRITTEN: recorder.overwritten,
        }
        if requested_by is not None:
            attrs[TORCH_DUMP_REQUESTED_BY] = requested_by
        span_id = secrets.randbits(64) or 1
        attrs.update(stamp_attributes(state, _StartOf(dump_utc, resource),  # type: ignore[arg-type]
                                      SpanRecord(lts, ptp, unc, quality, source, span_id),
                                      (state.lamport.tick(), ptp, unc, quality), source, dump_utc, ()))
        context = SpanContext(secrets.randbits(128) or 1, span_id, False, TraceFlags(TraceFlags.SAMPLED))
        _count_overwritten(processors)
        deliver([ReadableSpan("torch.dump", context, None, resource, attrs, kind=SpanKind.INTERNAL,
                              start_time=dump_utc, end_time=dump_utc, instrumentation_scope=scope)], processors)
        _flush(processors, deadline)
        count("dumps")
        _log.debug("tempotrace.torch: dump (%s): %d op spans, %d pending", reason, written, pending)
        return written
    except Exception:
        count("dump_failed")
        _log.debug("tempotrace.torch: dump failed", exc_info=True)
        return -1
    finally:
        _state.lock.release()


def _count_overwritten(processors: Any) -> None:
    new = recorder.overwritten - _state.counted
    if new <= 0:
        return
    _state.counted = recorder.overwritten
    for p in processors:
        ledger = getattr(p, "ledger", None)
        if ledger is not None:
            ledger.drop(new, "ring_overwritten", f"the flight-recorder ring overwrote {new} op(s) never exported")


def _flush(processors: Any, deadline: float) -> None:
    for p in processors:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            count("dump_flush_timeout")
            return
        try:
            p.force_flush(left_ms)
        except Exception:
            _log.debug("tempotrace.torch: flushing a dump failed", exc_info=True)


class Watchdog:
    """Two threads while instrumented: ``tempotrace-watchdog`` looks at this rank's open ops and dumps on a hang;
    ``tempotrace-dump-requests`` talks to the store (asks every rank to dump, serves other ranks' asks). Apart,
    so that a store that stops answering (its host frozen: a request can then block for minutes, whatever the
    store's timeout) never delays this rank's own dump."""

    def __init__(self) -> None:
        self.hang_timeout = DEFAULT_HANG_TIMEOUT_S
        #: The process that instrumented (install.py sets it): a forked child (a DataLoader worker) that did not
        #: instrument itself neither polls nor dumps at exit.
        self.owner_pid = -1
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        #: op number (a record's) or -1 - span id (an SDK span's) -> monotonic time the op was first seen open
        self._seen: dict[int, float] = {}
        #: open ops a hang dump already covered: one dump per hang, not one per poll
        self._dumped_for: set[int] = set()
        #: monotonic time of this rank's last hang dump: the next one waits hang_timeout (spans that end late, as
        #: a GPU op's at the step's exit, cannot make one a poll)
        self._last_hang = -float("inf")
        self._served = 0  #: the highest request number this rank has seen
        self._ask = threading.Event()  #: set by a hang dump: the store thread asks every rank
        self._store: Any = None
        self._store_failed = False

    def start(self, hang_timeout: float) -> None:
        self.hang_timeout = hang_timeout
        if any(t.is_alive() for t in self._threads) and not self._stop.is_set():
            return
        self._stop = stop = threading.Event()  # each start its own: a thread from before stops for good
        self._store, self._store_failed = None, False
        self._threads = [threading.Thread(target=self._run_local, args=(stop,), name="tempotrace-watchdog",
                                          daemon=True),
                         threading.Thread(target=self._run_store, args=(stop,), name="tempotrace-dump-requests",
                                          daemon=True)]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(POLL_S + 1)  # a thread stuck in a store call or a dump is left to end on its own
        self._threads = []

    def _run_local(self, stop: threading.Event) -> None:
        while not stop.wait(POLL_S):
            try:
                self.poll()
            except Exception:
                count("watchdog_failed")
                _log.debug("tempotrace.torch: watchdog poll failed", exc_info=True)

    def _run_store(self, stop: threading.Event) -> None:
        while not stop.wait(STORE_POLL_S):
            try:
                if self._ask.is_set():
                    self._ask.clear()
                    self._ask_everyone()
                self._serve_requests()
            except Exception:
                count("watchdog_failed")
                _log.debug("tempotrace.torch: dump-request poll failed", exc_info=True)

    def poll(self, now: float | None = None) -> None:
        """One look at this rank's open ops: one open for ``hang_timeout`` dumps it, and every rank is asked to."""
        now = time.monotonic() if now is None else now
        seen = self._seen
        still = {n: seen.get(n, now) for n in recorder.open_numbers()}
        for n in registry.open_numbers():  # an async op's record, even one the ring lost
            still.setdefault(n, seen.get(n, now))
        for span_id, (_, started) in list(open_ops.items()):  # the SDK spans' ops: keyed apart from numbers
            key = -span_id - 1
            still[key] = seen.get(key, started)
        self._seen = still
        self._dumped_for &= still.keys()
        stuck = [n for n, t in still.items() if now - t >= self.hang_timeout and n not in self._dumped_for]
        if not stuck or now - self._last_hang < self.hang_timeout:
            return
        self._dumped_for.update(still)
        self._last_hang = now
        _log.warning("tempotrace.torch: an op open for %.0f s (hang_timeout): dumping the flight recorder and asking "
                     "every rank to dump", self.hang_timeout)
        self._ask.set()  # the store thread asks; this one dumps now, whatever the store does
        dump("hang")

    def _store_or_none(self) -> Any:
        if self._store is not None or self._store_failed:
            return self._store
        try:
            import torch.distributed as dist
            import torch.distributed.distributed_c10d as c10d

            if dist.is_initialized() and dist.get_world_size() > 1:
                store = c10d._get_default_store()
                clone = getattr(store, "clone", None)
                try:  # a connection of its own: not queued behind the job's own store requests
                    self._store = clone() if clone is not None else store
                except Exception:
                    self._store = store
        except Exception:
            self._store_failed = True
        return self._store

    def _store_broke(self) -> None:
        count("dump_store_failed")
        _log.debug("tempotrace.torch: the store is gone: this rank dumps alone", exc_info=True)
        self._store, self._store_failed = None, True

    def _ask_everyone(self) -> None:
        store = self._store_or_none()
        if store is None:
            return
        try:
            number = int(store.add(_DUMP_COUNTER, 1))
            store.set(DUMP_KEY, f"{number}:{_rank()}")
            self._served = max(self._served, number)
        except Exception:
            self._store_broke()

    def _serve_requests(self) -> None:
        store = self._store_or_none()
        if store is None:
            return
        try:
            if not store.check([DUMP_KEY]):
                return
            number_text, _, rank_text = bytes(store.get(DUMP_KEY)).decode("ascii", "replace").partition(":")
            number, asker = int(number_text), int(rank_text)
        except Exception:
            self._store_broke()
            return
        if number <= self._served:
            return
        self._served = number
        if asker == _rank() or time.monotonic() - _state.last_at < PEER_QUIET_S:
            return  # its own ask, or this rank has just dumped (its own hang, or an earlier ask): that dump covers it
        dump("peer", requested_by=asker)

    def after_fork_in_child(self) -> None:
        # The parent's threads are not the child's; a child that instruments starts its own.
        self._threads = []
        self._stop = threading.Event()
        self._ask = threading.Event()
        self._seen = {}
        self._dumped_for = set()
        self._last_hang = -float("inf")
        self._store, self._store_failed = None, False


watchdog = Watchdog()
lifecycle.renew_after_fork(watchdog)


def _at_exit(reason: str) -> None:
    """SIGTERM and interpreter exit: a dump when the ring holds what export would not bring out (lifecycle); not in
    a forked child that never instrumented itself."""
    if watchdog.owner_pid != os.getpid():
        return
    if recorder.retain == "ring" or recorder.open_numbers() or open_ops:
        watchdog.stop()
        dump(reason, timeout_s=EXIT_DUMP_TIMEOUT_S)


lifecycle.before_exit_flush(_at_exit)


#: The handler the opt-in dump signal replaced, to put back at uninstrument().
_signal_saved: list[tuple[int, Any]] = []


def install_dump_signal(signum: int | None) -> None:
    """Dump on ``signum`` (e.g. SIGUSR1), on a helper thread: the interrupted one may hold anything."""
    remove_dump_signal()
    if signum is None:
        return
    previous = signal.getsignal(signum)

    def on_signal(sig: int, frame: Any) -> None:
        try:  # never into the interrupted code: a thread that cannot start is counted
            threading.Thread(target=dump, args=("signal",), name="tempotrace-dump", daemon=True).start()
        except Exception:
            count("dump_failed")

    signal.signal(signum, on_signal)
    _signal_saved.append((signum, previous))


def remove_dump_signal() -> None:
    while _signal_saved:
        signum, previous = _signal_saved.pop()
        try:
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        except Exception:
            _log.debug("tempotrace.torch: the dump signal's handler not put back", exc_info=True)
