"""From ptp4l's answers to a quality and a bound that grows with the age of the evidence.

Rules and constants are in spec/clocks.md §PTP quality, with their sources.
Summary:
- measured error = |master_offset| + |mean_path_delay| / 2 (path asymmetry
  can hide up to half the delay, the ClockBound "root delay / 2" term);
- UNKNOWN (implausible): an answer from a port hearing a master that breaks
  a sanity rule of ``ptpsanity`` (negative or huge path delay, offsets that
  disagree, ...), with that rule as the reason;
- OK: port SLAVE, grandmaster present, |offset| <= OFFSET_OK_LIMIT_NS, sync
  data fresher than the stale limit; bound = measured + LOCKED_DRIFT × age;
- DEGRADED (measuring): grandmaster present and fresh sync data, but the
  servo is not locked (UNCALIBRATED) or the offset is over the limit;
  bound = measured + HOLDOVER_DRIFT × age;
- DEGRADED (holdover): no fresh measurement (grandmaster lost, port not
  SLAVE/UNCALIBRATED, stale data, ptp4l unreachable) but a measurement less
  than VOID_AFTER_S old exists; bound = that measurement's bound +
  HOLDOVER_DRIFT × time since it;
- UNKNOWN: nothing measured within VOID_AFTER_S.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ClockError
from ..wire.layout import ClockQuality
from .ptp4l import DEFAULT_UDS, PortProperties, Ptp4lStatus, query
from .ptpsanity import implausible, interface_name_problem

__all__ = [
    "FUTURE_TOLERANCE_S",
    "HOLDOVER_DRIFT_PPB",
    "LOCKED_DRIFT_PPB",
    "OFFSET_OK_LIMIT_NS",
    "STALE_MIN_S",
    "STALE_SYNC_INTERVALS",
    "VOID_AFTER_S",
    "Limits",
    "Ptp4lHealth",
    "SyncHealth",
    "discipline_problem",
    "evaluate",
]

#: ptp4l's default first_step_threshold (20 µs): offsets beyond it make the
#: servo step, so a locked servo keeps |offset| under it.
OFFSET_OK_LIMIT_NS = 20_000
#: Free-running oscillator bound: ClockBound's recommended --max-drift-rate 50 PPM.
HOLDOVER_DRIFT_PPB = 50_000
#: While the servo is locked it corrects frequency every sync; the residual
#: between updates is bounded by chrony's default maxclockerror (1 PPM).
LOCKED_DRIFT_PPB = 1_000
#: Sync data is stale after this many sync intervals (at least STALE_MIN_S);
#: ptp4l's default announceReceiptTimeout is 3 intervals, we allow one more.
STALE_SYNC_INTERVALS = 4
STALE_MIN_S = 1.0
#: After this long without a measurement we claim nothing (UNKNOWN).
VOID_AFTER_S = 60.0
#: An ingress time this far in ptp4l's reference clock's future is not
#: scheduling jitter but a different timescale (software timestamps on
#: CLOCK_REALTIME against a PHC, an undisciplined PHC): inconsistent evidence.
FUTURE_TOLERANCE_S = 0.1


@dataclass(frozen=True)
class Limits:
    offset_ok_ns: float = OFFSET_OK_LIMIT_NS
    holdover_drift_ppb: float = HOLDOVER_DRIFT_PPB
    locked_drift_ppb: float = LOCKED_DRIFT_PPB
    stale_intervals: float = STALE_SYNC_INTERVALS
    stale_min_s: float = STALE_MIN_S
    void_after_s: float = VOID_AFTER_S
    future_tolerance_s: float = FUTURE_TOLERANCE_S


@dataclass(frozen=True)
class SyncHealth:
    """The verdict at one moment; the bound keeps growing after it at ``drift_ppb``.

    ``anchor_mono_ns`` is the CLOCK_MONOTONIC instant the bound refers to
    (the last sync measurement); ``void_mono_ns`` is when it turns UNKNOWN.
    ``stale_mono_ns`` is when the measurement stops being fresh: past it the
    verdict is holdover (DEGRADED, ``stale_drift_ppb`` from the anchor) even
    if nobody called ``update()`` since (a starved refresher must not keep an
    OK at the locked drift rate). None: the verdict is already holdover.
    """

    quality: ClockQuality
    bound_ns: float
    drift_ppb: float
    anchor_mono_ns: int
    void_mono_ns: int
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    stale_mono_ns: int | None = None
    stale_drift_ppb: float = HOLDOVER_DRIFT_PPB

    def bound_at(self, mono_ns: int) -> float:
        """Bound at a later monotonic instant (inf when UNKNOWN or void)."""
        if self.quality is ClockQuality.UNKNOWN or mono_ns > self.void_mono_ns:
            return math.inf
        drift = self.drift_ppb
        if self.stale_mono_ns is not None and mono_ns > self.stale_mono_ns:
            drift = max(drift, self.stale_drift_ppb)
        return self.bound_ns + drift * max(0, mono_ns - self.anchor_mono_ns) / 1e9

    def quality_at(self, mono_ns: int) -> ClockQuality:
        if mono_ns > self.void_mono_ns:
            return ClockQuality.UNKNOWN
        if self.quality is ClockQuality.OK and self.stale_mono_ns is not None and mono_ns > self.stale_mono_ns:
            return ClockQuality.DEGRADED
        return self.quality

    def as_dict(self, mono_ns: int | None = None) -> dict[str, Any]:
        now = time.monotonic_ns() if mono_ns is None else mono_ns
        bound = self.bound_at(now)
        return {
            "quality": self.quality_at(now).name,
            "bound_ns": None if math.isinf(bound) else round(bound, 1),
            "drift_ppb": self.drift_ppb,
            "evidence_age_s": round((now - self.anchor_mono_ns) / 1e9, 3),
            "reason": self.reason
            if self.stale_mono_ns is None or now <= self.stale_mono_ns
            else f"holdover: no fresh sync data since the last update ({self.reason})",
            "evidence": self.evidence,
        }


_NEVER = SyncHealth(ClockQuality.UNKNOWN, math.inf, 0.0, 0, -1, "no PTP measurement yet")


def _unknown(reason: str, evidence: dict[str, Any] | None = None) -> SyncHealth:
    return SyncHealth(ClockQuality.UNKNOWN, math.inf, 0.0, 0, -1, reason, evidence or {})


def _holdover(last: SyncHealth | None, now_mono: int, why: str, limits: Limits, ev: dict[str, Any]) -> SyncHealth:
    if last is None or last.quality is ClockQuality.UNKNOWN:
        return _unknown(f"{why}; no earlier measurement to hold over from", ev)
    if now_mono > last.void_mono_ns:
        return _unknown(f"{why}; last measurement older than {limits.void_after_s:g} s (void)", ev)
    # Re-anchor at the last measurement with the free-running drift rate.
    # (Its bound at its own anchor; a locked-drift term accrued since then is
    # covered by the larger holdover drift over the same interval.)
    bound = last.bound_ns
    return SyncHealth(
        ClockQuality.DEGRADED,
        bound,
        limits.holdover_drift_ppb,
        last.anchor_mono_ns,
        last.void_mono_ns,
        f"holdover: {why}",
        ev,
    )


def evaluate(
    status: Ptp4lStatus | None,
    *,
    now_mono_ns: int,
    reference_now_ns: int | None,
    last: SyncHealth | None = None,
    error: str = "",
    limits: Limits = Limits(),
) -> SyncHealth:
    """Map one ptp4l answer (or its absence) to a SyncHealth (module doc rules).

    ``reference_now_ns`` is "now" on the clock ptp4l timestamps with (the
    PHC for hardware timestamping, CLOCK_REALTIME for software), so that
    TIME_STATUS_NP.ingress_time gives the age of the last Sync.
    """
    if status is None:
        return _holdover(last, now_mono_ns, f"ptp4l not reachable ({error or 'no answer'})", limits, {})
    ts, port, cur = status.time_status, status.port, status.current
    state = port.port_state if port else "NO_PORT"
    interval_s = 2.0**port.log_sync_interval if port else 1.0
    stale_s = max(limits.stale_min_s, limits.stale_intervals * interval_s)
    age_s = math.inf
    if ts.ingress_time_ns > 0 and reference_now_ns is not None:
        age_s = (reference_now_ns - ts.ingress_time_ns) / 1e9
    offset = abs(ts.master_offset_ns)
    measured = offset + abs(cur.mean_path_delay_ns) / 2
    ev = {
        "port_state": state,
        "gm_present": ts.gm_present,
        "gm_identity": ts.gm_identity,
        "master_offset_ns": ts.master_offset_ns,
        "mean_path_delay_ns": cur.mean_path_delay_ns,
        "sync_age_s": None if math.isinf(age_s) else round(age_s, 3),
        "stale_after_s": stale_s,
        "gm_clock_class": status.parent.gm_clock_class,
    }
    if ts.gm_present and state in ("SLAVE", "UNCALIBRATED"):
        problem = implausible(status)
        if problem is not None:
            return _unknown(f"implausible ptp4l answer: {problem}", ev)
    if age_s < -limits.future_tolerance_s:
        # The last Sync "arrived" in the future of the clock we read: ptp4l
        # timestamps on another timescale than the one we compare with, so
        # neither its age nor the PHC's error can be known from this answer.
        ev["sync_age_s"] = round(age_s, 3)
        return _unknown(
            f"inconsistent evidence: last Sync ingress is {-age_s:.3f} s in the future of the reference clock "
            "(ptp4l timestamping on another clock than the one read?)",
            ev,
        )
    age_s = max(0.0, age_s)
    fresh = age_s <= stale_s
    if not (ts.gm_present and fresh and state in ("SLAVE", "UNCALIBRATED")):
        if not ts.gm_present:
            why = "grandmaster lost (gmPresent false)"
        elif state not in ("SLAVE", "UNCALIBRATED"):
            why = f"port {state}"
        else:
            why = "no Sync received yet" if math.isinf(age_s) else f"sync data stale ({age_s:.2f} s > {stale_s:g} s)"
        return _holdover(last, now_mono_ns, why, limits, ev)
    anchor = now_mono_ns - int(age_s * 1e9)
    void = anchor + int(limits.void_after_s * 1e9)
    stale = anchor + int(stale_s * 1e9)
    if state == "SLAVE" and offset <= limits.offset_ok_ns:
        reason = f"port SLAVE to {ts.gm_identity}, |offset| {offset} ns, path delay {cur.mean_path_delay_ns:.0f} ns"
        return SyncHealth(ClockQuality.OK, measured, limits.locked_drift_ppb, anchor, void, reason, ev,
                          stale, limits.holdover_drift_ppb)  # fmt: skip
    why = (
        f"port {state}: servo not locked"
        if state != "SLAVE"
        else f"|offset| {offset} ns over {limits.offset_ok_ns:g} ns"
    )
    return SyncHealth(ClockQuality.DEGRADED, measured, limits.holdover_drift_ppb, anchor, void, why, ev)


def discipline_problem(props: PortProperties | None, expect_phc: str, iface_phc: Callable[[str], str]) -> str | None:
    """Why ptp4l's answers say nothing about the PHC at ``expect_phc``, or None when its port disciplines it.

    ptp4l disciplines the PHC of its interface only with hardware timestamping;
    with software timestamping it steers CLOCK_REALTIME and its offsets and
    ingress times are about that clock. ``iface_phc`` maps an interface name to
    its /dev/ptpN (ETHTOOL_GET_TS_INFO) and raises ClockError/OSError when it has none.
    """
    if props is None:
        return "cannot confirm ptp4l disciplines this PHC (no PORT_PROPERTIES_NP answer)"
    bad_name = interface_name_problem(props.interface)
    if bad_name is not None:
        return bad_name
    if not props.hardware:
        return (f"ptp4l port {props.interface or '?'} uses {props.timestamping} timestamping: "
                f"it disciplines the system clock, not {expect_phc}")  # fmt: skip
    try:
        theirs = iface_phc(props.interface)
    except OSError as err:
        return f"cannot find the PHC of ptp4l's interface {props.interface!r}: {err}"
    if os.path.realpath(theirs) != os.path.realpath(expect_phc):
        return f"ptp4l disciplines {theirs} (interface {props.interface}), not {expect_phc}"
    return None


class Ptp4lHealth:
    """Queries ptp4l and keeps the last measurement for holdover; ``update()`` never raises."""

    def __init__(
        self,
        uds_path: str = DEFAULT_UDS,
        *,
        reference_ns: Callable[[], int] = time.time_ns,
        limits: Limits = Limits(),
        timeout_s: float = 0.2,
        domain: int = 0,
        expect_phc: str | None = None,
        iface_phc: Callable[[str], str] | None = None,
    ) -> None:
        """``expect_phc`` (with ``iface_phc``): the /dev/ptpN whose error we judge;
        answers from a ptp4l that does not discipline it give UNKNOWN (see ``discipline_problem``)."""
        self.uds_path = uds_path
        self._reference_ns = reference_ns
        self.limits = limits
        self._timeout_s = timeout_s
        self._domain = domain
        self._expect_phc = expect_phc
        self._iface_phc = iface_phc
        self.health: SyncHealth = _NEVER
        self.last_status: Ptp4lStatus | None = None

    def update(self) -> SyncHealth:
        status: Ptp4lStatus | None
        error = ""
        try:
            status = query(self.uds_path, timeout_s=self._timeout_s, domain=self._domain)
            reference: int | None = self._reference_ns()
        except (ClockError, OSError) as err:
            status, reference, error = None, None, str(err)
        last = self.health if self.health.quality is not ClockQuality.UNKNOWN else None
        health = evaluate(status, now_mono_ns=time.monotonic_ns(), reference_now_ns=reference, last=last,
                          error=error, limits=self.limits)  # fmt: skip
        if status is not None and self._expect_phc is not None and self._iface_phc is not None:
            problem = discipline_problem(status.properties, self._expect_phc, self._iface_phc)
            if problem is not None:
                health = _unknown(problem, dict(health.evidence))
        self.last_status = status
        self.health = health
        return health
