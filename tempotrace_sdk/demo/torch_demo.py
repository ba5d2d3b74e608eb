"""The demo's training job: ``torchrun`` with one CPU rank per planned clock, on the gloo backend.

The coordinator is not traced (like any launcher): it starts torchrun, which
starts the ranks (``demo.rank``); it prints their progress as it comes, then
reads the per-rank result files. The spans of every rank go to one OTLP
JSON-lines file, which the coordinator analyses afterwards.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .formatting import offset_text
from .launch import TorchrunJob
from .model import DemoConfig
from .plan import RankPlan
from .processes import WorkerError, terminate_on_signals

__all__ = ["TorchWorkload", "pipeline_text", "rank_log_tail", "run_torch_workload", "torchrun_environment"]


@dataclass
class TorchWorkload:
    clock_check: dict[str, Any]  #: rank 0's check_clocks result (every rank gets the same suspects)
    rank_results: list[dict[str, Any]]  #: result-<rank>.json of every rank, in rank order


def torchrun_environment() -> dict[str, str]:
    """The environment of the demo's torchrun job: the user's, less what would redirect or re-clock its ranks."""
    env = dict(os.environ)
    # Settings from the user's shell must not send the demo's spans elsewhere, pick other clocks or
    # name another job (the step trace ids derive from torchrun's fresh run id).
    for key in list(env):
        if key.startswith("OTEL_EXPORTER_") or key in (
            "OTEL_TRACES_EXPORTER", "TEMPOTRACE_EXPORT_DIR", "TEMPOTRACE_EXPORT_PATH", "TEMPOTRACE_CLOCK",
            "TEMPOTRACE_HOST", "TEMPOTRACE_JOB_ID",
        ):
            del env[key]
    env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})  # one thread a rank: several share a core
    return env


def pipeline_text(world: int) -> str:
    """0→1→2 for the pipeline's stages (elided past eight)."""
    stages = [str(r) for r in range(world)] if world <= 8 else ["0", "1", "…", str(world - 1)]
    return "→".join(stages)


def _clock_check_line(check: dict[str, Any], plans: list[RankPlan]) -> str:
    head = "check_clocks (every rank against rank 0, before training): "
    suspects = check["suspects"]
    rows = {r["rank"]: r for r in check["ranks"]}
    others = [rank for rank in suspects if rows[rank]["verdict"] != "ref"]
    if not suspects:
        return head + "every clock agrees with its claim (or claims nothing)"
    if not others:
        return head + f"rank {suspects[0]} ({plans[suspects[0]].host}), the reference, is the suspect: most ranks " \
            "disagree with it beyond their claims"

    def measured(rank: int) -> str:
        r = rows[rank]
        return f"{offset_text(r['offset_ns'])} ± {offset_text(r['bound_ns']).lstrip('+')} off rank 0"

    if len(suspects) > len(others):  # the reference and its one witness: which of the two lies is unknown
        rank = others[0]
        return head + (f"rank 0 ({plans[0].host}) and rank {rank} ({plans[rank].host}) disagree beyond their claims "
                       f"(measured {measured(rank)}, claims ±{rows[rank]['claim_ns']:,} ns): one witness cannot "
                       "say which clock lies")
    return head + "; ".join(
        f"rank {rank} ({plans[rank].host}) cannot be reconciled with its claim: measured {measured(rank)}, claims "
        f"±{rows[rank]['claim_ns']:,} ns" for rank in others)


def _read_results(folder: Path, world: int) -> list[dict[str, Any]]:
    results = []
    for rank in range(world):
        path = folder / f"result-{rank}.json"
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, ValueError) as err:
            raise WorkerError(f"rank {rank} left no readable {path.name}: {err}") from None
    return results


def rank_log_tail(folder: Path, rank: int, lines: int = 12) -> str:
    """The end of a rank's own log (its stderr: warnings, the traceback of its failure)."""
    try:
        text = (folder / f"rank-{rank}.log").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def run_torch_workload(plans: list[RankPlan], config: DemoConfig, folder: Path,
                       say: Callable[[str], None]) -> TorchWorkload:
    """Run the training job to its end; ``WorkerError`` when a rank or torchrun fails (everything stopped)."""
    world = len(plans)
    cast = json.dumps([{"clock": p.clock, "host": p.host} for p in plans])
    args = ["--out", str(folder), "--cast", cast, "--steps", str(config.iterations), "--carriage", config.carriage]
    say(f"torchrun: {world} ranks on this machine, gloo backend (CPU); each rank imports torch (a few seconds)")
    check: dict[str, Any] | None = None
    failed: dict[str, Any] | None = None  #: the first rank that reported its own failure
    done = 0
    with terminate_on_signals():
        job = TorchrunJob(world, args, torchrun_environment(), folder / "torchrun.log")
        try:
            for event in job.events():
                kind = event["kind"]
                if kind == "joined":
                    say(f"{event['world']} ranks joined the process group ({event['backend']})")
                elif kind == "clock_check":
                    check = event
                    say(_clock_check_line(event, plans))
                elif kind == "built":
                    say(f"instrumented (carriage={config.carriage}); DDP model ({event['parameters']:,} "
                        "parameters, comm_hook on its gradient buckets) and one pipeline stage per rank built")
                elif kind == "step":
                    say(f"step {event['step'] + 1}/{config.iterations}: DDP ({event['buckets']} gradient bucket"
                        f"{'s' if event['buckets'] != 1 else ''} all-reduced through comm_hook), pipeline "
                        f"{pipeline_text(world)} and back ({2 * (world - 1)} send/recv), barrier; mean loss "
                        f"{event['loss']:.2f} ({event['ms']:.0f} ms)")
                elif kind == "failed":
                    # Stop now: the other ranks may sit in a collective (in C, where SIGTERM waits) until
                    # torchrun gives up on them after 30 s.
                    failed = event
                    break
                elif kind == "done":
                    done += 1
                    if done == world:
                        say(f"training done; {world} ranks flushed their spans and wrote their results")
            code = job.wait() if failed is None else 1
        finally:
            job.stop()
    if failed is not None:
        rank = int(failed["rank"])
        raise WorkerError(f"rank {rank} failed: {failed['error']}\n{rank_log_tail(folder, rank)}")
    if code != 0:
        raise WorkerError(f"torchrun exited with code {code}:\n{job.tail()}")
    results = _read_results(folder, world)
    if check is None:
        check = results[0]["clock_check"]
    say("torchrun finished")
    return TorchWorkload(check, results)
