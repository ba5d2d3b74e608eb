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
        self.lts = 0

    def read(self) -> int:
        return time.clock_gettime_ns(TAI) + self.offset

    def domain(self) -> HostDomain:
        return HostDomain("kernel:test:tai", self.read, lambda: self.lts)


def test_two_domains_of_one_clock_measure_one_epoch() -> None:
    """Two processes (two HostDomains here) reading one clock agree on its epoch within their bounds."""
    clock = SteppableClock()
    a, b = clock.domain(), clock.domain()
    assert a.start.same(b.start)
    assert 2 * a.start.half_ns <= MAX_EPOCH_WIDTH_NS or a.unsure == 0
    assert a.read_ns >= MAX_EPOCH_WIDTH_NS  # the relative bound covers a step too small to be seen


def test_no_step_keeps_every_reading_in_the_first_epoch() -> None:
    clock = SteppableClock()
    d = clock.domain()
    for clock.lts in range(1, 200):
        d.check()
    assert d.label((5, 150)) is d.start
    assert d.epoch_of(199) is d.start


@pytest.mark.parametrize("step_ns", [2 * MAX_EPOCH_WIDTH_NS + 1, -(2 * MAX_EPOCH_WIDTH_NS + 1), 37_000_000_000,
                                     -1_000_000])
def test_a_step_starts_a_new_epoch_and_readings_beside_it_have_none(step_ns: int) -> None:
    """A step between two checks: readings ticked before the check before last keep the old epoch,
    readings after the check that saw it get the new one, readings between may lie on either side."""
    clock = SteppableClock()
    d = clock.domain()
    clock.lts = 10
    d.check()
    clock.lts = 20
    d.check()
    clock.offset += step_ns  # the clock steps; readings 21..30 are taken after it
    clock.lts = 30
    d.check()
    clock.lts = 40
    d.check()
    assert d.epoch_of(10) is d.start, "before the check before last: surely before the step"
    assert d.epoch_of(15) is None and d.epoch_of(30) is None, "may be either side of it"
    after = d.epoch_of(31)
    assert after is not None and after is not d.start and not after.same(d.start)
    assert abs(after.mid_ns - d.start.mid_ns - step_ns) <= after.half_ns + d.start.half_ns
    assert d.label((31, 40)) is after
    assert d.label((9, 31)) is None, "a span whose readings straddle the step has no epoch"


def test_two_steps_back_to_back_each_start_an_epoch() -> None:
    clock = SteppableClock()
    d = clock.domain()
    for n in range(1, 6):
        clock.offset += 10_000
        clock.lts = 10 * n
        d.check()
    assert len({d.epoch_of(lts) for lts in (51, 60)}) == 1
    assert d.epoch_of(31) is None  # each window reaches back one check


def test_a_clock_that_fails_to_read_is_taken_as_a_change() -> None:
    clock = SteppableClock()
    d = clock.domain()
    clock.lts = 5
    d.check()

    def broken() -> int:
        raise OSError("gone")

    d._read = broken
    clock.lts = 10
    d.check()
    assert d.epoch_of(7) is None


def test_the_cpu_source_has_a_domain_and_others_none(tmp_path: Path) -> None:
    boot = boot_id()
    if boot is None:
        pytest.skip("no /proc/sys/kernel/random/boot_id here (not Linux)")
    cpu = CpuClock(background=False, chrony=False)
    d = host_domain(cpu, lambda: 0)
    assert d is not None and d.key == domain_key(boot, TAI) == f"kernel:{boot}:tai"
    assert host_domain(object(), lambda: 0) is None  # a simulated or calibrated clock: no raw mapping
    missing = tmp_path / "boot_id"
    assert boot_id(missing) is None
    missing.write_text("\n")
    assert boot_id(missing) is None
