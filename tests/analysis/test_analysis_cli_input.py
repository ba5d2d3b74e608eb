"""Bad input to ``tempotrace analyze`` (spec/analysis.md §5, §6): a usage message and exit 2,
never a silently clamped option or a report of zeros."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tempotrace_sdk.analysis import analyze_file
from tempotrace_sdk.analysis.cli import add_analyze_command
from tempotrace_sdk.analysis.otlp_reader import TraceFileError

from .tracegen import write_trace


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tempotrace")
    add_analyze_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.func(args))


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("cli") / "t.jsonl")
    write_trace(path, {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:ptp"}, steps=1)
    return path


@pytest.mark.parametrize(("argv", "needle"), [
    (["--window", "0"], "--window must be >= 1"),
    (["--window", "-3"], "--window must be >= 1"),
    (["--keep", "-5"], "--keep must be >= 0"),
])
def test_bad_window_or_keep_is_a_usage_error(trace: str, argv: list[str], needle: str,
                                             capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "o.html"
    assert _cli(["analyze", trace, "--quiet", "--html", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tempotrace analyze: ") and needle in err
    assert not out.exists()


def test_window_one_and_keep_zero_are_accepted(trace: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["analyze", trace, "--quiet", "--window", "1", "--keep", "0"]) == 0
    assert "spans" in capsys.readouterr().out


@pytest.mark.parametrize("jobs", [1, 2])
def test_trace_lines_without_spans_are_bad_input(tmp_path: Path, jobs: int,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "f.jsonl"
    f.write_text('{"resourceSpans":[]}\n{"resourceSpans":[{"scopeSpans":[]}]}\n')
    with pytest.raises(TraceFileError, match="no spans"):
        analyze_file(str(f), jobs=jobs)
    assert _cli(["analyze", str(f), "--quiet"]) == 2
    assert f"{f}: no spans" in capsys.readouterr().err
