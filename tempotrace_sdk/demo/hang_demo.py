"""``tempotrace demo --hang``: a torchrun job in which one rank stops, and the hang report that comes of it.

Timeline: torchrun starts the ranks (``demo.hang_rank``, gloo on CPU, the
flight recorder on: ``retain="ring"``); they train a few steps of
collectives; then rank ``STUCK_RANK`` sleeps instead of entering an
all_reduce, and the others block in it. ``hang_timeout`` seconds later their
watchdogs dump their rings and ask every rank to dump (torch/dumps.py). The
coordinator watches the export file until every rank's dump record is in it
(or ``DUMP_WAIT_S`` past ``hang_timeout``), stops the job, analyses the file
as ``tempotrace analyze`` does and prints the top of its report, where the
analysis names the rank that never entered the collective.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .coordinator import Progress, analyse, output_paths
from .dump_watch import DumpWatch
from .hang_summary import hang_checks, render_hang
from .launch import TorchrunJob
from .model import DEFAULT_OUT
from .plan import RankPlan, plan_ranks
from .processes import WorkerError, terminate_on_signals
from .torch_demo import rank_log_tail, torchrun_environment

__all__ = ["DEFAULT_HANG_TIMEOUT_S", "STUCK_RANK", "HangConfig", "HangResult", "run_hang_demo"]

#: The demo's hang_timeout: small, so that the demo is short (a real job's default is 300 s).
DEFAULT_HANG_TIMEOUT_S = 3.0
#: The rank that stops.
STUCK_RANK = 2
#: How long past hang_timeout (counted from STUCK_RANK's stop) every rank's dump may take to reach the file: a
#: watchdog looks every 0.5 s, a dump flushes within 5 s (torch/dumps.py POLL_S, DUMP_TIMEOUT_S).
DUMP_WAIT_S = 10.0
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
        if not 0 < self.hang_timeout_s < float("inf"):
            raise ValueError(f"hang_timeout must be a positive number of seconds, got {self.hang_timeout_s}")


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

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(self.checks.values())


def run_hang_demo(config: HangConfig, out: TextIO | None = None) -> HangResult:
    """Run the hang demo; ``WorkerError`` when the job fails before the hang (every process stopped)."""
    stream = out or sys.stdout
    say = Progress(stream)
    plans = plan_ranks(config.ranks, liar=False, seed=config.seed)
    paths = output_paths(config.out)
    print(_header(config, paths["out"]), file=stream, flush=True)
    result = _run_job(plans, config, paths, say)
    report = analyse(paths)
    result.report_text = report.to_text()
    say(f"analysed {report.spans:,} spans (tempotrace analyze {paths['trace']})")
    result.checks = hang_checks(result, STUCK_RANK)
    result.elapsed_s = time.monotonic() - say.t0
    print(render_hang(result, STUCK_RANK), file=stream, flush=True)
    return result


def _header(config: HangConfig, folder: Path) -> str:
    steps = f"{config.steps} normal step{'s' if config.steps != 1 else ''}"
    return (f"TempoTrace demo --hang: {config.ranks} CPU ranks under torchrun (gloo), flight recorder on "
            f"(instrument(retain=\"ring\", hang_timeout={config.hang_timeout_s:g})); {steps}, then rank "
            f"{STUCK_RANK} stops before an all_reduce the others enter; outputs in {folder}/")


def _run_job(plans: list[RankPlan], config: HangConfig, paths: dict[str, Path],
             say: Callable[[str], None]) -> HangResult:
    world = len(plans)
    cast = json.dumps([{"clock": p.clock, "host": p.host} for p in plans])
    args = ["--out", str(paths["out"]), "--cast", cast, "--hang-step", str(config.steps),
            "--stuck-rank", str(STUCK_RANK), "--hang-timeout", str(config.hang_timeout_s),
            "--carriage", config.carriage]
    watch = DumpWatch(paths["trace"])
    stalled: float | None = None
    dumps_s: float | None = None
    failed: dict[str, object] | None = None
    say(f"torchrun: {world} ranks on this machine, gloo backend (CPU); each rank imports torch (a few seconds)")
    with terminate_on_signals():
        job = TorchrunJob(world, args, torchrun_environment(), paths["out"] / "torchrun.log",
                          module="tempotrace_sdk.demo.hang_rank")
        try:
            for event in job.events(idle_s=POLL_S):
                kind = event["kind"]
                if kind == "joined":
                    say(f"{event['world']} ranks joined the process group ({event['backend']})")
                elif kind == "instrumented":
                    say(f"instrumented: retain={event['retain']!r} (a flight-recorder ring of {event['ring_ops']:,} "
                        f"ops, exported only when dumped), hang_timeout={event['hang_timeout']:g} s")
                elif kind == "step":
                    say(f"step {event['step'] + 1}: {event['all_reduces']} all_reduces and a barrier on every rank "
                        f"({event['ms']:.0f} ms)")
                elif kind == "stalled":
                    stalled = time.monotonic()
                    say(f"step {event['step'] + 1}: rank {event['rank']} stops before all_reduce "
                        f"{event['all_reduce'] + 1} of the step and sleeps; the others enter it and block")
                elif kind == "failed":
                    failed = event
                    break
                if stalled is None:
                    continue
                for rank, dump in watch.poll():
                    asked = f", asked by rank {dump.requested_by}" if dump.requested_by is not None else ""
                    say(f"rank {rank} dumped its flight recorder ({dump.reason}{asked}): {dump.ops} ops, "
                        f"{dump.pending} pending")
                if watch.dumped() >= set(range(world)):
                    dumps_s = time.monotonic() - stalled
                    say(f"every rank's dump is in {paths['trace'].name}, {dumps_s:.1f} s after rank {STUCK_RANK} "
                        "stopped; stopping the job")
                    break
                if time.monotonic() - stalled > config.hang_timeout_s + DUMP_WAIT_S:
                    missing = ", ".join(str(r) for r in sorted(set(range(world)) - watch.dumped()))
                    say(f"no dump from rank(s) {missing} {config.hang_timeout_s + DUMP_WAIT_S:.0f} s after rank "
                        f"{STUCK_RANK} stopped; stopping the job")
                    break
        finally:
            job.stop(eof_grace_s=EOF_GRACE_S)
    if failed is not None:
        rank = int(str(failed["rank"]))
        raise WorkerError(f"rank {rank} failed: {failed['error']}\n{rank_log_tail(paths['out'], rank)}")
    if stalled is None:
        raise WorkerError(f"the job ended before rank {STUCK_RANK} stopped (torchrun code "
                          f"{job.process.returncode}):\n{job.tail()}")
    watch.poll()  # anything that landed while the job was stopped
    say(f"stopped torchrun and its {world} ranks" if job.stopped() else "torchrun or a rank would not stop")
    return HangResult(config, paths, watch, job.stopped(), dumps_s)
