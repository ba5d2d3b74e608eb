"""Is ptp4l's answer physically possible and self-consistent? (spec/clocks.md §5.1 Sanity)

ptp4l's management answers are evidence, and evidence can be false: a fake or
buggy daemon on the socket, a misconfigured PHY correction, a bit flip. A PHC
source claiming OK ±0 ns because a daemon reported a path delay of −7×10^13 ns
is worse than one saying UNKNOWN. Each rule below names a field, the range or
relation it must keep, and where that comes from; ``evaluate`` turns a broken
one into UNKNOWN with the rule as the reason.
"""

from __future__ import annotations

from .ptp4l import Ptp4lStatus

__all__ = [
    "MAX_PATH_DELAY_NS",
    "MAX_STEPS_REMOVED",
    "NEGATIVE_DELAY_TOLERANCE_NS",
    "OFFSET_AGREEMENT_NS",
    "SYNC_INTERVAL_RANGE",
    "implausible",
    "interface_name_problem",
]

#: A mean path delay is half a round trip over wires and switches; 100 ms is
#: light through 20,000 km of fibre, half the planet. More is not a path.
MAX_PATH_DELAY_NS = 100_000_000
#: A mean path delay cannot be negative; software timestamps jitter by a few
#: µs at most (the live veth tests see +10..50 µs), so below −1 µs the
#: timestamps behind it are broken or false, and so is any bound made from them.
NEGATIVE_DELAY_TOLERANCE_NS = 1_000
#: logSyncInterval (log2 s) from 128/s (gPTP, telecom profiles) to one per
#: 16 s: the extremes of the IEEE 1588 profiles. Outside it our stale window
#: (4 × 2^interval) means nothing (2^127 s would keep any answer "fresh").
SYNC_INTERVAL_RANGE = (-7, 4)
#: IEEE 1588 §9.3.2.5: an Announce whose stepsRemoved is 255 or more is not
#: qualified, so a slave (stepsRemoved = 1 + its master's) is 1..255 steps away.
MAX_STEPS_REMOVED = 255
#: TIME_STATUS_NP.master_offset and CURRENT_DATA_SET.offsetFromMaster are
#: the same servo value in linuxptp (clock.c); our two GETs may straddle a
#: Sync, so they may differ by a servo step: up to the locked limit (20 µs)
#: plus half the larger of the two.
OFFSET_AGREEMENT_NS = 20_000
#: clockClass 255 is "slave-only" (IEEE 1588 Table 5): such a clock never becomes a grandmaster.
SLAVE_ONLY_CLOCK_CLASS = 255
#: Linux IFNAMSIZ is 16 with the terminating NUL (dev_valid_name in net/core/dev.c).
_IFNAME_MAX = 15


def implausible(status: Ptp4lStatus) -> str | None:
    """The first rule a SLAVE/UNCALIBRATED answer breaks, in words; None when it is plausible."""
    cur, ts, port, parent = status.current, status.time_status, status.port, status.parent
    delay = cur.mean_path_delay_ns
    if delay < -NEGATIVE_DELAY_TOLERANCE_NS:
        return f"mean path delay {delay:.0f} ns is negative (below -{NEGATIVE_DELAY_TOLERANCE_NS} ns: impossible)"
    if delay > MAX_PATH_DELAY_NS:
        return f"mean path delay {delay:.0f} ns is over {MAX_PATH_DELAY_NS} ns (100 ms: no network path is that long)"
    if port is not None and not SYNC_INTERVAL_RANGE[0] <= port.log_sync_interval <= SYNC_INTERVAL_RANGE[1]:
        low, high = SYNC_INTERVAL_RANGE
        return f"logSyncInterval {port.log_sync_interval} is outside {low}..{high} (128 per s .. one per 16 s)"
    if not 1 <= cur.steps_removed <= MAX_STEPS_REMOVED:
        return f"stepsRemoved {cur.steps_removed} for a port hearing a master (must be 1..{MAX_STEPS_REMOVED})"
    a, b = ts.master_offset_ns, cur.offset_from_master_ns
    if abs(a - b) > OFFSET_AGREEMENT_NS + max(abs(a), abs(b)) / 2:
        return f"TIME_STATUS_NP offset {a} ns and CURRENT_DATA_SET offset {b:.0f} ns disagree"
    if ts.gm_identity != parent.gm_identity:
        return f"grandmaster {ts.gm_identity} in TIME_STATUS_NP but {parent.gm_identity} in PARENT_DATA_SET"
    if ts.gm_identity in ("000000.0000.000000", "ffffff.ffff.ffffff"):
        return f"grandmaster identity {ts.gm_identity} is not a clock (all zeros or all ones)"
    if parent.gm_clock_class == SLAVE_ONLY_CLOCK_CLASS:
        return f"grandmaster clockClass {SLAVE_ONLY_CLOCK_CLASS} is slave-only: it cannot be a grandmaster"
    return None


def interface_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a Linux network interface name (None when it can).

    ptp4l names its ports by interface; a "port" called ``/dev/ptp0`` would
    otherwise be mistaken for a PHC path by a lookup that accepts either.
    """
    if not name or len(name) > _IFNAME_MAX or name in (".", "..") or any(c in name for c in "/: \t\n\0"):
        return (
            f"ptp4l reports port interface {name!r}, which is not a network interface name "
            f"(1..{_IFNAME_MAX} characters, no '/', ':' or spaces)"
        )
    return None
