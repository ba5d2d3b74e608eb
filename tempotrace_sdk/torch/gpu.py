"""Timing collectives on the GPU: pooled CUDA events, harvested without synchronising (spec/torch.md §6).

NOT RUN ON A GPU YET: this module is exercised by unit tests on a fake event
source only (tests/torch/test_gpu_timer.py); see the README.

A collective on CUDA tensors returns once it is queued; its real start and
end happen later on a CUDA stream. ``begin`` records a pooled timing event on
the current stream before the op (the collective's stream waits for it), and
``end`` one after it: for a blocking op on the current stream, which c10d made
wait for the collective; for an async op (whose collective the current stream
does not wait for) from the work's future callback, which runs on a stream
made to wait for the collective's kernels. Either way the op's work lies
between the two events, and the op's span stays open. Nothing is recorded
while the current stream is being captured into a CUDA graph (it would
break the capture): such an op is timed on the CPU. At each
``harvest`` (``step()`` exit, ``sweep()``) events are asked ``query()``: the
finished ones are mapped to TAI and their spans end with
``tempotrace.torch.gpu.*``; the rest wait for the next harvest. Nothing
waits on the GPU.

Mapping to TAI: a calibration records an event on a quiet side stream and
polls it, reading our clock around every poll; the event completed after the
last read that saw it pending and before the read that saw it done, so its
TAI time is the midpoint, within half that window plus the clock's own bound.
An event E then sits at ``cal.tai + elapsed(cal, E)``, within
``cal.bound + resolution + drift_ppm * |elapsed|``; each harvest calibrates
afresh and each event uses the nearer calibration. The result is a
software-calibrated clock: ``ts_source`` SW_GCC.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from ..clocks.base import ClockSource, saturate_uncertainty
from ..otel.context import get_state
from ..semconv import (
    TORCH_COMPLETION,
    TORCH_GPU_END_PTP_NS,
    TORCH_GPU_PTP_NS,
    TORCH_GPU_TS_SOURCE,
    TORCH_GPU_UNCERTAINTY_NS,
)
from ..wire.layout import ClockQuality, TsSource
from .counts import count
from .spans import end_span

__all__ = ["Calibration", "EventSource", "GpuEvent", "GpuTimer"]

_log = logging.getLogger(__name__)

#: CUDA documents cudaEventElapsedTime's resolution as around 0.5 µs; we claim 1 µs.
RESOLUTION_NS = 1_000
#: A GPU's timer runs from its own oscillator: we assume it is within 50 ppm of TAI's rate
#: (ordinary crystal tolerance); each harvest recalibrates, so the term stays small.
DRIFT_PPM = 50.0
#: Polls of the calibration event before giving up (the side stream should be idle).
POLL_LIMIT = 100_000


class GpuEvent(Protocol):
    def query(self) -> bool: ...

    def elapsed_ms(self, later: GpuEvent) -> float: ...


class EventSource(Protocol):
    def record(self) -> GpuEvent:
        """A timing event recorded on the current stream."""

    def record_quiet(self) -> GpuEvent:
        """A timing event recorded on an otherwise idle side stream (calibration)."""

    def release(self, event: GpuEvent) -> None:
        """Give an event back to the pool."""

    def capturing(self) -> bool:
        """The current stream is being captured into a CUDA graph: no event may be recorded on it."""


@dataclass(frozen=True, slots=True)
class Calibration:
    event: GpuEvent
    order: int  #: when it was recorded, in the timer's count of recorded events
    tai_ns: int
    bound_ns: int
    quality: ClockQuality


@dataclass(slots=True)
class _Timed:
    span: Any
    start: GpuEvent
    order: int  #: the start event's place in the timer's count of recorded events
    exchange: Any
    end: GpuEvent | None = None  #: None until recorded (an async op's: from its future's callback)
    end_order: int = -1
    failed: bool = False  #: the end event could not be recorded


class GpuTimer:
    """Brackets ops with events and ends their spans at harvest."""

    def __init__(self, source: EventSource, clock: ClockSource | None = None, *, drift_ppm: float = DRIFT_PPM,
                 resolution_ns: int = RESOLUTION_NS) -> None:
        self.source = source
        self._clock = clock
        self.drift_ppm = drift_ppm
        self.resolution_ns = resolution_ns
        self.queue: list[_Timed] = []
        self.calibrations: list[Calibration] = []
        self._recorded = 0  # events recorded so far: says which of two events came first
        self._lock = threading.Lock()  # an async op's end is recorded on the thread that runs its future's callback

    @classmethod
    def for_cuda(cls) -> GpuTimer:
        return cls(CudaEventSource())

    @property
    def clock(self) -> ClockSource:
        return self._clock if self._clock is not None else get_state().clock

    # -- bracketing ------------------------------------------------------------
    def begin(self, reader: Any, spec: Any, args: Any, kwargs: dict[str, Any]) -> tuple[GpuEvent, int] | None:
        """A start event when the op's data lives on a CUDA device; None otherwise (CPU timing)."""
        data = reader.get(args, kwargs, spec.data) if spec.data is not None else None
        if isinstance(data, (list, tuple)):
            data = data[0] if data else None
        if data is None or getattr(getattr(data, "device", None), "type", None) != "cuda":
            return None
        if self.source.capturing():
            count("gpu_capturing")
            return None
        event = self.source.record()
        return event, self._next_order()

    def end(self, mark: tuple[GpuEvent, int], span: Any, exchange: Any = None, *, work: Any = None) -> bool:
        """Record the end event: now for a blocking op, from ``work``'s future callback for an async one.

        False when an async op's work has no future: no end event can be placed after it; the caller
        ends the span from the host instead (its start event goes back to the pool).
        """
        start, order = mark
        timed = _Timed(span, start, order, exchange)
        if work is None:
            self._record_end(timed)
        else:
            try:
                future = work.get_future()
            except Exception:
                self.source.release(start)
                return False
            future.add_done_callback(lambda _future: self._record_end(timed))
        self.queue.append(timed)
        return True

    def _record_end(self, timed: _Timed) -> None:
        try:
            event = self.source.record()
        except Exception:
            count("gpu_failed")
            _log.debug("tempotrace.torch: GPU end event not recorded", exc_info=True)
            timed.failed = True
            return
        timed.end_order = self._next_order()
        timed.end = event

    def _next_order(self) -> int:
        with self._lock:
            self._recorded += 1
            return self._recorded - 1

    # -- calibration -------------------------------------------------------------
    def calibrate(self) -> Calibration | None:
        clock = self.clock
        before = clock.now()
        event = self.source.record_quiet()
        order = self._next_order()
        low = before
        for _ in range(POLL_LIMIT):
            read = clock.now()
            if event.query():
                high = clock.now()
                width = high.ptp_ns - low.ptp_ns
                quality = ClockQuality(max(low.clk_quality, high.clk_quality))
                cal = Calibration(event, order, low.ptp_ns + width // 2, width // 2 + 1 + max(low.uncertainty_ns,
                                  high.uncertainty_ns), quality)
                self.calibrations = [*self.calibrations[-1:], cal]
                return cal
            low = read
        _log.debug("tempotrace.torch: GPU calibration event never completed")
        return None

    def to_tai(self, event: GpuEvent, order: int) -> tuple[int, int, ClockQuality] | None:
        """(TAI ns, bound ns, quality) of a completed event, from the nearer calibration.

        Elapsed times are always taken from the earlier event to the later one.
        """
        best: tuple[int, int, ClockQuality] | None = None
        for cal in self.calibrations:
            try:
                if cal.order < order:
                    delta_ns = round(cal.event.elapsed_ms(event) * 1e6)
                else:
                    delta_ns = -round(event.elapsed_ms(cal.event) * 1e6)
            except Exception:  # events of another device / not comparable
                continue
            bound = cal.bound_ns + self.resolution_ns + int(abs(delta_ns) * self.drift_ppm / 1e6) + 1
            if best is None or bound < best[1]:
                best = (cal.tai_ns + delta_ns, bound, cal.quality)
        return best

    # -- harvest -----------------------------------------------------------------
    def harvest(self, *, final: bool = False) -> int:
        """End the spans of ops whose end event completed; ``final``: end the rest too. Returns spans ended."""
        if not self.queue:
            return 0
        self.calibrate()
        waiting: list[_Timed] = []
        ended = 0
        for item in self.queue:
            end_event = item.end
            if item.failed or end_event is None or not end_event.query() or not _exchange_done(item.exchange):
                if final or item.failed:
                    end_span(item.span, {TORCH_COMPLETION: "unfinished"})
                    ended += 1
                else:
                    waiting.append(item)
                continue
            attrs: dict[str, Any] = {TORCH_COMPLETION: "gpu"}
            start, end = self.to_tai(item.start, item.order), self.to_tai(end_event, item.end_order)
            if start is not None and end is not None:
                attrs.update({
                    TORCH_GPU_PTP_NS: start[0], TORCH_GPU_END_PTP_NS: end[0],
                    TORCH_GPU_UNCERTAINTY_NS: saturate_uncertainty(max(start[1], end[1])),
                    TORCH_GPU_TS_SOURCE: TsSource.SW_GCC.name,
                })
            if item.exchange is not None:
                attrs.update(item.exchange.finish())
            end_span(item.span, attrs)
            self.source.release(item.start)
            self.source.release(end_event)
            ended += 1
        self.queue = waiting
        return ended

    def abandon(self) -> int:
        """End every span still waiting as ``unfinished``, asking the device nothing (a final harvest that
        failed: a sticky CUDA error fails every query). Returns spans ended."""
        queue, self.queue = self.queue, []
        for item in queue:
            end_span(item.span, {TORCH_COMPLETION: "unfinished"})
        return len(queue)


def _exchange_done(exchange: Any) -> bool:
    """An op-mode exchange is read only once it completed (an async op's runs on as the op does)."""
    return exchange is None or bool(exchange.done())


class CudaEventSource:  # pragma: no cover - needs a GPU; see the module doc
    """``torch.cuda.Event(enable_timing=True)`` from a pool, on the current stream or a quiet one."""

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._pool: list[Any] = []
        self._quiet = torch.cuda.Stream()  # type: ignore[no-untyped-call]

    def _take(self) -> Any:
        return self._pool.pop() if self._pool else _CudaEvent(self._torch.cuda.Event(enable_timing=True))  # type: ignore[no-untyped-call]

    def record(self) -> GpuEvent:
        event = self._take()
        event.raw.record()
        return event  # type: ignore[no-any-return]

    def record_quiet(self) -> GpuEvent:
        event = self._take()
        event.raw.record(self._quiet)
        return event  # type: ignore[no-any-return]

    def release(self, event: GpuEvent) -> None:
        self._pool.append(event)

    def capturing(self) -> bool:
        return bool(self._torch.cuda.is_current_stream_capturing())


class _CudaEvent:  # pragma: no cover - needs a GPU
    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def query(self) -> bool:
        return bool(self.raw.query())

    def elapsed_ms(self, later: GpuEvent) -> float:
        return float(self.raw.elapsed_time(later.raw))  # type: ignore[attr-defined]
