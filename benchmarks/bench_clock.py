"""Clock layer costs, as ratios against the bare clock read in the same run.

    python benchmarks/bench_clock.py [--json]

The issue's target: CpuClock.now() <= 1.5x time.clock_gettime_ns(CLOCK_TAI).
Also shown: why the hot path avoids the Timestamp constructor, the SW_GCC
source, and the off-hot-path refresh (adjtimex native vs ctypes).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import Row, emit, measure
from tempotrace_sdk.clocks import CalibratedClock, CpuClock, Timestamp, _native
from tempotrace_sdk.clocks._fast import make_timestamp
from tempotrace_sdk.clocks.kernel import _read_ctypes, read_kernel_sync
from tempotrace_sdk.wire._layout import ClockQuality, TsSource

TARGET_RATIO = 1.5


class _TupleTs(NamedTuple):
    ptp_ns: int
    ts_source: TsSource
    clk_quality: ClockQuality
    uncertainty_ns: int


class _TaiOk:
    """CLOCK_TAI labelled OK, so the calibrated source has something to trust."""

    name = "tai"

    def now(self) -> Timestamp:
        return Timestamp(time.clock_gettime_ns(time.CLOCK_TAI), TsSource.CPU, ClockQuality.OK, 0)

    def describe(self) -> dict[str, Any]:
        return {}


def main() -> None:
    tai = time.CLOCK_TAI
    gettime = time.clock_gettime_ns
    floor = measure(lambda: gettime(tai))
    cpu = CpuClock(background=False)
    rows = [Row("clock_gettime_ns(CLOCK_TAI)", floor)]
    cpu_ns = measure(cpu.now)
    rows.append(Row("CpuClock.now()", cpu_ns, "clock_gettime", cpu_ns / floor, TARGET_RATIO * floor))
    # What now() would cost if base.Timestamp were a tuple subclass (NamedTuple):
    # the same clock read and four fields, built by tuple.__new__.
    tuple_new = tuple.__new__
    off = 37_000_000_000
    as_tuple = measure(lambda: tuple_new(_TupleTs, (gettime(tai) + off, TsSource.CPU, ClockQuality.UNKNOWN, 65535)))
    rows.append(Row("same, if Timestamp were a NamedTuple", as_tuple, "clock_gettime", as_tuple / floor))
    ctor = measure(lambda: Timestamp(1, TsSource.CPU, ClockQuality.OK, 5))
    fast = measure(lambda: make_timestamp(1, TsSource.CPU, ClockQuality.OK, 5))
    rows.append(Row("Timestamp(...) constructor", ctor, "clock_gettime", ctor / floor))
    rows.append(Row("make_timestamp (hot path)", fast, "clock_gettime", fast / floor))
    gcc = CalibratedClock(lambda: gettime(time.CLOCK_MONOTONIC_RAW), _TaiOk(), background=False)
    gcc_ns = measure(gcc.now)
    rows.append(Row("CalibratedClock.now() (SW_GCC)", gcc_ns, "clock_gettime", gcc_ns / floor))
    # Off the hot path (refresher thread, once a second): the kernel state read.
    pure = measure(_read_ctypes)
    rows.append(Row("adjtimex via ctypes (refresh)", pure, "clock_gettime", pure / floor))
    if _native.native() is not None:
        nat = measure(read_kernel_sync)
        rows.append(Row("adjtimex via native (refresh)", nat, "ctypes", nat / pure))
        snap = measure(cpu.refresh)
        rows.append(Row("CpuClock.refresh() (whole snapshot)", snap, "clock_gettime", snap / floor))
    emit("clock sources (ratio = ours / peer; target: CpuClock.now() <= 1.5x clock_gettime)", rows)


if __name__ == "__main__":
    main()
