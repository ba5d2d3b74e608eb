"""LamportClock under threads and fork, and its merge bound (spec §10, §10.1)."""

from __future__ import annotations

import itertools
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

import tempotrace_sdk.wire
from tempotrace_sdk import FieldError, LamportClock
from tempotrace_sdk.wire import LAMPORT_MAX_AHEAD

LTS_MAX = 2**63 - 1
T = 10**12  # a counter that has been running a while


def test_no_tick_is_lost_across_threads() -> None:
    """8 threads x 5000 events: every value 1..40000 handed out exactly once."""
    clock = LamportClock()
    per_thread, threads = 5000, 8
    seen: list[list[int]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def work(slot: list[int], merge: bool) -> None:
        start.wait()
        for _ in range(per_thread):
            slot.append(clock.merge(0) if merge else clock.tick())

    workers = [threading.Thread(target=work, args=(seen[i], i % 2 == 1)) for i in range(threads)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(old)
    values = sorted(v for slot in seen for v in slot)
    assert values == list(range(1, per_thread * threads + 1))
    for slot in seen:  # each thread sees its own events strictly increasing
        assert all(a < b for a, b in itertools.pairwise(slot))


def test_merges_from_many_threads_keep_the_maximum() -> None:
    clock = LamportClock()
    remotes = [1000 * i for i in range(1, 9)]
    threads = [threading.Thread(target=clock.merge, args=(r,)) for r in remotes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clock.value >= max(remotes) + 1
    assert clock.value <= max(remotes) + len(remotes)


def test_refused_merge_changes_nothing_and_says_why() -> None:
    clock = LamportClock(41)
    for bad in (2**63, 2**64, -1, True, 1.0, "5", None):
        with pytest.raises(FieldError) as info:
            clock.merge(bad)  # type: ignore[arg-type]
        assert info.value.error_class == "LTS_RANGE" and info.value.remote
    assert clock.value == 41 and not clock.saturated


def test_saturates_instead_of_wrapping(caplog: pytest.LogCaptureFixture) -> None:
    clock = LamportClock(LTS_MAX - 1)
    assert clock.tick() == LTS_MAX and not clock.saturated
    assert clock.tick() == LTS_MAX and clock.saturated
    assert clock.merge(LTS_MAX) == LTS_MAX
    assert clock.value == LTS_MAX
    assert sum("saturated" in r.getMessage() for r in caplog.records) == 1, "reported once"


@pytest.mark.parametrize("bad", [-1, 2**63, 1.5, True])
def test_bad_start_values_are_refused(bad: object) -> None:
    with pytest.raises(FieldError):
        LamportClock(bad)  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")  # the point of the test
def test_fork_child_keeps_value_and_gets_a_free_lock() -> None:
    """A lock held by another thread at fork time must not deadlock the child."""
    clock = LamportClock(100)
    held = threading.Event()
    release = threading.Event()

    def hold_lock() -> None:
        with clock._lock:
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold_lock)
    holder.start()
    held.wait(5)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: one tick must complete although the parent's lock was held
        try:
            signal.alarm(10)  # a deadlocked child dies instead of hanging the suite
            value = clock.tick()
            os.write(write, str(value).encode())
        finally:
            os._exit(0)
    release.set()
    holder.join()
    os.close(write)
    _, status = os.waitpid(pid, 0)
    got = os.read(read, 64).decode()
    os.close(read)
    assert os.WIFEXITED(status) and got == "101"
    assert clock.tick() == 101  # the parent's counter is its own


# -- the merge bound (spec §10.1) ------------------------------------------------


def test_one_hostile_header_no_longer_saturates_a_fresh_process() -> None:
    """Issue 13 item 5: lts = 2^63-1 used to saturate the receiver, and everything downstream, for good."""
    clock = LamportClock()
    assert clock.receive(LTS_MAX) == (1, False)
    assert clock.merge(LTS_MAX) == 2, "merge applies the same bound"
    assert not clock.saturated and clock.tick() == 3


@pytest.mark.parametrize(
    ("start", "remote", "expected"),
    [
        pytest.param(0, LAMPORT_MAX_AHEAD, (LAMPORT_MAX_AHEAD + 1, True), id="exactly-at-bound"),
        pytest.param(0, LAMPORT_MAX_AHEAD + 1, (1, False), id="just-over"),
        pytest.param(T, T + LAMPORT_MAX_AHEAD, (T + LAMPORT_MAX_AHEAD + 1, True), id="at-bound-from-1e12"),
        pytest.param(T, T + LAMPORT_MAX_AHEAD + 1, (T + 1, False), id="just-over-from-1e12"),
        pytest.param(5, 2**62, (6, False), id="far-over"),
        pytest.param(500, 3, (501, True), id="behind-is-merged"),
        pytest.param(LTS_MAX - LAMPORT_MAX_AHEAD, LTS_MAX, (LTS_MAX, True), id="saturating-within-bound"),
    ],
)
def test_receive_merges_only_within_the_bound(start: int, remote: int, expected: tuple[int, bool]) -> None:
    clock = LamportClock(start)
    assert clock.receive(remote) == expected
    assert clock.value == expected[0]
    assert LamportClock(start).merge(remote) == expected[0]


def test_the_bound_is_fixed_and_public() -> None:
    """Other implementations must use the same number: it is in the spec and in the vectors."""
    assert LAMPORT_MAX_AHEAD == 2**44
    assert "LAMPORT_MAX_AHEAD" in tempotrace_sdk.wire.__all__
    spec = (Path(__file__).resolve().parents[2] / "spec" / "tt-ext-v3.md").read_text(encoding="utf-8")
    assert "LAMPORT_MAX_AHEAD" in spec and "2^44" in spec


def test_receive_refuses_out_of_range_like_merge() -> None:
    clock = LamportClock(41)
    for bad in (2**63, -1, True, 1.0):
        with pytest.raises(FieldError) as info:
            clock.receive(bad)  # type: ignore[arg-type]
        assert info.value.error_class == "LTS_RANGE" and info.value.remote
    assert clock.value == 41


def test_a_forger_advances_at_most_the_bound_per_header() -> None:
    """Saturating a process takes about 2^19 accepted headers, not one (spec §10.1 reasoning)."""
    clock = LamportClock()
    headers = 0
    while not clock.saturated:
        clock.receive(min(clock.value + LAMPORT_MAX_AHEAD, LTS_MAX))
        headers += 1
    # Each merged header moves the counter 2^44 + 1: 2^63 / (2^44 + 1) rounds up to 2^19.
    assert headers == 2**19


def test_receives_from_many_threads_never_lose_a_tick() -> None:
    """receive is as atomic as tick: 4 threads x 3000 receives of a value far ahead, each a plain tick."""
    clock = LamportClock()
    per_thread, threads = 3000, 4
    flags: list[bool] = []
    lock = threading.Lock()

    def work() -> None:
        mine = [clock.receive(LTS_MAX)[1] for _ in range(per_thread)]
        with lock:
            flags.extend(mine)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert clock.value == per_thread * threads and not any(flags)
