"""Who is named by check_clocks (spec/torch.md §5.2): the judgement over every rank's measurement."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from tempotrace_sdk.torch.clockcheck import RankClock, judge
from tempotrace_sdk.wire._layout import ClockQuality

OK, UNKNOWN = ClockQuality.OK, ClockQuality.UNKNOWN


def rc(rank: int, offset: int, *, bound: int = 50_000, claim: int = 220, quality: ClockQuality = OK) -> RankClock:
    return RankClock(rank, offset, bound, 2 * bound, claim, quality, (0, 0, 0, 0))


def test_a_liar_among_honest_ranks_is_the_one_named() -> None:
    result = judge([rc(0, 0), rc(1, 30_000), rc(2, -20_000), rc(3, 10_000_000)], 0)
    assert result.suspects == (3,) and not result.ok
    assert [r.verdict for r in result.ranks] == ["ref", "ok", "ok", "irreconcilable"]


def test_an_offset_inside_claims_plus_bound_is_reconciled() -> None:
    """|offset| <= claim + ref claim + bound: 220 + 220 + 50,000 ns."""
    assert judge([rc(0, 0), rc(1, 50_440)], 0).ok
    assert not judge([rc(0, 0), rc(1, 50_441)], 0).ok


def test_a_lying_reference_is_named_by_the_majority() -> None:
    result = judge([rc(0, 0), rc(1, -9_000_000), rc(2, -9_100_000), rc(3, -8_900_000)], 0)
    assert result.suspects == (0,)


def test_one_witness_cannot_say_which_clock_lied() -> None:
    assert judge([rc(0, 0), rc(1, 5_000_000)], 0).suspects == (0, 1)


def test_a_clock_that_claims_nothing_is_never_named() -> None:
    """UNKNOWN quality or a saturated bound promises nothing: unbounded, not a liar."""
    result = judge([rc(0, 0), rc(1, 3_000_000, claim=65535), rc(2, 3_000_000, quality=UNKNOWN)], 0)
    assert result.ok and [r.verdict for r in result.ranks] == ["ref", "unbounded", "unbounded"]
    assert judge([rc(0, 0, claim=65535), rc(1, 9_000_000)], 0).ok


def test_describe_names_each_rank_and_the_suspects() -> None:
    text = judge([rc(0, 0), rc(1, 30_000), rc(2, 10_000_000)], 0).describe()
    assert "rank 2: offset +10,000,000 ns" in text and "irreconcilable" in text and "suspects: 2" in text
