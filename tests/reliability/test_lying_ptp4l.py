"""A ptp4l that lies is not believed (issue 13 item 6; spec/clocks.md §5.1).

A fake daemon on a Unix socket answers the real client; the real quality
rules judge the answer. Before the fix, a path delay of −7×10^13 ns gave OK
with a bound of 120 ns (the offset alone), and a port named ``/dev/ptp0``
passed the "ptp4l disciplines this PHC" check.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from _fake_ptp4l import GM, Answer, FakePtp4l

from tempotrace_sdk.clocks.phc import interface_phc, resolve
from tempotrace_sdk.clocks.ptpquality import Ptp4lHealth
from tempotrace_sdk.errors import ClockError
from tempotrace_sdk.wire import ClockQuality


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[FakePtp4l]:
    fake = FakePtp4l(tmp_path / "ptp4l", Answer())
    yield fake
    fake.close()


def _judge(daemon: FakePtp4l, answer: Answer, **monitor: object) -> Ptp4lHealth:
    daemon.answer = answer
    health = Ptp4lHealth(daemon.path, reference_ns=time.time_ns, timeout_s=2.0, **monitor)  # type: ignore[arg-type]
    health.update()
    return health


def test_an_honest_answer_from_the_fake_daemon_is_ok(daemon: FakePtp4l) -> None:
    """The control: the fake speaks the protocol well enough to be believed when it tells the truth."""
    health = _judge(daemon, Answer()).health
    assert health.quality is ClockQuality.OK, health.reason
    assert 120 + 1_000 <= health.bound_at(time.monotonic_ns()) < 2_000


@pytest.mark.parametrize(
    ("lie", "reason"),
    [
        (Answer(path_delay_ns=-70_000_000_000_000, master_offset_ns=0), "negative"),
        (Answer(path_delay_ns=-5_000), "negative"),
        (Answer(path_delay_ns=3_000_000_000), "no network path"),
        (Answer(log_sync_interval=127), "logSyncInterval 127"),
        (Answer(steps_removed=0), "stepsRemoved 0"),
        (Answer(master_offset_ns=0, cds_offset_ns=5_000_000), "disagree"),
        (Answer(parent_gm_identity=bytes.fromhex("0011220000334455")), "PARENT_DATA_SET"),
        (Answer(gm_identity=bytes(8)), "all zeros"),
        (Answer(gm_clock_class=255), "slave-only"),
        (Answer(port_state=8, path_delay_ns=-70_000_000_000_000), "negative"),  # UNCALIBRATED too
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_an_implausible_answer_is_unknown_with_the_rule_as_reason(daemon: FakePtp4l, lie: Answer, reason: str) -> None:
    health = _judge(daemon, lie).health
    assert health.quality is ClockQuality.UNKNOWN
    assert math.isinf(health.bound_at(time.monotonic_ns()))
    assert "implausible ptp4l answer" in health.reason and reason in health.reason


def test_small_negative_delay_jitter_is_tolerated_but_never_shrinks_the_bound(daemon: FakePtp4l) -> None:
    health = _judge(daemon, Answer(path_delay_ns=-400, master_offset_ns=100)).health
    assert health.quality is ClockQuality.OK
    assert health.bound_at(time.monotonic_ns()) >= 100 + 200  # |delay| / 2, not 0


def test_a_port_named_like_a_device_path_does_not_discipline_the_phc(daemon: FakePtp4l) -> None:
    """``/dev/ptp0`` as a port's interface: an interface lookup that accepts paths would confirm it."""
    lie = Answer(interface="/dev/ptp0")
    health = _judge(daemon, lie, expect_phc="/dev/ptp0", iface_phc=resolve).health
    assert health.quality is ClockQuality.UNKNOWN
    assert "not a network interface name" in health.reason
    with pytest.raises(ClockError, match="not a network interface name"):
        interface_phc("/dev/ptp0")


def test_the_honest_fake_with_a_matching_interface_passes_the_discipline_check(daemon: FakePtp4l) -> None:
    health = _judge(daemon, replace(Answer(), interface="eth3"), expect_phc="/dev/ptp3",
                    iface_phc=lambda iface: "/dev/ptp3").health  # fmt: skip
    assert health.quality is ClockQuality.OK, health.reason
    assert GM.hex()[:6] in health.reason
