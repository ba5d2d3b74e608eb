"""The 4-rank gloo job the torch tests share (tests/torch/rank_worker.py says what each step does).

Started as torchrun starts ranks (rank_job.py), once per test session (conftest.py: the ``job``
fixture), because starting four torch processes on a loaded machine takes a while. Clocks: ranks 0
and 1 are PTP-class, rank 2 is NTP-class (honest, but its bound saturates: physics can never use
it), rank 3 is the simulated liar (10 ms off, claiming 220 ns).
"""

from __future__ import annotations

from pathlib import Path

import rank_job  # tests/torch is on sys.path (a package here would be named torch)

WORLD = 4
LIAR = 3
NTP = 2
JOB = "job-test"
CLOCKS = {0: "sim:ptp,seed=0", 1: "sim:ptp,seed=1", NTP: "sim:ntp,seed=2", LIAR: "sim:liar"}
WORKER = Path(__file__).with_name("rank_worker.py")
#: A 2-core machine shared with other jobs: starting 4 torch processes can take a while.
JOB_TIMEOUT_S = 240


class Job(rank_job.Job):
    def __init__(self, out: Path) -> None:
        super().__init__(out, WORLD)

    @property
    def span_files(self) -> list[str]:
        return [str(self.out / f"spans-{r}.jsonl") for r in range(WORLD)]


def run_job(out: Path) -> Job:
    rank_job.run_ranks(WORKER, WORLD, out, JOB_TIMEOUT_S, lambda rank: {
        "TORCHELASTIC_RUN_ID": JOB, "TEMPOTRACE_CLOCK": CLOCKS[rank], "TEMPOTRACE_HOST": f"node{rank}",
    })
    return Job(out)
