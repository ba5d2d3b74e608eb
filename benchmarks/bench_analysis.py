"""`tempotrace analyze` end to end against `json.loads` of the same lines (issue 24's goal: <= 0.6x).

    python benchmarks/bench_analysis.py [--sizes 10000,100000,1000000]
                                        [--profiles torch-demo,http-demo,step-2048,demo,light]
                                        [--dask 1000000] [--repeat 3] [--json]

Real exports first: ``torch-demo`` and ``http-demo`` are the span files
``tempotrace demo`` and ``tempotrace demo --http`` write (run once here, in
this process's environment; ``torch-demo`` is left out where torch is not
installed), replicated with fresh trace ids (each copy's ids begin with its
copy number) to each size, rounded up to whole copies. Collectives, point-to-
point pairs, the ``tempotrace.stamps`` text and the SDK's resources are what
they cost in a user's trace. (A replicated torch step's ids no longer derive
from its job, so its step spans count as parents lost, not virtual ones:
the same work.)

``step-2048`` (issue 24's (c)) is a synthetic training step of 2,048 ranks as
the SDK's exporter writes it (``generate_step``: 200 collectives a rank, an
FSDP-like mix, pipeline sends every 10, honest PTP-class clocks; fewer
collectives below one step's 452,608 spans). Its row also says how many
collectives came out incomplete: every member is in the file, so each one is
the default window (the hop horizon) cutting a collective whose members lie
further apart in the input than it (the report names them ``split``).

Traces are OTLP JSON lines in the shape the OTLP JSON file exporter writes
(batches of 512 spans a line), each trace a coordinator step calling every
rank (CLIENT -> SERVER hop with remote.* / send.* fields) whose server span
has a compute child; honest PTP-class clocks (±220 ns). Two generated profiles:

- ``demo``: the demo's attribute set (tempotrace.* plus tempotrace.rank,
  tempotrace.clock.profile, demo.iteration / demo.round, the SDK's resource
  attributes), about 1.6 KB a span as the demo writes them;
- ``light``: the tempotrace.* attributes alone, about 1.45 KB a span.

Per profile and size, in a fresh interpreter run as `tempotrace analyze` runs
(cyclic GC paused, the default window of 100,000 spans):

- ours / json.loads: CPU seconds of the analysis (read, decode, check, decide,
  report) over CPU seconds of ``json.loads`` on every line of the same file
  read the same way, the two timed alternately (median ratio), so load on a
  shared machine hits both alike;
- spans/s of the analysis, and the time ratio between sizes (linear: equal
  to the size ratio);
- peak RSS of a process that only analyses (flat beyond the window: memory
  bounded by the window, not the input);
- decode/json: the columnar engine's decode alone (spec/analysis.md §5.6: the
  msgspec skeleton and the C attribute pivot into one Arrow table) over
  ``json.loads``, timed the same way: the floor its analysis stages build on.

``--dask N`` also analyses the N-span trace (demo profile) with ``--engine
dask`` on a local cluster of two workers and checks the report equals the
single-process one.

``--parquet N`` also converts the N-span trace (demo profile) to a span table
(spec/parquet.md): its bytes against the JSON's, convert's spans/s, and the
analysis of the table against the analysis of the JSON (spans/s, equal report?).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tempotrace_sdk.wire import Sketch

BATCH = 512
GOAL = 0.6  # issue 24: end to end on one core <= 0.6x json.loads of the same lines (issue 11's was 1.0x)
GOAL_SPANS_PER_S = 100_000  # issue 24, from OTLP JSON on the real exports
REAL = ("torch-demo", "http-demo")
#: issue 24's (c): a synthetic training step of 2,048 ranks (generate_step)
STEP = "step-2048"
#: the profiles held to GOAL_SPANS_PER_S as well as GOAL
AT_RATE = (*REAL, STEP)
PROFILES = (*REAL, STEP, "demo", "light")
_TRACE_ID = re.compile(rb'"traceId":"[0-9a-fA-F]{8}')


def _kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    if isinstance(value, list):
        return {"key": key, "value": {"arrayValue": {"values": [{"intValue": str(v)} for v in value]}}}
    return {"key": key, "value": {"intValue": str(value)}}


def _span(trace_id: str, span_id: int, parent: int, name: str, kind: int, host: str, rank: int, t: int, dur: int,
          lts: int, sketch: Sketch, rng: random.Random, extra: list[dict[str, Any]], demo: dict[str, int] | None
          ) -> dict[str, Any]:
    def stamp(x: int) -> int:
        return x + rng.randint(-200, 200)

    lead = []
    if demo is not None:  # the demo's worker attributes come first, as it sets them at span start
        lead = [_kv("tempotrace.rank", rank), _kv("tempotrace.clock.profile", "ptp"),
                *(_kv(f"demo.{k}", v) for k, v in demo.items())]
    attrs = [
        *lead,
        _kv("tempotrace.ptp_ns", stamp(t)), _kv("tempotrace.uncertainty_ns", 220),
        _kv("tempotrace.clk_quality", "OK"), _kv("tempotrace.ts_source", "GTE"), _kv("tempotrace.lts", lts),
        _kv("tempotrace.tenant_id", 0), _kv("tempotrace.svc_sketch", sketch.to_bytes().hex()),
        _kv("tempotrace.clock", "sim:ptp"), _kv("tempotrace.host", host),
        *([] if demo is not None else [_kv("tempotrace.rank", rank)]),
        *extra,
        _kv("tempotrace.end.ptp_ns", stamp(t + dur)), _kv("tempotrace.end.uncertainty_ns", 220),
        _kv("tempotrace.end.clk_quality", "OK"), _kv("tempotrace.end.lts", lts + 50),
    ]
    out: dict[str, Any] = {"traceId": trace_id, "spanId": f"{span_id:016x}"}
    if parent:
        out["parentSpanId"] = f"{parent:016x}"
    out.update({"flags": 256 if demo is None or kind != 2 else 768, "name": name, "kind": kind,
                "startTimeUnixNano": str(t - 37_000_000_000), "endTimeUnixNano": str(t + dur - 37_000_000_000),
                "attributes": attrs, "status": {}})
    return out


def _resource(profile: str, rng: random.Random) -> dict[str, Any]:
    if profile != "demo":
        return {"attributes": [_kv("service.name", "bench")]}
    return {"attributes": [_kv("telemetry.sdk.language", "python"), _kv("telemetry.sdk.name", "opentelemetry"),
                           _kv("telemetry.sdk.version", "1.45.1"),
                           _kv("service.instance.id", str(uuid.UUID(int=rng.getrandbits(128)))),
                           _kv("service.name", "demo-rank0")]}


def generate(path: str, n_spans: int, ranks: int = 32, seed: int = 0, profile: str = "light") -> int:
    """Write about n_spans spans of ``profile``; returns the exact count."""
    rng = random.Random(seed)
    spans: list[dict[str, Any]] = []
    written = 0
    t = 1_800_000_000_000_000_000
    resource = _resource(profile, rng)
    with open(path, "w", encoding="utf-8") as fh:
        def flush() -> None:
            nonlocal spans
            if spans:
                doc = {"resourceSpans": [{"resource": resource,
                                          "scopeSpans": [{"scope": {"name": "tempotrace_sdk"}, "spans": spans}]}]}
                fh.write(json.dumps(doc, separators=(",", ":")) + "\n")
                spans = []

        step = 0
        while written < n_spans:
            trace_id = f"{rng.getrandbits(128):032x}"
            root = rng.getrandbits(63) | 1
            root_sk = Sketch.of(root)
            lts = 1
            for r in range(ranks):
                if written >= n_spans:
                    break
                demo = {"iteration": step, "round": r % 4} if profile == "demo" else None
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
                                   send_lts + 3, s_sk.with_span(compute), rng, [], demo))
                spans.append(_span(trace_id, server, client, "serve", 2, host, r, t_call + 8_000, 20_000,
                                   send_lts + 2, s_sk, rng, recv, demo))
                spans.append(_span(trace_id, client, root, f"call rank {r}", 3, "coord", 0, t_call, 35_000, lts + 1,
                                   c_sk, rng, send, demo))
                written += 3
                lts += 4
                if len(spans) >= BATCH:
                    flush()
            spans.append(_span(trace_id, root, 0, "step", 1, "coord", 0, t, ranks * 40_000 + 50_000, 0, root_sk,
                               rng, [], {"iteration": step} if profile == "demo" else None))
            written += 1
            step += 1
            t += ranks * 40_000 + 100_000
        flush()
    return written


_CHILD = """
import gc, json, statistics, sys, time
from tempotrace_sdk.analysis import analyze
mode, path, repeat, engine = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
gc.disable()  # as `tempotrace analyze` runs (cli.analyze: engine.gc_paused)
if engine == "columnar":  # (imported before any timing)
    import tempotrace_sdk.analysis.columnar.lines

def ours():
    return analyze(path, keep=0, engine=engine)

if mode == "decode":  # (imported before any timing: pyarrow's import is not the decode's)
    from tempotrace_sdk.analysis.columnar.decode import SpanColumns

def columns():
    # the columnar engine's decode alone (spec/analysis.md 5.6): skeleton, C pivot, one Arrow table
    decoded = SpanColumns()
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                decoded.add_line(line, number)
    decoded.table()

def floor():
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            json.loads(line)

def cpu(fn):
    t0 = time.process_time()
    fn()
    return time.process_time() - t0

def peak_mb():
    # VmHWM is this process's own high-water mark (ru_maxrss would keep the parent's at fork).
    with open("/proc/self/status") as fh:
        return next(int(x.split()[1]) for x in fh if x.startswith("VmHWM:")) / 1024

if mode == "peak":
    t0 = time.perf_counter()
    rep = ours()
    c = rep.collectives
    report = rep.to_dict()
    report.pop("elapsed_s", None)
    print(json.dumps({"seconds": time.perf_counter() - t0, "peak_rss_mb": peak_mb(), "spans": rep.spans,
                      "report": report,
                      "edges": rep.edges.total, "wrong": sum(rep.edges.wrong.values()), "collectives": c.total,
                      "incomplete": c.incomplete, "split": c.split, "split_distance": c.split_distance}))
else:
    pairs = []
    measured = columns if mode == "decode" else ours
    for _ in range(repeat):
        f = cpu(floor)
        o = cpu(measured)
        pairs.append((o, f))
    print(json.dumps({"ours_s": min(o for o, _ in pairs), "floor_s": min(f for _, f in pairs),
                      "ratio": statistics.median(o / f for o, f in pairs)}))
"""


def _child(mode: str, path: str, repeat: int = 1, engine: str = "reference") -> dict[str, Any]:
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, path, str(repeat), engine], capture_output=True,
                         text=True, check=True, env=env)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def demo_export(profile: str, tmp: str) -> str | None:
    """The span file of the demo ``profile`` names, run once here; None where it cannot run (no torch)."""
    out = os.path.join(tmp, profile)
    args = ["--http"] if profile == "http-demo" else []
    if profile == "torch-demo" and shutil.which("torchrun", path=os.path.dirname(sys.executable)) is None:
        try:
            import torch  # noqa: F401
        except ImportError:
            return None
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-m", "tempotrace_sdk", "demo", *args, "--out", out],
                          capture_output=True, text=True, env=env, timeout=600)
    trace = os.path.join(out, "trace.jsonl")
    if not os.path.exists(trace):
        print(f"  {profile}: the demo wrote no trace (exit {done.returncode}): {done.stderr[-500:]}", file=sys.stderr)
        return None
    return trace


def replicate(base: str, path: str, size: int) -> int:
    """``base`` copied into ``path`` until it holds at least ``size`` spans, each copy's trace ids fresh (links'
    too: a link stays within its copy)."""
    with open(base, "rb") as fh:
        lines = [line for line in fh if line.strip()]
    per_copy = sum(len(ss.get("spans", [])) for line in lines for rs in json.loads(line).get("resourceSpans", [])
                   for ss in rs.get("scopeSpans", []))
    copies = max(1, -(-size // per_copy))
    with open(path, "wb") as out:
        for k in range(copies):
            prefix = b'"traceId":"' + f"{k:08x}".encode()
            for line in lines:
                out.write(_TRACE_ID.sub(prefix, line))
    return copies * per_copy


def bench(sizes: list[int], profiles: list[str], repeat: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        bases = {p: demo_export(p, tmp) for p in profiles if p in REAL}
        for profile in profiles:
            for size in sizes:
                path = os.path.join(tmp, f"{profile}-{size}.jsonl")
                if profile in REAL:
                    base = bases[profile]
                    if base is None:
                        break
                    n = replicate(base, path, size)
                elif profile == STEP:
                    n = generate_step(path, size)
                else:
                    n = generate(path, size, profile=profile)
                peak = _child("peak", path)
                runs = repeat if size < 1_000_000 else 1
                ratio = _child("ratio", path, runs)
                decode = _child("decode", path, runs)
                columnar = _child("ratio", path, runs, "columnar")
                columnar_peak = _child("peak", path, 1, "columnar")
                rows.append({
                    "profile": profile, "spans": n, "bytes_per_span": round(os.path.getsize(path) / n),
                    "edges": peak["edges"], "wrong": peak["wrong"], "ratio_vs_json_loads": ratio["ratio"],
                    "spans_per_s": n / ratio["ours_s"], "json_loads_spans_per_s": n / ratio["floor_s"],
                    "peak_rss_mb": round(peak["peak_rss_mb"], 1), "collectives": peak["collectives"],
                    "collectives_incomplete": peak["incomplete"], "collectives_split": peak["split"],
                    "split_distance": peak["split_distance"], "columnar_decode_vs_json_loads": decode["ratio"],
                    "columnar_vs_json_loads": columnar["ratio"], "columnar_spans_per_s": n / columnar["ours_s"],
                    "columnar_peak_rss_mb": round(columnar_peak["peak_rss_mb"], 1),
                    "columnar_report_identical": columnar_peak["report"] == peak["report"],
                })
                os.unlink(path)
    return rows


def dask_identity(size: int, workers: int = 2) -> dict[str, Any]:
    """The size-span demo-profile trace analysed by one process and by --engine dask: equal reports?"""
    from tempotrace_sdk.analysis import analyze
    from tempotrace_sdk.analysis.engine import gc_paused

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dask.jsonl")
        n = generate(path, size, profile="demo")
        with gc_paused():
            t0 = time.perf_counter()
            one = analyze(path, keep=0).to_dict()
            t1 = time.perf_counter()
            spread = analyze(path, keep=0, engine="dask", jobs=workers).to_dict()
            t2 = time.perf_counter()
    one.pop("elapsed_s")
    spread.pop("elapsed_s")
    differ = sorted(k for k in one if one[k] != spread.get(k))
    return {"spans": n, "workers": workers, "identical": not differ, "differing_keys": differ,
            "one_process_s": t1 - t0, "dask_s": t2 - t1, "edges": one["edges"]["total"]}


def parquet_check(size: int) -> dict[str, Any]:
    """The torch demo's export replicated to ``size`` spans (the generated demo profile where torch cannot run) as a
    span table: size ratio, convert's speed, the analysis of each, by each engine."""
    from tempotrace_sdk.analysis import analyze
    from tempotrace_sdk.analysis.engine import gc_paused
    from tempotrace_sdk.analysis.parquet_convert import convert

    with tempfile.TemporaryDirectory() as tmp:
        path, table = os.path.join(tmp, "t.jsonl"), os.path.join(tmp, "t.parquet")
        base = demo_export("torch-demo", tmp)
        profile = "torch-demo" if base is not None else "demo"
        n = replicate(base, path, size) if base is not None else generate(path, size, profile="demo")
        with gc_paused():
            t0 = time.perf_counter()
            convert([path], table)
            t1 = time.perf_counter()
            reports, seconds = [], []
            for source, engine in ((path, "reference"), (table, "reference"), (table, "columnar")):
                t = time.perf_counter()
                reports.append(analyze(source, keep=0, engine=engine).to_dict())
                seconds.append(time.perf_counter() - t)
        ratio = os.path.getsize(table) / os.path.getsize(path)
    for r in reports:
        for key in ("elapsed_s", "source", "inputs"):
            r.pop(key)
    return {"profile": profile, "spans": n, "bytes_ratio": ratio, "convert_spans_per_s": n / (t1 - t0),
            "json_spans_per_s": n / seconds[0], "parquet_spans_per_s": n / seconds[1],
            "parquet_columnar_spans_per_s": n / seconds[2], "identical": reports[0] == reports[1] == reports[2]}


#: The synthetic training step (profile ``step-2048``): ranks, collectives a step, one send/receive pair per this
#: many collectives, the collectives' ops in turn (an FSDP-like mix), ranks a host.
STEP_RANKS = 2048
STEP_COLLECTIVES = 200
STEP_P2P_EVERY = 10
STEP_OPS = (("all_gather_into_tensor", 1 << 20), ("reduce_scatter_tensor", 1 << 22), ("all_reduce", 1 << 16))
STEP_RANKS_PER_HOST = 8


def generate_step(path: str, n_spans: int, seed: int = 0, ranks: int = STEP_RANKS,
                  collectives: int = STEP_COLLECTIVES) -> int:
    """Write steps of ``ranks`` torch.distributed ranks as the SDK's exporter writes them (a rank's spans of a step
    in lines of at most 512, the ranks' lines in turn), about ``n_spans`` spans; returns the exact count.

    Each rank: one ``torch.step`` span, ``collectives`` op spans (group 0-<ranks-1>, gloo, completion
    ``return``) and, every ``STEP_P2P_EVERY`` collectives, a pipeline send from each even rank to the next
    (its receive on that rank): ``tempotrace.stamps`` with honest PTP-class clocks (each rank off by at most
    150 ns, claiming ±220 ns) and Lamport counters that tick per event. A collective's members start within
    20 µs of each other and end at least 10 µs after the last start; a receive ends after its send starts.
    Below one step's spans, a step has fewer collectives (at least one)."""
    rng = random.Random(seed)
    per_rank = collectives + 1 + collectives // STEP_P2P_EVERY  # a rank's spans a step (half a pair each)
    if n_spans < ranks * per_rank:  # a smaller step: fewer collectives, the same ranks
        collectives = max(1, -(-(n_spans - ranks) * STEP_P2P_EVERY // (ranks * (STEP_P2P_EVERY + 1))))
    job = str(uuid.UUID(int=rng.getrandbits(128)))
    offsets = [rng.randint(-150, 150) for _ in range(ranks)]
    lts = [0] * ranks
    seqs = [0] * ranks
    p2p_seq: dict[int, int] = {}
    resources = []
    for r in range(ranks):
        resources.append({"attributes": [
            _kv("telemetry.sdk.language", "python"), _kv("telemetry.sdk.name", "opentelemetry"),
            _kv("service.name", "train"), _kv("tempotrace.host", f"node{r // STEP_RANKS_PER_HOST}"),
            _kv("tempotrace.clock", "sim:ptp"), _kv("tempotrace.tenant_id", 0), _kv("tempotrace.rank", r),
            _kv("tempotrace.world_size", ranks), _kv("tempotrace.local_rank", r % STEP_RANKS_PER_HOST),
            _kv("tempotrace.restart", 0), _kv("tempotrace.node_rank", r // STEP_RANKS_PER_HOST),
            _kv("tempotrace.job_id", job)]})
    group = [_kv("tempotrace.torch.group", f"0-{ranks - 1}"), None, _kv("tempotrace.torch.group_size", ranks),
             _kv("tempotrace.torch.backend", "gloo")]
    clock = [_kv("tempotrace.clk_quality", "OK"), _kv("tempotrace.uncertainty_ns", 220)]
    scope = {"name": "tempotrace_sdk.torch"}
    t0 = 1_800_000_000_000_000_000
    written = 0
    step = 0

    def op_span(r: int, trace_id: str, parent: str, name: str, start: int, end: int,
                attrs: list[dict[str, Any]]) -> dict[str, Any]:
        lts[r] += 2
        e = offsets[r]
        return {"traceId": trace_id, "spanId": f"{rng.getrandbits(63) | 1:016x}", "parentSpanId": parent,
                "flags": 256, "name": name, "kind": 1, "startTimeUnixNano": str(start + e),
                "endTimeUnixNano": str(end + e),
                "attributes": [*attrs, _kv("tempotrace.stamps", f"s{lts[r] - 1},0 e1"), *clock], "status": {}}

    with open(path, "w", encoding="utf-8") as fh:
        while written < n_spans:
            trace_id = f"{rng.getrandbits(128):032x}"
            starts = [[t0 + k * 100_000 + rng.randint(0, 20_000) for _ in range(ranks)] for k in range(collectives)]
            by_rank: list[list[dict[str, Any]]] = [[] for _ in range(ranks)]
            step_ids = [f"{rng.getrandbits(63) | 1:016x}" for _ in range(ranks)]
            for k in range(collectives):
                op, nbytes = STEP_OPS[k % len(STEP_OPS)]
                last = max(starts[k])
                for r in range(ranks):
                    end = last + 10_000 + rng.randint(0, 5_000)
                    group[1] = _kv("tempotrace.torch.group_rank", r)
                    by_rank[r].append(op_span(r, trace_id, step_ids[r], "torch." + op, starts[k][r], end, [
                        *group, _kv("tempotrace.torch.op", op), _kv("tempotrace.torch.bytes", nbytes),
                        _kv("tempotrace.torch.seq", seqs[r]), _kv("tempotrace.torch.completion", "return")]))
                    seqs[r] += 1
                if (k + 1) % STEP_P2P_EVERY == 0:
                    t = t0 + k * 100_000 + 40_000
                    for src in range(0, ranks - 1, 2):
                        dst = src + 1
                        j = p2p_seq.get(src, 0)
                        p2p_seq[src] = j + 1
                        for r, name, peer, start, end in ((src, "send", dst, t, t + 10_000),
                                                          (dst, "recv", src, t - 5_000, t + 15_000)):
                            group[1] = _kv("tempotrace.torch.group_rank", r)
                            by_rank[r].append(op_span(r, trace_id, step_ids[r], "torch." + name, start, end, [
                                *group, _kv("tempotrace.torch.op", name), _kv("tempotrace.torch.bytes", 1 << 20),
                                _kv("tempotrace.torch.tag", 0), _kv("tempotrace.torch.peer", peer),
                                _kv("tempotrace.torch.src", src), _kv("tempotrace.torch.dst", dst),
                                _kv("tempotrace.torch.p2p_seq", j), _kv("tempotrace.torch.completion", "return")]))
            for r in range(ranks):
                lts[r] += 2
                e = offsets[r]
                by_rank[r].append({
                    "traceId": trace_id, "spanId": step_ids[r], "flags": 256, "name": "torch.step", "kind": 1,
                    "startTimeUnixNano": str(t0 - 50_000 + e), "endTimeUnixNano": str(t0 + collectives * 100_000 + e),
                    "attributes": [_kv("tempotrace.torch.step", step), _kv("tempotrace.torch.carriage", "none"),
                                   _kv("tempotrace.stamps", f"s{lts[r] - 1},0 e1"), *clock], "status": {}})
            for first in range(0, max(len(b) for b in by_rank), BATCH):
                for r in range(ranks):
                    chunk = by_rank[r][first:first + BATCH]
                    if chunk:
                        doc = {"resourceSpans": [{"resource": resources[r],
                                                  "scopeSpans": [{"scope": scope, "spans": chunk}]}]}
                        fh.write(json.dumps(doc, separators=(",", ":")) + "\n")
                        written += len(chunk)
            step += 1
            t0 += collectives * 100_000 + 1_000_000
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10000,100000", help="comma-separated span counts")
    p.add_argument("--profiles", default=",".join(PROFILES), help="any of " + ", ".join(PROFILES))
    p.add_argument("--repeat", type=int, default=3, help="alternating runs per size below 10^6")
    p.add_argument("--dask", type=int, default=0, metavar="SPANS", help="also check --engine dask on SPANS spans")
    p.add_argument("--parquet", type=int, default=0, metavar="SPANS",
                   help="also convert SPANS spans to a span table and analyse both")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = bench([int(s) for s in args.sizes.split(",")], args.profiles.split(","), args.repeat)
    dask = dask_identity(args.dask) if args.dask else None
    table = parquet_check(args.parquet) if args.parquet else None
    if args.json:
        doc: dict[str, Any] = {"title": "analyze vs json.loads", "goal_ratio": GOAL,
                               "goal_spans_per_s": GOAL_SPANS_PER_S, "rows": rows, "dask": dask}
        if table is not None:
            doc["parquet"] = table
        print(json.dumps(doc, indent=2))
        return 0
    print(f"analyze end to end vs json.loads of the same lines, one core (goal <= {GOAL:.1f}x and, on the real "
          f"exports, >= {GOAL_SPANS_PER_S:,} spans/s; CPU time, alternating runs, median)")
    print(f"  {'profile':<10} {'spans':>9} {'B/span':>6} {'edges':>9} {'ours/json':>9} {'ok':>3} {'spans/s':>9} "
          f"{'json spans/s':>12} {'peak RSS MB':>11} {'decode/json':>11} {'columnar/json':>13} {'RSS MB':>6} "
          f"{'same':>4}")
    for r in rows:
        ok = "yes" if r["ratio_vs_json_loads"] <= GOAL and (
            r["profile"] not in AT_RATE or r["spans_per_s"] >= GOAL_SPANS_PER_S) else "NO"
        print(f"  {r['profile']:<10} {r['spans']:>9,} {r['bytes_per_span']:>6} {r['edges']:>9,} "
              f"{r['ratio_vs_json_loads']:>9.2f} {ok:>3} {r['spans_per_s']:>9,.0f} "
              f"{r['json_loads_spans_per_s']:>12,.0f} {r['peak_rss_mb']:>11} "
              f"{r['columnar_decode_vs_json_loads']:>11.2f} {r['columnar_vs_json_loads']:>13.2f} "
              f"{r['columnar_peak_rss_mb']:>6} {'yes' if r['columnar_report_identical'] else 'NO':>4}")
    print("  (ours: --engine reference. decode/json: the columnar decode alone, skeleton + C attribute pivot into one "
          "Arrow table. columnar/json: --engine columnar end to end, its peak RSS, and whether its report is the "
          "reference's; spans with nothing but ids, times and a stamps text are counted from arrays by its plain lane "
          "(no record made), other spans' records made from columns, their parent -> child edges counted a batch "
          "at a time as arrays, their other analysis stages the reference's: spec/analysis.md §5.6)")
    for r in rows:
        if r["profile"] == STEP and r["collectives"]:  # complete on an honest, whole step, unless the horizon cut it
            print(f"  {STEP} at {r['spans']:,} spans: {r['collectives']:,} collective instances, "
                  f"{r['collectives_incomplete']:,} incomplete, {r['collectives_split']:,} of them pieces the hop "
                  f"horizon (the window) cut: members up to {r['split_distance']:,} spans apart; {r['wrong']} wrong")
    for profile in args.profiles.split(","):
        mine = [r for r in rows if r["profile"] == profile]
        for a, b in itertools.pairwise(mine):
            growth = (b["spans"] / b["spans_per_s"]) / (a["spans"] / a["spans_per_s"])
            print(f"  {profile}: time ratio {b['spans']:,} / {a['spans']:,} spans: {growth:.2f} "
                  f"(linear = {b['spans'] / a['spans']:.0f}); peak RSS {a['peak_rss_mb']} -> {b['peak_rss_mb']} MB")
    if dask is not None:
        verdict = "identical" if dask["identical"] else f"DIFFERENT in {', '.join(dask['differing_keys'])}"
        print(f"  --engine dask, {dask['workers']} local workers, {dask['spans']:,} spans: report {verdict} to one "
              f"process's ({dask['edges']:,} edges; {dask['one_process_s']:.1f} s one process, "
              f"{dask['dask_s']:.1f} s dask incl. cluster start)")
    if table is not None:
        verdict = "identical" if table["identical"] else "DIFFERENT"
        print(f"  span table (Parquet) of the {table['profile']} profile, {table['spans']:,} spans: "
              f"{table['bytes_ratio']:.3f}x the JSON's bytes; convert {table['convert_spans_per_s']:,.0f} spans/s; "
              f"analyze {table['json_spans_per_s']:,.0f} spans/s from JSON, {table['parquet_spans_per_s']:,.0f} from "
              f"Parquet, {table['parquet_columnar_spans_per_s']:,.0f} from Parquet with --engine columnar; reports "
              f"{verdict} (wall time, one process; the copies differ in their trace ids only, so the bytes ratio "
              f"flatters: spec/parquet.md §6 measures fresh copies)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
