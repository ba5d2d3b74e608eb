"""The 4-rank gloo job the torch tests share (tests/torch/rank_worker.py says what each step does).

Started as torchrun starts ranks (RANK, WORLD_SIZE, MASTER_* in the environment), once per test
session (conftest.py: the ``job`` fixture), because starting four torch processes on a loaded
machine takes a while. Clocks: ranks 0 and 1 are PTP-class, rank 2 is NTP-class (honest, but its
bound saturates: physics can never use it), rank 3 is the simulated liar (10 ms off, claiming 220 ns).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spans_file import Span, read_spans  # tests/torch is on sys.path (a package here would be named torch)

WORLD = 4
LIAR = 3
NTP = 2
JOB = "job-test"
CLOCKS = {0: "sim:ptp,seed=0", 1: "sim:ptp,seed=1", NTP: "sim:ntp,seed=2", LIAR: "sim:liar"}
WORKER = Path(__file__).with_name("rank_worker.py")
#: A 2-core machine shared with other jobs: starting 4 torch processes can take a while.
JOB_TIMEOUT_S = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Job:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.spans = {r: read_spans(out / f"spans-{r}.jsonl") for r in range(WORLD)}
        self.results = {r: json.loads((out / f"result-{r}.json").read_text()) for r in range(WORLD)}

    @property
    def span_files(self) -> list[str]:
        return [str(self.out / f"spans-{r}.jsonl") for r in range(WORLD)]

    def named(self, rank: int, name: str) -> list[Span]:
        return [s for s in self.spans[rank] if s.name == name]

    def step_span(self, rank: int, number: int) -> Span:
        (found,) = [s for s in self.named(rank, "torch.step") if s["torch.step"] == number]
        return found

    def in_step(self, rank: int, number: int) -> list[Span]:
        trace = self.step_span(rank, number).trace_id
        return [s for s in self.spans[rank] if s.trace_id == trace and s.name != "torch.step"]


def run_job(out: Path) -> Job:
    port = str(_free_port())
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ)
        env.update({
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(WORLD), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port, "TORCHELASTIC_RUN_ID": JOB, "TT_TEST_OUT": str(out),
            "TEMPOTRACE_CLOCK": CLOCKS[rank], "TEMPOTRACE_HOST": f"node{rank}", "OMP_NUM_THREADS": "1",
            "PYTHONWARNINGS": "ignore",
        })
        env.pop("TEMPOTRACE_EXPORT_PATH", None)
        log = (out / f"log-{rank}.txt").open("wb")
        procs.append(subprocess.Popen([sys.executable, str(WORKER)], env=env, stdout=log, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + JOB_TIMEOUT_S
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
    if any(codes):
        logs = "\n".join(f"--- rank {r} (exit {c}) ---\n{(out / f'log-{r}.txt').read_text()[-3000:]}"
                         for r, c in enumerate(codes) if c)
        pytest.fail(f"rank workers failed: {codes}\n{logs}")
    return Job(out)
