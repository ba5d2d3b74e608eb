"""``check_clocks()``: measure every rank's clock against rank 0 and name one that breaks its claim (spec/torch.md §5).

The usual probe (all_gather of ``time.time()``) mixes the collective's
latency into the offset. This is NTP's four-timestamp exchange instead, over
the process group: the rank reads t1 and sends it; the reference reads t2 on
receipt and t3 just before replying; the rank reads t4 on receipt. Then

    offset = ((t2 - t1) + (t3 - t4)) / 2    (the reference's clock minus the rank's, negated below)
    delay  = (t4 - t1) - (t3 - t2)
    bound  = delay / 2 + 1 ns + read         (read: the fastest timed read of the rank's own clock)

over the round with the smallest delay of ``rounds``. A round whose delay is
negative cannot have happened as recorded (the reference would have replied
before it received) and is left out; a rank with no round left is
``unmeasured``. A receive on a device group (NCCL) returns when it is queued,
so each side synchronises with its stream before reading t2 or t4: a
timestamp is read only once its message is in. If both clocks keep
their claims (3σ bounds u_rank and u_ref), the true offset is within
u_rank + u_ref, so a measured |offset| > u_rank + u_ref + bound cannot be
reconciled with the claims: one of the two clocks lies. Which one is decided
over all ranks (``judge``). The transport is the group's original send/recv,
never the traced wrappers.

What the check says about clocks that fall short (the gate's message, the
warning: §5.3) is at the end. Every rank holds the same judgement (the
measurements are all_gathered), so one rank says it, the group's rank 0:
three ranks printing one verdict read as three verdicts. A clock falls short
in two ways with different fixes: it *claims* too little (nothing disciplines
it; the clock source says why: the fix is a time daemon, or not gating), or it
*lies* (measured against rank 0 it is further off than both claims allow:
starting a daemon fixes nothing). Reasons and clock names come from outside
(chronyd's answers, a clock spec from the environment) and are shown escaped
and cut (``_terminal_text.shown``, spec/reliability.md §7).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed.distributed_c10d as c10d

from .._terminal_text import MESSAGE_LIMIT, shown
from ..clocks.base import ClockSource, Timestamp
from ..otel.context import get_state
from ..semconv import (
    TORCH_CLOCK_BOUND_NS,
    TORCH_CLOCK_OFFSET_NS,
    TORCH_CLOCK_REF_RANK,
    TORCH_CLOCK_RTT_NS,
    TORCH_CLOCK_SUSPECTS,
    TORCH_CLOCK_TIMESTAMPS,
    TORCH_CLOCK_VERDICT,
)
from ..wire.layout import UNCERTAINTY_SATURATED, ClockQuality
from .carriage.owed import pay
from .groups import group_info
from .spans import end_span, start_or_invalid

__all__ = ["FIX_LIAR", "FIX_UNSYNCED", "ClockCheck", "RankClock", "best_round", "check_clocks", "clock_reason",
           "gate_message", "judge", "ranks_text", "warning"]

_log = logging.getLogger(__name__)

#: Clock reads timed to learn the read delay (the fastest is kept: scheduling only adds).
READ_SAMPLES = 16


@dataclass(frozen=True, slots=True)
class RankClock:
    """One rank's measurement against the reference, and what its clock claims."""

    rank: int  #: global rank
    offset_ns: int  #: this rank's clock minus the reference's (0 for the reference)
    bound_ns: int  #: |offset_ns - true offset| <= bound_ns
    rtt_ns: int  #: the best round's delay (0 for the reference)
    claim_ns: int  #: the largest uncertainty_ns its clock claimed during the check
    quality: ClockQuality  #: the worst quality its clock reported
    timestamps: tuple[int, int, int, int]  #: the best round's t1..t4 (zeros for the reference)
    verdict: str = ""  #: "ref" | "ok" | "unbounded" | "unmeasured" | "irreconcilable"
    #: False when every round's timestamps were inconsistent (a negative delay): nothing was measured.
    measured: bool = True
    clock: str = ""  #: the clock source's name (``cpu``, ``phc:eth0``, ``sim:ntp``)
    reason: str = ""  #: why that source reports its quality, in its own words (clock_reason)

    @property
    def unbounded(self) -> bool:
        return self.quality is ClockQuality.UNKNOWN or self.claim_ns >= UNCERTAINTY_SATURATED


@dataclass(frozen=True, slots=True)
class ClockCheck:
    ref_rank: int
    ranks: tuple[RankClock, ...]  #: in group-rank order, verdicts filled in
    suspects: tuple[int, ...]  #: ranks named as lying (the same on every rank)

    @property
    def ok(self) -> bool:
        return not self.suspects

    def describe(self) -> str:
        lines = [f"clock check against rank {self.ref_rank}:"]
        for r in self.ranks:
            claim = "unbounded" if r.unbounded else f"±{r.claim_ns} ns"
            if not r.measured:
                lines.append(f"  rank {r.rank}: not measured (every round inconsistent), claims {claim} "
                             f"({r.quality.name}): {r.verdict}")
                continue
            lines.append(f"  rank {r.rank}: offset {r.offset_ns:+,} ns ± {r.bound_ns:,} ns, claims {claim} "
                         f"({r.quality.name}): {r.verdict}")
        lines.append("  suspects: " + (", ".join(map(str, self.suspects)) if self.suspects else "none"))
        return "\n".join(lines)


def judge(ranks: list[RankClock], ref_rank: int) -> ClockCheck:
    """Verdicts and suspects from every rank's measurement (spec/torch.md §5.2).

    A rank is irreconcilable when |offset| > its claim + the reference's claim +
    the measurement bound; unbounded when either claim promises nothing;
    unmeasured when no round was consistent (never named). If
    more than half of the judged ranks are irreconcilable, the reference is the
    one suspect; if exactly one rank is judged and it disagrees, both are
    suspects (one witness cannot say which clock lied); else the
    irreconcilable ranks are.
    """
    ref = next(r for r in ranks if r.rank == ref_rank)
    judged: list[RankClock] = []
    for r in ranks:
        if r.rank == ref_rank:
            verdict = "ref"
        elif not r.measured:
            verdict = "unmeasured"
        elif r.unbounded or ref.unbounded:
            verdict = "unbounded"
        elif abs(r.offset_ns) > r.claim_ns + ref.claim_ns + r.bound_ns:
            verdict = "irreconcilable"
        else:
            verdict = "ok"
        judged.append(replace(r, verdict=verdict))
    bad = [r.rank for r in judged if r.verdict == "irreconcilable"]
    counted = [r for r in judged if r.verdict in ("ok", "irreconcilable")]
    if not bad:
        suspects: tuple[int, ...] = ()
    elif len(counted) == 1:
        suspects = tuple(sorted((ref_rank, bad[0])))
    elif len(bad) * 2 > len(counted):
        suspects = (ref_rank,)
    else:
        suspects = tuple(bad)
    return ClockCheck(ref_rank, tuple(judged), suspects)


def _read_delay(clock: ClockSource) -> int:
    best = None
    for _ in range(READ_SAMPLES):
        a = time.perf_counter_ns()
        clock.now()
        d = time.perf_counter_ns() - a
        best = d if best is None else min(best, d)
    return int(best or 0)


def delay_of(t: tuple[int, int, int, int]) -> int:
    """A round's delay: its round trip less the reference's time between receiving and replying."""
    t1, t2, t3, t4 = t
    return (t4 - t1) - (t3 - t2)


def best_round(rounds: list[tuple[int, int, int, int]]) -> tuple[int, int, int, int] | None:
    """The round with the smallest delay, of those whose delay is not negative; None if there is none."""
    consistent = [t for t in rounds if delay_of(t) >= 0]
    if len(consistent) < len(rounds):
        _log.debug("tempotrace.torch: %d of %d clock-check rounds inconsistent (negative delay), left out",
                   len(rounds) - len(consistent), len(rounds))
    return min(consistent, key=delay_of, default=None)


def _landed(info: Any) -> None:
    """Return once a receive that just returned is in: on a device group it may only be queued."""
    if info.device.type != "cpu":
        _sync_device(info.device)


def _sync_device(device: torch.device) -> None:  # pragma: no cover - needs a GPU
    torch.cuda.current_stream(device).synchronize()


def _measure(info: Any, clock: ClockSource, ref: int, rounds: int) -> RankClock:
    """Run the ping-pong with the reference; every rank serves or waits its turn."""
    me = info.group_rank
    pg = info.pg
    out = torch.zeros(1, dtype=torch.int64, device=info.device)  # NCCL only moves CUDA tensors
    back = torch.zeros(2, dtype=torch.int64, device=info.device)
    samples: list[tuple[int, int, int, int]] = []
    claim, quality = 0, ClockQuality.OK

    def note(ts: Timestamp) -> int:
        nonlocal claim, quality
        claim = max(claim, ts.uncertainty_ns)
        quality = ClockQuality(max(quality, ts.clk_quality))
        return int(ts.ptp_ns)

    for peer in range(info.size):
        if peer == ref:
            continue
        for _ in range(rounds):
            if me == peer:
                out[0] = t1 = note(clock.now())
                c10d.send(out, group=pg, group_dst=ref)
                c10d.recv(back, group=pg, group_src=ref)
                _landed(info)
                t4 = note(clock.now())
                t2, t3 = (int(v) for v in back.tolist())
                samples.append((t1, t2, t3, t4))
            elif me == ref:
                c10d.recv(out, group=pg, group_src=peer)
                _landed(info)
                t2 = note(clock.now())
                back[0], back[1] = t2, note(clock.now())
                c10d.send(back, group=pg, group_dst=peer)
    if me == ref:
        note(clock.now())
        return RankClock(info.rank, 0, 0, 0, claim, quality, (0, 0, 0, 0))
    best = best_round(samples)
    if best is None:
        return RankClock(info.rank, 0, 0, 0, claim, quality, (0, 0, 0, 0), measured=False)
    t1, t2, t3, t4 = best
    delay = delay_of(best)
    offset = -((t2 - t1) + (t3 - t4)) // 2  # this clock minus the reference's
    return RankClock(info.rank, offset, delay // 2 + 1, delay, claim, quality, best)


def _leave_together(pg: Any, default: bool) -> None:
    """Before the gate's exit: every rank past the verdict (a barrier), then the default group destroyed.
    A gloo group still alive when the interpreter exits can abort a rank (SIGABRT: "terminate called
    without an active exception", seen on one rank of three), and the gate promises exit status 1 on
    every rank. Best effort: a rank that cannot take part leaves as it is."""
    try:
        c10d.barrier(group=pg)
        if default:
            c10d.destroy_process_group()
    except Exception:  # a peer already gone: nothing to wait for
        _log.debug("tempotrace: leaving the clock gate alone", exc_info=True)


def check_clocks(group: Any = None, rounds: int = 8, require: str | ClockQuality | None = None,
                 *, ref: int = 0) -> ClockCheck:
    """Measure every rank of ``group`` against group rank ``ref``; every rank gets the same result.

    ``require``: a quality (``"OK"``, ``"DEGRADED"``, ``"UNKNOWN"``) every rank's
    clock must meet, as ``tempotrace clock --require``; with it the check is a
    gate: when a clock is named as lying or falls short, group rank 0 prints
    why (each rank's clock and its reason) and what to do to stderr, and every
    rank exits with status 1 (``SystemExit(1)``). Without it the job trains on,
    and group rank 0 logs one warning line when a clock claims no usable bound
    or lies (spec/torch.md §5.3). A collective: every rank of the group must
    call it. Recorded as a ``torch.check_clocks`` span per rank.
    """
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    required = None if require is None else (ClockQuality[require] if isinstance(require, str) else require)
    info = group_info(group)
    pay()  # a step's exchange owed since its exception goes before these collectives (spec/torch.md §4.2)
    clock = get_state().clock
    sp = start_or_invalid("torch.check_clocks", {**info.attributes, TORCH_CLOCK_REF_RANK: info.ranks[ref]})
    try:
        delay = _read_delay(clock)
        mine = _measure(info, clock, ref, rounds)
        mine = replace(mine, bound_ns=mine.bound_ns + delay, clock=str(getattr(clock, "name", "")),
                       reason=clock_reason(clock))
        everyone: list[Any] = [None] * info.size
        c10d.all_gather_object(everyone, mine, group=info.pg)
        result = judge(list(everyone), info.ranks[ref])
    except BaseException as err:
        end_span(sp, error=err)
        raise
    me = result.ranks[info.group_rank]
    end_span(sp, {
        TORCH_CLOCK_OFFSET_NS: me.offset_ns, TORCH_CLOCK_BOUND_NS: me.bound_ns, TORCH_CLOCK_RTT_NS: me.rtt_ns,
        TORCH_CLOCK_TIMESTAMPS: me.timestamps, TORCH_CLOCK_VERDICT: me.verdict,
        TORCH_CLOCK_SUSPECTS: result.suspects,
    })
    says = info.group_rank == 0  # every rank holds the same judgement: one of them says it (gate_message, warning)
    if required is not None:
        message = gate_message(result, required)
        if message is not None:
            if says:
                print(message, file=sys.stderr, flush=True)
            if info.size > 1:  # alone, no peer's leaving can abort this rank (and the group stays usable)
                _leave_together(info.pg, group is None)
            raise SystemExit(1)
    elif says:
        line = warning(result)
        if line is not None:
            _log.warning("%s", line)
    return result


# -- what the check says: the gate's message and the warning (§5.3) ------------------------------------
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
