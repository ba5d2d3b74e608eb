"""The analysis split by trace id gives one process's report (spec/analysis.md §5.3): ``--jobs`` on local
processes, ``--engine dask`` on a real ``distributed.LocalCluster`` with two worker processes. The
inputs are several files read side by side, with a window small enough that traces are analysed in
parts, hops are matched across parts, duplicates arrive after their trace, and a line is bad."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from tempotrace_sdk.analysis import analyze
from tempotrace_sdk.analysis.dask_engine import analyze_dask
from tempotrace_sdk.analysis.engine import Options
from tempotrace_sdk.analysis.inputs import expand
from tempotrace_sdk.analysis.merge import merge_reports
from tempotrace_sdk.cli.main import main as cli

from .tracegen import write_trace

WINDOW = 40


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("engines")
    a, b = folder / "a.jsonl", folder / "b.jsonl"
    write_trace(str(a), {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp", "w4": "sim:ptp"},
                steps=3)
    write_trace(str(b), {"c2": "sim:ptp", "x1": "sim:ntp", "x2": "sim:ptp", "x3": "sim:unsynced"}, steps=2)
    lines = b.read_text().splitlines()
    b.write_text("\n".join([*lines, "{cut sho", *lines[:3]]) + "\n")  # a bad line, and duplicates late
    return [str(a), str(b)]


def _comparable(d: dict[str, Any]) -> dict[str, Any]:
    d = dict(d)
    d.pop("elapsed_s")
    return d


def test_the_inputs_exercise_what_partitions_could_get_wrong(inputs: list[str]) -> None:
    d = analyze(inputs, window_spans=WINDOW).to_dict()
    assert d["trace_parts"] > d["traces"] and d["unresolved_parents"] > 0  # traces analysed in parts
    assert d["hops"]["matched"] == d["hops"]["total"]  # hops matched across parts
    assert d["duplicate_spans"] > 0 and d["bad"]["lines"] == 1 and d["faults"]


def test_jobs_give_one_processs_report(inputs: list[str]) -> None:
    one = _comparable(analyze(inputs, window_spans=WINDOW).to_dict())
    assert _comparable(analyze(inputs, window_spans=WINDOW, jobs=3).to_dict()) == one


@pytest.fixture(scope="module")
def cluster() -> Any:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


@pytest.mark.slow
@pytest.mark.parametrize("columnar", [True, False], ids=["columnar decode", "per-span decode"])
def test_dask_gives_one_processs_report(inputs: list[str], cluster: Any, columnar: bool) -> None:
    """Small chunks (many read tasks per file) and three partitions over the two workers."""
    one = _comparable(analyze(inputs, window_spans=WINDOW).to_dict())
    outcomes = analyze_dask(expand(inputs), None, Options(window=WINDOW, columnar=columnar),
                            scheduler=cluster.scheduler_address, partitions=3, chunk_bytes=20_000)
    assert len(outcomes) == 3
    assert _comparable(merge_reports([o.partial for o in outcomes], Options().keep).to_dict()) == one


@pytest.mark.slow
def test_cli_engine_dask_with_a_scheduler(inputs: list[str], cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    want = _comparable(analyze(inputs, window_spans=WINDOW, keep=0).to_dict())
    assert cli(["analyze", *inputs, "--json", "--window", str(WINDOW), "--engine", "dask", "--scheduler",
                cluster.scheduler_address]) == 0
    assert _comparable(json.loads(capsys.readouterr().out)) == want


@pytest.mark.parametrize(("chunk_bytes", "block_lines"), [(700, 4096), (20_000, 3), (1 << 20, 4096), (1 << 20, 2)])
def test_a_read_task_decoding_columns_gives_the_per_span_decode(inputs: list[str], tmp_path: Any,
                                                                monkeypatch: pytest.MonkeyPatch, chunk_bytes: int,
                                                                block_lines: int) -> None:
    """Each chunk's line fates, counts and records (pickled per partition) are the same either way; with a
    blank, a blank-looking and a too-long line besides the bad one, chunks that cut lines, and blocks of a
    few lines (positions run on across a block's lines)."""
    pytest.importorskip("pyarrow")
    from tempotrace_sdk.analysis import dask_engine, reader

    monkeypatch.setattr(reader, "BLOCK_LINES", block_lines)

    text = open(inputs[1], encoding="utf-8").read().splitlines()
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([text[0], "", "   ", text[1], "x" * 3000, *text[2:]]) + "\n")
    sources = expand([str(path), *inputs])
    for chunk in dask_engine.plan_chunks(sources, chunk_bytes):
        source = sources[chunk.source]
        want = dask_engine.read_chunk(source, chunk, 3, 2048)
        got = dask_engine.read_chunk(source, chunk, 3, 2048, columnar=True)
        assert got[0] == want[0], f"{source.name} chunk {chunk.index}: the lines' fates differ"
        assert [pickle.loads(b) for b in got[1]] == [pickle.loads(b) for b in want[1]], \
            f"{source.name} chunk {chunk.index}: the records differ"


def test_scheduler_needs_engine_dask(inputs: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["analyze", inputs[0], "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "--scheduler needs --engine dask" in capsys.readouterr().err


def test_dask_refuses_stdin(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("distributed")
    with pytest.raises(Exception, match="not stdin or a FIFO"):
        analyze_dask(expand(["-"]), None, Options())
