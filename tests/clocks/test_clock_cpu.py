"""CPU source: CLOCK_TAI, the leap-second fix, quality from adjtimex (spec/clocks.md §CPU)."""

from __future__ import annotations

import time

import pytest

from tempotrace_sdk.clocks import CpuClock, Timestamp, _native
from tempotrace_sdk.clocks.cpu import _judge
from tempotrace_sdk.clocks.kernel import KernelSync, read_kernel_sync
from tempotrace_sdk.clocks.leapseconds import leap_table
from tempotrace_sdk.wire.layout import ClockQuality, TsSource


def _ks(status: int = 0x2001, state: int = 0, maxerror: int = 1000, tai: int = 37) -> KernelSync:
    return KernelSync(state, status, maxerror, 50, tai, "test")


@pytest.mark.parametrize(
    ("name", "ks", "expired", "correcting", "quality", "unc", "reason_has"),
    [
        ("unsync bit", _ks(status=0x0040, state=5, maxerror=16_000_000), False, True,
         ClockQuality.UNKNOWN, 65535, "STA_UNSYNC"),
        ("clock error bit", _ks(status=0x1000), False, False, ClockQuality.UNKNOWN, 65535, "clock state"),
        ("synced, small maxerror: still saturates after 3 s of 500 ppm", _ks(maxerror=1), False, False,
         ClockQuality.OK, 65535, "maxerror 1"),
        ("synced, kernel TAI 0, leap table expired", _ks(tai=0), True, True, ClockQuality.DEGRADED, 65535,
         "expired"),
        ("synced, table expired but kernel holds TAI: no correction needed", _ks(), True, False,
         ClockQuality.OK, 65535, "synchronised"),
    ],
)  # fmt: skip
def test_judge_rules(name: str, ks: KernelSync, expired: bool, correcting: bool, quality: ClockQuality, unc: int,
                     reason_has: str) -> None:  # fmt: skip
    got_q, got_u, reason = _judge(ks, expired, correcting)
    assert (got_q, got_u) == (quality, unc), name
    assert reason_has in reason, name


def test_this_host_reports_kernel_state() -> None:
    """Done-when: on an unsynchronised host the CPU source says UNKNOWN and names STA_UNSYNC."""
    ks = read_kernel_sync()
    clock = CpuClock(background=False)
    ts = clock.now()
    assert ts.ts_source is TsSource.CPU
    info = clock.describe()
    if ks.unsync:
        assert ts.clk_quality is ClockQuality.UNKNOWN and ts.uncertainty_ns == 65535
        assert "STA_UNSYNC" in info["reason"]
    else:
        assert ts.clk_quality is not ClockQuality.UNKNOWN
    assert info["kernel"]["sta_unsync"] == ks.unsync


def test_tai_correction_when_kernel_offset_is_zero() -> None:
    """CLOCK_TAI reads UTC when the kernel's TAI offset is 0: the source adds TAI-UTC and says so."""
    ks = read_kernel_sync()
    clock = CpuClock(background=False)
    utc_before = time.time_ns()
    ts = clock.now()
    utc_after = time.time_ns()
    table = leap_table()
    expired = table.expires_unix_s is not None and utc_before / 1e9 > table.expires_unix_s
    # The table is authoritative unless the kernel's own offset is set and the table expired.
    expected = ks.tai_s if ks.tai_s and expired else table.offset_at_utc(utc_before / 1e9)
    assert utc_before + expected * 10**9 <= ts.ptp_ns <= utc_after + expected * 10**9 + 10**6
    corr = clock.describe()["tai_correction"]
    assert corr["kernel_tai_offset_s"] == ks.tai_s
    assert corr["applied_s"] == expected - ks.tai_s


@pytest.mark.parametrize(
    ("expired", "shift_s", "reason_has"),
    [(False, 1, "discrepancy"), (True, 0, "kept the kernel's")],
)
def test_kernel_tai_offset_that_disagrees_with_the_table(monkeypatch: pytest.MonkeyPatch, expired: bool,
                                                         shift_s: int, reason_has: str) -> None:  # fmt: skip
    """A daemon set TAI offset 36 while the table says 37: times would be 1 s off, so the table's value is
    applied and the source reports DEGRADED naming both values (with an expired table the kernel's is kept)."""
    from tempotrace_sdk.clocks import cpu
    from tempotrace_sdk.clocks.leapseconds import LeapTable

    now_s = int(time.time())
    table = LeapTable.from_entries([(0, 10), (now_s - 86_400, 37)], "test table", now_s + (-1 if expired else 86_400))
    monkeypatch.setattr(cpu, "leap_table", lambda: table)
    monkeypatch.setattr(cpu, "read_kernel_sync", lambda: _ks(tai=36))
    clock = CpuClock(background=False)
    raw = time.clock_gettime_ns(time.CLOCK_TAI)
    ts = clock.now()
    assert abs(ts.ptp_ns - (raw + shift_s * 10**9)) < 100_000_000
    assert ts.clk_quality is ClockQuality.DEGRADED
    info = clock.describe()
    assert reason_has in info["reason"] and "36" in info["reason"] and "37" in info["reason"]
    assert info["tai_correction"]["applied_s"] == shift_s


def test_kernel_tai_offset_that_agrees_is_used_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    from tempotrace_sdk.clocks import cpu

    monkeypatch.setattr(cpu, "read_kernel_sync", lambda: _ks(tai=leap_table().offset_at_utc(time.time())))
    clock = CpuClock(background=False)
    assert clock.describe()["tai_correction"]["applied_s"] == 0
    assert clock.now().clk_quality is ClockQuality.OK and "synchronised" in clock.reason


def test_now_is_monotone_enough_and_fast_path_equals_constructor() -> None:
    clock = CpuClock(background=False)
    a, b = clock.now(), clock.now()
    assert b.ptp_ns >= a.ptp_ns
    built = Timestamp(b.ptp_ns, b.ts_source, b.clk_quality, b.uncertainty_ns)
    assert b == built and hash(b) == hash(built) and repr(b) == repr(built)


def test_stale_snapshot_is_refreshed_inline() -> None:
    """If the refresher stalls, now() re-reads the kernel state instead of trusting an old snapshot."""
    clock = CpuClock(background=False)
    old = clock._state
    clock._state = type(old)(old.read_at_ns - 10**10, old.read_at_ns - 10**9, old.offset_ns, ClockQuality.OK, 5,
                             "stale fake", old.kernel, old.correction)  # fmt: skip
    ts = clock.now()
    assert clock._state.reason != "stale fake"
    assert ts.clk_quality is clock._state.quality


def test_background_refresh_renews_state() -> None:
    clock = CpuClock(background=True)
    first = clock._state
    deadline = time.monotonic() + 5
    while clock._state is first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert clock._state is not first, "refresher thread did not renew the snapshot within 5 s"


def test_pure_python_fallback_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_native.PURE_ENV, "1")
    _native.reset_cache()
    try:
        clock = CpuClock(background=False)
        info = clock.describe()
        assert info["kernel"]["read_via"] == "ctypes ntp_adjtime"
        assert info["native"]["available"] is False
        assert clock.now().ts_source is TsSource.CPU
    finally:
        monkeypatch.undo()
        _native.reset_cache()


def test_missing_native_build_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source tree never installed has no _phc: CPU still works and the reason names the fix."""
    real_import = _native.importlib.import_module

    def no_phc(name: str, package: str | None = None) -> object:
        if name == "tempotrace_sdk._phc":
            raise ImportError("No module named 'tempotrace_sdk._phc'")
        return real_import(name, package)

    monkeypatch.setattr(_native.importlib, "import_module", no_phc)
    monkeypatch.delenv(_native.PURE_ENV, raising=False)
    _native.reset_cache()
    try:
        status = _native.native_status()
        assert not status.available
        assert "not built" in status.reason and "pip install -e ." in status.reason and "make venv" in status.reason
        clock = CpuClock(background=False)
        assert clock.describe()["kernel"]["read_via"] == "ctypes ntp_adjtime"
    finally:
        monkeypatch.undo()
        _native.reset_cache()


def test_inserted_leap_second_maps_onto_a_repeated_utc_second() -> None:
    """spec/clocks.md §3: TAI during 2016-12-31 23:59:60 maps onto 2017-01-01 00:00:00, which then repeats."""
    from tempotrace_sdk.clocks.leapseconds import tai_to_utc_ns, utc_to_tai_ns

    s = 1_483_228_800  # 2017-01-01T00:00:00Z, TAI - UTC 36 -> 37
    sec = 10**9
    assert tai_to_utc_ns((s + 35) * sec) == (s - 1) * sec  # 23:59:59
    assert tai_to_utc_ns((s + 36) * sec + sec // 2) == s * sec + sec // 2  # 23:59:60.5 reads 00:00:00.5
    assert tai_to_utc_ns((s + 37) * sec) == s * sec  # 00:00:00 again
    assert utc_to_tai_ns(s * sec) == (s + 37) * sec  # the later instant
