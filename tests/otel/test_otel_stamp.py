"""The native stamp and its pure-Python twin agree value for value (otel/stamp.py, issue 12).

A differential run on random inputs: Lamport sequences (ticks, merges,
bounded receives, saturation), events (readings of every source, quality
and bound) and clock mappings (random raw readings and offsets), plus the
properties each must keep on its own (no tick lost across threads, a stale
mapping never stamps).
"""

from __future__ import annotations

import errno
import threading
import time
from typing import Any

import pytest
from _otel_helpers import StepClock
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk.clocks import CpuClock
from tempotrace_sdk.clocks._native import native, native_status
from tempotrace_sdk.errors import FieldError
from tempotrace_sdk.otel.stamp import NativeLamport, NativeStamp, PureStamp
from tempotrace_sdk.wire import ClockQuality, LamportClock, TsSource
from tempotrace_sdk.wire.lamport import LAMPORT_MAX_AHEAD
from tempotrace_sdk.wire.layout import LTS_MAX, PTP_NS_MAX

pytestmark = pytest.mark.skipif(native() is None, reason=f"native stamp unavailable: {native_status().reason}")

I63 = 2**63
ops = st.lists(
    st.one_of(
        st.just(("tick", 0)),
        st.tuples(st.just("merge"), st.integers(0, LTS_MAX)),
        st.tuples(st.just("merge"), st.integers(LTS_MAX - 8, LTS_MAX)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(start=st.one_of(st.integers(0, 1000), st.integers(LTS_MAX - 5, LTS_MAX)), steps=ops)
def test_lamport_sequences_agree(start: int, steps: list[tuple[str, int]]) -> None:
    """Every tick and merge gives the same value, and saturation is flagged on the same event (spec §10)."""
    pure, fast = LamportClock(start), NativeLamport(start)
    for op, remote in steps:
        if op == "tick":
            assert fast.tick() == pure.tick()
        else:
            assert fast.merge(remote) == pure.merge(remote)
        assert fast.value == pure.value and fast.saturated == pure.saturated


def _bounded_reference(local: int, remote: int, max_ahead: int) -> tuple[int, int, bool]:
    """(new local, lts, merged): a remote more than max_ahead ahead is a plain local tick."""
    merged = not (remote > local and remote - local > max_ahead)
    base = max(local, remote) if merged else local
    lts = min(base + 1, LTS_MAX)
    return lts, lts, merged


@settings(max_examples=300, deadline=None)
@given(local=st.integers(0, LTS_MAX), remote=st.integers(0, LTS_MAX), max_ahead=st.integers(0, 2**40))
def test_bounded_receive_matches_the_rule(local: int, remote: int, max_ahead: int) -> None:
    """The max-ahead switch (issue 13 item 5): refused remotes leave only a local tick, and say so."""
    fast = NativeLamport(local)
    new_local, lts, merged = _bounded_reference(local, remote, max_ahead)
    assert fast.receive(remote, max_ahead) == (lts, merged)
    assert fast.value == new_local
    # Without an explicit bound: exactly the wire counter's rule (spec §10.1).
    wire, native_default = LamportClock(local), NativeLamport(local)
    assert native_default.receive(remote) == wire.receive(remote)
    assert native_default.value == wire.value and native_default.saturated == wire.saturated


M = LAMPORT_MAX_AHEAD


@pytest.mark.parametrize(
    ("local", "remote", "expected", "saturates"),
    [
        pytest.param(1000, 1000 + M, (1001 + M, True), False, id="at-the-bound-merged"),
        pytest.param(1000, 1001 + M, (1001, False), False, id="just-over-not-merged"),
        pytest.param(1000, LTS_MAX, (1001, False), False, id="far-over-2^63-1-not-merged"),
        pytest.param(0, LTS_MAX, (1, False), False, id="fresh-process-2^63-1"),
        pytest.param(LTS_MAX - M, LTS_MAX, (LTS_MAX, True), True, id="at-the-bound-to-the-top-saturates"),
        pytest.param(LTS_MAX, LTS_MAX, (LTS_MAX, True), True, id="saturated-counter-merges"),
        pytest.param(5000, 7, (5001, True), False, id="behind-keeps-local"),
    ],
)
@pytest.mark.parametrize("counter", [LamportClock, NativeLamport])
def test_the_bound_at_just_over_and_far_over(
    counter: Any, local: int, remote: int, expected: tuple[int, bool], saturates: bool
) -> None:
    """tt-ext §10.1 on both counters: R = L + 2^44 is merged, L + 2^44 + 1 and 2^63 - 1 are a plain
    tick, and only a merge that reaches the top saturates (§10)."""
    clock = counter(local)
    assert clock.receive(remote) == expected
    assert clock.value == expected[0]
    assert clock.saturated == saturates


def test_an_unmerged_receive_can_reach_int64_min_in_the_native_encoding() -> None:
    """tt_lamport_receive returns ~lts when it does not merge; lts = 2^63-1 is the extreme (~ = -2^63)."""
    assert NativeLamport(LTS_MAX - 1).receive(LTS_MAX, 0) == (LTS_MAX, False)


@pytest.mark.parametrize("remote", [-1, I63, True, 1.0, "1", None])
def test_a_bad_remote_is_refused_and_leaves_the_counter(remote: Any) -> None:
    fast = NativeLamport(5)
    with pytest.raises(FieldError) as info:
        fast.merge(remote)
    assert info.value.error_class == "LTS_RANGE" and info.value.remote and fast.value == 5


@settings(max_examples=300, deadline=None)
@given(
    lts=st.integers(0, 10**6),
    quality=st.sampled_from(ClockQuality),
    source=st.sampled_from(TsSource),
    bound=st.integers(0, 0xFFFF),
)
def test_tick_events_agree(lts: int, quality: ClockQuality, source: TsSource, bound: int) -> None:
    """A span start, end or send: the same reading fields and Lamport value from both stamps."""
    clocks = [StepClock(source=source, quality=quality, uncertainty=bound) for _ in range(2)]
    pure = PureStamp(LamportClock(lts)).tick(clocks[0])
    fast = NativeStamp(NativeLamport(lts)).tick(clocks[1])
    assert fast == pure
    assert fast[4] == lts + 1


class _MappedClock:
    """A source offering a raw mapping over CLOCK_MONOTONIC, with a now() that counts its calls."""

    name = "test:mapped"

    def __init__(self, offset: int, valid: bool, quality: ClockQuality = ClockQuality.OK, bound: int = 40) -> None:
        raw = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        until = raw + 60 * 10**9 if valid else raw - 1
        self.raw_mapping = (time.CLOCK_MONOTONIC, raw - 10**9, until, offset, int(quality), bound, int(TsSource.CPU))
        self.offset, self.quality, self.bound, self.calls = offset, quality, bound, 0

    def now(self) -> Any:
        from tempotrace_sdk.clocks.base import Timestamp

        self.calls += 1
        return Timestamp(time.clock_gettime_ns(time.CLOCK_MONOTONIC) + self.offset, TsSource.CPU, self.quality, 1)

    def describe(self) -> dict[str, Any]:
        return {}


@settings(max_examples=100, deadline=None)
@given(offset=st.integers(0, 2**62), quality=st.sampled_from([ClockQuality.OK, ClockQuality.DEGRADED]))
def test_a_mapped_read_is_the_raw_clock_plus_the_offset(offset: int, quality: ClockQuality) -> None:
    clock = _MappedClock(offset, valid=True, quality=quality, bound=77)
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + offset
    ptp, bound, source, got_quality, lts = NativeStamp(NativeLamport()).tick(clock)
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + offset
    assert before <= ptp <= after and (bound, source, got_quality, lts) == (77, TsSource.CPU, quality, 1)
    assert clock.calls == 0  # read in C, no Python reading made


def test_a_stale_mapping_falls_back_to_the_sources_own_now() -> None:
    """Outside its window the mapping never stamps: the source's now() (which refreshes) does."""
    clock = _MappedClock(5, valid=False)
    stamp = NativeStamp(NativeLamport())
    _ptp, bound, *_ = stamp.tick(clock)
    assert clock.calls == 1 and bound == 1
    assert stamp.tick(clock)[1] == 1 and clock.calls == 2


@settings(max_examples=200, deadline=None)
@given(raw=st.integers(-(2**62), 2**62), offset=st.integers(-(2**62), 2**62))
def test_the_c_mapping_matches_the_python_rule(raw: int, offset: int) -> None:
    """ptp = raw + offset when 0..2^63-1, refused otherwise (as Timestamp refuses it)."""
    lib, ffi = native()  # type: ignore[misc]
    cmap = ffi.new("struct tt_clock_map *")
    cmap.offset_ns = offset
    ptp = lib.tt_clock_map_ns(cmap, raw)
    if 0 <= raw + offset <= PTP_NS_MAX:
        assert ptp == raw + offset
    else:
        assert ptp == -errno.ERANGE


def test_the_cpu_clock_through_its_mapping_agrees_with_its_now() -> None:
    """The CPU source read in C: same source, quality and bound, a time between two now() calls."""
    clock = CpuClock(background=False)
    stamp = NativeStamp(NativeLamport())
    before = clock.now()
    ptp, bound, source, quality, _ = stamp.tick(clock)
    after = clock.now()
    assert (bound, source, quality) == (before.uncertainty_ns, before.ts_source, before.clk_quality)
    assert before.ptp_ns <= ptp <= after.ptp_ns


def test_threads_lose_no_tick() -> None:
    """8 threads x 2,000 events, calls running without the GIL: every value taken once."""
    stamp = NativeStamp(NativeLamport())
    clock = CpuClock(background=False)
    seen: list[list[int]] = [[] for _ in range(8)]

    def work(n: int) -> None:
        for i in range(2000):
            seen[n].append(stamp.tick(clock)[4] if i % 2 else stamp.lamport.tick())

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    values = [v for part in seen for v in part]
    assert sorted(values) == list(range(1, 16001)) and stamp.lamport.value == 16000
