"""The analysis of one collective of n ranks grows as n log n (issue 10): n = 8 ... 4,096, synthetic spans.

    python benchmarks/bench_collectives.py [--sizes 8,16,...,4096] [--naive-max 512] [--repeat 5] [--json]

One all_reduce of n ranks, its n member spans already read (SpanRecords built
once, outside the timing), analysed as `tempotrace analyze` analyses it: an
Analyzer gathers the members, decides the claim "every rank's start precedes
every rank's end" (claims.py), counts it, ranks the arrivals, keeps no record.
Three kinds of collective, each taking another path of the claim:

- ``physics``: PTP-class clocks (±220 ns): the extremes decide (O(n));
- ``lamport``: NTP-class clocks (physics silent), carriage "op": every end
  recorded a merge of every other rank's record, so Lamport checks the starts
  sorted by counter against each end (O(n log n)); the sketches hold one id
  each (a 256-bit sketch saturates beyond a few dozen), so SVC gives up;
- ``liar``: one rank 10 ms late while claiming 220 ns: a contradiction, with
  one witness per violating end (the fault ledger's evidence).

Per n: microseconds per collective (median of ``--repeat`` runs, GC paused),
that time over n·log2(n) (flat when the cost grows as n log n), the peak memory
the analysis allocated (tracemalloc), and, up to ``--naive-max`` ranks, the
peer: the same claim decided pair by pair with ``order.decide`` on n(n-1) event
pairs, as an analysis that materialised the edges would (ratio naive / ours).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tempotrace_sdk.analysis.analyzer import Analyzer
from tempotrace_sdk.analysis.events import SpanRecord, Stamp, TorchOp
from tempotrace_sdk.analysis.order import decide, span_mask

T0 = 1_800_000_000_000_000_000
KINDS = ("physics", "lamport", "liar")
SIZES = tuple(2**k for k in range(3, 13))  # 8 ... 4,096


def members(n: int, kind: str) -> list[SpanRecord]:
    """The n member spans of one all_reduce (seq 0 of group 0-(n-1)) of the given kind."""
    out = []
    u = 65535 if kind == "lamport" else 220
    for r in range(n):
        late = 10_000_000 if kind == "liar" and r == n // 2 else 0
        start, end = T0 + r * 50 + late, T0 + n * 50 + 200_000 + r * 7 + late
        torch = TorchOp("all_reduce", f"0-{n - 1}", r, 0, completion="return")
        sends: tuple[tuple[int, int | None, int | None], ...] = ()
        if kind == "lamport":
            torch = TorchOp("all_reduce", f"0-{n - 1}", r, 0, completion="return", recv_lts=100 + r,
                            recv_sketch=span_mask(f"{r + 1:016x}"))
            sends = ((11 + r % 7, None, None),)
        out.append(SpanRecord(f"{7:032x}", f"{r + 1:016x}", "", "torch.all_reduce", 1, f"node{r}",
                              Stamp(start, u, "OK", 10 + r % 7), Stamp(end, u, "OK", 200 + r), start, end,
                              span_mask(f"{r + 1:016x}"), r, sends=sends, pos=r, torch=torch))
    return out


def analyse(spans: list[SpanRecord]) -> dict[str, Any]:
    analyzer = Analyzer(keep=0)
    analyzer.add_all(spans)
    rep = analyzer.finish()
    assert rep.collectives.complete == 1, rep.collectives
    return rep.collectives.outcomes


def naive(spans: list[SpanRecord]) -> int:
    """The claim pair by pair: every start against every other span's end (what n^2 edges would cost)."""
    starts = [s.start_event() for s in spans]
    ends = [s.end_event() for s in spans]
    wrong = 0
    for i, a in enumerate(starts):
        for j, b in enumerate(ends):
            if i != j and decide(a, b).relation.value in ("after", "not_before", "concurrent"):
                wrong += 1
    return wrong


def timed(fn: Any, arg: Any, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(arg)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def bench(sizes: list[int], naive_max: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    gc.disable()
    try:
        for kind in KINDS:
            for n in sizes:
                spans = members(n, kind)
                outcome = analyse(spans)
                ours = timed(analyse, spans, repeat)
                tracemalloc.start()
                analyse(spans)
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                row: dict[str, Any] = {
                    "kind": kind, "n": n, "outcome": max(outcome, key=outcome.__getitem__),
                    "us": ours * 1e6, "ns_per_nlogn": ours * 1e9 / (n * math.log2(n)), "peak_kib": peak / 1024,
                }
                if n <= naive_max:
                    peer = timed(naive, spans, max(1, repeat // 2))
                    row.update({"naive_us": peer * 1e6, "naive_over_ours": peer / ours})
                rows.append(row)
    finally:
        gc.enable()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated rank counts")
    p.add_argument("--naive-max", type=int, default=512, help="largest n decided pair by pair too")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = bench([int(x) for x in args.sizes.split(",")], args.naive_max, args.repeat)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("one collective of n ranks: the analysis (gather, claim, count, arrival order), median, GC paused")
    print(f"  {'kind':8} {'n':>6} {'outcome':>13} {'us':>10} {'ns/(n lg n)':>12} {'peak KiB':>9} "
          f"{'naive us':>12} {'naive/ours':>10}")
    for r in rows:
        peer = f"{r['naive_us']:12,.0f} {r['naive_over_ours']:10.1f}" if "naive_us" in r else f"{'-':>12} {'-':>10}"
        print(f"  {r['kind']:8} {r['n']:6,} {r['outcome']:>13} {r['us']:10,.0f} {r['ns_per_nlogn']:12,.1f} "
              f"{r['peak_kib']:9,.0f} {peer}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
