"""Readings of one host clock, compared by their difference against a relative bound (spec/analysis.md §2.1).

Processes on one host read the kernel's one clock: its error against TAI is common to all of them, so
two of their readings differ by the time between them, whatever the absolute 3σ bound (UNKNOWN on a
host without chrony or PTP). The SDK writes the clock's **domain** on the Resource
(``tempotrace.clock.domain``, ``.epoch_ns``, ``.epoch_bound_ns``, ``.read_ns``; spec/semantic-conventions
§1.2, spec/clocks.md) and marks a span whose readings may straddle a step of the clock
(``tempotrace.clock.stepped``) or that were taken in a later epoch (its own ``epoch_ns``).

Two readings are in one domain when the keys are equal and the epochs can be one constant (their
measurements meet). The room between them is their difference less the relative bound:

    slack = read_a + read_b + |epoch_a - epoch_b| + bound_a + bound_b

(each read_ns already holds its process's read delay and the widest epoch measurement its checks
accept; the epoch terms cover a step too small for the two measurements to tell apart).
"""

from __future__ import annotations

import msgspec

__all__ = ["Domain", "comparable", "relative_gap", "relative_slack"]


class Domain(msgspec.Struct, frozen=True, gc=False):
    """What a stamp says about the clock it was read from: the domain's key, the epoch it was read in
    (CLOCK_TAI − CLOCK_MONOTONIC, within ``bound_ns``) and the relative bound of one reading."""

    key: str
    epoch_ns: int
    bound_ns: int
    read_ns: int


def comparable(a: Domain, b: Domain) -> bool:
    """One clock in one epoch, as far as the two measurements can tell."""
    return a.key == b.key and abs(a.epoch_ns - b.epoch_ns) <= a.bound_ns + b.bound_ns


def relative_slack(a: Domain, b: Domain) -> int:
    """The relative bound between a reading in ``a`` and one in ``b`` (comparable domains)."""
    return a.read_ns + b.read_ns + abs(a.epoch_ns - b.epoch_ns) + a.bound_ns + b.bound_ns


def relative_gap(pa: int, a: Domain, pb: int, b: Domain) -> int:
    """> 0: reading pa lies before pb by that much beyond the relative bound; < 0: after; 0: too close
    to tell, or not one domain."""
    if not comparable(a, b):
        return 0
    slack = relative_slack(a, b)
    d = pb - pa
    if d > slack:
        return d - slack
    if -d > slack:
        return d + slack
    return 0


#: One Domain object per distinct value (every span of a process names the same): bounded like values._CANON.
_KNOWN: dict[tuple[str, int, int, int], Domain] = {}
_MAX_KNOWN = 1 << 16


def domain_of(key: str | None, epoch_ns: int | None, bound_ns: int | None, read_ns: int | None) -> Domain | None:
    """The Domain the four attributes name, None unless all four are there."""
    if key is None or epoch_ns is None or bound_ns is None or read_ns is None:
        return None
    values = (key, epoch_ns, bound_ns, read_ns)
    known = _KNOWN.get(values)
    if known is None:
        known = Domain(*values)
        if len(_KNOWN) < _MAX_KNOWN:
            _KNOWN[values] = known
    return known


def claimed_bounds(a_uncertainty: int, a: Domain | None, b_uncertainty: int, b: Domain | None) -> tuple[int, int]:
    """The bounds two readings were ordered by: their relative bounds within one domain (an UNKNOWN clock
    on a shared kernel claimed no absolute bound, so a violation is of the relative one), else their own."""
    if a is not None and b is not None and comparable(a, b):
        return a.read_ns, b.read_ns
    return a_uncertainty, b_uncertainty
