"""`tempotrace analyze` throughput on generated traces of 10^4, 10^5 (and 10^6) spans.

    python -m benchmarks.bench_analysis [--sizes 10000,100000] [--json]

The traces are OTLP JSON lines in the shape the OTLP JSON file exporter
writes (batches of 512 spans per line), with every tempotrace.* attribute
the span processor sets: a coordinator step span calls each rank (CLIENT ->
SERVER hop with remote.* / send.* fields), each server span has a compute
child; honest PTP-class clocks (±220 ns).

Reported per size: end-to-end spans/s (read + parse + decide + report, in a
fresh interpreter, as ``tempotrace analyze`` runs it: cyclic GC paused) and
that interpreter's peak RSS (flat across sizes = memory bounded by the window,
not the trace); for sizes up to 200,000 also the peer floor ``json.loads`` of
the same lines (what any reader of this format pays before doing anything),
the ratio ours / floor, the analysis stage alone (pre-parsed records) and the
reader alone (records from the file, not analysed). Linear growth shows as a
flat spans/s column; the time ratio between sizes is printed. The issue's
target is >= 200,000 spans/s.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import Row, compare, print_table
from tempotrace_sdk.analysis import analyze_file, iter_spans
from tempotrace_sdk.analysis.analyzer import Analyzer
from tempotrace_sdk.wire import Sketch

TARGET = 200_000
BATCH = 512


def _kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    if isinstance(value, list):
        return {"key": key, "value": {"arrayValue": {"values": [{"intValue": str(v)} for v in value]}}}
    return {"key": key, "value": {"intValue": str(value)}}


def _span(trace_id: str, span_id: int, parent: int, name: str, kind: int, host: str, rank: int, t: int, dur: int,
          lts: int, sketch: Sketch, rng: random.Random, extra: list[dict[str, Any]]) -> dict[str, Any]:
    def stamp(x: int) -> int:
        return x + rng.randint(-200, 200)

    attrs = [
        _kv("tempotrace.ptp_ns", stamp(t)), _kv("tempotrace.uncertainty_ns", 220),
        _kv("tempotrace.clk_quality", "OK"), _kv("tempotrace.ts_source", "GTE"), _kv("tempotrace.lts", lts),
        _kv("tempotrace.tenant_id", 0), _kv("tempotrace.svc_sketch", sketch.to_bytes().hex()),
        _kv("tempotrace.clock", "sim:ptp"), _kv("tempotrace.host", host), _kv("tempotrace.rank", rank),
        *extra,
        _kv("tempotrace.end.ptp_ns", stamp(t + dur)), _kv("tempotrace.end.uncertainty_ns", 220),
        _kv("tempotrace.end.clk_quality", "OK"), _kv("tempotrace.end.lts", lts + 50),
    ]
    # Key order as the exporter writes it (the reader's fast path relies on it, and checks).
    out: dict[str, Any] = {"traceId": trace_id, "spanId": f"{span_id:016x}"}
    if parent:
        out["parentSpanId"] = f"{parent:016x}"
    out.update({"flags": 256, "name": name, "kind": kind, "startTimeUnixNano": str(t - 37_000_000_000),
                "endTimeUnixNano": str(t + dur - 37_000_000_000), "attributes": attrs, "status": {}})
    return out


def generate(path: str, n_spans: int, ranks: int = 32, seed: int = 0) -> int:
    """Write about n_spans spans; returns the exact count."""
    rng = random.Random(seed)
    spans: list[dict[str, Any]] = []
    written = 0
    t = 1_800_000_000_000_000_000
    with open(path, "w", encoding="utf-8") as fh:
        def flush() -> None:
            nonlocal spans
            if spans:
                doc = {"resourceSpans": [{"resource": {"attributes": [_kv("service.name", "bench")]},
                                          "scopeSpans": [{"scope": {"name": "bench"}, "spans": spans}]}]}
                fh.write(json.dumps(doc, separators=(",", ":")) + "\n")
                spans = []

        while written < n_spans:
            trace_id = f"{rng.getrandbits(128):032x}"
            root = rng.getrandbits(63) | 1
            root_sk = Sketch.of(root)
            lts = 1
            for r in range(ranks):
                if written >= n_spans:
                    break
                client, server, compute = (rng.getrandbits(63) | 1 for _ in range(3))
                t_call = t + 10_000 + r * 40_000
                send_lts = lts + 2
                c_sk = root_sk.with_span(client)
                s_sk = c_sk.with_span(server)
                send = [_kv("tempotrace.send.lts", [send_lts]), _kv("tempotrace.send.ptp_ns", [t_call + 2_000]),
                        _kv("tempotrace.send.uncertainty_ns", [220])]
                recv = [_kv("tempotrace.remote.ptp_ns", t_call + 2_000), _kv("tempotrace.remote.uncertainty_ns", 220),
                        _kv("tempotrace.remote.clk_quality", "OK"), _kv("tempotrace.remote.ts_source", "GTE"),
                        _kv("tempotrace.remote.lts", send_lts), _kv("tempotrace.remote.tenant_id", 0),
                        _kv("tempotrace.remote.svc_sketch", c_sk.to_bytes().hex()),
                        _kv("tempotrace.recv.lts", send_lts + 1)]
                host = f"node-{r}"
                spans.append(_span(trace_id, compute, server, "compute", 1, host, r, t_call + 12_000, 10_000,
                                   send_lts + 3, s_sk.with_span(compute), rng, []))
                spans.append(_span(trace_id, server, client, "serve", 2, host, r, t_call + 8_000, 20_000,
                                   send_lts + 2, s_sk, rng, recv))
                spans.append(_span(trace_id, client, root, f"call rank {r}", 3, "coord", 0, t_call, 35_000, lts + 1,
                                   c_sk, rng, send))
                written += 3
                lts += 4
                if len(spans) >= BATCH:
                    flush()
            spans.append(_span(trace_id, root, 0, "step", 1, "coord", 0, t, ranks * 40_000 + 50_000, 0, root_sk,
                               rng, []))
            written += 1
            t += ranks * 40_000 + 100_000
        flush()
    return written


def _best(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


_CHILD = """
import json, resource, sys, time
from tempotrace_sdk.analysis import analyze_file
from tempotrace_sdk.analysis.api import gc_paused
best = float("inf")
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    with gc_paused():  # as `tempotrace analyze` runs it (cli.run_analyze)
        rep = analyze_file(sys.argv[1], keep=0, jobs=int(sys.argv[3]))
    best = min(best, time.perf_counter() - t0)
def peak_mb():
    # VmHWM is this process's own high-water mark; Linux's ru_maxrss also keeps the RSS the process
    # had when it was forked from the benchmark, which holds the smaller sizes' records by then.
    try:
        with open("/proc/self/status") as fh:
            return next(int(x.split()[1]) for x in fh if x.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": best, "peak_rss_mb": peak_mb(),
                  "edges": rep.edges.total, "wrong": sum(rep.edges.wrong.values())}))
"""


def _end_to_end(path: str, repeat: int, jobs: int = 1) -> dict[str, Any]:
    """analyze_file in a fresh interpreter, so its peak RSS is the analysis's own."""
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _CHILD, path, str(repeat), str(jobs)], capture_output=True, text=True,
                         check=True, env=env)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def bench(sizes: list[int], repeat: int, floor_max: int = 200_000, jobs: int = 1) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            path = os.path.join(tmp, f"t{size}.jsonl")
            n = generate(path, size)
            mb = os.path.getsize(path) / 1e6
            e2e = _end_to_end(path, repeat if size < 1_000_000 else 1)
            row: dict[str, Any] = {
                "spans": n, "file_mb": round(mb, 1), "edges": e2e["edges"], "wrong": e2e["wrong"],
                "spans_per_s": n / e2e["seconds"], "peak_rss_mb": round(e2e["peak_rss_mb"], 1),
                "json_floor_spans_per_s": None, "ratio_vs_json_floor": None, "analysis_stage_spans_per_s": None,
                "reader_spans_per_s": None,
            }
            if jobs > 1:
                par = _end_to_end(path, repeat if size < 1_000_000 else 1, jobs)
                row[f"spans_per_s_jobs_{jobs}"] = n / par["seconds"]
            if size <= floor_max:  # the peers hold the whole file in memory: only for the smaller sizes
                with open(path, encoding="utf-8") as fh:
                    lines = fh.readlines()

                def floor_run(lines: list[str] = lines) -> None:
                    for x in lines:
                        json.loads(x)

                floor = _best(floor_run, repeat)
                records = list(iter_spans(path))

                def stage(records: list[Any] = records) -> None:
                    a = Analyzer()
                    a.add_all(records)
                    a.finish()

                def read(path: str = path) -> None:
                    for _ in iter_spans(path):
                        pass

                row["json_floor_spans_per_s"] = n / floor
                row["ratio_vs_json_floor"] = e2e["seconds"] / floor
                row["analysis_stage_spans_per_s"] = n / _best(stage, repeat)
                row["reader_spans_per_s"] = n / _best(read, repeat)
            rows.append(row)
            os.unlink(path)
    return rows


def _steady_ratio(repeat: int, size: int = 10_000) -> tuple[float, float, float]:
    """ns/span of analyze and of the json.loads floor, timed in alternating runs
    (harness.compare) so both see the same load on a shared machine."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "steady.jsonl")
        n = generate(path, size)
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()

        def floor() -> None:
            for x in lines:
                json.loads(x)

        ours, peer, ratio = compare(lambda: analyze_file(path, keep=0), floor, min_time=0.1, repeat=max(3, repeat))
    return ours / n, peer / n, ratio


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10000,100000", help="comma-separated span counts (add 1000000 if time allows)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--jobs", type=int, default=1, help="also measure analyze --jobs N end to end")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = bench([int(s) for s in args.sizes.split(",")], args.repeat, jobs=args.jobs)
    if args.json:
        print(json.dumps({"title": "analyze throughput", "target_spans_per_s": TARGET, "rows": rows}, indent=2))
        return 0
    print(f"analyze throughput (target >= {TARGET:,} spans/s end to end)")
    print(f"  {'spans':>9} {'MB':>7} {'edges':>9} {'spans/s':>10} {'peak RSS MB':>11} {'json floor':>11} "
          f"{'ours/floor':>10} {'stage only':>11} {'reader only':>11}")

    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    for r in rows:
        print(f"  {r['spans']:>9,} {r['file_mb']:>7} {r['edges']:>9,} {r['spans_per_s']:>10,.0f} "
              f"{r['peak_rss_mb']:>11} {num(r['json_floor_spans_per_s'], ',.0f'):>11} "
              f"{num(r['ratio_vs_json_floor'], '.2f'):>10} {num(r['analysis_stage_spans_per_s'], ',.0f'):>11} "
              f"{num(r['reader_spans_per_s'], ',.0f'):>11}")
    if args.jobs > 1:
        for r in rows:
            par = r[f"spans_per_s_jobs_{args.jobs}"]
            print(f"  {r['spans']:>9,} spans with --jobs {args.jobs}: {par:,.0f} spans/s "
                  f"({par / r['spans_per_s']:.2f}x one process; {os.cpu_count()} CPUs here)")
    steady = _steady_ratio(args.repeat)
    print_table("analyze vs json.loads floor, alternating runs on 10,000 spans (per span)", [
        Row("analyze (read+parse+decide)", steady[0], "json.loads of the lines", steady[2], 1e9 / TARGET),
    ])
    for a, b in itertools.pairwise(rows):
        growth = (b["spans"] / b["spans_per_s"]) / (a["spans"] / a["spans_per_s"])
        linear = b["spans"] / a["spans"]
        print(f"  time ratio {b['spans']:,} / {a['spans']:,} spans: {growth:.2f} (linear = {linear:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
