"""Start a real multi-rank gloo job as torchrun would (RANK, WORLD_SIZE, MASTER_* in the environment).

Shared by the torch tests that spawn ranks (test_distributed.py: 4 ranks, test_faults.py: 2, ...). Each
rank runs ``worker`` with its output in ``out`` (stdout and stderr in ``log-<rank>.txt``); a job that
does not finish in ``timeout_s`` is killed; a rank that fails fails the test with the tail of every
failed rank's log, unless the test expects failures (``check=False``: it reads the exit codes).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from spans_file import Span, read_spans


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(worker: Path, world: int, out: Path, timeout_s: float,
              extra_env: Callable[[int], dict[str, str]] = lambda rank: {}, *, check: bool = True) -> list[int]:
    """Run ``world`` ranks of ``worker``; their exit codes (-9: killed at the timeout)."""
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = dict(os.environ)
        env.update({
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port, "TT_TEST_OUT": str(out), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
        })
        env.update(extra_env(rank))
        env.pop("TEMPOTRACE_EXPORT_PATH", None)
        log_file = (out / f"log-{rank}.txt").open("wb")
        procs.append(subprocess.Popen([sys.executable, str(worker)], env=env, stdout=log_file,
                                      stderr=subprocess.STDOUT))
    deadline = time.monotonic() + timeout_s
    try:
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    codes = [p.returncode for p in procs]
    if check and any(codes):
        logs = "\n".join(f"--- rank {r} (exit {c}) ---\n{(out / f'log-{r}.txt').read_text()[-3000:]}"
                         for r, c in enumerate(codes) if c)
        pytest.fail(f"rank workers failed: {codes}\n{logs}")
    return codes


def log(out: Path, rank: int) -> str:
    """What a rank printed (stdout and stderr, interleaved as written)."""
    return (out / f"log-{rank}.txt").read_text(errors="replace")


class Job:
    """What a finished job left: each rank's spans and its result file."""

    def __init__(self, out: Path, world: int) -> None:
        self.out = out
        self.spans = {r: read_spans(out / f"spans-{r}.jsonl") for r in range(world)}
        self.results = {r: json.loads((out / f"result-{r}.json").read_text()) for r in range(world)}

    def named(self, rank: int, name: str) -> list[Span]:
        return [s for s in self.spans[rank] if s.name == name]

    def step_span(self, rank: int, number: int) -> Span:
        (found,) = [s for s in self.named(rank, "torch.step") if s["torch.step"] == number]
        return found

    def in_step(self, rank: int, number: int) -> list[Span]:
        trace = self.step_span(rank, number).trace_id
        return [s for s in self.spans[rank] if s.trace_id == trace and s.name != "torch.step"]
