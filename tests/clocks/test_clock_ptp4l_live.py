"""Against real ptp4l: query the slave over UDS, map to quality, lose the master (spec/clocks.md §PTP quality).

Needs root and linuxptp (``make test`` installs it as root); skips with the
reason elsewhere. Namespaces and processes are removed even on failure.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest

from tempotrace_sdk.clocks.ptp4l import query, survey_ptp4l
from tempotrace_sdk.clocks.ptpquality import HOLDOVER_DRIFT_PPB, Limits, Ptp4lHealth
from tempotrace_sdk.errors import ClockError
from tempotrace_sdk.wire.layout import ClockQuality

from .ptp_netns import PtpPair, unavailable_reason

pytestmark = [pytest.mark.root, pytest.mark.slow]

_REASON = unavailable_reason()


@pytest.fixture
def pair() -> Iterator[PtpPair]:
    if _REASON:
        pytest.skip(_REASON)
    ptp = PtpPair()
    try:
        ptp.start()
        yield ptp
    finally:
        ptp.stop()


def _slave_measuring(ptp: PtpPair) -> bool:
    try:
        status = query(ptp.slave_uds, timeout_s=0.3)
    except ClockError:
        return False
    return status.time_status.gm_present and status.time_status.ingress_time_ns > 0


def test_slave_fields_quality_and_master_loss(pair: PtpPair) -> None:
    pair.wait_for(lambda: _slave_measuring(pair), 15, f"slave to hear the master\n{pair.log('s')}")

    master = query(pair.master_uds)
    slave = query(pair.slave_uds)
    # Fields: the slave's grandmaster is the master's own clock, one step away.
    assert slave.time_status.gm_identity == master.parent.gm_identity == slave.parent.gm_identity
    assert master.port is not None and master.port.port_state == "MASTER"
    assert slave.port is not None and slave.port.port_number == 1
    # free_running 1: linuxptp 3.x never locks the servo, so the port stays UNCALIBRATED (4.x may say SLAVE).
    assert slave.port.port_state in ("UNCALIBRATED", "SLAVE")
    assert slave.port.log_sync_interval == -3 and slave.port.log_announce_interval == -2
    assert slave.current.steps_removed == 1
    assert 0 < slave.current.mean_path_delay_ns < 1e6  # software timestamps over veth: µs, not ms
    assert abs(slave.time_status.master_offset_ns) < 1e6  # both ends read the same CLOCK_REALTIME

    # Quality mapping on live data. Software timestamping: ingress times are CLOCK_REALTIME.
    health_monitor = Ptp4lHealth(pair.slave_uds, reference_ns=time.time_ns, limits=Limits(void_after_s=4.0))
    before_update = time.monotonic_ns()
    health = health_monitor.update()
    expected = ClockQuality.OK if slave.port.port_state == "SLAVE" else ClockQuality.DEGRADED
    assert health.quality is expected, health.reason
    measured = abs(health.evidence["master_offset_ns"]) + health.evidence["mean_path_delay_ns"] / 2
    now = time.monotonic_ns()
    # Fresh data is at most stale_after_s old at update(); since then the bound grows at most at the
    # holdover drift. Derived from the elapsed time, so a loaded box does not make it flake.
    elapsed_s = health.evidence["stale_after_s"] + (now - before_update) / 1e9
    assert measured <= health.bound_at(now) <= measured + HOLDOVER_DRIFT_PPB * elapsed_s
    if expected is ClockQuality.DEGRADED:
        assert "UNCALIBRATED" in health.reason

    # Which clock it disciplines: software timestamping on the slave's veth, so a PHC source must not
    # take these answers as evidence about /dev/ptp0 (PORT_PROPERTIES_NP from the live daemon).
    assert slave.properties is not None
    assert (slave.properties.interface, slave.properties.timestamping) == (pair.if_slave, "SOFTWARE")
    phc_monitor = Ptp4lHealth(pair.slave_uds, reference_ns=time.time_ns, expect_phc="/dev/ptp0",
                              iface_phc=lambda iface: "/dev/ptp0")  # fmt: skip
    judged = phc_monitor.update()
    assert judged.quality is ClockQuality.UNKNOWN and "SOFTWARE timestamping" in judged.reason

    # Lose the grandmaster: DEGRADED (holdover) with a bound that keeps growing, then UNKNOWN.
    pair.stop_master()
    pair.wait_for(lambda: "holdover" in health_monitor.update().reason, 5, "holdover after master loss")
    first = health_monitor.health
    assert first.quality is ClockQuality.DEGRADED
    t1 = time.monotonic_ns()
    b1 = first.bound_at(t1)
    time.sleep(0.3)
    second = health_monitor.update()
    b2 = second.bound_at(time.monotonic_ns())
    assert second.quality is ClockQuality.DEGRADED and "holdover" in second.reason
    assert b2 > b1 >= measured
    assert b2 - b1 >= 0.3 * 50_000 * 0.9  # 50 ppm of 0.3 s, less a little for timing
    after = query(pair.slave_uds)
    assert after.port is not None and after.port.port_state in ("LISTENING", "UNCALIBRATED", "SLAVE")

    pair.wait_for(lambda: health_monitor.update().quality is ClockQuality.UNKNOWN, 8, "void after 4 s")
    assert "void" in health_monitor.health.reason
    assert math.isinf(health_monitor.health.bound_at(time.monotonic_ns()))


def test_survey_sees_live_ptp4l(pair: PtpPair) -> None:
    pair.wait_for(lambda: _slave_measuring(pair), 15, "slave to hear the master")
    report = survey_ptp4l(pair.slave_uds)
    assert report["reachable"] is True
    assert report["status"]["current"]["steps_removed"] == 1


def test_unreachable_ptp4l_is_a_clock_error(tmp_path: object) -> None:
    with pytest.raises(ClockError) as info:
        query("/nonexistent/ptp4l.sock")
    assert info.value.filename == "/nonexistent/ptp4l.sock"
