"""ptp4l message codec on recorded bytes, and the quality rules (spec/clocks.md §ptp4l, §PTP quality)."""

from __future__ import annotations

import math

import pytest

from tempotrace_sdk.clocks.ptp4l import (
    CurrentDataSet,
    MgmtId,
    ParentDataSet,
    PortDataSet,
    PortProperties,
    Ptp4lClient,
    Ptp4lStatus,
    TimeStatusNP,
)
from tempotrace_sdk.clocks.ptpquality import (
    HOLDOVER_DRIFT_PPB,
    LOCKED_DRIFT_PPB,
    Limits,
    SyncHealth,
    discipline_problem,
    evaluate,
)
from tempotrace_sdk.errors import ClockError
from tempotrace_sdk.wire.layout import ClockQuality

# Recorded from ptp4l 3.1.1 (Debian) answering GET TIME_STATUS_NP over UDS,
# a slave hearing grandmaster a287e4.fffe.79f8a2 (sequenceId 1).
RECORDED_TIME_STATUS = bytes.fromhex(
    "0d020068000000000000000000000000000000006ea3effffefd8a5500000001047f74656d706f747263304e0000020000010034c000"
    "000000000000003a00000000000000000000000000000000000000000000000000000000000000000001a287e4fffe79f8a2"
)


def test_get_request_layout() -> None:
    """A GET is header(34) + management body(14) + TLV header(6) + zeroed data, as pmc sends it."""
    client = Ptp4lClient("/nonexistent")
    try:
        req = client._request(MgmtId.TIME_STATUS_NP)
    finally:
        client.close()
    assert len(req) == 34 + 14 + 6 + 50
    assert req[0] == 0x0D and req[1] == 2  # management message, PTP v2
    assert int.from_bytes(req[2:4], "big") == len(req)
    assert req[32] == 4 and req[33] == 0x7F  # control MANAGEMENT, logMessageInterval
    assert req[34:44] == b"\xff" * 10  # wildcard target port
    assert req[44:46] == b"\x00\x00"  # boundary hops 0: ptp4l must not forward us
    assert req[46] & 0x0F == 0  # GET
    assert req[48:54] == bytes.fromhex("00010034c000")  # TLV MANAGEMENT, length 2+50, TIME_STATUS_NP
    assert req[54:] == bytes(50)


def test_recorded_response_parses() -> None:
    client = Ptp4lClient("/nonexistent")
    try:
        client._seq = 1
        port, data = client._parse(RECORDED_TIME_STATUS, MgmtId.TIME_STATUS_NP)  # type: ignore[misc]
        assert client._parse(RECORDED_TIME_STATUS, MgmtId.PORT_DATA_SET) is None  # not what we asked
        client._seq = 2
        assert client._parse(RECORDED_TIME_STATUS, MgmtId.TIME_STATUS_NP) is None  # someone else's answer
        assert client._parse(RECORDED_TIME_STATUS[:40], MgmtId.TIME_STATUS_NP) is None  # truncated
    finally:
        client.close()
    ts = TimeStatusNP.parse(data)
    assert port == 0
    assert (ts.master_offset_ns, ts.ingress_time_ns, ts.gm_present, ts.gm_identity) == (
        58,
        0,
        True,
        "a287e4.fffe.79f8a2",
    )


def test_management_error_is_reported() -> None:
    msg = bytearray(RECORDED_TIME_STATUS[:54])
    msg[48:50] = b"\x00\x02"  # MANAGEMENT_ERROR_STATUS
    msg[52:54] = b"\x00\x02"  # error id: NO_SUCH_ID
    client = Ptp4lClient("/nonexistent")
    try:
        client._seq = 1
        with pytest.raises(ClockError, match="management error 0x0002"):
            client._parse(bytes(msg) + bytes(8), MgmtId.TIME_STATUS_NP)
    finally:
        client.close()


NOW_REF = 1_800_000_000_000_000_000
NOW_MONO = 500_000_000_000


def _status(state: str = "SLAVE", gm: bool = True, offset: int = 120, delay: float = 2000.0, age_s: float = 0.1,
            log_sync: int = -3) -> Ptp4lStatus:  # fmt: skip
    ingress = 0 if math.isinf(age_s) else NOW_REF - int(age_s * 1e9)
    return Ptp4lStatus(
        "/x",
        TimeStatusNP(offset, ingress, 0, gm, "a287e4.fffe.79f8a2"),
        PortDataSet(1, state, log_sync, -2, 0.0),
        CurrentDataSet(1, float(offset), delay),
        ParentDataSet("a287e4.fffe.79f8a2", "a287e4.fffe.79f8a2", 6, 0x21, 0x4E5D, 128, 128),
        NOW_REF,
        NOW_MONO,
    )


def _eval(status: Ptp4lStatus | None, last: SyncHealth | None = None, mono: int = NOW_MONO) -> SyncHealth:
    return evaluate(status, now_mono_ns=mono, reference_now_ns=NOW_REF, last=last, error="ECONNREFUSED")


@pytest.mark.parametrize(
    ("name", "status", "quality", "bound", "reason_has"),
    [
        ("locked slave", _status(), ClockQuality.OK, 120 + 1000 + LOCKED_DRIFT_PPB * 0.1, "SLAVE"),
        ("negative offset counts by magnitude", _status(offset=-300), ClockQuality.OK,
         300 + 1000 + LOCKED_DRIFT_PPB * 0.1, "SLAVE"),
        ("servo not locked", _status(state="UNCALIBRATED"), ClockQuality.DEGRADED,
         120 + 1000 + HOLDOVER_DRIFT_PPB * 0.1, "UNCALIBRATED"),
        ("offset over 20 µs", _status(offset=25_000), ClockQuality.DEGRADED,
         25_000 + 1000 + HOLDOVER_DRIFT_PPB * 0.1, "over"),
        ("stale sync, nothing earlier", _status(age_s=2.0), ClockQuality.UNKNOWN, math.inf, "stale"),
        ("gm lost, nothing earlier", _status(gm=False), ClockQuality.UNKNOWN, math.inf, "grandmaster lost"),
        ("listening, nothing earlier", _status(state="LISTENING"), ClockQuality.UNKNOWN, math.inf, "LISTENING"),
        ("no sync yet", _status(age_s=math.inf), ClockQuality.UNKNOWN, math.inf, "no Sync"),
        ("unreachable, nothing earlier", None, ClockQuality.UNKNOWN, math.inf, "not reachable"),
    ],
)  # fmt: skip
def test_rules_from_a_single_answer(name: str, status: Ptp4lStatus | None, quality: ClockQuality, bound: float,
                                    reason_has: str) -> None:  # fmt: skip
    health = _eval(status)
    assert health.quality is quality, name
    got = health.bound_at(NOW_MONO)
    if math.isinf(bound):
        assert math.isinf(got), name
    else:
        assert got == pytest.approx(bound, rel=1e-6), name
    assert reason_has in health.reason, name


def test_stale_limit_follows_sync_interval() -> None:
    """4 sync intervals, at least 1 s: at logSyncInterval 1 (2 s) data 5 s old is still fresh."""
    assert _eval(_status(age_s=5.0, log_sync=1)).quality is ClockQuality.OK
    assert _eval(_status(age_s=9.0, log_sync=1)).quality is ClockQuality.UNKNOWN


@pytest.mark.parametrize("loss", [None, _status(gm=False), _status(state="LISTENING"), _status(age_s=3.0)])
def test_holdover_grows_then_voids(loss: Ptp4lStatus | None) -> None:
    good = _eval(_status())
    later = NOW_MONO + 2_000_000_000
    held = _eval(loss, last=good, mono=later)
    assert held.quality is ClockQuality.DEGRADED and held.reason.startswith("holdover")
    b1 = held.bound_at(later)
    b2 = held.bound_at(later + 1_000_000_000)
    assert b2 - b1 == pytest.approx(HOLDOVER_DRIFT_PPB)  # 50 ppm of 1 s = 50 µs
    # holdover never narrows the bound; the stale OK verdict read on the hot path already agrees with it
    assert b1 >= good.bound_at(later) == pytest.approx(b1)
    assert good.quality_at(later) is ClockQuality.DEGRADED
    void = NOW_MONO + int(Limits().void_after_s * 1e9) + 1
    assert _eval(loss, last=held, mono=void).quality is ClockQuality.UNKNOWN
    assert held.quality_at(void) is ClockQuality.UNKNOWN and math.isinf(held.bound_at(void))


@pytest.mark.parametrize("age_s", [-37.0, -1.0])
def test_sync_in_the_future_is_inconsistent_evidence_not_fresh(age_s: float) -> None:
    """ptp4l on software timestamps (CLOCK_REALTIME) while we read an undisciplined PHC: ingress is "in the future".

    Clamping that age to 0 used to make it the freshest possible sync: OK with a ~1 µs bound whatever the gap.
    """
    health = _eval(_status(age_s=age_s))
    assert health.quality is ClockQuality.UNKNOWN
    assert math.isinf(health.bound_at(NOW_MONO))
    assert "future" in health.reason
    assert health.evidence["sync_age_s"] == pytest.approx(age_s, abs=1e-3)


def test_sync_slightly_in_the_future_is_jitter() -> None:
    """Within the tolerance (scheduling between the ptp4l answer and our reference read) it is fresh."""
    assert _eval(_status(age_s=-0.05)).quality is ClockQuality.OK


def test_ok_turns_holdover_on_the_hot_path_without_update() -> None:
    """No update() after an OK verdict (background=False, starved refresher): past the stale limit the
    verdict read by now() is DEGRADED and grows at the holdover drift from the anchor, as spec §PTP quality says."""
    ok = _eval(_status(age_s=0.0, delay=0.0, offset=100))
    assert ok.quality is ClockQuality.OK
    stale_s = max(Limits().stale_min_s, Limits().stale_intervals * 2.0**-3)
    just_fresh = NOW_MONO + int(stale_s * 1e9) - 1
    assert ok.quality_at(just_fresh) is ClockQuality.OK
    assert ok.bound_at(just_fresh) == pytest.approx(100 + LOCKED_DRIFT_PPB * stale_s, rel=1e-6)
    later = NOW_MONO + 30_000_000_000
    assert ok.quality_at(later) is ClockQuality.DEGRADED
    assert ok.bound_at(later) == pytest.approx(100 + HOLDOVER_DRIFT_PPB * 30, rel=1e-6)  # ~1.5 ms, not 31 µs
    assert "holdover" in ok.as_dict(later)["reason"]
    void = NOW_MONO + int(Limits().void_after_s * 1e9) + 1
    assert ok.quality_at(void) is ClockQuality.UNKNOWN


def _props(ts: int, iface: str = "eth3") -> PortProperties:
    # PORT_PROPERTIES_NP data as ptp4l sends it: portIdentity, port_state, timestamping, PTPText interface.
    raw = bytes.fromhex("a287e4fffe79f8a2") + (1).to_bytes(2, "big") + bytes([9, ts, len(iface)]) + iface.encode()
    return PortProperties.parse(raw)


def test_port_properties_parse_and_empty_get() -> None:
    props = _props(1)
    assert (props.port_number, props.port_state, props.timestamping, props.interface) == (
        1,
        "SLAVE",
        "HARDWARE",
        "eth3",
    )
    assert props.hardware and not _props(0).hardware and _props(0).timestamping == "SOFTWARE"
    client = Ptp4lClient("/nonexistent")
    try:
        req = client._request(MgmtId.PORT_PROPERTIES_NP)
    finally:
        client.close()
    assert req[48:54] == bytes.fromhex("00010002c004") and len(req) == 54  # length-2 TLV, as pmc -z sends


def _iface_phc(iface: str) -> str:
    if iface == "lo":
        raise ClockError(95, "interface 'lo' has no PTP hardware clock", iface)
    return {"eth3": "/dev/ptp3", "eth0": "/dev/ptp0"}[iface]


@pytest.mark.parametrize(
    ("props", "problem"),
    [
        (_props(1, "eth3"), None),
        (_props(3, "eth3"), None),  # one-step is hardware timestamping too
        (_props(0, "eth3"), "SOFTWARE timestamping"),
        (_props(1, "eth0"), "disciplines /dev/ptp0"),
        (_props(1, "lo"), "cannot find the PHC"),
        (None, "cannot confirm"),
    ],
)
def test_ptp4l_must_discipline_this_phc(props: PortProperties | None, problem: str | None) -> None:
    got = discipline_problem(props, "/dev/ptp3", _iface_phc)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got
