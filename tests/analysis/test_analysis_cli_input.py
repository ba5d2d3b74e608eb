"""Bad input to ``tempotrace analyze`` (spec/analysis.md §5, §6): a usage message and exit 2,
never a silently clamped option or a report of zeros."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempotrace_sdk.analysis import TraceFileError, analyze_file
from tempotrace_sdk.cli.main import main as _cli

from .tracegen import write_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("cli") / "t.jsonl")
    write_trace(path, {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:ptp"}, steps=1)
    return path


@pytest.mark.parametrize(("argv", "needle"), [
    (["--window", "0"], "argument --window: must be >= 1"),
    (["--window", "-3"], "argument --window: must be >= 1"),
    (["--keep", "-5"], "argument --keep: must be >= 0"),
    (["--dedup", "-1"], "argument --dedup: must be >= 0"),
    (["--max-line-mb", "0"], "argument --max-line-mb: must be >= 1"),
    (["--jobs", "0"], "argument --jobs: must be >= 1"),
])
def test_bad_window_or_keep_is_a_usage_error(trace: str, argv: list[str], needle: str,
                                             capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "o.html"
    assert _cli(["analyze", trace, "--quiet", "--html", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert "tempotrace analyze: error: " in err and needle in err
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


def test_json_lists_kept_records_only_when_keep_is_given(trace: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--json alone stays small on a cluster trace; --keep N asks for the rendering records too."""
    assert _cli(["analyze", trace, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert _cli(["analyze", trace, "--json", "--keep", "1000"]) == 0
    kept = json.loads(capsys.readouterr().out)
    assert plain["rendered"] == {"spans": 0, "hops": 0, "collectives": 0} and plain["collectives"] == []
    assert kept["rendered"]["spans"] == kept["spans"] > 0 and kept["rendered"]["hops"] > 0
    assert plain["edges"] == kept["edges"]
