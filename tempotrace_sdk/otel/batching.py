"""``TempoTraceBatchProcessor``: batched export that never hangs after fork and never loses a span silently.

The SDK's BatchSpanProcessor drops spans when its queue is full, with one
rate-limited log line and no count a user can read. Here (spec/reliability.md
§Batching):

- a full queue makes the ending thread wait while the exporter makes
  progress (back-pressure: the application runs at the exporter's pace);
  only an exporter that finishes no batch and uses no CPU for
  ``block_millis`` (or one span end waiting ``MAX_WAIT_S`` in all) causes
  drops, and then without further waiting until it finishes one again (so a
  stalled collector costs one wait, not one per span);
- only the application's own threads wait (``may_wait_for_export``): a
  gloo/NCCL callback, any thread Python did not start, TempoTrace's own
  threads and threads inside ``no_export_wait()`` drop the span at once and
  count it, so that a slow exporter never stalls a library's threads;
- every dropped span is counted in the pipeline's ``LossLedger``
  (``errors()``, a rate-limited warning, the drop record in the file);
- after fork the child gets fresh locks, an empty queue (the parent exports
  what it queued) and its own worker thread, started at its first span;
- SIGTERM, interpreter exit and multiprocessing worker exit flush it
  (``lifecycle``).

Defaults (queue 8,192 spans, batch 512, delay 1 s, wait 2 s) are chosen from
``benchmarks/bench_export.py``; the standard OTEL_BSP_* variables override
them, TEMPOTRACE_EXPORT_BLOCK_MS sets the wait (0: drop at once, as the SDK does).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, Context, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import lifecycle
from .lifecycle import FlushLock, release_held
from .loss import LossLedger

__all__ = [
    "BLOCK_ENV",
    "DEFAULT_BLOCK_MS",
    "DEFAULT_MAX_EXPORT_BATCH_SIZE",
    "DEFAULT_MAX_QUEUE_SIZE",
    "DEFAULT_SCHEDULE_DELAY_MS",
    "TempoTraceBatchProcessor",
    "block_millis_from_env",
    "may_wait_for_export",
    "no_export_wait",
]

_log = logging.getLogger(__name__)

#: Spans queued per process before an ending thread waits. bench_export.py
#: (a shared 2-core machine; figures move with its load): a process ends and
#: exports at most S ~ 3,000-11,000 spans/s on its one GIL, one thread alone
#: ends 7,000-33,000/s, a queued span holds ~3.7 KB. 8,192 spans (~29 MiB,
#: 4x the SDK's 2,048) absorb 0.4-1.7 s of one thread ending at full speed
#: before back-pressure starts; for a rate above S any queue only delays the
#: first drop, by queue / (rate - S) seconds, which is why a full queue waits.
DEFAULT_MAX_QUEUE_SIZE = 8192
#: The SDK's batch size: one line of ~0.5 MB per write at ~1 KB per span.
DEFAULT_MAX_EXPORT_BATCH_SIZE = 512
#: A span waits at most this long in the queue when traffic is light (the
#: SDK waits 5 s): a SIGKILLed or OOM-killed process loses at most ~1 s.
DEFAULT_SCHEDULE_DELAY_MS = 1000
#: How long the exporter may go without finishing a batch while an ending
#: thread waits for room before spans are dropped (and counted): many times
#: the ~60 ms one 512-span batch takes to encode and write, short next to a
#: collector's 10 s export timeout.
DEFAULT_BLOCK_MS = 2000
BLOCK_ENV = "TEMPOTRACE_EXPORT_BLOCK_MS"
#: The worker counts as busy (encoding, writing) when it used this much CPU
#: during a wait of block_millis: a stalled exporter sleeps in a socket or
#: a file system call and uses none.
BUSY_CPU_S = 0.01
#: The longest one span end waits, even behind a busy exporter.
MAX_WAIT_S = 30.0
#: How long shutdown waits for the worker and the last export.
SHUTDOWN_TIMEOUT_S = 30.0


#: TempoTrace's own threads (the batch worker, the clock refresher, the torch
#: couriers) are named with this prefix; none of them may be held up by the queue.
OWN_THREAD_PREFIX = "tempotrace-"
_opted_out = threading.local()


@contextmanager
def no_export_wait() -> Iterator[None]:
    """Spans ended on this thread inside the block never wait for room in a full export queue.

    For a library's own worker threads (spec/reliability.md §2.1): a full queue then
    drops the span at once and counts it (``export_dropped_queue_full_no_wait``).
    """
    before = getattr(_opted_out, "on", False)
    _opted_out.on = True
    try:
        yield
    finally:
        _opted_out.on = before


def may_wait_for_export() -> bool:
    """True on a thread that may wait for room: one of the application's own (spec/reliability.md §2.1).

    Not: a thread Python did not start (gloo/NCCL work and future callbacks, the
    autograd engine's device threads, any C/C++ thread calling into Python: Python
    knows them only as dummy threads), TempoTrace's own threads, and a thread inside
    ``no_export_wait()``. Stalling those would stall the library, not the application.
    """
    if getattr(_opted_out, "on", False):
        return False
    thread = threading.current_thread()
    return not isinstance(thread, threading._DummyThread) and not thread.name.startswith(OWN_THREAD_PREFIX)


def _env_int(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        # OpenTelemetry's rule for its own variables: warn and use the default.
        _log.warning("%s=%r is not an integer >= %d; using %d", name, raw, minimum, default)
        return default
    return value


def block_millis_from_env() -> int:
    """TEMPOTRACE_EXPORT_BLOCK_MS (default 2000); ValueError naming the variable when it is not 0..999999999."""
    raw = os.environ.get(BLOCK_ENV, "").strip()
    if not raw:
        return DEFAULT_BLOCK_MS
    if not raw.isdigit() or len(raw) > 9:
        raise ValueError(f"{BLOCK_ENV} must be an integer number of milliseconds 0..999999999, got {raw!r}")
    return int(raw)


class TempoTraceBatchProcessor(SpanProcessor):
    """Queues ended spans and exports them in batches from one worker thread per process."""

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        max_queue_size: int | None = None,
        max_export_batch_size: int | None = None,
        schedule_delay_millis: float | None = None,
        block_millis: float | None = None,
        ledger: LossLedger | None = None,
    ) -> None:
        self.exporter = exporter
        own_ledger = getattr(exporter, "ledger", None)
        self.ledger: LossLedger = ledger or (own_ledger if isinstance(own_ledger, LossLedger) else LossLedger())
        #: Exporters that count their own failures (ours) return FAILURE for
        #: "kept to retry"; any other exporter's FAILURE means the batch is gone.
        self._exporter_counts_loss = getattr(exporter, "counts_own_loss", False) is True
        self.max_queue_size = max_queue_size or _env_int("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE_SIZE, 1)
        batch = max_export_batch_size or _env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_MAX_EXPORT_BATCH_SIZE, 1)
        self.max_export_batch_size = min(batch, self.max_queue_size)
        delay_ms = (
            schedule_delay_millis
            if schedule_delay_millis is not None
            else _env_int("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_SCHEDULE_DELAY_MS, 1)
        )
        self.schedule_delay_s = delay_ms / 1000
        self.block_s = (block_millis if block_millis is not None else block_millis_from_env()) / 1000
        if min(self.max_queue_size, self.max_export_batch_size) < 1 or self.schedule_delay_s <= 0 or self.block_s < 0:
            raise ValueError("queue and batch sizes must be >= 1, the delay > 0 and the wait >= 0")
        #: ReadableSpans, and (group, JSON) pairs from on_end_encoded
        self._queue: deque[Any] = deque()
        self._shutdown = False
        self._init_threading()
        lifecycle.renew_after_fork(self)
        lifecycle.flush_on_exit(self)
        self._start_worker()

    def _init_threading(self) -> None:
        self._export_lock = FlushLock()
        self._start_lock = threading.Lock()
        self._wake = threading.Event()
        self._room = threading.Condition(threading.Lock())
        self._waiters = 0
        self._progress_at = time.monotonic()  # when the exporter last finished a batch
        self._shedding = False
        self._worker: threading.Thread | None = None
        self._worker_ident: int | None = None

    def after_fork_in_child(self) -> None:
        # Whatever another thread held at the fork stays held forever in the
        # child: replace it all. The queued spans are the parent's to export.
        self._queue.clear()
        self._init_threading()
        self.ledger.after_fork_in_child()

    def _start_worker(self) -> None:
        with self._start_lock:
            if self._worker is not None or self._shutdown:
                return
            worker = threading.Thread(target=self._run, name=OWN_THREAD_PREFIX + "batch-export", daemon=True)
            worker.start()
            self._worker = worker

    # -- the span path ------------------------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return
        if self._shutdown:
            # Not a loss: shutdown() was asked for, and a processor cannot be
            # removed from the provider, so after configure() replaced this
            # pipeline every span still arrives here too (and is exported there).
            return
        if self._worker is None:  # the first span of a forked child
            self._start_worker()
        queue = self._queue
        if len(queue) >= self.max_queue_size and not self._room_made():
            return
        queue.append(span)
        if len(queue) >= self.max_export_batch_size and not self._wake.is_set():
            self._wake.set()

    def on_end_encoded(self, items: list[Any]) -> None:
        """Spans already encoded (torch's op spans written in C, torch/opspans.py: (group, JSON) pairs), queued as
        ``on_end`` queues spans, one place each, waiting for room or dropped and counted alike."""
        if self._shutdown or not items:
            return
        if self._worker is None:
            self._start_worker()
        queue = self._queue
        room = max(0, self.max_queue_size - len(queue))
        queue.extend(items[:room])
        for item in items[room:]:
            if len(queue) >= self.max_queue_size and not self._room_made():
                continue
            queue.append(item)
        if len(queue) >= self.max_export_batch_size and not self._wake.is_set():
            self._wake.set()

    def _room_made(self) -> bool:
        """The queue is full: wait for room where this thread may (§2.1), else drop and count; True if room."""
        if not may_wait_for_export() or threading.get_ident() == self._worker_ident:
            thread = threading.current_thread().name
            self.ledger.drop(
                1,
                "queue_full_no_wait",
                f"export queue full ({self.max_queue_size} spans) on thread {thread!r}, which is not the "
                "application's own (a library or backend thread): dropped without waiting",
            )
            return False
        if self._wait_for_room():
            return True
        why = (
            f"no batch finished for {self.block_s:g} s (or one span waited {MAX_WAIT_S:g} s): "
            "spans are dropped until one does"
            if self.block_s > 0
            else f"waiting is off ({BLOCK_ENV}=0)"
        )
        self.ledger.drop(1, "queue_full", f"export queue full ({self.max_queue_size} spans), {why}")
        return False

    def _wait_for_room(self) -> bool:
        if self._shedding or self.block_s <= 0:
            return False
        self._wake.set()
        started = time.monotonic()  # the cap on this span end's wait counts from here
        anchor = started  # the start of the current block_s window (moves on while the worker computes)
        cpu_seen = self._worker_cpu_s()
        with self._room:
            self._waiters += 1
            try:
                while len(self._queue) >= self.max_queue_size:
                    if self._shutdown:
                        return False
                    # Waiting is fine while batches keep finishing, or while the
                    # worker is computing one (a CPU-starved encoder on a loaded
                    # machine is slow, not stalled). An exporter that finished no
                    # batch and used no CPU for block_s is stalled: a collector
                    # not answering, a hung file system. Either way no span end
                    # waits longer than MAX_WAIT_S in all.
                    now = time.monotonic()
                    cap_left = started + MAX_WAIT_S - now
                    if cap_left <= 0:
                        self._shedding = True
                        return False
                    left = max(anchor, self._progress_at) + self.block_s - now
                    if left <= 0:
                        cpu = self._worker_cpu_s()
                        if cpu is None or cpu_seen is None or cpu - cpu_seen < BUSY_CPU_S:
                            self._shedding = True
                            return False
                        cpu_seen, anchor, left = cpu, now, self.block_s
                    self._room.wait(min(left, cap_left))
            finally:
                self._waiters -= 1
        return True

    def _worker_cpu_s(self) -> float | None:
        """CPU seconds the worker thread has used (None where the platform cannot say)."""
        ident = self._worker_ident
        if ident is None:
            return None
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(ident))
        except (AttributeError, OSError):  # not Linux/BSD, or the worker has exited
            return None

    # -- the worker ---------------------------------------------------------------------------------------------
    def _run(self) -> None:
        self._worker_ident = threading.get_ident()
        while not self._shutdown:
            self._wake.wait(self.schedule_delay_s)
            self._wake.clear()
            if self._shutdown:
                break
            if len(self._queue) < self.max_queue_size // 2:  # made here they could not wait for room (§2.1)
                release_held()  # spans held to be made in bulk wait at most one tick, like queued ones
            self._drain(None)

    def _drain(self, deadline: float | None) -> bool:
        """Export everything queued; False when the lock or the queue could not be had before ``deadline``."""
        timeout = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._export_lock.acquire(timeout):
            return False
        try:
            while self._queue:
                if deadline is not None and time.monotonic() > deadline:
                    return False
                self._export(self._take_batch())
            return True
        finally:
            self._export_lock.release()

    def _take_batch(self) -> list[ReadableSpan]:
        queue = self._queue
        batch = []
        for _ in range(min(self.max_export_batch_size, len(queue))):
            try:
                batch.append(queue.popleft())
            except IndexError:  # cleared by shutdown meanwhile
                break
        return batch

    def _export(self, batch: Sequence[ReadableSpan]) -> None:
        if not batch:
            return
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            result = self.exporter.export(batch)
            if result is not SpanExportResult.SUCCESS and not self._exporter_counts_loss:
                self.ledger.drop(len(batch), "export_failed", f"{type(self.exporter).__name__} failed a batch")
        except Exception as err:  # an exporter must not take the worker down with it
            self.ledger.drop(
                len(batch), "export_failed", f"{type(self.exporter).__name__} raised {type(err).__name__}: {err}"
            )
        finally:
            detach(token)
        # Progress: waiting threads may go on. They are woken only now, not when
        # the batch left the queue, so that they do not compete for the GIL
        # with the encoding of the batch that makes their room.
        self._progress_at = time.monotonic()
        self._shedding = False
        if self._waiters:
            with self._room:
                self._room.notify_all()

    # -- flush and shutdown ---------------------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every span queued now, then flush the exporter; False if that did not finish in time."""
        if self._shutdown:
            return False
        deadline = time.monotonic() + timeout_millis / 1000
        ok = self._drain(deadline)
        left_ms = int((deadline - time.monotonic()) * 1000)
        try:
            # The SDK's base SpanExporter.force_flush returns None: only False is a "no".
            ok = self.exporter.force_flush(max(0, left_ms)) is not False and ok
        except Exception:
            _log.debug("tempotrace: exporter force_flush failed", exc_info=True)
            ok = False
        return ok

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self._shutdown = True
        self._wake.set()
        with self._room:
            self._room.notify_all()
        worker = self._worker
        deadline = time.monotonic() + SHUTDOWN_TIMEOUT_S
        if worker is not None and worker is not threading.current_thread():
            worker.join(SHUTDOWN_TIMEOUT_S)
        self._drain(deadline)
        left = len(self._queue)
        self._queue.clear()
        self.ledger.drop(left, "shutdown_timeout", f"shutdown did not export {left} span(s) in time")
        try:
            self.exporter.shutdown()
        except Exception:
            _log.debug("tempotrace: exporter shutdown failed", exc_info=True)
