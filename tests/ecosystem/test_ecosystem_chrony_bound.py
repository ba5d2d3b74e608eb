"""The CPU bound from chronyd's tracking data, ClockBound's rule (spec/clocks.md §3.1).

Recorded answers are replayed through ``ChronyHealth.observe`` (the same code
``poll()`` feeds), so every rule is checked at exact ages; the live daemon is in
test_ecosystem_chrony_live.py.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import pytest
from _chrony_golden import GOLDEN_REPLY, GOLDEN_SEQUENCE

from tempotrace_sdk.clocks import cpu
from tempotrace_sdk.clocks.chrony import (
    EMPTY_REGISTER_UPDATES,
    RESTART_GRACE_S,
    VOID_AFTER_S,
    ChronyHealth,
    report_bound_ns,
)
from tempotrace_sdk.clocks.chrony_candm import REFID_LOCAL, ChronyTracking, decode_tracking_reply
from tempotrace_sdk.clocks.chrony_client import ChronyTarget
from tempotrace_sdk.clocks.cpu import SNAPSHOT_VALID_S, CpuClock
from tempotrace_sdk.clocks.kernel import KernelSync
from tempotrace_sdk.clocks.leapseconds import LeapTable
from tempotrace_sdk.clocks.ptpquality import HOLDOVER_DRIFT_PPB
from tempotrace_sdk.wire.layout import ClockQuality

S = 1_000_000_000
WALL = 1_800_000_000.0  # a wall-clock instant for chronyd's ref_time to be compared with
SYNCED = dataclasses.replace(
    decode_tracking_reply(GOLDEN_REPLY, GOLDEN_SEQUENCE),
    ref_time_s=WALL - 0.2,
    root_dispersion_s=2e-6,
    last_update_interval_s=1.0,
)


class Replay(ChronyHealth):
    """A ChronyHealth that never asks a daemon: the test feeds it answers."""

    def __init__(self, max_drift_ppb: float | None = None) -> None:
        super().__init__(ChronyTarget("unix", "/nonexistent/replay.sock"), max_drift_ppb=max_drift_ppb)

    def poll(self, timeout_s: float = 0.0, *, force: bool = False) -> None:
        pass


def locked_rate(t: ChronyTracking, max_drift_ppb: float = 1000) -> float:
    return max_drift_ppb + (abs(t.skew_ppm) + abs(t.resid_freq_ppm)) * 1000


def test_synchronised_is_ok_with_clockbounds_bound_growing_at_chronys_rate() -> None:
    h = Replay()
    h.observe(SYNCED, 0, WALL)
    v = h.verdict_at(2 * S)
    base = (abs(SYNCED.current_correction_s) + SYNCED.root_dispersion_s + SYNCED.root_delay_s / 2) * 1e9
    assert report_bound_ns(SYNCED) == pytest.approx(base)
    assert v.quality is ClockQuality.OK and v.status == "synchronised"
    assert v.bound_ns == pytest.approx(base + locked_rate(SYNCED) * 2)
    assert "10.77.0.1" in v.reason and "root delay/2" in v.reason


def test_max_drift_setting_is_chronys_maxclockerror(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPOTRACE_CHRONY_MAX_DRIFT_PPM", "50")
    h = ChronyHealth(ChronyTarget("off"))
    assert h.max_drift_ppb == 50_000
    monkeypatch.setenv("TEMPOTRACE_CHRONY_MAX_DRIFT_PPM", "fast")
    with pytest.raises(ValueError, match="TEMPOTRACE_CHRONY_MAX_DRIFT_PPM"):
        ChronyHealth(ChronyTarget("off"))


def test_free_running_after_a_sync_is_holdover_from_the_last_synchronised_report() -> None:
    h = Replay()
    h.observe(SYNCED, 0, WALL)
    stale_s = EMPTY_REGISTER_UPDATES * SYNCED.last_update_interval_s + 1  # chronyd still says "Normal"
    h.observe(SYNCED, int(stale_s * S), WALL + stale_s)
    early, late = h.verdict_at(int(stale_s * S)), h.verdict_at(int((stale_s + 4) * S))
    assert early.quality is late.quality is ClockQuality.DEGRADED
    assert late.bound_ns == pytest.approx(report_bound_ns(SYNCED) + HOLDOVER_DRIFT_PPB * (stale_s + 4))
    assert late.bound_ns - early.bound_ns == pytest.approx(HOLDOVER_DRIFT_PPB * 4)
    assert "holdover" in late.reason and "update intervals" in late.reason


@pytest.mark.parametrize(
    ("name", "tracking", "words"),
    [
        ("stale updates", dataclasses.replace(SYNCED, ref_time_s=WALL - 60), "more than 8 update intervals"),
        ("leap status 3", dataclasses.replace(SYNCED, leap_status=3), "Not synchronised"),
        ("never updated", dataclasses.replace(SYNCED, ref_time_s=0.0), "not updated the clock yet"),
        ("local reference", dataclasses.replace(SYNCED, ref_id=REFID_LOCAL, ref_address=""), "local reference"),
    ],
)
def test_no_synchronised_report_yet_means_the_kernel_rule(name: str, tracking: ChronyTracking, words: str) -> None:
    h = Replay()
    h.observe(tracking, 0, WALL)
    v = h.verdict_at(S)
    assert v.quality is None and math.isinf(v.bound_ns), name
    assert words in v.reason and "no synchronised report" in v.reason, name


def test_leap_status_3_after_a_sync_is_holdover() -> None:
    h = Replay()
    h.observe(SYNCED, 0, WALL)
    h.observe(dataclasses.replace(SYNCED, leap_status=3), S, WALL + 1)
    v = h.verdict_at(2 * S)
    assert v.quality is ClockQuality.DEGRADED and "Not synchronised" in v.reason


def test_unreachable_chronyd_is_holdover_within_the_restart_grace_then_the_kernel_rule() -> None:
    h = Replay()
    h.observe(SYNCED, 0, WALL)
    h.observe(None, 3 * S, WALL + 3, error="chronyd at unix:/x: Connection refused")
    v = h.verdict_at(3 * S)
    assert v.quality is ClockQuality.DEGRADED and "restart grace" in v.reason
    assert v.bound_ns == pytest.approx(report_bound_ns(SYNCED) + HOLDOVER_DRIFT_PPB * 3)
    h.observe(None, int((RESTART_GRACE_S + 1) * S), WALL + RESTART_GRACE_S + 1, error="Connection refused")
    v = h.verdict_at(int((RESTART_GRACE_S + 1) * S))
    assert v.quality is None and "unreachable" in v.reason


def test_a_stalled_refresher_turns_ok_into_holdover() -> None:
    h = Replay()
    h.observe(SYNCED, 0, WALL)
    v = h.verdict_at(int((RESTART_GRACE_S + 1) * S))
    assert v.quality is ClockQuality.DEGRADED and "no chronyd report for" in v.reason


def test_holdover_is_void_after_1000_s() -> None:
    h = Replay()
    h.observe(SYNCED, 0, WALL)
    h.observe(dataclasses.replace(SYNCED, leap_status=3), S, WALL + 1)
    assert h.verdict_at(int((VOID_AFTER_S - 1) * S)).quality is ClockQuality.DEGRADED
    v = h.verdict_at(int(VOID_AFTER_S * S))
    assert v.quality is None and "1000 s" in v.reason


def test_disabled_and_never_asked() -> None:
    assert "off" in ChronyHealth(ChronyTarget("off")).verdict_at(0).reason
    assert Replay().verdict_at(0).reason == "chronyd not asked yet"


# -- the CPU source with a replayed chronyd -----------------------------------------------------


def _unsynced_kernel() -> KernelSync:
    return KernelSync(5, 0x0040, 16_000_000, 16_000_000, 0, "test")


@pytest.fixture
def fresh_leap_table(monkeypatch: pytest.MonkeyPatch) -> None:
    now_s = int(time.time())
    table = LeapTable.from_entries([(0, 10), (now_s - 86_400, 37)], "test table", now_s + 86_400)
    monkeypatch.setattr(cpu, "leap_table", lambda: table)
    monkeypatch.setattr(cpu, "read_kernel_sync", _unsynced_kernel)


def test_cpu_source_takes_chronys_bound_over_an_unsynchronised_kernel(fresh_leap_table: None) -> None:
    """The kernel says STA_UNSYNC (chronyd -x), chronyd is synchronised: OK, bound held for the snapshot's life."""
    h = Replay()
    asked = time.monotonic_ns()
    h.observe(dataclasses.replace(SYNCED, ref_time_s=time.time() - 0.2), asked, time.time())
    clock = CpuClock(background=False, chrony=h)
    ts = clock.now()
    elapsed_s = (time.monotonic_ns() - asked) / S
    rate = locked_rate(SYNCED)
    assert ts.clk_quality is ClockQuality.OK
    assert math.ceil(report_bound_ns(SYNCED) + rate * SNAPSHOT_VALID_S) <= ts.uncertainty_ns
    assert ts.uncertainty_ns <= math.ceil(report_bound_ns(SYNCED) + rate * (SNAPSHOT_VALID_S + elapsed_s)) + 1
    info = clock.describe()
    assert info["chrony"]["used"] is True and info["chrony"]["tracking"]["reference"] == "10.77.0.1"
    assert info["reason"].startswith("chronyd synchronised")


def test_cpu_source_falls_back_to_the_kernel_rule_saying_why(fresh_leap_table: None) -> None:
    h = Replay()
    h.observe(dataclasses.replace(SYNCED, leap_status=3), time.monotonic_ns(), time.time())
    clock = CpuClock(background=False, chrony=h)
    ts = clock.now()
    assert ts.clk_quality is ClockQuality.UNKNOWN and ts.uncertainty_ns == 65535
    assert "STA_UNSYNC" in clock.reason and "chrony not used: chronyd reports leap status Not synchronised" in (
        clock.reason
    )


def test_tai_doubt_degrades_even_a_synchronised_chrony(monkeypatch: pytest.MonkeyPatch) -> None:
    now_s = int(time.time())
    expired = LeapTable.from_entries([(0, 10), (now_s - 86_400, 37)], "expired table", now_s - 1)
    monkeypatch.setattr(cpu, "leap_table", lambda: expired)
    monkeypatch.setattr(cpu, "read_kernel_sync", _unsynced_kernel)
    h = Replay()
    h.observe(dataclasses.replace(SYNCED, ref_time_s=time.time() - 0.2), time.monotonic_ns(), time.time())
    clock = CpuClock(background=False, chrony=h)
    assert clock.now().clk_quality is ClockQuality.DEGRADED
    assert "chronyd synchronised" in clock.reason and "leap-second table has expired" in clock.reason


def test_chrony_false_is_the_kernel_rule_alone(fresh_leap_table: None) -> None:
    clock = CpuClock(background=False, chrony=False)
    assert clock.describe()["chrony"] is None and clock.now().clk_quality is ClockQuality.UNKNOWN


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_child_forked_during_a_poll_can_still_ask_chronyd() -> None:
    """A fork while the refresher thread holds the poll lock must not leave the child unable to poll."""
    health = ChronyHealth(ChronyTarget("unix", "/nonexistent/fork.sock"))
    with health._lock:  # as if a poll were in flight on another thread
        pid = os.fork()
        if pid == 0:  # child: ask (the answer is an error: no such socket) and report whether it was recorded
            health.poll(force=True)
            os._exit(0 if health.describe().get("error") else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
