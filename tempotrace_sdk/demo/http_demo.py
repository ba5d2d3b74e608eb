"""The HTTP imitation of a training step (``tempotrace demo --http``): one process per rank on localhost.

Each iteration every rank runs a ring all-reduce, a pipeline activation chain
and a barrier as HTTP calls between the workers (``demo.worker``), every hop
carrying ``traceparent`` and ``tt-ext``. The coordinator starts the workers,
tells each the others' ports, asks every rank to run one iteration at a time,
then stops them (they flush their spans into one OTLP JSON-lines file).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .model import DemoConfig
from .plan import RankPlan, expected_hops
from .processes import WorkerError, WorkerSpec, check_alive, shutdown_all, start_workers, terminate_on_signals
from .transport import post

__all__ = ["run_http_workload"]


def run_http_workload(plans: list[RankPlan], config: DemoConfig, folder: Path, say: Callable[[str], None]) -> int:
    """Run the iterations; return the hops made (``WorkerError`` on any failure, workers always stopped)."""
    specs = [WorkerSpec(p.rank, p.profile, p.clock, p.host, folder / f"worker-{p.rank}.log") for p in plans]
    trace = folder / "trace.jsonl"
    workers = []
    hops = 0
    with terminate_on_signals():
        try:
            say(f"starting {len(specs)} worker processes (each imports OpenTelemetry: about a second)")
            workers = start_workers(specs, trace)
            ports = [w.port for w in workers]
            say(f"{len(workers)} workers listening on 127.0.0.1 ports {', '.join(map(str, ports))}")
            for w in workers:
                post(w.port, "/peers", {"ports": ports}, propagate_context=False)
            with ThreadPoolExecutor(max_workers=len(workers)) as pool:
                for k in range(config.iterations):
                    t0 = time.monotonic()
                    futures = [
                        pool.submit(post, w.port, "/step", {"iteration": k}, propagate_context=False) for w in workers
                    ]
                    try:
                        answers = [f.result() for f in futures]
                    except OSError as err:
                        check_alive(workers)  # a dead worker explains it better than a socket error
                        raise WorkerError(f"iteration {k + 1}: {err}") from err
                    step_hops = sum(int(a["hops_sent"]) for a in answers)
                    hops += step_hops
                    say(
                        f"iteration {k + 1}/{config.iterations}: ring all-reduce, pipeline, barrier "
                        f"({step_hops} hops, {1e3 * (time.monotonic() - t0):.0f} ms)"
                    )
        finally:
            codes = shutdown_all(workers)
    bad = [(w.spec.rank, c) for w, c in zip(workers, codes, strict=True) if c != 0]
    if bad:
        rank, code = bad[0]
        raise WorkerError(f"rank {rank} exited with code {code} while flushing its spans:\n{workers[rank].tail()}")
    if hops != expected_hops(len(plans), config.iterations):
        raise WorkerError(f"workload made {hops} hops, expected {expected_hops(len(plans), config.iterations)}")
    say(f"workers stopped; spans flushed to {trace.name}")
    return hops
