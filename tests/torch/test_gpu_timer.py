"""GPU event timing on a fake event source (spec/torch.md §6). NOT a GPU test: none has run on a GPU."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tempotrace_sdk.clocks.base import Timestamp
from tempotrace_sdk.torch.gpu import GpuTimer
from tempotrace_sdk.torchops import SPECS, Reader
from tempotrace_sdk.wire.layout import ClockQuality, TsSource


class World:
    """GPU time and TAI both in ns; the GPU timer reads TAI + 5 ms (a GPU timer has its own epoch)."""

    def __init__(self) -> None:
        self.tai = 1_000_000_000_000
        self.gpu_epoch = 5_000_000


class FakeEvent:
    def __init__(self, world: World, completes_at_tai: int | None) -> None:
        self.world = world
        self.at = completes_at_tai  # None: never (still queued on the stream)

    def query(self) -> bool:
        return self.at is not None and self.world.tai >= self.at

    def elapsed_ms(self, later: Any) -> float:
        assert self.query() and later.query()
        return (later.at - self.at) / 1e6


class FakeSource:
    """Events complete at the times the test queues in ``next_times``, in recording order; an event recorded
    while a future's callbacks run completes at ``callback_time`` (their stream waits for the op)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.next_times: list[int | None] = []
        self.released: list[FakeEvent] = []
        self.capture = False
        self.callback_time: int | None = None

    def record(self) -> FakeEvent:
        if self.callback_time is not None:
            return FakeEvent(self.world, self.callback_time)
        return FakeEvent(self.world, self.next_times.pop(0))

    def capturing(self) -> bool:
        return self.capture

    def record_quiet(self) -> FakeEvent:
        return FakeEvent(self.world, self.world.tai + 3_000)  # completes 3 µs after being recorded

    def release(self, event: Any) -> None:
        self.released.append(event)


class FakeClock:
    """Advances 1 µs per read (a poll loop costs time); claims ±100 ns, OK."""

    name = "fake"

    def __init__(self, world: World) -> None:
        self.world = world

    def now(self) -> Timestamp:
        self.world.tai += 1_000
        return Timestamp(self.world.tai, TsSource.GTE, ClockQuality.OK, 100)

    def describe(self) -> dict[str, Any]:
        return {}


class CudaTensor:
    class device:
        type = "cuda"


@pytest.fixture
def setup() -> tuple[World, FakeSource, GpuTimer, InMemorySpanExporter, Any]:
    world = World()
    source = FakeSource(world)
    timer = GpuTimer(source, FakeClock(world))  # type: ignore[arg-type]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return world, source, timer, exporter, provider.get_tracer("t")


ALL_REDUCE = next(s for s in SPECS if s.name == "all_reduce")


def _all_reduce(tensor: Any) -> None:  # the signature the reader needs
    pass


def test_cpu_tensors_are_not_bracketed(setup: Any) -> None:
    _, _, timer, _, _ = setup
    assert timer.begin(Reader(_all_reduce), ALL_REDUCE, (object(),), {}) is None


def test_a_finished_op_ends_with_its_gpu_interval_mapped_to_tai(setup: Any) -> None:
    """TAI = calibration + elapsed; bound = calibration bound + 1 µs resolution + 50 ppm of the distance."""
    world, source, timer, exporter, tracer = setup
    timer.calibrate()  # the previous harvest's calibration
    cal = timer.calibrations[-1]
    start_at, end_at = world.tai + 200_000, world.tai + 700_000
    source.next_times = [start_at, end_at]
    mark = timer.begin(Reader(_all_reduce), ALL_REDUCE, (CudaTensor(),), {})
    span = tracer.start_span("torch.all_reduce")
    timer.end(mark, span)
    assert timer.harvest() == 0 and span.is_recording()  # still on the stream: nothing waits for it
    world.tai = end_at + 1
    assert timer.harvest() == 1
    (done,) = exporter.get_finished_spans()
    a = done.attributes or {}
    assert a["tempotrace.torch.gpu.ts_source"] == "SW_GCC" and a["tempotrace.torch.completion"] == "gpu"
    # the fake calibration event completed 3 µs after recording, somewhere inside the poll window
    assert abs(a["tempotrace.torch.gpu.ptp_ns"] - start_at) <= cal.bound_ns
    assert abs(a["tempotrace.torch.gpu.end.ptp_ns"] - end_at) <= cal.bound_ns
    assert a["tempotrace.torch.gpu.end.ptp_ns"] - a["tempotrace.torch.gpu.ptp_ns"] == 500_000
    assert a["tempotrace.torch.gpu.uncertainty_ns"] >= cal.bound_ns + 1_000
    assert len(source.released) == 2


def test_the_bound_grows_with_distance_from_the_calibration(setup: Any) -> None:
    world, _, timer, _, _ = setup
    cal = timer.calibrate()
    assert cal is not None
    near, far = FakeEvent(world, cal.event.at + 1_000), FakeEvent(world, cal.event.at + 100_000_000)
    world.tai = far.at + 1  # type: ignore[operator]
    (_, near_bound, _), (_, far_bound, _) = timer.to_tai(near, 99), timer.to_tai(far, 100)  # type: ignore[misc]
    assert far_bound - near_bound == pytest.approx(50 * 100, abs=2)  # 50 ppm of 0.1 s = 5 µs


def test_uninstrument_ends_what_never_finished(setup: Any) -> None:
    _, source, timer, exporter, tracer = setup
    source.next_times = [None, None]
    mark = timer.begin(Reader(_all_reduce), ALL_REDUCE, (CudaTensor(),), {})
    timer.end(mark, tracer.start_span("torch.all_reduce"))
    assert timer.harvest(final=True) == 1
    (done,) = exporter.get_finished_spans()
    assert (done.attributes or {})["tempotrace.torch.completion"] == "unfinished"


class FakeFuture:
    """A CUDA-aware future: done when the op is queued; its callbacks run on a stream that waits for the op."""

    def __init__(self, source: FakeSource) -> None:
        self.source = source
        self.callbacks: list[Any] = []

    def add_done_callback(self, callback: Any) -> None:
        self.callbacks.append(callback)

    def run_callbacks(self, op_end: int) -> None:
        self.source.callback_time = op_end
        try:
            for callback in self.callbacks:
                callback(self)
        finally:
            self.source.callback_time = None


class FakeWork:
    def __init__(self, future: FakeFuture | None) -> None:
        self.future = future

    def get_future(self) -> FakeFuture:
        if self.future is None:
            raise RuntimeError("Work::getFuture not implemented")
        return self.future


class FakeExchange:
    def __init__(self) -> None:
        self.completed = False

    def done(self) -> bool:
        return self.completed

    def finish(self) -> dict[str, Any]:
        return {"tempotrace.torch.recv.count": 1}


def test_an_async_op_ends_when_its_work_does_not_when_it_was_queued(setup: Any) -> None:
    """Finding 10, spec §6: the current stream does not wait for an async collective, so an end event recorded
    there completes at queue time. The end event is recorded from the work's future callback instead, on a
    stream that waits for the op: the span's GPU end is the op's end."""
    world, source, timer, exporter, tracer = setup
    timer.calibrate()
    queued_at, op_end = world.tai + 100_000, world.tai + 900_000
    source.next_times = [world.tai + 50_000, queued_at]  # start; (an end recorded now would complete at queue time)
    future = FakeFuture(source)
    mark = timer.begin(Reader(_all_reduce), ALL_REDUCE, (CudaTensor(),), {})
    assert timer.end(mark, tracer.start_span("torch.all_reduce"), work=FakeWork(future)) is True
    world.tai = queued_at + 1
    assert timer.harvest() == 0  # no end event yet: the span waits
    future.run_callbacks(op_end)
    assert timer.harvest() == 0  # recorded, not complete
    world.tai = op_end + 1
    assert timer.harvest() == 1
    (done,) = exporter.get_finished_spans()
    a = done.attributes or {}
    assert abs(a["tempotrace.torch.gpu.end.ptp_ns"] - op_end) <= a["tempotrace.torch.gpu.uncertainty_ns"]


def test_an_async_op_without_a_future_is_left_to_the_host(setup: Any) -> None:
    _, source, timer, _, tracer = setup
    source.next_times = [1]
    mark = timer.begin(Reader(_all_reduce), ALL_REDUCE, (CudaTensor(),), {})
    assert timer.end(mark, tracer.start_span("torch.all_reduce"), work=FakeWork(None)) is False
    assert timer.queue == [] and len(source.released) == 1  # the start event went back to the pool


def test_nothing_is_recorded_while_the_stream_is_captured(setup: Any) -> None:
    """Finding 13, spec §6: an event recorded inside CUDA graph capture breaks the capture: CPU timing instead."""
    from tempotrace_sdk.torch.counts import carriage_counts

    _, source, timer, _, _ = setup
    source.capture = True
    before = carriage_counts().get("gpu_capturing", 0)
    assert timer.begin(Reader(_all_reduce), ALL_REDUCE, (CudaTensor(),), {}) is None
    assert carriage_counts()["gpu_capturing"] == before + 1


def test_an_op_mode_exchange_is_read_only_once_it_completed(setup: Any) -> None:
    world, source, timer, exporter, tracer = setup
    timer.calibrate()
    source.next_times = [world.tai + 10, world.tai + 20]
    exchange = FakeExchange()
    mark = timer.begin(Reader(_all_reduce), ALL_REDUCE, (CudaTensor(),), {})
    timer.end(mark, tracer.start_span("torch.all_reduce"), exchange)
    world.tai += 1_000
    assert timer.harvest() == 0  # the op is done, its exchange is not
    exchange.completed = True
    assert timer.harvest() == 1
    assert (exporter.get_finished_spans()[0].attributes or {})["tempotrace.torch.recv.count"] == 1
