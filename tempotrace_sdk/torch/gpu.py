"""Timing collectives on the GPU: pooled CUDA events, harvested without synchronising (spec/torch.md §6).

NOT RUN ON A GPU YET: this module is exercised by unit tests on a fake event
source only (tests/torch/test_gpu_timer.py); see the README.

A collective on CUDA tensors returns once it is queued; its real start and
end happen later on a CUDA stream. ``begin`` records a pooled timing event on
the current stream before the op and ``end`` one after it (the op's work is
ordered between them on that stream), and the op's span stays open. At each
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
from ..wire._layout import ClockQuality, TsSource
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
    end: GpuEvent
    order: int  #: the start event's place in the timer's count (the end is order + 1)
    exchange: Any


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
        self._recorded += 2
        return self.source.record(), self._recorded - 2

    def end(self, mark: tuple[GpuEvent, int], span: Any, exchange: Any = None) -> None:
        start, order = mark
        self.queue.append(_Timed(span, start, self.source.record(), order, exchange))

    # -- calibration -------------------------------------------------------------
    def calibrate(self) -> Calibration | None:
        clock = self.clock
        before = clock.now()
        event = self.source.record_quiet()
        order = self._recorded
        self._recorded += 1
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
            if not item.end.query():
                if final:
                    end_span(item.span, {TORCH_COMPLETION: "unfinished"})
                    ended += 1
                else:
                    waiting.append(item)
                continue
            attrs: dict[str, Any] = {TORCH_COMPLETION: "gpu"}
            start, end = self.to_tai(item.start, item.order), self.to_tai(item.end, item.order + 1)
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
            self.source.release(item.end)
            ended += 1
        self.queue = waiting
        return ended


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


class _CudaEvent:  # pragma: no cover - needs a GPU
    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def query(self) -> bool:
        return bool(self.raw.query())

    def elapsed_ms(self, later: GpuEvent) -> float:
        return float(self.raw.elapsed_time(later.raw))  # type: ignore[attr-defined]
