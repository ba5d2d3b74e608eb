"""Readings of one host clock domain ordered by their difference (spec/analysis.md §2.1): the pair rule,
the collective claim decided as a whole against every pair decided alone, and stragglers."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tempotrace_sdk.analysis.claims import ALL, ROOT_END, ROOT_START, arrival, decide_claim, required
from tempotrace_sdk.analysis.clockdomain import Domain, relative_slack
from tempotrace_sdk.analysis.events import SpanRecord, Stamp, TorchOp
from tempotrace_sdk.analysis.order import Method, Relation, physics_gap, physics_silence

T0 = 1_800_000_000_000_000_000
HOST = Domain("kernel:boot-a:tai", 37_000_123_456_789, 300, 1_700)
SAT = 65535


def _stamp(at: int, domain: Domain | None = HOST, quality: str = "UNKNOWN", u: int = SAT) -> Stamp:
    return Stamp(T0 + at, u, quality, None, False, domain)


@pytest.mark.parametrize(
    ("a", "b", "want", "why"),
    [
        (_stamp(0), _stamp(10_000), 10_000 - relative_slack(HOST, HOST), "one domain, UNKNOWN quality: by difference"),
        (_stamp(10_000), _stamp(0), -(10_000 - relative_slack(HOST, HOST)), "and the other way"),
        (_stamp(0), _stamp(relative_slack(HOST, HOST)), 0, "no further apart than the relative bound"),
        (_stamp(0), _stamp(10_000, Domain("kernel:boot-b:tai", HOST.epoch_ns, 300, 1_700)), 0,
         "another boot: another clock"),
        (_stamp(0), _stamp(10_000, Domain(HOST.key, HOST.epoch_ns + 5_000, 300, 1_700)), 0,
         "another epoch: a step lies between them"),
        (_stamp(0), _stamp(10_000, None), 0, "one side names no domain (a simulated clock): absolute only"),
        (_stamp(0, quality="OK", u=100), _stamp(10_000, None, "OK", 100), 10_000 - 200,
         "without a common domain the absolute intervals still decide"),
    ],
)
def test_a_pair_of_readings(a: Stamp, b: Stamp, want: int, why: str) -> None:
    assert physics_gap(a, b) == want, why


def test_a_degraded_reading_is_never_ordered_by_physics() -> None:
    degraded = Stamp(T0 + 10_000, SAT, "UNKNOWN", None, True, HOST)
    assert physics_gap(_stamp(0), degraded) == 0
    assert physics_silence(_stamp(0), degraded) == "policy_degrade"
    assert physics_silence(_stamp(0), _stamp(1)) == "overlap"  # one domain, too close: not "unknown_quality"


def _member(rng: random.Random, rank: int, keys: list[Domain | None]) -> SpanRecord:
    """A member on one of a few host domains (UNKNOWN quality: only the domain orders it) or on none
    (a random absolute interval), with random counters as in test_analysis_claims."""
    domain = rng.choice(keys)
    start = rng.randrange(0, 40_000)
    end = start + rng.randrange(-4_000, 40_000)
    if domain is None:
        quality, u = rng.choice((("OK", 50), ("OK", 220), ("OK", 5_000), ("UNKNOWN", SAT)))
    else:
        quality, u = "UNKNOWN", SAT
    lts = rng.randrange(1, 40)
    torch = TorchOp("all_reduce", "0-7", rank, 0, completion="return")
    return SpanRecord(f"{1:032x}", f"{rank + 1:016x}", "", "torch.all_reduce", 1, f"h{rank}",
                      Stamp(T0 + start, u, quality, lts, False, domain),
                      Stamp(T0 + end, u, quality, lts + rng.randrange(-10, 30), False, domain), 0, 0,
                      rank=rank, torch=torch)


def _pairs(members: list[SpanRecord], starts: list[int], ends: list[int]) -> dict[tuple[int, int], int]:
    return {(i, j): physics_gap(members[i].start, members[j].end or Stamp(None)) for i in starts for j in ends
            if i != j}


@pytest.mark.parametrize("shape", [ALL, ROOT_START, ROOT_END])
def test_the_claim_over_host_domains_equals_every_pair_decided_alone(shape: str) -> None:
    """Members on two hosts' domains and members without one: the claim's physics decision (as a whole,
    O(n)) is the one every pair gives through physics_gap, and its witnesses are real violations naming
    every violating start and end."""
    rng = random.Random(f"domains-{shape}")
    keys: list[Domain | None] = [HOST, Domain("kernel:boot-b:tai", 11, 250, 2_000), None]
    seen: set[Any] = set()
    for _ in range(2000):
        n = rng.randrange(2, 9)
        members = [_member(rng, r, keys) for r in range(n)]
        ranks = list(range(n))
        starts, ends = required(members, ranks, shape, rng.randrange(0, n))
        gaps = _pairs(members, starts, ends)
        claim = decide_claim(members, ranks, starts, ends)
        if not gaps:
            assert claim is None
            continue
        assert claim is not None
        d = claim.decision
        reversed_ = {p for p, g in gaps.items() if g < 0}
        if reversed_:
            assert (d.method, d.relation) == (Method.PHYSICS, Relation.AFTER)
            witnessed = {(i, j) for i, j, _ in claim.witnesses}
            assert witnessed <= reversed_
            assert {i for i, _ in reversed_} == {i for i, _ in witnessed}
            assert {j for _, j in reversed_} == {j for _, j in witnessed}
            assert d.gap_ns == max(-gaps[p] for p in reversed_)
        elif all(g > 0 for g in gaps.values()):
            assert (d.method, d.relation, d.gap_ns) == (Method.PHYSICS, Relation.BEFORE, min(gaps.values()))
        else:
            assert d.method is not Method.PHYSICS
        seen.add((d.method, d.relation))
    assert {(Method.PHYSICS, Relation.BEFORE), (Method.PHYSICS, Relation.AFTER)} <= seen


def test_stragglers_on_one_host_are_certain_by_physics() -> None:
    """Three ranks of one host, no synchronised clock: the last arriver is certain when it came after the
    others by more than the relative bound, not when it came within it."""
    def members(last_at: int) -> list[SpanRecord]:
        return [SpanRecord(f"{1:032x}", f"{r + 1:016x}", "", "torch.barrier", 1, "h", _stamp(at), _stamp(at + 9),
                           0, 0, rank=r, torch=TorchOp("barrier", "0-2", r, 0))
                for r, at in enumerate((0, 500, last_at))]

    order, certain = arrival(members(50_000), [0, 1, 2])
    assert order[-1] == 2 and certain
    order, certain = arrival(members(600), [0, 1, 2])
    assert order[-1] == 2 and not certain


def test_a_member_whose_end_has_no_reading_is_no_crash_and_no_claim_by_physics() -> None:
    """A completed member whose stamps text lost its end token (end stamp without a reading): its start is
    in the domain, its end is not; the claim is decided without it, never by a TypeError."""
    members = [SpanRecord(f"{1:032x}", f"{r + 1:016x}", "", "torch.all_reduce", 1, "h", _stamp(r * 10),
                          _stamp(90_000) if r else Stamp(None), 0, 0, rank=r,
                          torch=TorchOp("all_reduce", "0-2", r, 0, completion="return"))
               for r in range(3)]
    starts, ends = required(members, [0, 1, 2], ALL, None)
    claim = decide_claim(members, [0, 1, 2], starts, ends)
    assert claim is not None and claim.decision.method is not Method.PHYSICS  # one end cannot be ordered


def test_a_span_stamped_with_another_clock_than_its_resources_has_no_domain() -> None:
    """A provider's Resource is fixed: a process that moved from the CPU clock to a PHC keeps the Resource
    naming the kernel domain, but its spans name their own clock and are not in it (review finding)."""
    from tempotrace_sdk import semconv as S
    from tempotrace_sdk.analysis.values import SPAN, build_record

    def record(span_clock: str | None) -> SpanRecord:
        attrs = [(S.STAMPS, "s1,2 e1"), (S.CLK_QUALITY, "UNKNOWN")]
        if span_clock is not None:
            attrs.append((S.CLOCK, span_clock))
        return build_record("1" * 32, "2" * 16, "", "s", 1, SPAN.read_plain(attrs), 10, 20, "h", None,
                            resource_clock="cpu", resource_domain=HOST)

    assert record(None).start.domain is HOST and record("cpu").start.domain is HOST
    assert record("phc:/dev/ptp0").start.domain is None and record("phc:/dev/ptp0").end.domain is None  # type: ignore[union-attr]
