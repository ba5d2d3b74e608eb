"""Clock layer costs, as ratios against the bare clock read in the same run.

    python benchmarks/bench_clock.py [--json]

The issue's target: CpuClock.now() <= 1.5x time.clock_gettime_ns(CLOCK_TAI).
The now() ratio is timed in alternating batches against the bare read
(harness.compare), so load on a shared machine moves both sides together.
Also shown: why the hot path avoids the Timestamp constructor, the SW_GCC
source, and the off-hot-path refresh (adjtimex native vs ctypes).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tempotrace_sdk.clocks._fast import make_timestamp

from benchmarks.harness import Row, compare, emit, measure
from tempotrace_sdk.clocks import CalibratedClock, CpuClock, Timestamp, _native
from tempotrace_sdk.clocks.kernel import _read_ctypes, read_kernel_sync
from tempotrace_sdk.wire._layout import ClockQuality, TsSource

TARGET_RATIO = 1.5


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
    cpu = CpuClock(background=False)
    cpu_ns, floor, ratio = compare(cpu.now, lambda: gettime(tai), min_time=1.0, repeat=21)
    rows = [Row("clock_gettime_ns(CLOCK_TAI)", floor)]
    rows.append(Row("CpuClock.now()", cpu_ns, "clock_gettime", ratio, TARGET_RATIO * floor))
    # The floor of any Python-level now(): the same read plus a plain tuple.
    off = 37_000_000_000
    plain, _, plain_ratio = compare(lambda: (gettime(tai) + off, 2, 2, 65535), lambda: gettime(tai))
    rows.append(Row("  same read + a plain 4-tuple", plain, "clock_gettime", plain_ratio))
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
