"""PhcClock's bound composition with a replayed device (no PHC exists here) (spec/clocks.md §4)."""

from __future__ import annotations

import errno
import time
from typing import ClassVar

import pytest

from tempotrace_sdk.clocks.cpu import CpuClock
from tempotrace_sdk.clocks.phc import PhcClock, PhcReading
from tempotrace_sdk.clocks.ptpquality import SyncHealth
from tempotrace_sdk.errors import ClockError
from tempotrace_sdk.wire.layout import ClockQuality, TsSource


class ReplayDevice:
    """Stands in for PhcDevice.read(): recorded readings, or an error."""

    path = "/dev/ptp-replay"
    method = "PTP_SYS_OFFSET_EXTENDED"
    samples = 5
    caps: ClassVar[dict[str, int]] = {}

    def __init__(self, readings: list[PhcReading | ClockError]) -> None:
        self.readings = readings

    def read(self) -> PhcReading:
        item = self.readings.pop(0)
        if isinstance(item, ClockError):
            raise item
        return item


class FixedMonitor:
    def __init__(self, health: SyncHealth) -> None:
        self.health = health
        self.last_status = None


def _clock(device: ReplayDevice, health: SyncHealth) -> PhcClock:
    clock = object.__new__(PhcClock)
    clock.device = device  # type: ignore[assignment]
    clock.name = "phc:replay"
    clock.uds_path = "/nonexistent"
    clock.monitor = FixedMonitor(health)  # type: ignore[assignment]
    clock.read_failures = 0
    clock.last_read_error = ""
    clock._cpu = CpuClock(background=False)
    return clock


def _health(quality: ClockQuality, bound: float, drift_ppb: float, void_in_s: float = 60) -> SyncHealth:
    now = time.monotonic_ns()
    return SyncHealth(quality, bound, drift_ppb, now, now + int(void_in_s * 1e9), "test")


PHC = 1_800_000_037_000_000_000


@pytest.mark.parametrize(
    ("quality", "bound", "width", "lo", "hi"),
    [
        (ClockQuality.OK, 1_000.0, 600, 1_300, 1_400),  # 1000 + 600/2 + a little 1 ppm growth
        (ClockQuality.DEGRADED, 5_000.0, 0, 5_000, 6_000),  # PRECISE: width 0
        (ClockQuality.OK, 70_000.0, 10, 65_535, 65_535),  # saturates
    ],
)
def test_bound_is_ptp_error_plus_half_sandwich(quality: ClockQuality, bound: float, width: int, lo: int,
                                               hi: int) -> None:  # fmt: skip
    reading = PhcReading(PHC, PHC - 37_000_000_000, width, "PTP_SYS_OFFSET_EXTENDED", 5)
    clock = _clock(ReplayDevice([reading]), _health(quality, bound, 1_000))
    ts = clock.now()
    assert (ts.ptp_ns, ts.ts_source, ts.clk_quality) == (PHC, TsSource.GTE, quality)
    assert lo <= ts.uncertainty_ns <= hi


def test_void_health_gives_unknown() -> None:
    reading = PhcReading(PHC, 0, 100, "PTP_SYS_OFFSET", 5)
    clock = _clock(ReplayDevice([reading]), _health(ClockQuality.DEGRADED, 100.0, 50_000, void_in_s=-1))
    ts = clock.now()
    assert ts.clk_quality is ClockQuality.UNKNOWN and ts.uncertainty_ns == 65535 and ts.ts_source is TsSource.GTE


def test_read_failure_never_throws_and_is_labelled_cpu_unknown() -> None:
    clock = _clock(ReplayDevice([ClockError(errno.ENODEV, "gone", "/dev/ptp-replay")]),
                   _health(ClockQuality.OK, 100.0, 1_000))  # fmt: skip
    ts = clock.now()
    assert ts.ts_source is TsSource.CPU and ts.clk_quality is ClockQuality.UNKNOWN
    info = clock.describe()
    assert info["read_failures"] == 1 and "gone" in info["last_read_error"]


def test_stale_ok_health_reads_as_holdover_in_now() -> None:
    """An OK verdict 30 s old (refresher starved, no update()) gives DEGRADED and the 50 ppm holdover bound."""
    reading = PhcReading(PHC, PHC - 37_000_000_000, 0, "PTP_SYS_OFFSET_PRECISE", 5)
    anchor = time.monotonic_ns() - 30_000_000_000
    health = SyncHealth(ClockQuality.OK, 1_000.0, 1_000, anchor, anchor + 60_000_000_000, "test",
                        stale_mono_ns=anchor + 1_000_000_000, stale_drift_ppb=50_000)  # fmt: skip
    ts = _clock(ReplayDevice([reading]), health).now()
    assert ts.clk_quality is ClockQuality.DEGRADED
    assert ts.uncertainty_ns == 65535  # ~1.5 ms saturates the uint16 field; the locked 1 ppm gave 31 µs
