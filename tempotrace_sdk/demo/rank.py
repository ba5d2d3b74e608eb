"""One rank of the demo's training job, started by ``torchrun`` (``python -m tempotrace_sdk.demo.rank``).

Every rank, on the gloo backend (CPU):

1. picks its simulated clock and host from the cast (``--cast``, one entry per
   rank: the coordinator's plan) and calls ``configure()``, which reads RANK,
   WORLD_SIZE and the job id torchrun set;
2. ``check_clocks()``: a four-timestamp ping-pong with rank 0, before any
   training, that names a clock it cannot reconcile with its claim;
3. ``instrument()`` and, per step, inside ``tt.step(i)``:
   - data parallel: a small MLP in ``DistributedDataParallel``, its gradient
     bucket all-reduced through ``comm_hook()``;
   - pipeline: one stage per rank in rank order, the activation sent forward
     rank 0 -> 1 -> ... -> n-1 and its gradient back, over send/recv;
   - a barrier, and an all_reduce of the loss for the progress line;
4. writes what it did (ops it called, the clock check, carriage counters) to
   ``result-<rank>.json`` and flushes its spans.

Progress goes to the coordinator on stdout (``launch.emit``); everything else
this rank prints goes to ``rank-<rank>.log``. The rank exits at once if its
stdin closes (the coordinator is gone).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

from .. import torch as tt
from ..otel import configure
from .launch import emit

__all__ = ["COLLECTIVE_TIMEOUT_S", "main"]

#: A collective or p2p op waiting longer than this fails the job (a rank died or hangs), never hangs it.
COLLECTIVE_TIMEOUT_S = 90.0
#: Pipeline activation: micro-batch x features (2 KiB of float32).
ACTIVATION = (32, 16)


def _watch_stdin() -> None:
    # os.read on the descriptor, not sys.stdin: a daemon thread blocked in the buffered
    # reader holds its lock, and the interpreter aborts at exit when it cannot take it.
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    os._exit(3)  # the coordinator is gone: nobody will read what this rank would write


def _log_to_file(path: Path) -> None:
    """Send this process's stderr (warnings, tracebacks) to its own log file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    os.close(fd)


class Rank:
    """What one rank trains and the ops it calls (counted here, by the workload, not by the tracing)."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        self.ops: Counter[str] = Counter()
        torch.manual_seed(0)  # DDP starts every replica from rank 0's weights anyway
        mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        self.ddp = torch.nn.parallel.DistributedDataParallel(mlp)
        self.ddp.register_comm_hook(None, tt.comm_hook(inner=self._bucket))
        self.ddp_opt = torch.optim.SGD(self.ddp.parameters(), lr=0.05)
        torch.manual_seed(1000 + rank)
        self.stage = torch.nn.Linear(ACTIVATION[1], ACTIVATION[1])
        self.stage_opt = torch.optim.SGD(self.stage.parameters(), lr=0.05)

    def _bucket(self, state: Any, bucket: Any) -> Any:
        self.ops["torch.ddp.bucket"] += 1
        self.ops["torch.all_reduce"] += 1  # allreduce_hook makes one all_reduce per bucket
        return allreduce_hook(state, bucket)

    def _send(self, tensor: torch.Tensor, dst: int) -> None:
        self.ops["torch.send"] += 1
        dist.send(tensor, dst)

    def _recv(self, src: int) -> torch.Tensor:
        self.ops["torch.recv"] += 1
        buf = torch.zeros(ACTIVATION)
        dist.recv(buf, src)
        return buf

    def data_parallel(self, step: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(step * 1000 + self.rank)
        x = torch.randn(64, 32, generator=gen)
        loss: torch.Tensor = (self.ddp(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        self.ddp_opt.zero_grad()
        torch.autograd.backward(loss)  # DDP all-reduces the gradient bucket through comm_hook
        self.ddp_opt.step()
        return loss.detach()

    def pipeline(self, step: int) -> None:
        """Forward rank 0 -> n-1, backward n-1 -> 0: 2 (n-1) messages a step."""
        first, last = self.rank == 0, self.rank == self.world - 1
        if first:
            act = torch.randn(ACTIVATION, generator=torch.Generator().manual_seed(step))
        else:
            act = self._recv(self.rank - 1).requires_grad_()
        out = torch.tanh(self.stage(act))
        self.stage_opt.zero_grad()
        if last:
            torch.autograd.backward(out.pow(2).mean())
        else:
            self._send(out.detach(), self.rank + 1)
            torch.autograd.backward(out, self._recv(self.rank + 1))
        if not first:
            assert act.grad is not None
            self._send(act.grad, self.rank - 1)
        self.stage_opt.step()

    def step(self, step: int) -> float:
        with tt.step(step):
            self.ops["torch.step"] += 1
            loss = self.data_parallel(step)
            self.pipeline(step)
            self.ops["torch.barrier"] += 1
            dist.barrier()
            self.ops["torch.all_reduce"] += 1
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        return float(loss)


def _check_result(check: Any) -> dict[str, Any]:
    return {
        "suspects": list(check.suspects),
        "ranks": [
            {"rank": r.rank, "offset_ns": r.offset_ns, "bound_ns": r.bound_ns, "claim_ns": r.claim_ns,
             "quality": r.quality.name, "unbounded": r.unbounded, "verdict": r.verdict}
            for r in check.ranks
        ],
    }


def reporting_failure(run: Callable[[list[str] | None], int], argv: list[str] | None) -> int:
    """``run(argv)``; a failure is reported to the coordinator (``failed``) before it propagates (every demo
    rank's main: this one and hang_rank.py)."""
    try:
        return run(argv)
    except BaseException as err:
        if not isinstance(err, SystemExit):
            emit("failed", rank=int(os.environ.get("RANK", -1)), error=f"{type(err).__name__}: {err}")
        raise


def main(argv: list[str] | None = None) -> int:
    """Run this rank; a failure is reported to the coordinator (``failed``) before it propagates."""
    return reporting_failure(_run, argv)


def _run(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tempotrace_sdk.demo.rank")
    parser.add_argument("--out", type=Path, required=True, help="folder for the spans, results and logs")
    parser.add_argument("--cast", required=True, help="JSON list, one {clock, host} per rank")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--carriage", default="step", help="instrument(carriage=...): none, step, step+p2p or op")
    args = parser.parse_args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    me = json.loads(args.cast)[rank]
    _log_to_file(args.out / f"rank-{rank}.log")
    threading.Thread(target=_watch_stdin, name="stdin", daemon=True).start()
    emit("hello", rank=rank, pid=os.getpid())

    handle = configure(service_name="demo-train", clock=me["clock"], host=me["host"],
                       export_path=args.out / "trace.jsonl")
    dist.init_process_group("gloo", timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    if rank == 0:
        emit("joined", world=dist.get_world_size(), backend=str(dist.get_backend()))
    check = tt.check_clocks(rounds=8)  # before any training; require="DEGRADED" would stop the job here
    if rank == 0:
        emit("clock_check", **_check_result(check))

    tt.instrument(carriage=args.carriage)  # "step": one exchange per step, nothing added to a p2p op
    job = Rank(rank, world)
    if rank == 0:
        emit("built", parameters=sum(p.numel() for p in job.ddp.parameters()))
    for i in range(args.steps):
        t0 = time.monotonic()
        before = Counter(job.ops)
        loss = job.step(i)
        if rank == 0:
            made = job.ops - before
            emit("step", step=i, loss=loss, ms=1e3 * (time.monotonic() - t0), buckets=made["torch.ddp.bucket"],
                 collectives=made["torch.all_reduce"] + made["torch.barrier"])
    tt.uninstrument()
    result = {"rank": rank, "pid": os.getpid(), "ops": dict(job.ops), "clock_check": _check_result(check),
              "carriage": tt.carriage_counts()}
    del job  # DDP's reducer holds the process group: release it before the group is destroyed
    dist.barrier()  # untraced: every rank is done before any leaves the group
    dist.destroy_process_group()
    handle.shutdown()  # every span on disk before the result says so
    (args.out / f"result-{rank}.json").write_text(json.dumps(result))
    emit("done", rank=rank)
    return 0


if __name__ == "__main__":
    code = main()
    # Everything is on disk (spans flushed, result written) and the coordinator told. Skip the
    # interpreter's teardown: with torch loaded it takes seconds per rank on a busy machine, and once
    # in a few dozen runs under load a rank aborted in it ("terminate called without an active
    # exception", from a C++ thread torch tears down), failing a job whose work was done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
