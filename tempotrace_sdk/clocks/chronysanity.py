"""Is chronyd's TRACKING answer physically possible? (spec/clocks.md §3.2 Sanity)

What answers on chronyd's command socket is evidence, and evidence can be
false: the UDP fallback (127.0.0.1:323) can be bound by any process where
unprivileged ports start at 0 (many container runtimes), and a buggy build or
a bit flip can report anything. The bound is |correction| + root dispersion +
root delay / 2, so a root delay of −2 s cancels a 0.25 s correction into
"OK ±0 ns" for a clock 250 ms off. Each rule below names a field and what
chronyd itself can never report (chrony reference.c ``REF_SetReference``,
``REF_GetTrackingReport``); ``implausible`` returns the first one broken, in
words, and the answer then gives no verdict at all (no holdover either: a
daemon caught lying is not believed about the past).
"""

from __future__ import annotations

from .chrony_candm import ChronyTracking

__all__ = ["FUTURE_TOLERANCE_S", "MAX_STRATUM", "implausible"]

#: chronyd reports its last clock update fuzzed up to 1 s *earlier* (reference.c,
#: against the interleaved-mode estimate), never later; our wall time is read
#: before asking, and an exchange takes at most 0.25 s. A reference time more
#: than 1 s after our reading is in chronyd's future.
FUTURE_TOLERANCE_S = 1.0
#: chronyd's stratum is its source's + 1; NTP stratum 16 means unsynchronised,
#: 0 unspecified (RFC 5905 §7.3), so a synchronised chronyd is 1..15.
MAX_STRATUM = 15


def implausible(t: ChronyTracking, wall_s: float) -> str | None:
    """The first rule a synchronised-looking answer asked at ``time.time()`` = ``wall_s`` breaks; None if none."""
    if t.root_delay_s < 0:
        return f"root delay {t.root_delay_s:g} s is negative (a sum of round-trip delays cannot be)"
    if t.root_dispersion_s < 0:
        return f"root dispersion {t.root_dispersion_s:g} s is negative (an error bound cannot be)"
    if t.skew_ppm < 0:
        return f"skew {t.skew_ppm:g} ppm is negative (an error estimate cannot be)"
    if t.rms_offset_s < 0:
        return f"RMS offset {t.rms_offset_s:g} s is negative (a root mean square cannot be)"
    if not 1 <= t.stratum <= MAX_STRATUM:
        return f"stratum {t.stratum} for a synchronised clock (must be 1..{MAX_STRATUM})"
    if t.last_update_interval_s < 0:
        # 0 is honest: chronyd reports it until its second clock update.
        return f"update interval {t.last_update_interval_s:g} s is negative (a time between two updates)"
    ahead = t.ref_time_s - wall_s
    if ahead > FUTURE_TOLERANCE_S:
        return f"reference time {ahead:.1f} s in the future (chronyd's last clock update cannot be)"
    return None
