"""One rank of ``tempotrace demo --hang``, started by ``torchrun`` (``python -m tempotrace_sdk.demo.hang_rank``).

Every rank, on the gloo backend (CPU): ``configure()`` with its clock from the
cast, ``init_process_group("gloo")``, ``instrument(retain="ring",
hang_timeout=H)``, then steps of a tiny training loop inside ``tt.step()``:
``ALL_REDUCES`` all_reduces of a small tensor and a barrier. At step
``--hang-step`` the stuck rank stops before the step's second all_reduce and
sleeps instead, while every other rank enters that all_reduce and blocks in it.
After H seconds their watchdogs dump their flight-recorder rings and ask every
rank, the stuck one too, to dump (tempotrace_sdk/torch/dumps.py). Nothing here
ends the hang: the coordinator stops the job once every dump is on disk.

Progress goes to the coordinator on stdout (``launch.emit``); everything else
goes to ``rank-<rank>.log``. The rank exits at once when its stdin closes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from .. import torch as tt
from ..otel import configure
from .launch import emit
from .rank import _log_to_file, _watch_stdin, reporting_failure

__all__ = ["ALL_REDUCES", "RING_OPS", "SKIPPED", "main"]

#: all_reduces in every step (then one barrier).
ALL_REDUCES = 3
#: Which of the step's all_reduces the stuck rank never enters: not the first, so that its ring ends in a
#: completed op of the very step it hangs in.
SKIPPED = 1
#: The flight recorder's ring: more ops than the demo makes, so the dump holds the whole run.
RING_OPS = 1024


def _train(rank: int, steps: int, hang_step: int, stuck: int, group_timeout_s: float) -> None:
    grad = torch.ones(8)
    for i in range(steps):
        t0 = time.monotonic()
        with tt.step(i):
            for k in range(ALL_REDUCES):
                if i == hang_step and k == SKIPPED and rank == stuck:
                    emit("stalled", rank=rank, step=i, all_reduce=k)
                    # Sleep, not exit: a rank that is alive but stuck (a data loader, a deadlock) is the hard case.
                    time.sleep(group_timeout_s)
                    raise RuntimeError(f"nobody stopped the job within {group_timeout_s:g} s of the hang")
                dist.all_reduce(grad)
                grad /= dist.get_world_size()
            dist.barrier()
        if rank == 0:
            emit("step", step=i, ms=1e3 * (time.monotonic() - t0), all_reduces=ALL_REDUCES)


def main(argv: list[str] | None = None) -> int:
    """Run this rank; a failure is reported to the coordinator (``failed``) before it propagates."""
    return reporting_failure(_run, argv)


def _run(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tempotrace_sdk.demo.hang_rank")
    parser.add_argument("--out", type=Path, required=True, help="folder for the spans and logs")
    parser.add_argument("--cast", required=True, help="JSON list, one {clock, host} per rank")
    parser.add_argument("--hang-step", type=int, required=True, help="the step the stuck rank stops in")
    parser.add_argument("--stuck-rank", type=int, required=True)
    parser.add_argument("--hang-timeout", type=float, required=True, help="instrument(hang_timeout=...), seconds")
    parser.add_argument("--carriage", default="step", help="instrument(carriage=...): none or step")
    parser.add_argument("--group-timeout", type=float, required=True,
                        help="the process group's timeout, seconds (hang_demo.GROUP_TIMEOUT_S)")
    args = parser.parse_args(argv)
    rank = int(os.environ["RANK"])
    me = json.loads(args.cast)[rank]
    _log_to_file(args.out / f"rank-{rank}.log")
    threading.Thread(target=_watch_stdin, name="stdin", daemon=True).start()
    emit("hello", rank=rank, pid=os.getpid())

    configure(service_name="demo-hang", clock=me["clock"], host=me["host"], export_path=args.out / "trace.jsonl")
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.group_timeout))
    if rank == 0:
        emit("joined", world=dist.get_world_size(), backend=str(dist.get_backend()))
    # Every knob given: the user's TEMPOTRACE_TORCH_* variables must not change the demo.
    tt.instrument(carriage=args.carriage, retain="ring", ring_ops=RING_OPS, export_every=0,
                  hang_timeout=args.hang_timeout, sdk_spans=False)
    if rank == 0:
        emit("instrumented", retain="ring", ring_ops=RING_OPS, hang_timeout=args.hang_timeout)
    _train(rank, args.hang_step + 1, args.hang_step, args.stuck_rank, args.group_timeout)
    raise RuntimeError(f"step {args.hang_step} ended: rank {args.stuck_rank} never stopped")


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as rank.py: skip torch's slow and, under load, occasionally aborting teardown
