"""Every way of running the analysis gives the reference's report (spec/analysis.md §5.3; issue 24): one
process reading the OTLP JSON (the reference), the same input split by trace id into partitions merged
(what ``--jobs`` and ``--engine dask`` run, here in this process), the input converted to a span table
first (``tempotrace convert``, then analyze the Parquet), and ``--engine columnar`` (lines decoded as
columns, or a span table's rows read from its columns), whole and split. The traces are drawn (enginegen.py): honest and
lying clocks, collectives, pipeline messages, HTTP hops, lines out of order, repeated and torn, windows
that split traces. A difference names the way that differs from the reference; on honest clocks no way
decides a known edge wrongly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tempotrace_sdk.analysis import analyze
from tempotrace_sdk.analysis.engine import Options, run
from tempotrace_sdk.analysis.inputs import expand
from tempotrace_sdk.analysis.merge import merge_reports

from .enginegen import Drawn, drawn_trace, spans_in
from .parquetgen import comparable, converted

pytest.importorskip("pyarrow")


def _reference(path: str, window: int, keep: int | None = None) -> dict[str, Any]:
    return comparable(analyze(path, window_spans=window, **({} if keep is None else {"keep": keep})).to_dict())


def _partitions(path: str, window: int, n: int, columnar: bool = False, keep: int | None = None) -> dict[str, Any]:
    """What ``--jobs n`` computes, its partitions run here in turn: each owns the traces shard_of gives it."""
    sources = expand([path])
    options = Options(window=window, columnar=columnar) if keep is None else \
        Options(window=window, columnar=columnar, keep=keep)
    outcomes = [run(sources, None, options, (k, n)) for k in range(n)]
    return comparable(merge_reports([o.partial for o in outcomes], options.keep).to_dict())


def _parquet(path: str, window: int, engine: str = "reference", keep: int | None = None) -> dict[str, Any]:
    table = converted([path], path + ".parquet")
    kept = {} if keep is None else {"keep": keep}
    return comparable(analyze(table, window_spans=window, engine=engine, **kept).to_dict())


WAYS = {
    "two partitions": lambda path, window: _partitions(path, window, 2),
    "three partitions": lambda path, window: _partitions(path, window, 3),
    "span table": _parquet,
    "columnar": lambda path, window: comparable(analyze(path, window_spans=window, engine="columnar").to_dict()),
    "columnar, two partitions": lambda path, window: _partitions(path, window, 2, columnar=True),
    "columnar, from a span table": lambda path, window: _parquet(path, window, "columnar"),
}

#: With nothing kept for rendering (what `make bench` and a user's --keep 0 run), the columnar engine counts the
#: parts of plain rows in its plain lane (analysis/plainlane.py) from the first span on; with spans kept, only once
#: the kept ones are all kept.
NOTHING_KEPT = {
    "columnar, nothing kept": lambda path, window: comparable(
        analyze(path, window_spans=window, keep=0, engine="columnar").to_dict()),
    "columnar, two partitions, nothing kept": lambda path, window: _partitions(path, window, 2, True, 0),
    "columnar, from a span table, nothing kept": lambda path, window: _parquet(path, window, "columnar", 0),
    "columnar, five kept": lambda path, window: comparable(
        analyze(path, window_spans=window, keep=5, engine="columnar").to_dict()),
}


def _differences(a: Any, b: Any, at: str = "") -> list[str]:
    """Where two reports differ, as paths (the first few): what a failure prints instead of two whole reports."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(key), b.get(key), f"{at}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{at}[{i}]")]
    return [] if a == b else [f"{at}: {a!r} != {b!r}"[:300]]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=drawn_trace())
def test_every_way_gives_the_reference_report(data: Drawn, tmp_path: Path) -> None:
    path = data.write(str(tmp_path / "drawn.jsonl"))
    want = _reference(path, data.window)
    assert want["spans"] == spans_in(data.lines)  # every span object read (a torn line's are not)
    for way, analyse in WAYS.items():
        got = analyse(path, data.window)
        diff = _differences(got, want)
        assert not diff, f"{way} differs from the reference (one process on the OTLP JSON): {diff[:5]}"
    for way, analyse in NOTHING_KEPT.items():
        keep = 5 if "five" in way else 0
        diff = _differences(analyse(path, data.window), _reference(path, data.window, keep))
        assert not diff, f"{way} differs from the reference keeping as many: {diff[:5]}"
    if data.honest:
        assert want["edges"]["wrong_total"] == 0, want["edges"]  # no silent causal inversion on honest clocks
        assert not want["lying_hosts"]
