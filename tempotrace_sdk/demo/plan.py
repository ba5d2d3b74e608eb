"""Which rank gets which simulated clock: the cast of the demo.

Honest ranks: the first half PTP-class (GTE, tens of ns off, 220 ns bound),
the rest NTP-class (CPU, hundreds of µs off; their 1.5 ms bound saturates the
uint16 field, so physics cannot order their edges and Lamport/SVC must). The
liar claims PTP precision (GTE, OK, 220 ns) while being milliseconds off.

Placement is deliberate: the liar sits between two PTP ranks in the ring and
on the pipeline path, so its broken promise shows on edges with *several*
honest peers (that is how the analysis tells a liar from a pair of suspects),
and NTP offsets alternate in sign so that a plain tracer sees receivers act
before senders on some hops.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..clocks.simulated import PROFILES

__all__ = ["RankPlan", "expected_hops", "plan_ranks"]

#: NTP-class offsets, in turn (µs). The paper's NTP hosts are σ ≈ 500 µs off
#: each; these sit at 2-3σ because a localhost Python HTTP hop takes ~0.3-1 ms
#: (a real collective's hop takes µs): smaller offsets would hide inside the
#: hop latency and a plain tracer would look right by luck.
NTP_OFFSETS_US = (-1200, 1500, -1000, 1300)
#: PTP-class offsets, in turn (ns): well inside the 220 ns bound.
PTP_OFFSETS_NS = (35, -20, 50, -40)


@dataclass(frozen=True)
class RankPlan:
    rank: int
    host: str
    profile: str  #: "ptp" | "ntp" | "liar"
    offset_ns: float  #: the true error this rank's clock is given
    clock: str  #: the TEMPOTRACE_CLOCK value

    @property
    def claim(self) -> str:
        p = PROFILES[self.profile]
        bound = f"±{p.bound_ns:,.0f} ns" if p.bound_ns < 65535 else "≥65,535 ns (saturated)"
        return f"{p.source.name} {p.quality.name} {bound}"

    @property
    def liar(self) -> bool:
        return self.profile == "liar"


def _fmt_offset(ns: float) -> str:
    if abs(ns) >= 1_000_000:
        return f"{ns / 1e6:+.3f}ms"
    if abs(ns) >= 1_000:
        return f"{ns / 1e3:+.0f}us"
    return f"{ns:+.0f}ns"


def plan_ranks(ranks: int, *, liar: bool = True, liar_offset_ns: float | None = None, seed: int = 1) -> list[RankPlan]:
    """The rank → clock plan for ``ranks`` honest workers (plus the liar)."""
    if ranks < 2:
        raise ValueError("the demo needs at least 2 honest ranks")
    n_ptp = (ranks + 1) // 2
    profiles = ["ptp"] * n_ptp + ["ntp"] * (ranks - n_ptp)
    if liar:
        profiles.insert(1, "liar")
    plans: list[RankPlan] = []
    n_seen = {"ptp": 0, "ntp": 0}
    for rank, profile in enumerate(profiles):
        if profile == "liar":
            offset = liar_offset_ns if liar_offset_ns is not None else PROFILES["liar"].offset_ns
        elif profile == "ntp":
            offset = NTP_OFFSETS_US[n_seen["ntp"] % len(NTP_OFFSETS_US)] * 1e3
        else:
            offset = float(PTP_OFFSETS_NS[n_seen["ptp"] % len(PTP_OFFSETS_NS)])
        n_seen[profile] = n_seen.get(profile, 0) + 1
        clock = f"sim:{profile},offset={_fmt_offset(offset)},seed={seed * 100 + rank}"
        plans.append(RankPlan(rank, f"node{rank}", profile, offset, clock))
    return plans


def expected_hops(world: int, iterations: int) -> int:
    """HTTP hops the workload makes: ring (n·(n-1)), pipeline (n-1), barrier (n), per iteration."""
    return iterations * (world * (world - 1) + (world - 1) + world)
