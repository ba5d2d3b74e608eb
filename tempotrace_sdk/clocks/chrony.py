"""The CPU clock's error bound from chronyd, the way AWS ClockBound computes it.

Rules and constants are in spec/clocks.md §3.1, with their sources. Summary:

- bound at a report = |offset| + root dispersion + root delay / 2
  (ClockBound ``extract_error_bound_nsec``; chronyd's root dispersion already
  grew from its last clock update to the moment of the report);
- it keeps growing after the report: while synchronised at chrony's own rate
  (skew + |residual frequency| + max clock error, reference.c
  ``get_root_dispersion``), in holdover at HOLDOVER_DRIFT_PPB from the last
  synchronised report (ClockBound's ``bound + max_drift × (now − as_of)``);
- synchronised: leap status 0..2 and chronyd updated the clock within the
  last 8 update intervals (ClockBound: an empty 8-wide reachability
  register means free running) → OK;
- free running (old updates, leap status 3 after having been synchronised,
  chronyd unreachable for less than RESTART_GRACE_S) → DEGRADED, holdover;
- nothing synchronised yet, chronyd serving only its own clock, absent,
  disabled, or holdover older than VOID_AFTER_S → no verdict: the caller
  uses the kernel rule and gives ``reason``;
- an answer no chronyd could give (``chronysanity``: a negative delay,
  dispersion or skew, stratum outside 1..15, a reference time in the
  future) → no verdict, and the holdover anchor is dropped.

``ChronyHealth.poll()`` does the socket exchange (refresher thread only);
``verdict_at()`` is arithmetic on the last poll, safe anywhere.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from ..errors import ClockError
from ..wire.layout import ClockQuality
from .chrony_candm import LEAP_NAMES, REFID_LOCAL, ChronyTracking
from .chrony_client import DEFAULT_TIMEOUT_S, ChronyTarget, query_tracking, target
from .chronysanity import implausible
from .ptpquality import HOLDOVER_DRIFT_PPB, LOCKED_DRIFT_PPB

__all__ = [
    "EMPTY_REGISTER_UPDATES",
    "MAX_DRIFT_ENV",
    "MIN_POLL_INTERVAL_S",
    "RESTART_GRACE_S",
    "VOID_AFTER_S",
    "ChronyHealth",
    "ChronyVerdict",
    "report_bound_ns",
    "shared_health",
]

#: chronyd's ``maxclockerror`` as configured on this host (ppm); default 1, chronyd's own default.
MAX_DRIFT_ENV = "TEMPOTRACE_CHRONY_MAX_DRIFT_PPM"
#: ClockBound: chronyd keeps saying "synchronised" long after its sources went
#: silent; 8 update intervals empty its 8-wide reachability register.
EMPTY_REGISTER_UPDATES = 8
#: ClockBound CHRONY_RESTART_GRACE_PERIOD: an unanswered poll this soon after
#: a synchronised one is a chronyd restart, not a lost clock.
RESTART_GRACE_S = 5.0
#: ClockBound void_after: past this the linear drift model is not trusted.
VOID_AFTER_S = 1000.0
#: Several CpuClocks share one chronyd: ask at most this often.
MIN_POLL_INTERVAL_S = 0.5


def report_bound_ns(t: ChronyTracking) -> float:
    """ClockBound's bound at the moment of the report: |offset| + root dispersion + root delay / 2, in ns."""
    return (abs(t.current_correction_s) + t.root_dispersion_s + t.root_delay_s / 2) * 1e9


@dataclass(frozen=True, slots=True)
class _Poll:
    as_of_ns: int  # CLOCK_MONOTONIC taken before asking (ClockBound's as_of)
    wall_s: float  # time.time() then, to age chronyd's ref_time
    tracking: ChronyTracking | None
    error: str  # why there is no tracking ("" when there is)


@dataclass(frozen=True, slots=True)
class _Anchor:
    """The last synchronised report: the bound then, and how fast it grows while still locked."""

    as_of_ns: int
    bound_ns: float
    locked_rate_ppb: float
    reference: str


#: (last answer, last synchronised answer): one moment's evidence.
Seen = tuple[_Poll | None, _Anchor | None]


@dataclass(frozen=True, slots=True)
class ChronyVerdict:
    """``quality`` None: chrony gives no evidence, use the kernel rule (``reason`` says why)."""

    quality: ClockQuality | None
    bound_ns: float
    reason: str
    #: synchronised, free running (holdover), not synchronised, no reference time,
    #: local reference, implausible, absent (no answer), void (holdover too old), disabled
    status: str


def _max_drift_ppb() -> float:
    raw = os.environ.get(MAX_DRIFT_ENV, "").strip()
    if not raw:
        return float(LOCKED_DRIFT_PPB)
    try:
        ppm = float(raw)
    except ValueError:
        raise ValueError(f"{MAX_DRIFT_ENV}={raw!r}: must be a number of ppm (chronyd's maxclockerror)") from None
    if not 0 <= ppm < 1e6 or ppm != ppm:
        raise ValueError(f"{MAX_DRIFT_ENV}={raw!r}: must be 0..1000000 ppm")
    return ppm * 1000


def _us(ns: float) -> str:
    return f"{ns / 1000:.1f} µs"


class ChronyHealth:
    """What chronyd last said, and the bound it supports at any later moment."""

    def __init__(self, where: ChronyTarget | None = None, *, max_drift_ppb: float | None = None) -> None:
        self.where = where if where is not None else target()
        self.max_drift_ppb = max_drift_ppb if max_drift_ppb is not None else _max_drift_ppb()
        # (last answer, last synchronised answer) as one value: readers on other threads
        # (an inline CPU re-snapshot) see both from the same moment.
        self._seen: Seen = (None, None)
        self._lock = threading.Lock()
        _ALL.add(self)

    @property
    def enabled(self) -> bool:
        return self.where.mode != "off"

    def poll(self, timeout_s: float = DEFAULT_TIMEOUT_S, *, force: bool = False) -> None:
        """Ask chronyd once (bounded by ``timeout_s``); skipped if asked less than MIN_POLL_INTERVAL_S ago."""
        if not self.enabled or not self._lock.acquire(blocking=False):
            return  # another thread is asking right now: its answer will do
        try:
            last = self._seen[0]
            as_of = time.monotonic_ns()
            if not force and last is not None and as_of - last.as_of_ns < MIN_POLL_INTERVAL_S * 1e9:
                return
            wall = time.time()
            try:
                self.observe(query_tracking(self.where, timeout_s), as_of, wall)
            except ClockError as err:
                self.observe(None, as_of, wall, error=str(err.strerror or err))
            except Exception as err:  # a bug of ours must not stop the clock: say it, use the kernel rule
                self.observe(None, as_of, wall, error=f"{type(err).__name__}: {err}")
        finally:
            self._lock.release()

    def observe(self, tracking: ChronyTracking | None, as_of_ns: int, wall_s: float, *, error: str = "") -> None:
        """Record one answer (or, with ``tracking`` None, why there was none) asked at CLOCK_MONOTONIC ``as_of_ns``.

        ``poll()`` calls it; tests replay recorded answers through it.
        """
        anchor = self._seen[1]
        status = self._status(tracking, wall_s) if tracking is not None else ""
        if status == "implausible":
            anchor = None  # no holdover from a daemon caught lying
        if tracking is not None and status == "synchronised":
            t = tracking
            rate = self.max_drift_ppb + (abs(t.skew_ppm) + abs(t.resid_freq_ppm)) * 1000
            anchor = _Anchor(as_of_ns, report_bound_ns(t), rate, t.ref_name or f"{t.ref_id:08X}")
        self._seen = (_Poll(as_of_ns, wall_s, tracking, error if tracking is None else ""), anchor)

    @staticmethod
    def _status(t: ChronyTracking, wall_s: float) -> str:
        if t.ref_id == REFID_LOCAL:
            return "local reference"
        if t.leap_status not in (0, 1, 2):
            return "not synchronised"
        if t.ref_time_s <= 0:
            return "no reference time"
        if implausible(t, wall_s) is not None:
            return "implausible"
        if wall_s - t.ref_time_s > EMPTY_REGISTER_UPDATES * t.last_update_interval_s:
            return "free running"
        return "synchronised"

    @property
    def seen(self) -> Seen:
        """What chronyd last said: pass it to ``verdict_at``/``describe`` to judge one moment's data twice."""
        return self._seen

    def verdict_at(self, mono_ns: int, seen: Seen | None = None) -> ChronyVerdict:
        """The verdict at CLOCK_MONOTONIC ``mono_ns`` (no I/O) from ``seen`` (default: the latest)."""
        last, anchor = self._seen if seen is None else seen
        if not self.enabled:
            return ChronyVerdict(None, math.inf, self.where.describe(), "disabled")
        if last is None:
            return ChronyVerdict(None, math.inf, "chronyd not asked yet", "absent")
        if last.tracking is None:
            why = f"chronyd unreachable ({last.error})"
            if anchor is not None and (last.as_of_ns - anchor.as_of_ns) / 1e9 < RESTART_GRACE_S:
                return self._holdover(anchor, mono_ns, f"{why}, within the {RESTART_GRACE_S:g} s restart grace")
            return ChronyVerdict(None, math.inf, why, "absent")
        t = last.tracking
        status = self._status(t, last.wall_s)
        if status == "implausible":
            rule = implausible(t, last.wall_s)
            return ChronyVerdict(None, math.inf, f"implausible chronyd answer: {rule}", status)
        if status == "synchronised" and anchor is not None:  # observe() anchored this very report
            silent_s = (mono_ns - last.as_of_ns) / 1e9
            if silent_s < RESTART_GRACE_S:  # our refresher may stall; chronyd's word holds this long
                bound = anchor.bound_ns + anchor.locked_rate_ppb * max(0.0, silent_s)
                reason = (
                    f"chronyd synchronised to {anchor.reference} (stratum {t.stratum}): bound {_us(bound)} = "
                    f"|offset| {_us(abs(t.current_correction_s) * 1e9)} + root dispersion "
                    f"{_us(t.root_dispersion_s * 1e9)} + root delay/2 {_us(t.root_delay_s * 5e8)} + "
                    f"{anchor.locked_rate_ppb / 1000:.2f} ppm × {silent_s:.1f} s of report age"
                )
                return ChronyVerdict(ClockQuality.OK, bound, reason, "synchronised")
            return self._holdover(anchor, mono_ns, f"no chronyd report for {silent_s:.1f} s")
        why = {
            "local reference": f"chronyd serves only its own clock (local reference, stratum {t.stratum})",
            "not synchronised": f"chronyd reports leap status {LEAP_NAMES.get(t.leap_status, t.leap_status)}",
            "no reference time": "chronyd has not updated the clock yet (no reference time)",
            "free running": (
                f"chronyd's last clock update was {last.wall_s - t.ref_time_s:.1f} s ago, more than "
                f"{EMPTY_REGISTER_UPDATES} update intervals ({t.last_update_interval_s:.1f} s)"
            ),
        }[status]
        if anchor is not None:
            return self._holdover(anchor, mono_ns, why)
        return ChronyVerdict(None, math.inf, f"{why}; no synchronised report seen since this process started", status)

    def _holdover(self, anchor: _Anchor, mono_ns: int, why: str) -> ChronyVerdict:
        age_s = max(0.0, (mono_ns - anchor.as_of_ns) / 1e9)
        if age_s >= VOID_AFTER_S:
            return ChronyVerdict(None, math.inf, f"{why}; last synchronised report over {VOID_AFTER_S:g} s old", "void")
        rate = max(HOLDOVER_DRIFT_PPB, anchor.locked_rate_ppb)
        bound = anchor.bound_ns + rate * age_s
        reason = (
            f"holdover: {why}; bound {_us(bound)} = {_us(anchor.bound_ns)} at the last synchronised report "
            f"({anchor.reference}) + {rate / 1000:g} ppm × {age_s:.1f} s"
        )
        return ChronyVerdict(ClockQuality.DEGRADED, bound, reason, "free running")

    def describe(self, mono_ns: int | None = None, seen: Seen | None = None) -> dict[str, Any]:
        """JSON-ready: where we ask, chronyd's tracking figures (as ``chronyc tracking``) and the verdict."""
        mono = time.monotonic_ns() if mono_ns is None else mono_ns
        seen = self._seen if seen is None else seen
        verdict = self.verdict_at(mono, seen)
        last = seen[0]
        out: dict[str, Any] = {
            "socket": self.where.describe(),
            "status": verdict.status,
            "used": verdict.quality is not None,
            "reason": verdict.reason,
            "bound_ns": None if verdict.quality is None else math.ceil(verdict.bound_ns),
            "max_drift_ppm": self.max_drift_ppb / 1000,
        }
        if last is not None:
            out["asked_s_ago"] = round((mono - last.as_of_ns) / 1e9, 3)
            if last.tracking is not None:
                out["tracking"] = last.tracking.as_dict()
                out["ref_time_age_s"] = round(last.wall_s - last.tracking.ref_time_s, 3)
            else:
                out["error"] = last.error
        return out


_SHARED: ChronyHealth | None = None
_SHARED_LOCK = threading.Lock()
_ALL: weakref.WeakSet[ChronyHealth] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A poll in flight on the refresher thread at fork time would leave its lock held
    # forever in the child, which then could never ask chronyd again.
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()
    for health in list(_ALL):
        health._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def shared_health() -> ChronyHealth:
    """The process's one view of the local chronyd (from $TEMPOTRACE_CHRONY), made on first use."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = ChronyHealth()
        return _SHARED
