"""Streaming (spec/analysis.md §5): memory bounded by the window, progress on stderr,
the same numbers whatever the window when traces do not straddle it."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from tempotrace_sdk.analysis import analyze_file, iter_spans
from tempotrace_sdk.analysis.analyzer import Analyzer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.bench_analysis import generate


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("st") / "t.jsonl")
    generate(path, 4000, ranks=8)  # traces of 25 spans, written trace after trace
    return path


def test_buffer_never_exceeds_the_window(trace: str) -> None:
    """§5.2: the spans held at once never exceed the window (positions), whatever the traces' sizes."""
    a = Analyzer(window_spans=300)
    peak = 0
    for span in iter_spans(trace):
        a.add(span)
        peak = max(peak, sum(len(part) for part in a._open.values()))
    rep = a.finish()
    assert peak <= 300 + 300 // 16  # the window, and the positions between two sweeps
    assert rep.spans == 4000 and rep.traces >= 4000 // 25


def test_window_does_not_change_the_numbers_for_contiguous_traces(trace: str) -> None:
    small = analyze_file(trace, window_spans=300).to_dict()
    large = analyze_file(trace).to_dict()
    for key in ("summary", "edges", "hops", "faults"):
        assert small[key] == large[key], key
    assert small["edges"]["wrong_total"] == 0 and small["unresolved_parents"] == 0


def test_progress_line_says_spans_rate_and_eta(trace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """§5.1: on a terminal, a progress line (spans, rate, share of the input, ETA) at most every second."""
    from tempotrace_sdk.analysis import progress as progress_mod
    from tempotrace_sdk.analysis.progress import Progress

    clock = iter(float(i) for i in range(10**6))
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: next(clock))
    err = io.StringIO()
    size = Path(trace).stat().st_size
    analyze_file(trace, progress=Progress(err, size, rewrite=False))
    lines = err.getvalue().splitlines()
    assert lines and all(line.startswith("analyze: ") and "spans/s" in line for line in lines)
    assert any("ETA" in line for line in lines) and any(" of " in line and "MB" in line for line in lines)


def test_no_progress_when_piped_or_quiet() -> None:
    """§5.1: progress only on a terminal; piped or --json/--quiet: none."""
    from tempotrace_sdk.analysis.progress import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert Progress.for_stream(io.StringIO(), 100, quiet=False) is None
    assert Progress.for_stream(Tty(), 100, quiet=True) is None
    assert Progress.for_stream(Tty(), 100, quiet=False) is not None


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
        analyze_file(str(bad), jobs=2, strict=True)
    assert info.value.line == 2 and "not JSON" in info.value.reason
