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
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from ..clocks.domain import checked_once
from ..clocks.leapseconds import tai_to_utc_ns
from ..otel import lifecycle
from ..otel.context import get_state
from ..otel.processor import _attributes as stamp_attributes
from ..otel.records import SpanRecord
from ..semconv import (
    TORCH_DUMP_OPS,
    TORCH_DUMP_OVERWRITTEN,
    TORCH_DUMP_PENDING,
    TORCH_DUMP_REASON,
    TORCH_DUMP_REQUESTED_BY,
)
from .carriage import count
from .opspans import _StartOf, deliver, destination, make_span, sampled
from .recorder import DEFAULT_HANG_TIMEOUT_S, recorder

__all__ = ["DEFAULT_HANG_TIMEOUT_S", "DUMP_KEY", "DUMP_TIMEOUT_S", "POLL_S", "Watchdog", "dump", "watchdog"]

_log = logging.getLogger(__name__)

#: How often the watchdog looks at the open ops and the store's dump key (the issue: at least once a second).
POLL_S = 0.5
#: The longest a dump spends flushing what it handed to the export processors.
DUMP_TIMEOUT_S = 5.0
#: Spans handed to an export processor between two of its flushes: well under its queue (8,192 by default), so
#: a dump from the watchdog thread, which may not wait for room, drops nothing.
CHUNK = 2048
#: The store key a hang dump sets ("<request number>:<rank>"), and the counter numbering requests.
DUMP_KEY = "tempotrace/dump"
_DUMP_COUNTER = "tempotrace/dump-counter"

#: One dump at a time; a second asked meanwhile is skipped (counted ``dump_busy``): the first covers it.
_dumping = threading.Lock()
#: Overwritten ops already counted in the loss ledger.
_counted = [0]


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


def dump(reason: str = "request", *, requested_by: int | None = None) -> int:
    """Export every op the ring holds that was never exported, open ones as ``pending``, and a dump record;
    flushed before it returns (at most DUMP_TIMEOUT_S). Returns the op spans written, -1 when another dump was
    running or this one failed. Never raises."""
    if not _dumping.acquire(blocking=False):
        count("dump_busy")
        return -1
    try:
        with recorder.lock:  # records are taken under it; spans are made and flushed after it is let go
            records = recorder.take_all()
        state = get_state()
        clock = state._clock
        ptp, unc, source, quality, lts = state.stamp.tick(clock if clock is not None else state.clock)
        dump_utc = tai_to_utc_ns(ptp)
        resource, scope, processors = destination()
        with checked_once(state.domain):  # every reading was taken before this check
            spans = [make_span(state, r, resource, scope, dump_utc) for r in records if sampled(r)]
        pending = sum(1 for r in records if r.end is None)
        attrs: dict[str, Any] = {
            TORCH_DUMP_REASON: reason,
            TORCH_DUMP_OPS: len(spans),
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
        spans.append(ReadableSpan("torch.dump", context, None, resource, attrs, kind=SpanKind.INTERNAL,
                                  start_time=dump_utc, end_time=dump_utc, instrumentation_scope=scope))
        _count_overwritten(processors)
        deadline = time.monotonic() + DUMP_TIMEOUT_S
        for i in range(0, len(spans), CHUNK):
            deliver(spans[i:i + CHUNK], processors)
            _flush(processors, deadline)
        recorder.dumped += 1
        count("dumps")
        _log.debug("tempotrace.torch: dump (%s): %d op spans, %d pending", reason, len(spans) - 1, pending)
        return len(spans) - 1
    except Exception:
        count("dump_failed")
        _log.debug("tempotrace.torch: dump failed", exc_info=True)
        return -1
    finally:
        _dumping.release()


def _count_overwritten(processors: Any) -> None:
    new = recorder.overwritten - _counted[0]
    if new <= 0:
        return
    _counted[0] = recorder.overwritten
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
    """The thread that dumps on a hang and serves other ranks' dump requests (one per process, while instrumented).
    """

    def __init__(self) -> None:
        self.hang_timeout = DEFAULT_HANG_TIMEOUT_S
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        #: op number -> monotonic time the watchdog first saw it open
        self._seen: dict[int, float] = {}
        #: open ops a hang dump already covered: one dump per hang, not one per poll
        self._dumped_for: set[int] = set()
        self._served = 0  #: the highest request number this rank dumped for
        self._store: Any = None
        self._store_failed = False

    def start(self, hang_timeout: float) -> None:
        self.hang_timeout = hang_timeout
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._store, self._store_failed = None, False
        thread = threading.Thread(target=self._run, name="tempotrace-watchdog", daemon=True)
        self._thread = thread
        thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(2 * POLL_S + 1)
        self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.poll()
            except Exception:
                count("watchdog_failed")
                _log.debug("tempotrace.torch: watchdog poll failed", exc_info=True)

    def poll(self, now: float | None = None) -> None:
        """One look: another rank's request first, then this rank's open ops."""
        now = time.monotonic() if now is None else now
        self._serve_requests()
        if self.hang_timeout <= 0:
            return
        numbers = recorder.open_numbers()
        seen = self._seen
        still = {n: seen.get(n, now) for n in numbers}
        self._seen = still
        self._dumped_for &= still.keys()
        stuck = [n for n, t in still.items() if now - t >= self.hang_timeout and n not in self._dumped_for]
        if not stuck:
            return
        self._dumped_for.update(still)
        _log.warning("tempotrace.torch: an op open for %.0f s (hang_timeout): dumping the flight recorder and asking "
                     "every rank to dump", self.hang_timeout)
        self._ask_everyone()
        dump("hang")

    def _store_or_none(self) -> Any:
        if self._store is not None or self._store_failed:
            return self._store
        try:
            import torch.distributed as dist
            import torch.distributed.distributed_c10d as c10d

            if dist.is_initialized() and dist.get_world_size() > 1:
                self._store = c10d._get_default_store()
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
        if asker != _rank():
            dump("peer", requested_by=asker)

    def after_fork_in_child(self) -> None:
        # The parent's thread is not the child's; a child that traces starts its own at instrument().
        self._thread = None
        self._stop = threading.Event()
        self._seen = {}
        self._dumped_for = set()
        self._store, self._store_failed = None, False


watchdog = Watchdog()
lifecycle.renew_after_fork(watchdog)


def _at_exit(reason: str) -> None:
    """SIGTERM and interpreter exit: a dump when the ring holds what export would not bring out (lifecycle)."""
    if recorder.retain == "ring" or recorder.open_numbers():
        dump(reason)


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
        threading.Thread(target=dump, args=("signal",), name="tempotrace-dump", daemon=True).start()

    signal.signal(signum, on_signal)
    _signal_saved.append((signum, previous))


def remove_dump_signal() -> None:
    while _signal_saved:
        signum, previous = _signal_saved.pop()
        try:
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        except Exception:
            _log.debug("tempotrace.torch: the dump signal's handler not put back", exc_info=True)
