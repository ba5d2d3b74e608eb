"""Which threads wait for room in a full export queue, and for how long (spec/reliability.md §2.1).

The application's own threads wait (back-pressure), at most ``MAX_WAIT_S`` for
any one span end even behind an exporter that keeps computing; threads that
are not the application's (a gloo/NCCL future callback, any thread Python did
not start, TempoTrace's own threads, a thread that opted out) never wait: the
span is dropped and counted. Each case holds the exporter inside ``export()``
until the test releases it, so "returned while the exporter was held" is a
fact about the code, not about timing.
"""

from __future__ import annotations

import ctypes
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Tracer

from tempotrace_sdk.otel import batching
from tempotrace_sdk.otel.batching import TempoTraceBatchProcessor, no_export_wait
from tempotrace_sdk.otel.loss import LossLedger

#: Generous bound for "this returns": a hang shows as this timeout, a loaded machine does not.
RETURNS_WITHIN_S = 30.0


class Spinning(SpanExporter):
    """Computes inside export() until released: busy (CPU time grows), never finishing a batch."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.exported: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        while not self.release.is_set():
            sum(range(2000))
        self.exported.extend(s.name for s in spans)
        return SpanExportResult.SUCCESS


class Setup:
    def __init__(self, block_millis: float) -> None:
        self.counts: Counter[str] = Counter()
        self.exporter = Spinning()
        self.processor = TempoTraceBatchProcessor(
            self.exporter,
            max_queue_size=4,
            max_export_batch_size=2,
            schedule_delay_millis=10,
            block_millis=block_millis,
            ledger=LossLedger(self._count),
        )
        provider = TracerProvider(shutdown_on_exit=False, resource=Resource.create({"service.name": "wait"}))
        provider.add_span_processor(self.processor)
        self.tracer: Tracer = provider.get_tracer("wait")

    def _count(self, where: str, n: int) -> None:
        self.counts[where] += n

    def fill(self) -> None:
        """The worker stuck in export() with a batch, the queue full behind it."""
        self.tracer.start_span("first").end()
        assert self.exporter.entered.wait(RETURNS_WITHIN_S)
        while len(self.processor._queue) < self.processor.max_queue_size:
            self.tracer.start_span("filler").end()

    def end_on_thread(self, name: str) -> tuple[threading.Thread, threading.Event]:
        done = threading.Event()

        def end() -> None:
            self.tracer.start_span(name).end()
            done.set()

        thread = threading.Thread(target=end, name=f"app-{name}", daemon=True)
        thread.start()
        return thread, done


@pytest.fixture
def setup_factory() -> Iterator[Callable[[float], Setup]]:
    made: list[Setup] = []

    def make(block_millis: float) -> Setup:
        made.append(Setup(block_millis))
        return made[-1]

    yield make
    for s in made:
        s.exporter.release.set()
        s.processor.shutdown()


def test_one_span_end_waits_at_most_max_wait_behind_a_busy_exporter(
    setup_factory: Callable[[float], Setup], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A computing exporter that never finishes: the busy rule keeps waiting, but only up to MAX_WAIT_S.

    Before the fix each busy check moved the start of the wait forward, so the span end
    waited for as long as the exporter computed (forever here).
    """
    monkeypatch.setattr(batching, "MAX_WAIT_S", 1.0)
    s = setup_factory(100)
    s.fill()
    _thread, done = s.end_on_thread("blocked")
    assert done.wait(RETURNS_WITHIN_S), "the span end waited past MAX_WAIT_S"
    assert not s.exporter.release.is_set()
    assert s.counts["export_dropped_queue_full"] == 1 == s.counts["export_dropped"]


def test_an_application_thread_waits_while_the_exporter_computes_and_its_span_arrives(
    setup_factory: Callable[[float], Setup],
) -> None:
    """Back-pressure on the application's own thread: nothing dropped, the span exported once there is room."""
    s = setup_factory(100)
    s.fill()
    thread, done = s.end_on_thread("waited")
    thread.join(1.0)
    assert thread.is_alive() and not done.is_set(), "an application thread must wait for a busy exporter"
    s.exporter.release.set()
    assert done.wait(RETURNS_WITHIN_S)
    assert s.processor.force_flush(30_000)
    assert "waited" in s.exporter.exported
    assert s.counts["export_dropped"] == 0


def _end_on_foreign_thread(tracer: Tracer) -> dict[str, Any]:
    """End a span on a thread made by pthread_create (as gloo's and NCCL's are), not by Python."""
    seen: dict[str, Any] = {}

    @ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    def body(_arg: Any) -> None:
        seen["thread"] = threading.current_thread()
        tracer.start_span("from-c-thread").end()
        seen["returned"] = True
        return None

    seen["body"] = body  # alive until the C thread has finished with it
    libc = ctypes.CDLL(None)
    tid = ctypes.c_ulong()
    assert libc.pthread_create(ctypes.byref(tid), None, body, None) == 0
    joiner = threading.Thread(target=libc.pthread_join, args=(tid, None), daemon=True)
    joiner.start()
    joiner.join(RETURNS_WITHIN_S)
    seen["joined"] = not joiner.is_alive()
    return seen


def test_a_thread_python_did_not_start_never_waits(setup_factory: Callable[[float], Setup]) -> None:
    """A C thread (gloo's, NCCL's, the autograd engine's) ending a span on a full queue drops it at once, counted."""
    s = setup_factory(60_000)
    s.fill()
    seen = _end_on_foreign_thread(s.tracer)
    assert seen.get("joined") and seen.get("returned"), "a backend thread was stalled by the export queue"
    assert not s.exporter.release.is_set()
    assert type(seen["thread"]).__name__ == "_DummyThread"
    assert s.counts["export_dropped_queue_full_no_wait"] == 1 == s.counts["export_dropped"]


@pytest.mark.parametrize("how", ["opted-out", "tempotrace-thread"])
def test_a_library_thread_never_waits(setup_factory: Callable[[float], Setup], how: str) -> None:
    """A Python thread that opted out (``no_export_wait``), or one of TempoTrace's own, drops at once."""
    s = setup_factory(60_000)
    s.fill()
    done = threading.Event()

    def end() -> None:
        if how == "opted-out":
            with no_export_wait():
                s.tracer.start_span("library").end()
        else:
            s.tracer.start_span("ours").end()
        done.set()

    name = "tempotrace-side-recv" if how == "tempotrace-thread" else "somelib-worker"
    threading.Thread(target=end, name=name, daemon=True).start()
    assert done.wait(RETURNS_WITHIN_S)
    assert not s.exporter.release.is_set()
    assert s.counts["export_dropped_queue_full_no_wait"] == 1 == s.counts["export_dropped"]


def test_the_opt_out_is_per_thread_and_ends_with_the_block() -> None:
    assert batching.may_wait_for_export()
    with no_export_wait():
        assert not batching.may_wait_for_export()
        seen: list[bool] = []
        t = threading.Thread(target=lambda: seen.append(batching.may_wait_for_export()))
        t.start()
        t.join()
        assert seen == [True]
    assert batching.may_wait_for_export()


def test_a_gloo_future_callback_is_never_stalled(setup_factory: Callable[[float], Setup]) -> None:
    """The case behind the rule: a span ended in a torch future callback, which gloo runs on its own thread."""
    dist = pytest.importorskip("torch.distributed")
    torch = pytest.importorskip("torch")
    from datetime import timedelta

    s = setup_factory(60_000)
    s.fill()
    store = dist.HashStore()
    groups: list[Any] = [None, None]

    def join_group(rank: int) -> None:  # both ranks meet in the store: build them side by side
        groups[rank] = dist.ProcessGroupGloo(store, rank, 2, timedelta(seconds=60))

    builders = [threading.Thread(target=join_group, args=(rank,), daemon=True) for rank in range(2)]
    for b in builders:
        b.start()
    for b in builders:
        b.join(RETURNS_WITHIN_S)
    assert all(g is not None for g in groups)
    seen: dict[str, Any] = {}
    called = threading.Event()

    def on_done(_fut: Any) -> None:
        seen["thread"] = threading.current_thread()
        s.tracer.start_span("in-gloo-callback").end()
        called.set()

    tensors = [torch.ones(4), torch.ones(4)]
    work0 = groups[0].allreduce([tensors[0]])
    work0.get_future().add_done_callback(on_done)  # rank 1 has not joined yet: cannot complete inline
    work1 = groups[1].allreduce([tensors[1]])
    assert called.wait(RETURNS_WITHIN_S), "gloo's thread was stalled by the export queue"
    assert work0.wait() and work1.wait()
    assert not s.exporter.release.is_set()
    assert seen["thread"] is not threading.main_thread()
    assert s.counts["export_dropped_queue_full_no_wait"] == 1 == s.counts["export_dropped"]
