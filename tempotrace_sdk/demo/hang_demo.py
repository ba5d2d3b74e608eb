"""``tempotrace demo --hang``: a torchrun job in which one rank stops, and the hang report that comes of it.

Timeline: torchrun starts the ranks (``demo.hang_rank``, gloo on CPU, the
flight recorder on: ``retain="ring"``); they train a few steps of
collectives; then rank ``STUCK_RANK`` sleeps instead of entering an
all_reduce, and the others block in it. ``hang_timeout`` seconds later their
watchdogs dump their rings and ask every rank to dump (torch/dumps.py). The
coordinator watches the export file, from where it ended at the stall, until
every rank's dump record is in it (or ``DUMP_WAIT_S`` past ``hang_timeout``,
or a rank fails), stops the job, analyses the file as ``tempotrace analyze``
does and prints the top of its report, where the analysis names the rank that
never entered the collective. ``hang_timeout`` stays below
``HANG_TIMEOUT_LIMIT_S``, so that the wait ends before the process group's
timeout fails that collective.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .._terminal_text import MESSAGE_LIMIT, shown
from .coordinator import Progress, analyse, output_paths
from .dump_watch import DumpWatch
from .hang_summary import hang_checks, render_hang
from .launch import TorchrunJob
from .model import DEFAULT_OUT
from .plan import RankPlan, plan_ranks
from .processes import WorkerError, terminate_on_signals
from .torch_demo import rank_log_tail, torchrun_environment

__all__ = ["DEFAULT_HANG_TIMEOUT_S", "GROUP_TIMEOUT_S", "HANG_TIMEOUT_LIMIT_S", "STUCK_RANK", "HangConfig",
           "HangResult", "HangWait", "run_hang_demo", "watch_hang"]

#: The demo's hang_timeout: small, so that the demo is short (a real job's default is 300 s).
DEFAULT_HANG_TIMEOUT_S = 3.0
#: The rank that stops.
STUCK_RANK = 2
#: How long past hang_timeout (counted from STUCK_RANK's stop) every rank's dump may take to reach the file: a
#: watchdog looks every 0.5 s, a dump flushes within 5 s (torch/dumps.py POLL_S, DUMP_TIMEOUT_S).
DUMP_WAIT_S = 10.0
#: The ranks' process-group timeout (init_process_group(timeout=...)), as the training demo's
#: (rank.COLLECTIVE_TIMEOUT_S, not imported: that module imports torch): past it the others' all_reduce fails.
GROUP_TIMEOUT_S = 90.0
#: hang_timeout must be below this: the dumps' wait (hang_timeout + DUMP_WAIT_S) then ends before the group's
#: timeout fails the collective the dumps are meant to show pending.
HANG_TIMEOUT_LIMIT_S = GROUP_TIMEOUT_S - DUMP_WAIT_S
#: How often the coordinator looks at the export file meanwhile.
POLL_S = 0.1
#: How long the ranks get to exit on their stdin's EOF before torchrun and they are sent SIGTERM (then SIGKILL).
EOF_GRACE_S = 2.0


@dataclass(frozen=True)
class HangConfig:
    ranks: int = 4
    steps: int = 3  #: normal steps before the one in which STUCK_RANK stops
    hang_timeout_s: float = DEFAULT_HANG_TIMEOUT_S
    out: Path = DEFAULT_OUT
    carriage: str = "step"  #: instrument(carriage=...)
    seed: int = 1  #: the simulated clocks' noise

    def __post_init__(self) -> None:
        if self.ranks <= STUCK_RANK:
            raise ValueError(f"the hang demo needs at least {STUCK_RANK + 1} ranks (rank {STUCK_RANK} stops)")
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got {self.steps}")
        if not 0 < self.hang_timeout_s < HANG_TIMEOUT_LIMIT_S:
            raise ValueError(f"hang_timeout must be more than 0 and less than {HANG_TIMEOUT_LIMIT_S:g} seconds "
                             f"(the process group times out at {GROUP_TIMEOUT_S:g}), got {self.hang_timeout_s}")
        if self.carriage == "op":
            raise ValueError("carriage 'op': carried collectives are not in the flight-recorder ring, so nothing "
                             "would be dumped")


@dataclass
class HangResult:
    config: HangConfig
    paths: dict[str, Path]
    watch: DumpWatch  #: the dump records and pending ops read from the export file
    stopped: bool  #: torchrun and every rank exited
    dumps_s: float | None  #: from STUCK_RANK's stop to the last rank's dump record in the file (None: not every rank)
    report_text: str = ""  #: the analysis' text report
    elapsed_s: float = 0.0
    checks: dict[str, bool] = field(default_factory=dict)
    failure: str | None = None  #: what a rank that failed after the stall said (the wait ended there)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(self.checks.values())


def run_hang_demo(config: HangConfig, out: TextIO | None = None) -> HangResult:
    """Run the hang demo; ``WorkerError`` when the job fails before the hang (every process stopped). A rank
    that fails after the hang ends the wait: the dumps written by then are analysed (``HangResult.failure``)."""
    stream = out or sys.stdout
    say = Progress(stream)
    plans = plan_ranks(config.ranks, liar=False, seed=config.seed)
    paths = output_paths(config.out)
    print(_header(config, paths["out"]), file=stream, flush=True)
    result = _run_job(plans, config, paths, say)
    report = analyse(paths)
    result.report_text = report.to_text()
    say(f"analysed {report.spans:,} spans (tempotrace analyze {shown(paths['trace'], MESSAGE_LIMIT)})")
    result.checks = hang_checks(result, STUCK_RANK)
    result.elapsed_s = time.monotonic() - say.t0
    print(render_hang(result, STUCK_RANK), file=stream, flush=True)
    return result


def _header(config: HangConfig, folder: Path) -> str:
    steps = f"{config.steps} normal step{'s' if config.steps != 1 else ''}"
    return (f"TempoTrace demo --hang: {config.ranks} CPU ranks under torchrun (gloo), flight recorder on "
            f"(instrument(retain=\"ring\", hang_timeout={config.hang_timeout_s:g})); {steps}, then rank "
            f"{STUCK_RANK} stops before an all_reduce the others enter; outputs in {shown(folder, MESSAGE_LIMIT)}/")


def _run_job(plans: list[RankPlan], config: HangConfig, paths: dict[str, Path],
             say: Callable[[str], None]) -> HangResult:
    world = len(plans)
    cast = json.dumps([{"clock": p.clock, "host": p.host} for p in plans])
    args = ["--out", str(paths["out"]), "--cast", cast, "--hang-step", str(config.steps),
            "--stuck-rank", str(STUCK_RANK), "--hang-timeout", str(config.hang_timeout_s),
            "--carriage", config.carriage, "--group-timeout", str(GROUP_TIMEOUT_S)]
    watch = DumpWatch(paths["trace"])
    say(f"torchrun: {world} ranks on this machine, gloo backend (CPU); each rank imports torch (a few seconds)")
    with terminate_on_signals():
        job = TorchrunJob(world, args, torchrun_environment(), paths["out"] / "torchrun.log",
                          module="tempotrace_sdk.demo.hang_rank")
        try:
            wait = watch_hang(job.events(idle_s=POLL_S), watch, world, config.hang_timeout_s, say)
        finally:
            job.stop(eof_grace_s=EOF_GRACE_S)
    if wait.failed_before is not None:
        rank = wait.failed_before
        raise WorkerError(f"rank {rank} failed: {wait.failure}\n{rank_log_tail(paths['out'], rank)}")
    if wait.stalled is None:
        raise WorkerError(f"the job ended before rank {STUCK_RANK} stopped (torchrun code "
                          f"{job.process.returncode}):\n{job.tail()}")
    watch.poll()  # anything that landed while the job was stopped
    say(f"stopped torchrun and its {world} ranks" if job.stopped() else "torchrun or a rank would not stop")
    return HangResult(config, paths, watch, job.stopped(), wait.dumps_s, failure=wait.failure)


@dataclass
class HangWait:
    """How the wait for the dumps ended (``watch_hang``)."""

    stalled: float | None = None  #: monotonic time of STUCK_RANK's ``stalled`` event (None: it never came)
    dumps_s: float | None = None  #: from the stall to the last rank's dump record (None: not every rank)
    failed_before: int | None = None  #: the rank whose ``failed`` event came before the stall: no hang to report
    failure: str | None = None  #: what the first failed rank said ("rank N failed: ..." after the stall)


def watch_hang(events: Iterable[dict[str, Any]], watch: DumpWatch, world: int, hang_timeout_s: float,
               say: Callable[[str], None]) -> HangWait:
    """Follow the ranks' events until every rank's dump record is in the file, ``DUMP_WAIT_S`` past
    ``hang_timeout_s`` after the stall, a rank fails or the job ends. Only dumps written after the stall count
    (``DumpWatch.skip_to_end``); a failure after it ends the wait, and what was dumped is analysed."""
    wait = HangWait()
    for event in events:
        kind = event["kind"]
        if kind == "joined":
            say(f"{event['world']} ranks joined the process group ({shown(event['backend'])})")
        elif kind == "instrumented":
            say(f"instrumented: retain={shown(event['retain'])!r} (a flight-recorder ring of {event['ring_ops']:,} "
                f"ops, exported only when dumped), hang_timeout={event['hang_timeout']:g} s")
        elif kind == "step":
            say(f"step {event['step'] + 1}: {event['all_reduces']} all_reduces and a barrier on every rank "
                f"({event['ms']:.0f} ms)")
        elif kind == "stalled" and wait.stalled is None:
            wait.stalled = time.monotonic()
            watch.skip_to_end()  # a dump written before the stall (a slow step's, an exception's) is not this one
            say(f"step {event['step'] + 1}: rank {event['rank']} stops before all_reduce "
                f"{event['all_reduce'] + 1} of the step and sleeps; the others enter it and block")
        elif kind == "failed":
            rank = int(str(event["rank"]))
            if wait.stalled is None:
                wait.failed_before, wait.failure = rank, str(event["error"])
                return wait
            wait.failure = f"rank {rank} failed: {event['error']}"
            say(f"{shown(wait.failure, MESSAGE_LIMIT)} (after rank {STUCK_RANK} stopped); stopping the job and "
                "analysing what was dumped")
            _poll(watch, say)
            return wait
        if wait.stalled is None:
            continue
        _poll(watch, say)
        if watch.dumped() >= set(range(world)):
            wait.dumps_s = time.monotonic() - wait.stalled
            say(f"every rank's dump is in {shown(watch.path.name)}, {wait.dumps_s:.1f} s after rank {STUCK_RANK} "
                "stopped; stopping the job")
            return wait
        if time.monotonic() - wait.stalled > hang_timeout_s + DUMP_WAIT_S:
            missing = ", ".join(str(r) for r in sorted(set(range(world)) - watch.dumped()))
            say(f"no dump from rank(s) {missing} {hang_timeout_s + DUMP_WAIT_S:.0f} s after rank "
                f"{STUCK_RANK} stopped; stopping the job")
            return wait
    return wait


def _poll(watch: DumpWatch, say: Callable[[str], None]) -> None:
    for rank, dump in watch.poll():
        asked = f", asked by rank {dump.requested_by}" if dump.requested_by is not None else ""
        say(f"rank {rank} dumped its flight recorder ({shown(dump.reason)}{asked}): {dump.ops} ops, "
            f"{dump.pending} pending")
