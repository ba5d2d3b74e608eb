"""What ``check_clocks()`` says about clocks that fall short: the gate's message, the warning (spec/torch.md §5.3).

Every rank holds the same judgement (the measurements are all_gathered), so
one rank says it: the group's rank 0. Three ranks printing the same verdict
read as three verdicts, and a thousand bury the one line that matters.

A clock falls short in two different ways, and the fix differs:

- it *claims* too little (a quality below ``require``, or no usable bound):
  nothing disciplines it, and the clock source says why (the kernel reports
  STA_UNSYNC and no chronyd answered; ptp4l lost its grandmaster). The fix is
  a time daemon, or not gating;
- it *lies*: measured against rank 0 it is further off than both claims
  allow. Its daemon reports a bound it does not keep; starting one fixes
  nothing.

Reasons and clock names come from outside (chronyd's answers, a clock spec
from the environment): they are shown escaped and cut (``_terminal_text.shown``,
spec/reliability.md §7).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._terminal_text import MESSAGE_LIMIT, shown
from ..clocks.base import ClockSource
from ..wire.layout import UNCERTAINTY_SATURATED, ClockQuality

if TYPE_CHECKING:
    from .clockcheck import ClockCheck, RankClock

__all__ = ["FIX_LIAR", "FIX_UNSYNCED", "clock_reason", "gate_message", "ranks_text", "warning"]

#: What to do about a clock that claims too little.
FIX_UNSYNCED = ("start chronyd (or ptp4l for a NIC clock) on their hosts, or call tt.check_clocks() without "
                "require= to warn and train on")
#: What to do about a clock that breaks its claim.
FIX_LIAR = ("check the time daemon of its host (chronyc tracking; pmc for ptp4l): it claims a bound it does "
            "not keep; or call tt.check_clocks() without require= to train on (the analysis flags the edges "
            "it contradicts)")


def clock_reason(clock: ClockSource) -> str:
    """Why ``clock`` reports the quality it does, in its own words; "" when it says nothing. Never raises.

    The CPU source keeps its reason at hand (``reason``: the kernel's sync state, chronyd's answer); other
    sources give it in ``describe()``; a simulated clock says what it imitates."""
    try:
        reason = getattr(clock, "reason", None)
        if isinstance(reason, str) and reason:
            return reason
        described: dict[str, Any] = clock.describe()
        if isinstance(described.get("reason"), str):
            return str(described["reason"])
        if described.get("simulated"):
            return f"simulated: {described.get('imitates', described.get('profile', ''))}"
        return str(described.get("note", ""))
    except Exception:  # a source that cannot describe itself: the check goes on without a reason
        return ""


def ranks_text(ranks: Sequence[int]) -> str:
    """``rank 3`` or ``ranks 0-2, 5``: consecutive ranks as runs, so a thousand ranks take one word."""
    ordered = sorted(set(ranks))
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ("rank " if len(ordered) == 1 else "ranks ") + ", ".join(runs)


def _claim(r: RankClock) -> str:
    if r.quality is ClockQuality.UNKNOWN:
        return "quality UNKNOWN"
    if r.claim_ns >= UNCERTAINTY_SATURATED:
        return f"quality {r.quality.name}, bound saturated at {UNCERTAINTY_SATURATED:,} ns"
    return f"quality {r.quality.name}, ±{r.claim_ns:,} ns"


def _by_cause(ranks: Sequence[RankClock]) -> list[tuple[list[int], RankClock]]:
    """Ranks whose clocks say the same thing (source, quality, reason), in rank order: one line each."""
    groups: dict[tuple[str, ClockQuality, bool, str], tuple[list[int], RankClock]] = {}
    for r in ranks:
        key = (r.clock, r.quality, r.claim_ns >= UNCERTAINTY_SATURATED, r.reason)
        groups.setdefault(key, ([], r))[0].append(r.rank)
    return sorted(groups.values(), key=lambda g: g[0][0])


def _cause(r: RankClock) -> str:
    clock = f"clock {shown(r.clock)}, " if r.clock else ""
    reason = f": {shown(r.reason, MESSAGE_LIMIT)}" if r.reason else ""
    return f"{clock}{_claim(r)}{reason}"


def _lies(result: ClockCheck) -> list[str]:
    """One line per suspect (spec/torch.md §5.2 says who is named and why)."""
    by_rank = {r.rank: r for r in result.ranks}
    ref = by_rank[result.ref_rank]
    judged = [r for r in result.ranks if r.verdict in ("ok", "irreconcilable")]
    bad = [r for r in judged if r.verdict == "irreconcilable"]
    lines = []
    if len(result.suspects) == 2 and len(judged) == 1:
        (other,) = bad
        lines.append(f"ranks {ref.rank} and {other.rank} disagree beyond both claims (measured "
                     f"{other.offset_ns:+,} ns ± {other.bound_ns:,} ns apart; {_claim(other)} and {_claim(ref)}): "
                     "with one witness either clock may be the liar")
        return lines
    for rank in result.suspects:
        r = by_rank[rank]
        clock = f" (clock {shown(r.clock)})" if r.clock else ""
        if rank == result.ref_rank:
            lines.append(f"rank {rank}{clock}, the reference, lies: {len(bad)} of {len(judged)} ranks measured it "
                         "further off than their claims and its own allow")
        else:
            lines.append(f"rank {rank}{clock} lies: measured {r.offset_ns:+,} ns ± {r.bound_ns:,} ns off rank "
                         f"{ref.rank}, beyond its claim (±{r.claim_ns:,} ns) and rank {ref.rank}'s "
                         f"(±{ref.claim_ns:,} ns)")
    return lines


def gate_message(result: ClockCheck, required: ClockQuality) -> str | None:
    """The gate's message when ``require=required`` is not met (None: it is): which ranks fall short, why, and
    what to do, then the measurement table."""
    short = [r for r in result.ranks if r.quality > required]
    if not (result.suspects or short):
        return None
    lines = [f"tempotrace check_clocks: require=\"{required.name}\" is not met, so every rank exits with status 1:"]
    for ranks, r in _by_cause(short):
        lines.append(f"  {ranks_text(ranks)} below {required.name}: {_cause(r)}")
    if short:
        lines.append(f"    what to do: {FIX_UNSYNCED}")
    lines.extend(f"  {line}" for line in _lies(result))
    if result.suspects:
        lines.append(f"    what to do: {FIX_LIAR}")
    return "\n".join(lines) + "\n" + result.describe()


def warning(result: ClockCheck) -> str | None:
    """One line for a check without ``require`` that found clocks physics cannot use (None: all is well): who,
    why, and what that means for the analysis."""
    parts = []
    unbounded = [r for r in result.ranks if r.unbounded]
    for ranks, r in _by_cause(unbounded):
        parts.append(f"{ranks_text(ranks)} claim no usable bound ({_cause(r)})")
    if unbounded:
        parts.append("the analysis orders ranks of one host by their shared clock and the rest by Lamport/SVC "
                     "where physics cannot decide (start chronyd, or ptp4l for a NIC clock, for physical order "
                     "across hosts)")
    if result.suspects:
        parts.extend(_lies(result))
        parts.append("the analysis flags the edges a lying clock's stamps contradict")
    if not parts:
        return None
    return ("tempotrace check_clocks: " + "; ".join(parts) + "; training goes on (require=\"DEGRADED\" stops the "
            "job instead)")
