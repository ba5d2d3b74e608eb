"""LamportClock under threads and fork (spec §10)."""

from __future__ import annotations

import itertools
import os
import signal
import sys
import threading

import pytest

from tempotrace_sdk import FieldError, LamportClock

LTS_MAX = 2**63 - 1


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
