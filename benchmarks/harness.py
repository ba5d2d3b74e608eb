"""A tiny shared micro-benchmark harness: medians, peers, ratios.

Speed in this project is always reported as a ratio against a peer or floor
measured in the same process and run (machines differ; ratios travel), never
as a timed assertion in a test.

    from benchmarks.harness import Row, measure, print_table, as_json

    ours = measure(lambda: TTExt.from_header(text))
    peer = measure(lambda: base64.urlsafe_b64decode(padded))
    print_table("decode", [Row("tt-ext decode", ours, "b64 floor", ours / peer, 1200.0)])

``compare(ours, peer)`` times the two in alternating batches and returns
(ours ns, peer ns, median per-pair ratio): prefer it on a shared machine.

``measure`` returns the median nanoseconds per call over ``repeat`` timed
batches; the batch size is calibrated so one batch lasts about
``min_time / repeat`` seconds. The garbage collector is disabled while timing
(and restored afterwards) so a collection does not land in one batch.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

__all__ = ["Row", "as_json", "compare", "emit", "measure", "print_table"]


class Row(NamedTuple):
    """One line of a results table.

    ``ns`` is our median ns/call; ``peer`` names what we compared against;
    ``ratio`` is ours / peer (lower is better); ``target_ns`` is the budget
    the issue sets for this operation, if any.
    """

    name: str
    ns: float
    peer: str | None = None
    ratio: float | None = None
    target_ns: float | None = None


def _time_batch(fn: Callable[[], object], loops: int) -> float:
    # A local range object and bound call keep the loop overhead small and
    # constant; it is the same for ours and the peer, so ratios stay fair.
    clock = time.perf_counter_ns
    it = range(loops)
    start = clock()
    for _ in it:
        fn()
    return (clock() - start) / loops


def measure(fn: Callable[[], object], *, min_time: float = 0.2, repeat: int = 7) -> float:
    """Median ns per call of ``fn()`` over ``repeat`` calibrated batches."""
    if repeat < 1 or min_time <= 0:
        raise ValueError("repeat must be >= 1 and min_time > 0")
    per_batch_ns = min_time * 1e9 / repeat
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        fn()  # warm caches, imports, lru_caches
        loops = 1
        while True:
            ns = _time_batch(fn, loops) * loops
            if ns >= per_batch_ns / 10 or loops >= 1 << 24:
                break
            loops *= 10
        loops = max(1, int(loops * per_batch_ns / max(ns, 1.0)))
        samples = [_time_batch(fn, loops) for _ in range(repeat)]
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(samples)


def _rows(rows: Iterable[Row | Sequence[Any]]) -> list[Row]:
    return [r if isinstance(r, Row) else Row(*r) for r in rows]


def _loops_for(fn: Callable[[], object], per_batch_ns: float) -> int:
    fn()
    loops = 1
    while True:
        ns = _time_batch(fn, loops) * loops
        if ns >= per_batch_ns / 10 or loops >= 1 << 24:
            return max(1, int(loops * per_batch_ns / max(ns, 1.0)))
        loops *= 10


def compare(
    fn: Callable[[], object], peer: Callable[[], object], *, min_time: float = 0.4, repeat: int = 15
) -> tuple[float, float, float]:
    """(ours ns, peer ns, ratio) with the two timed in alternating batches.

    On a shared, noisy machine load changes between two separate
    ``measure`` calls; alternating batches exposes both to the same load, and
    the ratio is the median of the per-pair ratios, which is far steadier
    than a ratio of two medians.
    """
    if repeat < 1 or min_time <= 0:
        raise ValueError("repeat must be >= 1 and min_time > 0")
    per_batch_ns = min_time * 1e9 / (2 * repeat)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        ours_loops, peer_loops = _loops_for(fn, per_batch_ns), _loops_for(peer, per_batch_ns)
        ours, theirs = [], []
        for _ in range(repeat):
            ours.append(_time_batch(fn, ours_loops))
            theirs.append(_time_batch(peer, peer_loops))
    finally:
        if gc_was_enabled:
            gc.enable()
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    return statistics.median(ours), statistics.median(theirs), statistics.median(ratios)


def _fmt_ns(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:8.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:8.3f} µs"
    return f"{ns:8.1f} ns"


def print_table(title: str, rows: Iterable[Row | Sequence[Any]], *, file: Any = None) -> None:
    """Print rows as an aligned table: name, median, peer, ratio, target, verdict."""
    out = file if file is not None else sys.stdout
    table = _rows(rows)
    width = max([len(r.name) for r in table] + [9])
    peer_w = max([len(r.peer or "") for r in table] + [4])
    print(f"\n## {title}", file=out)
    print(f"{'operation':<{width}}  {'median':>11}  {'peer':<{peer_w}}  {'ratio':>7}  {'target':>11}  ok", file=out)
    for r in table:
        ratio = f"{r.ratio:7.2f}" if r.ratio is not None else " " * 7
        target = _fmt_ns(r.target_ns) if r.target_ns is not None else " " * 11
        verdict = "" if r.target_ns is None else ("yes" if r.ns <= r.target_ns else "NO")
        print(f"{r.name:<{width}}  {_fmt_ns(r.ns)}  {r.peer or '':<{peer_w}}  {ratio}  {target}  {verdict}", file=out)


def as_json(title: str, rows: Iterable[Row | Sequence[Any]]) -> dict[str, Any]:
    """The same rows as a JSON-ready dict (for ``--json`` output)."""
    return {
        "title": title,
        "python": sys.version.split()[0],
        "rows": [
            {
                "name": r.name,
                "median_ns": round(r.ns, 1),
                "peer": r.peer,
                "ratio": None if r.ratio is None else round(r.ratio, 3),
                "target_ns": r.target_ns,
                "meets_target": None if r.target_ns is None else r.ns <= r.target_ns,
            }
            for r in _rows(rows)
        ],
    }


def emit(title: str, rows: Iterable[Row | Sequence[Any]], argv: Sequence[str] | None = None) -> None:
    """Print a table, or JSON when ``--json`` is among ``argv`` (default sys.argv)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if "--json" in args:
        print(json.dumps(as_json(title, rows), indent=2))
    else:
        print_table(title, rows)
