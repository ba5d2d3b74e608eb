"""``tempotrace demo --hang`` (issue 23, item 6): a real torchrun job in which rank 2 stops before an all_reduce.

The end-to-end test runs the CLI as a subprocess, as a user would: every rank's watchdog dumps its
flight recorder, the demo stops the job and prints the analysis' hang report. The checks' own logic and
the option rules are tested without any process.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from proc_tree import alive, descendants  # tests/demo is on sys.path (no package)

from tempotrace_sdk.analysis.events import DumpInfo
from tempotrace_sdk.cli.main import main
from tempotrace_sdk.demo.dump_watch import DumpWatch, PendingOp
from tempotrace_sdk.demo.hang_demo import DEFAULT_HANG_TIMEOUT_S, STUCK_RANK, HangConfig, HangResult
from tempotrace_sdk.demo.hang_summary import hang_blocks, hang_checks, render_hang

#: The stuck rank's line in the demo's progress: the hang begins here.
STALL_LINE = f"rank {STUCK_RANK} stops before all_reduce"
#: Wall time the whole demo may take on a 2-core machine: hang_timeout, four torch imports, the analysis.
TOTAL_LIMIT_S = DEFAULT_HANG_TIMEOUT_S + 20
#: From the stop to the demo's exit: hang_timeout, a watchdog poll, the dumps, stopping the job, the analysis.
AFTER_HANG_LIMIT_S = DEFAULT_HANG_TIMEOUT_S + 10


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the hang demo is a torchrun job: needs torch")
def test_rank_2_stops_every_rank_dumps_and_the_report_names_it_within_the_hang_timeout(tmp_path: Path) -> None:
    start = time.monotonic()
    demo = subprocess.Popen([sys.executable, "-m", "tempotrace_sdk", "demo", "--hang", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    below: list[int] = []
    stalled: float | None = None
    try:
        assert demo.stdout is not None
        for line in demo.stdout:
            lines.append(line)
            if stalled is None and STALL_LINE in line:
                stalled = time.monotonic()
                below = descendants(demo.pid)  # torchrun and its ranks, while they hang
        err = demo.stderr.read() if demo.stderr is not None else ""
        code = demo.wait(timeout=30)
    finally:
        if demo.poll() is None:
            demo.kill()
    ended = time.monotonic()
    text = "".join(lines)
    assert code == 0, text + err
    assert stalled is not None, text
    assert ended - start <= TOTAL_LIMIT_S, text
    assert ended - stalled <= AFTER_HANG_LIMIT_S, text

    # The analysis' hang line names the rank that stopped and the collective the others wait in.
    hang = [line for line in lines if line.strip().startswith("HANG")]
    assert len(hang) == 1, text
    assert re.search(rf"\brank {STUCK_RANK}\b.*never entered all_reduce #\d+", hang[0]), hang[0]
    assert "[FAILED]" not in text and f"[ok] the hang report names rank {STUCK_RANK}" in text

    # Read without the demo or the analysis: every rank wrote a dump record; the others were in an all_reduce.
    dumps, pending = _dumps_and_pending(tmp_path / "trace.jsonl")
    assert set(dumps) == {0, 1, 2, 3}, dumps
    assert {reason for reasons in dumps.values() for reason in reasons} <= {"hang", "peer"}
    assert "hang" in {reasons[0] for reasons in dumps.values()}
    assert sorted(rank for rank, op in pending) == [0, 1, 3] and {op for _, op in pending} == {"torch.all_reduce"}

    # The demo stopped torchrun and every rank before it exited: nothing is left.
    assert len(below) >= 5, below  # torchrun and its 4 ranks
    assert alive(below) == []


def _dumps_and_pending(path: Path) -> tuple[dict[int, list[str]], list[tuple[int, str]]]:
    """rank -> the reasons of its dump records, and (rank, name) of every pending op span."""
    dumps: dict[int, list[str]] = {}
    pending: list[tuple[int, str]] = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line).get("resourceSpans", []):
            resource = {a["key"]: a["value"] for a in rs.get("resource", {}).get("attributes", [])}
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    attrs = {**resource, **{a["key"]: a["value"] for a in s.get("attributes", [])}}
                    rank = int(attrs["tempotrace.rank"]["intValue"])
                    if s["name"] == "torch.dump":
                        dumps.setdefault(rank, []).append(attrs["tempotrace.torch.dump.reason"]["stringValue"])
                    elif attrs.get("tempotrace.torch.completion", {}).get("stringValue") == "pending":
                        pending.append((rank, s["name"]))
    return dumps, pending


def _result(tmp_path: Path, report_text: str, dumped: tuple[int, ...] = (0, 1, 2, 3)) -> HangResult:
    watch = DumpWatch(tmp_path / "trace.jsonl")
    watch.dumps = {r: [DumpInfo("peer" if r else "hang", 14, 0 if r == 2 else 1)] for r in dumped}
    watch.pending = [PendingOp(r, "all_reduce", "0-3", 13) for r in dumped if r != 2]
    paths = {name: tmp_path / name for name in ("out", "trace", "report", "perfetto", "html")}
    return HangResult(HangConfig(), paths, watch, stopped=True, dumps_s=3.4, report_text=report_text)


HANG_TEXT = ("HANG: rank 2 (node2) never entered all_reduce #13 of group 0-3; ranks 0, 1, 3 pending in it since x\n"
             "  rank 2 (node2): last completed all_reduce #12\n"
             "TempoTrace analysis of trace.jsonl\n")


@pytest.mark.parametrize(
    ("report_text", "dumped", "failed"),
    [
        (HANG_TEXT, (0, 1, 2, 3), []),
        ("TempoTrace analysis of trace.jsonl\n  spans 71\n", (0, 1, 2, 3), ["names rank 2"]),
        (HANG_TEXT.replace("rank 2 (node2) never", "rank 1 (node1) never").replace("2 (node2): last", "1: last"),
         (0, 1, 2, 3), ["names rank 2"]),
        (HANG_TEXT.replace("#13 of", "#130 of"), (0, 1, 2, 3), ["names rank 2"]),
        (HANG_TEXT, (0, 1, 3), ["every rank dumped"]),
    ],
    ids=["named", "no-hang-line", "another-rank", "another-collective", "a-rank-never-dumped"],
)
def test_the_demo_passes_only_when_the_report_names_the_stuck_rank_and_collective_and_every_rank_dumped(
    tmp_path: Path, report_text: str, dumped: tuple[int, ...], failed: list[str]
) -> None:
    result = _result(tmp_path, report_text, dumped)
    result.checks = hang_checks(result, STUCK_RANK)
    assert [name for name, passed in result.checks.items() if not passed] == [
        name for name in result.checks for part in failed if part in name]
    assert result.ok == (not failed)
    text = render_hang(result, STUCK_RANK)
    assert ("[FAILED]" in text) is bool(failed)
    if not hang_blocks(report_text):  # no hang named: the report's head and what the dumps say instead
        assert "spans 71" in text
        assert "the analysis names no hang; the dump records themselves say: ranks 0, 1, 3 pending in all_reduce " \
               "seq 13 of group 0-3; rank 2 in no op" in text


def test_hang_blocks_keep_the_lines_under_each_hang_line() -> None:
    assert hang_blocks(HANG_TEXT) == [HANG_TEXT.splitlines()[:2]]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--hang-timeout", "3"], "add --hang"),
        (["--hang", "--http"], "leave out --http"),
        (["--hang", "--liar-offset", "10ms"], "no liar"),
        (["--hang", "--ranks", "2"], "at least 3 ranks"),
    ],
    ids=["timeout-without-hang", "with-http", "with-a-liar", "too-few-ranks"],
)
def test_hang_option_mistakes_are_usage_errors_before_any_process(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    assert main(["demo", *argv, "--out", "/nonexistent/never-made"]) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf"])
def test_a_hang_timeout_must_be_a_positive_number_of_seconds(capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert main(["demo", "--hang", "--hang-timeout", value]) == 2
    assert "--hang-timeout" in capsys.readouterr().err
