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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .plan import RankPlan, expected_hops, plan_ranks
from .processes import WorkerError, WorkerSpec, check_alive, shutdown_all, start_workers, terminate_on_signals
from .transport import post

__all__ = ["DemoConfig", "DemoResult", "run_demo"]

DEFAULT_OUT = Path("tempotrace-demo-out")


@dataclass
class DemoConfig:
    ranks: int = 4
    iterations: int = 3
    out: Path = DEFAULT_OUT
    liar: bool = True
    liar_offset_ns: float | None = None
    seed: int = 1


@dataclass
class DemoResult:
    plans: list[RankPlan]
    report: dict[str, Any]  #: the analysis report's to_dict()
    paths: dict[str, Path]
    hops_sent: int
    elapsed_s: float
    checks: dict[str, bool] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)  #: a few hops told in words
    naive_hops: int = 0  #: hops whose raw timestamps put the receive before the send

    @property
    def ok(self) -> bool:
        return all(self.checks.values())


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


def _checks(plans: list[RankPlan], report: dict[str, Any], hops_sent: int) -> dict[str, bool]:
    liars = {p.host for p in plans if p.liar}
    faults = report["faults"]
    blamed_honest = [f for f in faults if f["host"] not in liars]
    checks = {
        "every hop the workload made was matched in the trace": report["hops"]["matched"] == hops_sent,
        "no wrong decision on edges between honest clocks": not blamed_honest
        and (liars or report["edges"]["wrong_total"] == 0),
    }
    if liars:
        checks["the lying clock was flagged"] = set(report["lying_hosts"]) == liars
    return checks


def _pct(n: int, total: int) -> str:
    return f"{n:>6,}  ({100.0 * n / total:5.1f}%)" if total else f"{n:>6,}"


def _print_summary(result: DemoResult, out: TextIO) -> None:
    rep = result.report
    edges = rep["edges"]
    total = edges["total"]
    kinds = ", ".join(f"{k} {v:,}" for k, v in edges["by_kind"].items())
    decided = edges["decided"]
    liars = {p.host: p for p in result.plans if p.liar}
    lines = [
        "",
        f"Known causal edges: {total:,} ({kinds}); {rep['hops']['matched']:,}/{result.hops_sent:,} hops matched",
        f"  plain tracer (raw timestamps): {_pct(edges['naive_inversions'], total)} edges shown reversed, "
        f"incl. {result.naive_hops} of {rep['hops']['total']} hops with the receive before the send",
        "  TempoTrace:",
        f"    physics (disjoint bounds)  {_pct(decided['physics'], total)}",
        f"    Lamport                    {_pct(decided['lamport'], total)}",
        f"    SVC sketch                 {_pct(decided['svc'], total)}",
        f"    undecided (said so)        {_pct(decided['undecided'], total)}",
        f"    wrong                      {_pct(edges['wrong_total'], total)}"
        + (
            "   <- not silent: each is evidence against the lying clock below"
            if edges["wrong_total"] and result.checks.get("no wrong decision on edges between honest clocks")
            else ""
        ),
    ]
    if result.examples:
        lines.append("  for example:")
        lines.extend(f"    {e}" for e in result.examples)
    for fault in rep["faults"]:
        plan = liars.get(fault["host"])
        who = f" (the {plan.profile} profile, truly {plan.offset_ns / 1e6:+.3f} ms off)" if plan else ""
        lines.append(
            f"  {fault['verdict'].upper()} clock: {fault['host']}{who}: broke its {fault['claimed_bound_ns']:,} ns "
            f"promise on {fault['violations']:,} of {fault['edges']:,} edges with {_peers(fault)}, "
            f"by up to {fault['max_excess_ns'] / 1e3:,.1f} µs"
        )
    if not rep["faults"]:
        lines.append("  no clock broke its promise")
    lines.append("")
    for name, passed in result.checks.items():
        lines.append(f"  [{'ok' if passed else 'FAILED'}] {name}")
    lines.append("")
    lines.append(f"Outputs in {result.paths['out']}/:")
    lines.append(f"  spans (OTLP JSON lines)  {result.paths['trace']}")
    lines.append(f"  analysis (JSON)          {result.paths['report']}")
    lines.append(f"  Perfetto trace           {result.paths['perfetto']}   (open in https://ui.perfetto.dev)")
    lines.append(f"  HTML timeline            {result.paths['html']}")
    lines.append(f"  worker logs              {result.paths['out']}/worker-*.log")
    print("\n".join(lines), file=out, flush=True)


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
        print(f"  {p.rank:<5}{p.host:<7}{p.profile:<15}{_offset(p.offset_ns):>12}   {p.claim}{note}", file=stream)
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
    result.examples = _examples(report.hops_kept, {p.host for p in plans if p.liar})
    result.naive_hops = sum(
        1
        for h in report.hops_kept
        if h["send_ptp_ns"] is not None and h["recv_ptp_ns"] is not None and h["recv_ptp_ns"] < h["send_ptp_ns"]
    )
    result.checks = _checks(plans, data, hops)
    _print_summary(result, stream)
    return result


def _examples(hops: list[dict[str, Any]], liars: set[str]) -> list[str]:
    """One hop a plain tracer gets backwards and TempoTrace still orders, and one the liar broke."""
    out: list[str] = []
    honest = [
        h
        for h in hops
        if h["outcome"] == "consistent"
        and h["send_host"] not in liars
        and h["recv_host"] not in liars
        and h["send_ptp_ns"] is not None
        and h["recv_ptp_ns"] is not None
        and h["recv_ptp_ns"] < h["send_ptp_ns"]
    ]
    if honest:
        h = max(honest, key=lambda h: h["send_ptp_ns"] - h["recv_ptp_ns"])
        d = h["decision"]
        how = {
            "svc": f"the SVC sketch (send in the receive's causal past; false-positive rate {d.get('fp', 0.0):.1e})",
            "lamport": "Lamport counters (they rule out receive-before-send)",
        }.get(d["method"], d["method"])
        out.append(
            f"hop {h['send_host']} -> {h['recv_host']}: raw timestamps put the receive "
            f"{(h['send_ptp_ns'] - h['recv_ptp_ns']) / 1e3:,.0f} µs BEFORE the send; "
            f"TempoTrace orders it correctly by {how}"
        )
    broken = [h for h in hops if h["outcome"] == "contradiction"]
    if broken:
        h = max(broken, key=lambda h: (h["send_ptp_ns"] or 0) - (h["recv_ptp_ns"] or 0))
        out.append(
            f"hop {h['send_host']} -> {h['recv_host']}: both claim ±{h['send_uncertainty_ns']} / "
            f"±{h['recv_uncertainty_ns']} ns, yet the receive is stamped "
            f"{(h['send_ptp_ns'] - h['recv_ptp_ns']) / 1e3:,.0f} µs before the send: a clock broke its bound"
        )
    return out


def _peers(fault: dict[str, Any]) -> str:
    peers = fault.get("peer_sample", fault.get("peers"))
    if isinstance(peers, list):
        count = fault["peers"] if isinstance(fault.get("peers"), int) else len(peers)
        more = f" (+{count - len(peers)} more)" if count > len(peers) else ""
        return ", ".join(map(str, peers)) + more
    return f"{peers} hosts"


def _offset(ns: float) -> str:
    if abs(ns) >= 1_000_000:
        return f"{ns / 1e6:+.3f} ms"
    if abs(ns) >= 1_000:
        return f"{ns / 1e3:+,.0f} µs"
    return f"{ns:+.0f} ns"
