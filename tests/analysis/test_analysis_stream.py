"""Streaming (spec/analysis.md §5): memory bounded by the window, progress on stderr,
the same numbers whatever the window when traces do not straddle it."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from tempotrace_sdk.analysis import analyze_file, iter_spans
from tempotrace_sdk.analysis import analyzer as analyzer_mod
from tempotrace_sdk.analysis.analyzer import Analyzer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.bench_analysis import generate


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("st") / "t.jsonl")
    generate(path, 4000, ranks=8)  # traces of 25 spans, written trace after trace
    return path


def test_buffer_never_exceeds_the_window(trace: str) -> None:
    a = Analyzer(window_spans=300)
    peak = 0
    for span in iter_spans(trace):
        a.add(span)
        peak = max(peak, a._buffered)
    rep = a.finish()
    assert peak <= 300
    assert rep.spans == 4000 and rep.traces >= 4000 // 25


def test_window_does_not_change_the_numbers_for_contiguous_traces(trace: str) -> None:
    small = analyze_file(trace, window_spans=300).to_dict()
    large = analyze_file(trace).to_dict()
    for key in ("summary", "edges", "hops", "faults"):
        assert small[key] == large[key], key
    assert small["edges"]["wrong_total"] == 0 and small["unresolved_parents"] == 0


def test_progress_goes_to_the_given_stream(trace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(float(i) for i in range(10**6))
    monkeypatch.setattr(analyzer_mod.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(analyzer_mod, "PROGRESS_EVERY", 1000)
    err = io.StringIO()
    analyze_file(trace, progress=err)
    lines = err.getvalue().splitlines()
    assert lines and all(line.startswith("analyze: ") and "spans/s" in line for line in lines)
    assert "4,000 spans" in lines[-1]


def test_jobs_split_by_trace_give_the_same_report(trace: str, tmp_path: Path) -> None:
    """§5: analyze --jobs N equals one process (counts, faults, kept spans)."""
    from .tracegen import write_trace

    liar = tmp_path / "liar.jsonl"
    write_trace(str(liar), {"c": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp", "w4": "sim:ntp"})
    for path in (trace, str(liar)):
        one = analyze_file(path, window_spans=500).to_dict()
        three = analyze_file(path, window_spans=500, jobs=3).to_dict()
        one.pop("elapsed_s")
        three.pop("elapsed_s")
        assert three == one


def test_jobs_report_the_first_bad_line(tmp_path: Path) -> None:
    from tempotrace_sdk.analysis import TraceFileError

    good = Path(tmp_path / "g.jsonl")
    generate(str(good), 600, ranks=4)
    lines = good.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], "{broken", *lines[1:], "[]"]) + "\n")
    with pytest.raises(TraceFileError) as info:
        analyze_file(str(bad), jobs=2)
    assert info.value.line == 2 and "not JSON" in info.value.reason
