"""Against a real chronyd (Debian's): the CPU bound follows it from unsynchronised to synchronised to holdover.

spec/clocks.md §3.1. Needs root, ``ip netns`` and chronyd (``make test`` unpacks
Debian's chrony as root when it is not installed); skips with the reason elsewhere. Both daemons run with -x, so
nothing here touches the system clock. The leap table is pinned to an unexpired
one so that the quality seen is chrony's alone (an expired system table would
add its own DEGRADED).
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from _chrony_netns import CHRONYC, SERVER_IP, ChronyPair, unavailable_reason
from _eco_helpers import clean_env

from tempotrace_sdk.clocks import cpu
from tempotrace_sdk.clocks.chrony import ChronyHealth, ChronyVerdict
from tempotrace_sdk.clocks.chrony_client import ChronyTarget
from tempotrace_sdk.clocks.cpu import SNAPSHOT_VALID_S, CpuClock
from tempotrace_sdk.clocks.leapseconds import LeapTable
from tempotrace_sdk.clocks.ptpquality import HOLDOVER_DRIFT_PPB
from tempotrace_sdk.wire.layout import ClockQuality

pytestmark = [pytest.mark.root, pytest.mark.slow]

_REASON = unavailable_reason()


@pytest.fixture
def pair() -> Iterator[ChronyPair]:
    if _REASON:
        pytest.skip(_REASON)
    chrony = ChronyPair()
    try:
        yield chrony
    finally:
        chrony.stop()


@pytest.fixture
def unexpired_leap_table(monkeypatch: pytest.MonkeyPatch) -> None:
    now_s = int(time.time())
    table = LeapTable.from_entries([(0, 10), (1_483_228_800, 37)], "test table", now_s + 86_400)
    monkeypatch.setattr(cpu, "leap_table", lambda: table)


def _verdict(health: ChronyHealth) -> ChronyVerdict:
    health.poll(force=True)
    return health.verdict_at(time.monotonic_ns())


def test_bound_follows_chronyd_from_unsynchronised_to_synchronised_to_holdover(
    pair: ChronyPair, unexpired_leap_table: None
) -> None:
    health = ChronyHealth(ChronyTarget("unix", pair.client_sock))
    pair.start_client()  # no server yet: the client cannot synchronise
    pair.wait_for(lambda: _verdict(health).status != "absent", 20, "client chronyd's socket")
    unsync = _verdict(health)
    assert unsync.quality is None and "Not synchronised" in unsync.reason, unsync
    clock = CpuClock(background=False, chrony=health)
    kernel_only = clock.now()
    assert "chrony not used: chronyd reports leap status Not synchronised" in clock.reason

    pair.start_server()

    def settled() -> bool:  # chronyd's first reports carry a large skew estimate; it shrinks within seconds
        clock.refresh()
        ts = clock.now()
        return ts.clk_quality is ClockQuality.OK and ts.uncertainty_ns < kernel_only.uncertainty_ns

    pair.wait_for(settled, 60, "a synchronised bound below the kernel rule's")
    before = time.monotonic_ns()
    health.poll(force=True)
    clock.refresh()  # (its own poll is skipped: asked less than 0.5 s ago)
    synced = clock.now()
    after = time.monotonic_ns()
    info = clock.describe()["chrony"]
    t = info["tracking"]
    assert t["reference"] == SERVER_IP and t["stratum"] == 2 and t["leap_status"] == "Normal"
    # ClockBound's bound from the figures chronyd reported, grown at chrony's rate to the end of the
    # snapshot's validity (the report is [0, after - before] old when the snapshot is taken).
    reported_ns = (abs(t["system_time_offset_s"]) + t["root_dispersion_s"] + t["root_delay_s"] / 2) * 1e9
    rate_ppb = 1000 + (abs(t["skew_ppm"]) + abs(t["residual_freq_ppm"])) * 1000
    assert synced.clk_quality is ClockQuality.OK
    assert math.ceil(reported_ns + rate_ppb * SNAPSHOT_VALID_S) <= synced.uncertainty_ns
    assert synced.uncertainty_ns <= math.ceil(reported_ns + rate_ppb * (SNAPSHOT_VALID_S + (after - before) / 1e9)) + 1

    pair.stop_server()  # chronyd keeps saying "Normal"; its updates stop
    pair.wait_for(lambda: _verdict(health).quality is ClockQuality.DEGRADED, 60, "holdover")
    first = health.verdict_at(t1 := time.monotonic_ns())
    time.sleep(1.0)
    health.poll(force=True)
    second = health.verdict_at(t2 := time.monotonic_ns())
    assert second.quality is ClockQuality.DEGRADED and "holdover" in second.reason
    assert second.bound_ns - first.bound_ns == pytest.approx(HOLDOVER_DRIFT_PPB * (t2 - t1) / 1e9, rel=1e-6)
    clock.refresh()
    held = clock.now()
    assert held.clk_quality is ClockQuality.DEGRADED and held.uncertainty_ns > synced.uncertainty_ns

    pair.stop_client()  # a restart, for ClockBound's 5 s grace after the last synchronised report; then gone
    pair.wait_for(lambda: "unreachable" in _verdict(health).reason, 20, "chronyd to be missed")
    missed = _verdict(health)
    if missed.quality is not None:
        assert missed.quality is ClockQuality.DEGRADED and "restart grace" in missed.reason
        pair.wait_for(lambda: _verdict(health).quality is None, 20, "the restart grace to end")
    gone = _verdict(health)
    assert "unreachable" in gone.reason and math.isinf(gone.bound_ns)
    clock.refresh()
    assert "chrony not used: chronyd unreachable" in clock.reason


def test_clock_command_shows_the_figures_as_chronyc_tracking_does(pair: ChronyPair) -> None:
    health = ChronyHealth(ChronyTarget("unix", pair.client_sock))
    pair.start_server()
    pair.start_client()
    pair.wait_for(lambda: _verdict(health).status == "synchronised", 60, "synchronisation")
    # A fresh process asks chronyd once, within 0.25 s an exchange: on a loaded machine that
    # answer can come late, and the CLI then rightly says chrony was not used. Ask again then.
    for _attempt in range(5):
        ours = subprocess.run(
            [sys.executable, "-m", "tempotrace_sdk", "clock", "--clock", "cpu"],
            env=clean_env(TEMPOTRACE_CHRONY=pair.client_sock),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if ours.returncode != 0 or "not used" not in ours.stdout:
            break
    assert CHRONYC is not None, "chronyc ships with chronyd"
    theirs = subprocess.run([CHRONYC, "-h", pair.client_sock, "tracking"], capture_output=True, text=True, timeout=30)
    assert ours.returncode == 0, ours.stderr
    block = ours.stdout[ours.stdout.index("chronyd (unix:") :].splitlines()[1:14]
    ours_fields = dict(line[2:].split(" : ", 1) for line in block)  # labels padded to chronyc's 15 columns
    theirs_fields = dict(line.split(" : ", 1) for line in theirs.stdout.splitlines() if " : " in line)
    assert theirs.returncode == 0 and list(ours_fields) == list(theirs_fields), (block, theirs.stdout)
    for label in ("Reference ID   ", "Stratum        ", "Leap status    "):  # the figures that do not drift
        assert ours_fields[label] == theirs_fields[label]
    assert ours_fields["Reference ID   "].endswith(f"({SERVER_IP})")
    bound_line = next(line for line in ours.stdout.splitlines() if line.strip().startswith("CPU bound"))
    assert "synchronised" in bound_line or "saturated" in bound_line, bound_line
