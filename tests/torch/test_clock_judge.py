"""check_clocks (spec/torch.md §5): which rounds count, how a device transport is read, and who is named."""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("torch")

from tempotrace_sdk.clocks.base import Timestamp
from tempotrace_sdk.torch.clockcheck import RankClock, best_round, judge
from tempotrace_sdk.wire.layout import ClockQuality, TsSource

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


def test_a_round_with_a_negative_delay_is_left_out() -> None:
    """Finding 7, spec §5.1: a negative delay means the timestamps cannot be what happened (t2 read before
    the message was in); the smallest delay would pick it with a ~1 ns bound and accuse honest clocks."""
    honest = (1_000, 60_000, 61_000, 120_000)  # delay 119 µs
    impossible = (1_000, 2_000, 5_000, 2_500)  # the reference held it 3 µs of a 1.5 µs round trip
    assert best_round([impossible, honest]) == honest
    assert best_round([impossible]) is None


def test_a_rank_with_no_consistent_round_is_unmeasured_never_named() -> None:
    unmeasured = RankClock(2, 0, 0, 0, 220, OK, (0, 0, 0, 0), measured=False)
    result = judge([rc(0, 0), rc(1, 30_000), unmeasured], 0)
    assert result.ok and [r.verdict for r in result.ranks] == ["ref", "ok", "unmeasured"]
    assert "rank 2: not measured" in result.describe()


class _Wire:
    """Two ranks in one process over a device-like transport (as NCCL): a receive returns at once, and its
    data is in, and the receiver's time past its arrival, only once the receiver synchronises (``land``)."""

    FLIGHT_NS = 100_000

    def __init__(self) -> None:
        import queue

        self.lock = threading.Lock()
        self.time = 1_700_000_000_000_000_000
        self.messages = {(a, b): queue.Queue() for a in (0, 1) for b in (0, 1)}  # type: ignore[var-annotated]
        self.pending: dict[int, list[Any]] = {0: [], 1: []}
        self.rank = threading.local()

    def now(self) -> Timestamp:
        with self.lock:
            self.time += 1_000  # a clock read takes 1 µs
            return Timestamp(self.time, TsSource.GTE, ClockQuality.OK, 100)

    def send(self, tensor: Any, group: Any = None, group_dst: int = 0) -> None:
        with self.lock:
            lands = self.time + self.FLIGHT_NS
        self.messages[(self.rank.value, group_dst)].put((tensor.clone(), lands))

    def recv(self, tensor: Any, group: Any = None, group_src: int = 0) -> None:
        self.pending[self.rank.value].append((tensor, group_src))  # queued, not in

    def land(self, info: Any) -> None:
        me = self.rank.value
        for tensor, src in self.pending[me]:
            data, lands = self.messages[(src, me)].get(timeout=30)
            tensor.copy_(data)
            with self.lock:
                self.time = max(self.time, lands)
        self.pending[me].clear()


def test_on_a_device_group_each_timestamp_is_read_once_its_message_is_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 7, spec §5.1: a device receive returns when queued; reading t2 then reads the queue time. Each
    side synchronises with its stream first, so an honest pair (one true clock here) measures offset 0 within
    its bound, with a non-negative delay."""
    from types import SimpleNamespace

    import torch

    from tempotrace_sdk.torch import clockcheck

    wire = _Wire()
    monkeypatch.setattr(clockcheck, "c10d", SimpleNamespace(send=wire.send, recv=wire.recv))
    monkeypatch.setattr(clockcheck, "_landed", wire.land)
    results: dict[int, Any] = {}

    def rank(me: int) -> None:
        wire.rank.value = me
        info = SimpleNamespace(group_rank=me, rank=me, size=2, pg=None, device=torch.device("cpu"))
        results[me] = clockcheck._measure(info, wire, 0, 4)  # type: ignore[arg-type]

    threads = [threading.Thread(target=rank, args=(me,)) for me in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    mine = results[1]
    assert mine.measured and mine.rtt_ns >= 2 * _Wire.FLIGHT_NS
    assert abs(mine.offset_ns) <= mine.bound_ns
