"""The demo's coordinator: start the ranks, drive the training steps, analyse, report.

The coordinator itself is not traced (like a launcher such as torchrun): it
starts the workers, tells each the others' ports, asks every rank to run one
iteration at a time, then stops them (they flush their spans into one OTLP
JSON-lines file) and runs the analysis on that file.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

from .model import DemoConfig, DemoResult
from .plan import RankPlan, expected_hops, plan_ranks
from .processes import WorkerError, WorkerSpec, check_alive, shutdown_all, start_workers, terminate_on_signals
from .summary import checks, examples, hop_stats, offset_text, render_summary
from .transport import post

__all__ = ["DemoConfig", "DemoResult", "run_demo"]


class _Progress:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.t0:5.1f}s] {message}", file=self.stream, flush=True)


def _drive(plans: list[RankPlan], config: DemoConfig, trace: Path, logs: Path, say: _Progress) -> int:
    specs = [WorkerSpec(p.rank, p.profile, p.clock, p.host, logs / f"worker-{p.rank}.log") for p in plans]
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
    return hops


def run_demo(config: DemoConfig, out: TextIO | None = None) -> DemoResult:
    """Run the whole demo; raise ``WorkerError`` when a worker fails (workers are always stopped)."""
    stream = out or sys.stdout
    say = _Progress(stream)
    plans = plan_ranks(config.ranks, liar=config.liar, liar_offset_ns=config.liar_offset_ns, seed=config.seed)
    folder = config.out.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "out": folder,
        "trace": folder / "trace.jsonl",
        "report": folder / "report.json",
        "perfetto": folder / "trace.perfetto.json",
        "html": folder / "report.html",
    }
    for stale in ("trace", "report", "perfetto", "html"):
        paths[stale].unlink(missing_ok=True)  # the exporter appends; a rerun must start clean

    print(
        f"TempoTrace demo: {len(plans)} ranks on localhost, {config.iterations} iterations; outputs in {folder}/",
        file=stream,
    )
    print(f"  {'rank':<5}{'host':<7}{'clock profile':<15}{'true error':>12}   claims in every tt-ext", file=stream)
    for p in plans:
        note = "   <- lies: error far beyond its claim" if p.liar else ""
        print(f"  {p.rank:<5}{p.host:<7}{p.profile:<15}{offset_text(p.offset_ns):>12}   {p.claim}{note}", file=stream)
    stream.flush()

    hops = _drive(plans, config, paths["trace"], folder, say)
    if hops != expected_hops(len(plans), config.iterations):
        raise WorkerError(f"workload made {hops} hops, expected {expected_hops(len(plans), config.iterations)}")
    say(f"workers stopped; spans flushed to {paths['trace'].name}")
    from ..analysis import analyze_file, write_html, write_json, write_perfetto

    report = analyze_file(str(paths["trace"]))
    data = report.to_dict()
    write_json(report, str(paths["report"]))
    write_perfetto(report, str(paths["perfetto"]))
    write_html(report, str(paths["html"]))
    say(f"analysed {data['spans']:,} spans in {data['traces']:,} traces")
    result = DemoResult(plans, data, paths, hops, time.monotonic() - say.t0)
    result.examples = examples(report.hops_kept, {p.host for p in plans if p.liar})
    result.naive_hops, result.saturated_hops = hop_stats(report.hops_kept, plans)
    result.checks = checks(plans, data, hops, result.saturated_hops)
    print(render_summary(result), file=stream, flush=True)
    return result
