"""What check_clocks says when clocks fall short (spec/torch.md §5.3): the gate's reasons and fix, the
warning of the form that trains on, each said once, by group rank 0.

Issue 21: on a host without chrony or PTP, ``check_clocks(require="DEGRADED")`` stopped every rank with
"rank(s) 0, 1, 2 below the required quality DEGRADED", once per rank, with no reason and no fix. The jobs
here force that host's condition with simulated clocks (``sim:unsynced``: quality UNKNOWN, as the kernel
rule gives an unsynchronised CPU clock), so they do not depend on this machine's time daemon.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from clock_gate_worker import PASSED, TRAINED_ON  # tests/torch is on sys.path (a package here would be named torch)
from rank_job import log, run_ranks

from tempotrace_sdk.clocks.cpu import CpuClock
from tempotrace_sdk.clocks.simulated import from_spec
from tempotrace_sdk.torch.clockcheck import (
    FIX_LIAR,
    FIX_UNSYNCED,
    RankClock,
    clock_reason,
    gate_message,
    judge,
    warning,
)
from tempotrace_sdk.wire.layout import ClockQuality

OK, DEGRADED, UNKNOWN = ClockQuality.OK, ClockQuality.DEGRADED, ClockQuality.UNKNOWN
WORKER = Path(__file__).with_name("clock_gate_worker.py")
WORLD = 3
#: Three torch processes on a loaded 2-core machine.
JOB_TIMEOUT_S = 180
#: What every line check_clocks prints or logs starts with.
PREFIX = "tempotrace check_clocks:"
UNSYNCED_REASON = "kernel reports STA_UNSYNC: no NTP/PTP daemon is disciplining the system clock"


def rc(rank: int, offset: int = 0, *, claim: int = 220, quality: ClockQuality = OK, clock: str = "sim:ptp",
       reason: str = "simulated: PTP") -> RankClock:
    return RankClock(rank, offset, 50_000, 100_000, claim, quality, (0, 0, 0, 0), clock=clock, reason=reason)


def unsynced(rank: int) -> RankClock:
    return rc(rank, 3_000_000, claim=65_535, quality=UNKNOWN, clock="cpu", reason=UNSYNCED_REASON)


# --- the messages, from judged measurements -------------------------------------------------------------------


def test_every_rank_unsynchronised_gates_with_the_reason_and_the_fix_on_one_line_per_cause() -> None:
    """The issue's host: every clock UNKNOWN. The message names the ranks once (a run), the clock, its
    reason and what to do, and does not call anyone a liar."""
    message = gate_message(judge([unsynced(0), unsynced(1), unsynced(2)], 0), DEGRADED)
    assert message is not None
    head, cause, fix = message.splitlines()[:3]
    assert head == f'{PREFIX} require="DEGRADED" is not met, so every rank exits with status 1:'
    assert cause == f"  ranks 0-2 below DEGRADED: clock cpu, quality UNKNOWN: {UNSYNCED_REASON}"
    assert fix == f"    what to do: {FIX_UNSYNCED}"
    assert "lies" not in message and FIX_LIAR not in message
    assert "clock check against rank 0:" in message  # the measurement table follows


def test_a_lying_clock_is_named_with_its_measurement_and_not_called_unsynchronised() -> None:
    message = gate_message(judge([rc(0), rc(1, 30_000), rc(2, 10_000_000, clock="sim:liar")], 0), DEGRADED)
    assert message is not None
    assert ("  rank 2 (clock sim:liar) lies: measured +10,000,000 ns ± 50,000 ns off rank 0, beyond its claim "
            "(±220 ns) and rank 0's (±220 ns)") in message.splitlines()
    assert f"    what to do: {FIX_LIAR}" in message.splitlines()
    assert "below DEGRADED" not in message and FIX_UNSYNCED not in message


def test_one_witness_is_said_to_be_unable_to_tell_which_clock_lies() -> None:
    message = gate_message(judge([rc(0), rc(1, 5_000_000)], 0), OK)
    assert message is not None and "ranks 0 and 1 disagree beyond both claims" in message
    assert "either clock may be the liar" in message


def test_causes_are_told_apart_and_ranks_with_different_reasons_get_their_own_line() -> None:
    ranks = [rc(0), rc(1), unsynced(2), rc(3, quality=DEGRADED, clock="cpu", reason="chronyd in holdover"),
             rc(4, 9_000_000, clock="sim:liar")]
    message = gate_message(judge(ranks, 0), OK)
    assert message is not None
    lines = message.splitlines()
    assert f"  rank 2 below OK: clock cpu, quality UNKNOWN: {UNSYNCED_REASON}" in lines
    assert "  rank 3 below OK: clock cpu, quality DEGRADED, ±220 ns: chronyd in holdover" in lines
    assert any(line.startswith("  rank 4 (clock sim:liar) lies:") for line in lines)


def test_a_job_that_meets_the_requirement_passes_the_gate_silently() -> None:
    assert gate_message(judge([rc(0), rc(1, 30_000), rc(2, -20_000)], 0), DEGRADED) is None
    assert gate_message(judge([unsynced(0), unsynced(1)], 0), UNKNOWN) is None


def test_a_reason_from_outside_cannot_drive_the_terminal() -> None:
    """spec/reliability.md §7: chronyd's answers and clock names reach stderr escaped."""
    hostile = replace(unsynced(1), reason="\x1b[2Jall clocks OK\nrank 1 passed")
    message = gate_message(judge([unsynced(0), hostile], 0), DEGRADED)
    assert message is not None and "\x1b" not in message and "\\x1b[2Jall clocks OK\\nrank 1 passed" in message


@pytest.mark.parametrize(("ranks", "says"), [
    pytest.param([rc(0), rc(1, 30_000)], None, id="honest-clocks-say-nothing"),
    pytest.param([unsynced(0), unsynced(1), unsynced(2)], "ranks 0-2 claim no usable bound (clock cpu, quality "
                 f"UNKNOWN: {UNSYNCED_REASON})", id="unsynchronised"),
    pytest.param([rc(0), rc(1, claim=65_535, clock="sim:ntp", reason="simulated: NTP")],
                 "rank 1 claim no usable bound (clock sim:ntp, quality OK, bound saturated at 65,535 ns: simulated: "
                 "NTP)", id="saturated-ntp-class"),
    pytest.param([rc(0), rc(1), rc(2, 10_000_000, clock="sim:liar")], "rank 2 (clock sim:liar) lies: measured "
                 "+10,000,000 ns ± 50,000 ns off rank 0", id="liar"),
])
def test_the_form_without_require_warns_in_one_line_saying_what_it_means(ranks: list[RankClock],
                                                                          says: str | None) -> None:
    line = warning(judge(ranks, 0))
    if says is None:
        assert line is None
        return
    assert line is not None and "\n" not in line and line.startswith(PREFIX)
    assert says in line and line.endswith('training goes on (require="DEGRADED" stops the job instead)')
    if "claim no usable bound" in says:
        assert "the analysis orders ranks of one host by their shared clock and the rest by Lamport/SVC" in line
    else:
        assert "the analysis flags the edges a lying clock's stamps contradict" in line


def test_the_reason_is_the_clock_sources_own() -> None:
    """The CPU source's reason (the kernel's sync state, chronyd's answer) whatever this host's daemon is;
    a simulated clock says what it imitates; a source that cannot describe itself gives none."""
    cpu = CpuClock(background=False, chrony=False)
    assert clock_reason(cpu) == cpu.reason != ""
    assert clock_reason(from_spec("unsynced")) == "simulated: unsynchronised CPU clock (CPU, UNKNOWN)"

    class Mute:
        name = "mute"

        def describe(self) -> dict[str, Any]:
            raise OSError("gone")

    assert clock_reason(Mute()) == ""  # type: ignore[arg-type]


# --- real 3-rank gloo jobs ------------------------------------------------------------------------------------


def run(tmp: Path, clocks: dict[int, str], require: str) -> tuple[list[int], dict[int, str]]:
    codes = run_ranks(WORKER, WORLD, tmp, JOB_TIMEOUT_S, lambda rank: {"TEMPOTRACE_CLOCK": clocks[rank],
                                                                         "TT_REQUIRE": require}, check=False)
    return codes, {rank: log(tmp, rank) for rank in range(WORLD)}


def said(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(PREFIX)]


def test_an_unsynchronised_job_warns_once_trains_on_and_the_gate_stops_it_saying_why_once(tmp_path: Path) -> None:
    """Issue 21 item 1 on 3 gloo ranks: ``check_clocks()`` warns (rank 0 only) and every rank trains on;
    ``check_clocks(require="DEGRADED")`` stops every rank with status 1, and only rank 0 says why."""
    codes, logs = run(tmp_path, dict.fromkeys(range(WORLD), "sim:unsynced"), "DEGRADED")
    assert codes == [1, 1, 1], logs
    assert all(TRAINED_ON in logs[rank] and PASSED not in logs[rank] for rank in range(WORLD)), logs
    warned, gated = said(logs[0])
    assert warned.startswith(f"{PREFIX} ranks 0-2 claim no usable bound (clock sim:unsynced, quality UNKNOWN: "
                             "simulated: unsynchronised CPU clock")
    assert gated == f'{PREFIX} require="DEGRADED" is not met, so every rank exits with status 1:'
    assert "  ranks 0-2 below DEGRADED: clock sim:unsynced, quality UNKNOWN: simulated:" in logs[0]
    assert FIX_UNSYNCED in logs[0]
    assert said(logs[1]) == said(logs[2]) == [], (logs[1], logs[2])


def test_a_lying_clock_stops_the_job_named_as_a_liar(tmp_path: Path) -> None:
    codes, logs = run(tmp_path, {0: "sim:ptp,seed=0", 1: "sim:ptp,seed=1", 2: "sim:liar"}, "DEGRADED")
    assert codes == [1, 1, 1], logs
    warned, gated = said(logs[0])
    assert warned.startswith(f"{PREFIX} rank 2 (clock sim:liar) lies: measured +")
    assert gated.startswith(f'{PREFIX} require="DEGRADED" is not met')
    assert "  rank 2 (clock sim:liar) lies: measured +" in logs[0] and FIX_LIAR in logs[0]
    assert "below DEGRADED" not in logs[0]
    assert said(logs[1]) == said(logs[2]) == []
