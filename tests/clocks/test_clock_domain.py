"""The host clock domain (spec/clocks.md §Domain): the epoch a process measures, and the steps it sees.

A real kernel clock cannot be stepped from a test without root and without disturbing the machine, so the
steps here are made by the read function the domain is given (the correction a source adds, moved), the
same path a new TAI offset or a changed leap table takes; the live CLOCK_TAI and CLOCK_MONOTONIC are read
for everything else.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tempotrace_sdk.clocks.cpu import CpuClock
from tempotrace_sdk.clocks.domain import MAX_EPOCH_WIDTH_NS, HostDomain, boot_id, domain_key, host_domain

TAI = getattr(time, "CLOCK_TAI", 11)


class SteppableClock:
    """CLOCK_TAI plus a correction the test moves: a step as every later reading sees it."""

    def __init__(self) -> None:
        self.offset = 0

    def read(self) -> int:
        return time.clock_gettime_ns(TAI) + self.offset

    def domain(self) -> HostDomain:
        return HostDomain("kernel:test:tai", self.read)


def test_two_domains_of_one_clock_measure_one_epoch() -> None:
    """Two processes (two HostDomains here) reading one clock agree on its epoch within their bounds."""
    clock = SteppableClock()
    a, b = clock.domain(), clock.domain()
    assert a.start.same(b.start)
    assert a.read_ns >= MAX_EPOCH_WIDTH_NS  # the relative bound covers a step too small to be seen


def test_no_step_keeps_every_reading_in_the_first_epoch() -> None:
    clock = SteppableClock()
    d = clock.domain()
    first = clock.read()
    for _ in range(200):
        d.check()
    assert d.label((first, clock.read())) is d.start


def test_a_reading_from_before_the_domain_was_made_has_none() -> None:
    """A span open when the clock was chosen may hold a reading of another clock: it is not labelled."""
    clock = SteppableClock()
    before = clock.read()
    time.sleep(0.001)
    d = clock.domain()
    assert d.label((before, clock.read())) is None


# +-1: the smallest step a check is sure to see, just over twice the domain's width (known once it is made)
@pytest.mark.parametrize("step_ns", [1, -1, 37_000_000_000, -1_000_000])
def test_a_step_starts_a_new_epoch_and_readings_are_placed_by_their_values(step_ns: int) -> None:
    """A step between two checks: a reading is in the epoch its value fits, whenever it is written down;
    one whose value fits either side (within the step's size of it) is in none."""
    clock = SteppableClock()
    d = clock.domain()
    if abs(step_ns) == 1:
        step_ns *= 2 * d.max_width_ns + 1
    old = clock.read()  # more than a small step's size before the last check that sees its epoch
    time.sleep(0.005)
    d.check()
    time.sleep(0.002)
    late_old = clock.read()  # taken just before the step, written after it (a thread that lost the GIL)
    clock.offset += step_ns
    new = clock.read()
    d.check()
    time.sleep(0.002)
    newer = clock.read()
    after = d.current
    assert after is not d.start and not after.same(d.start)
    assert abs(after.mid_ns - d.start.mid_ns - step_ns) <= after.half_ns + d.start.half_ns
    assert d.label((old,)) is d.start
    assert d.label((newer,)) is after
    assert d.label((old, newer)) is None, "a span whose readings straddle the step has no epoch"
    # Taken between the last check that saw the old epoch and the one that saw the new: either side, unless
    # its value rules one out (a big step puts it far outside the other epoch's interval).
    for reading in (late_old, new):
        got = d.label((reading,))
        assert got is None or got is (d.start if reading == late_old else after)
    if abs(step_ns) > 10**9:
        assert d.label((late_old,)) is d.start and d.label((new,)) is after


def test_many_steps_stop_the_labels_rather_than_guess() -> None:
    from tempotrace_sdk.clocks.domain import MAX_EPOCHS

    clock = SteppableClock()
    d = clock.domain()
    for _ in range(MAX_EPOCHS + 1):
        clock.offset += 10_000
        d.check()
    assert d.label((clock.read(),)) is None


class SlowClock(SteppableClock):
    """A clock that takes ``read_s`` to read (a VM's clock source), and ``cold_s`` for the next ``cold`` reads
    (a thread just woken from sleep)."""

    def __init__(self, read_s: float) -> None:
        super().__init__()
        self.read_s, self.cold, self.cold_s = read_s, 0, 0.0

    def read(self) -> int:
        took = self.read_s
        if self.cold:
            self.cold -= 1
            took = self.cold_s
        end = time.perf_counter() + took
        while time.perf_counter() < end:
            pass
        return super().read()


def test_a_clock_slow_to_read_widens_what_a_check_accepts_not_the_epochs() -> None:
    """Where one sandwich takes longer than 1 µs, every check would be too wide to tell by a fixed limit: a
    change each, and after MAX_EPOCHS no labels at all. The domain takes its limit from its clock."""
    from tempotrace_sdk.clocks.domain import MAX_EPOCHS

    clock = SlowClock(2e-6)
    d = HostDomain("kernel:test:tai", clock.read)
    for _ in range(MAX_EPOCHS + 1):
        d.check()
    assert d.label((clock.read(),)) is d.start
    assert d.max_width_ns > 2 * MAX_EPOCH_WIDTH_NS
    assert d.read_ns >= d.max_width_ns  # what a check cannot see is in the relative bound
    clock.offset += 2 * d.max_width_ns + 1  # a step beyond what the wider limit hides is still seen
    d.check()
    assert not d.current.same(d.start) and d.label((clock.read(),)) is d.current


def test_a_few_cold_reads_are_tried_past_not_taken_as_a_change() -> None:
    """A check made just after sleep meets a few slow reads: it tries on rather than spend an epoch."""
    clock = SlowClock(0.0)
    d = HostDomain("kernel:test:tai", clock.read)
    # the check's sandwich and the usual five tries, and two more, each wider than the domain accepts
    clock.cold, clock.cold_s = 8, 2 * d.max_width_ns / 1e9
    d.check()
    assert clock.cold == 0 and len(d._epochs) == 1
    assert d.label((clock.read(),)) is d.start


def test_a_clock_that_fails_to_read_is_taken_as_a_change() -> None:
    clock = SteppableClock()
    d = clock.domain()
    d.check()
    before = len(d._epochs)

    def broken() -> int:
        raise OSError("gone")

    d._read = broken
    d.check()
    assert len(d._epochs) == before + 1
    d._read = clock.read
    assert d.label((clock.read(),)) is not d.start


def test_a_forked_child_gets_a_lock_of_its_own() -> None:
    import os

    clock = SteppableClock()
    d = clock.domain()
    d._lock.acquire()  # as if another thread were inside check() when the process forked
    pid = os.fork()
    if pid == 0:
        try:
            d.check()
        finally:
            os._exit(0)
    d._lock.release()
    _, status = os.waitpid(pid, 0)
    assert status == 0


def test_the_cpu_source_has_a_domain_and_others_none(tmp_path: Path) -> None:
    boot = boot_id()
    if boot is None:
        pytest.skip("no /proc/sys/kernel/random/boot_id here (not Linux)")
    cpu = CpuClock(background=False, chrony=False)
    d = host_domain(cpu)
    assert d is not None and d.key == domain_key(boot, TAI) == f"kernel:{boot}:tai"
    assert host_domain(object()) is None  # a simulated or calibrated clock: no raw mapping
    missing = tmp_path / "boot_id"
    assert boot_id(missing) is None
    missing.write_text("\n")
    assert boot_id(missing) is None
