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
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proc_tree import alive, descendants  # tests/demo is on sys.path (no package)

from tempotrace_sdk.analysis.events import DumpInfo
from tempotrace_sdk.cli.main import main
from tempotrace_sdk.demo.dump_watch import DumpWatch, PendingOp
from tempotrace_sdk.demo.hang_demo import (
    DEFAULT_HANG_TIMEOUT_S,
    HANG_TIMEOUT_LIMIT_S,
    STUCK_RANK,
    HangConfig,
    HangResult,
    watch_hang,
)
from tempotrace_sdk.demo.hang_summary import hang_blocks, hang_checks, render_hang

#: The stuck rank's line in the demo's progress: the hang begins here.
STALL_LINE = f"rank {STUCK_RANK} stops before all_reduce"
#: Wall time the whole demo may take on a 2-core machine: hang_timeout, four torch imports, the analysis.
TOTAL_LIMIT_S = DEFAULT_HANG_TIMEOUT_S + 20
#: From the stop to the demo's exit: hang_timeout, a watchdog poll, the dumps, stopping the job, the analysis.
AFTER_HANG_LIMIT_S = DEFAULT_HANG_TIMEOUT_S + 10
#: When a demo that has not ended is killed and the test fails (no pytest-timeout here): well past TOTAL_LIMIT_S,
#: so that a slow run still fails on the timing assertions, which say more.
KILL_AFTER_S = TOTAL_LIMIT_S + 60


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the hang demo is a torchrun job: needs torch")
def test_rank_2_stops_every_rank_dumps_and_the_report_names_it_within_the_hang_timeout(tmp_path: Path) -> None:
    start = time.monotonic()
    lines: list[str] = []
    below: list[int] = []
    stalled: float | None = None

    def read(stdout: Any) -> None:
        nonlocal stalled, below
        for line in stdout:
            lines.append(line)
            if stalled is None and STALL_LINE in line:
                stalled = time.monotonic()
                below = descendants(demo.pid)  # torchrun and its ranks, while they hang

    with (tmp_path / "demo-stderr.txt").open("w+") as stderr:
        demo = subprocess.Popen([sys.executable, "-m", "tempotrace_sdk", "demo", "--hang", "--out", str(tmp_path)],
                                stdout=subprocess.PIPE, stderr=stderr, text=True)
        reader = threading.Thread(target=read, args=(demo.stdout,), daemon=True)
        reader.start()
        try:
            reader.join(timeout=KILL_AFTER_S)  # the reader ends at the demo's EOF, or the demo is stuck
            ended = time.monotonic()
            if reader.is_alive():
                demo.kill()  # its ranks see their stdin close and exit (launch.py)
                reader.join(timeout=10)
                pytest.fail(f"the demo had not ended {KILL_AFTER_S:.0f} s after it started:\n" + "".join(lines))
            code = demo.wait(timeout=30)
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait(timeout=10)
        stderr.seek(0)
        err = stderr.read()
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


def _result(tmp_path: Path, report_text: str, dumped: tuple[int, ...] = (0, 1, 2, 3),
            seqs: tuple[int, ...] = (13, 13, 13)) -> HangResult:
    """Every rank of ``dumped`` dumped; the others than rank 2 are pending in all_reduce #seqs[i] (one each)."""
    watch = DumpWatch(tmp_path / "trace.jsonl")
    watch.dumps = {r: [DumpInfo("peer" if r else "hang", 14, 0 if r == 2 else 1)] for r in dumped}
    waiting = [r for r in dumped if r != 2]
    watch.pending = [PendingOp(r, "all_reduce", "0-3", seq) for r, seq in zip(waiting, seqs, strict=False)]
    paths = {name: tmp_path / name for name in ("out", "trace", "report", "perfetto", "html")}
    return HangResult(HangConfig(), paths, watch, stopped=True, dumps_s=3.4, report_text=report_text)


HANG_TEXT = ("HANG: rank 2 (node2) never entered all_reduce #13 of group 0-3; ranks 0, 1, 3 pending in it since x\n"
             "  rank 2 (node2): last completed all_reduce #12\n"
             "TempoTrace analysis of trace.jsonl\n")


@pytest.mark.parametrize(
    ("report_text", "dumped", "seqs", "failed"),
    [
        (HANG_TEXT, (0, 1, 2, 3), (13, 13, 13), []),
        ("TempoTrace analysis of trace.jsonl\n  spans 71\n", (0, 1, 2, 3), (13, 13, 13), ["names rank 2"]),
        (HANG_TEXT.replace("rank 2 (node2) never", "rank 1 (node1) never").replace("2 (node2): last", "1: last"),
         (0, 1, 2, 3), (13, 13, 13), ["names rank 2"]),
        (HANG_TEXT.replace("#13 of", "#130 of"), (0, 1, 2, 3), (13, 13, 13), ["names rank 2"]),
        (HANG_TEXT.replace("(node2) never entered", "pending in"), (0, 1, 2, 3), (13, 13, 13), ["names rank 2"]),
        (HANG_TEXT.replace("HANG: rank 2 (node2) never entered all_reduce #13 of group 0-3; ",
                           "HANG: rank 1 (node1) pending in all_reduce #13; rank 2 (node2) never entered all_reduce "
                           "#13; "), (0, 1, 2, 3), (13, 13, 13), ["names rank 2"]),
        (HANG_TEXT, (0, 1, 2, 3), (), ["names rank 2"]),
        (HANG_TEXT, (0, 1, 2, 3), (13, 14, 13), ["names rank 2"]),
        (HANG_TEXT, (0, 1, 3), (13, 13), ["every rank dumped"]),
    ],
    ids=["named", "no-hang-line", "another-rank", "another-collective", "pending-not-never-entered",
         "never-entered-said-after-another-rank", "no-pending-seq", "several-pending-seqs", "a-rank-never-dumped"],
)
def test_the_demo_passes_only_when_the_report_names_the_stuck_rank_and_collective_and_every_rank_dumped(
    tmp_path: Path, report_text: str, dumped: tuple[int, ...], seqs: tuple[int, ...], failed: list[str]
) -> None:
    result = _result(tmp_path, report_text, dumped, seqs)
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
        (["--hang", "--carriage", "op"], "not recorded in the flight-recorder ring"),
        (["--hang", "--hang-timeout", f"{HANG_TIMEOUT_LIMIT_S:g}"], f"less than {HANG_TIMEOUT_LIMIT_S:g} s"),
        (["--hang", "--hang-timeout", "300"], f"less than {HANG_TIMEOUT_LIMIT_S:g} s"),
    ],
    ids=["timeout-without-hang", "with-http", "with-a-liar", "too-few-ranks", "carried-per-op",
         "timeout-at-the-limit", "timeout-past-the-group-timeout"],
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


@pytest.mark.parametrize(
    ("options", "says"),
    [({"hang_timeout_s": HANG_TIMEOUT_LIMIT_S}, "less than"), ({"hang_timeout_s": 0.0}, "more than 0"),
     ({"carriage": "op"}, "not in the flight-recorder ring")],
    ids=["timeout-at-the-limit", "no-timeout", "carried-per-op"],
)
def test_a_hang_config_that_cannot_pass_cannot_be_made(options: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        HangConfig(**options)


def _kv(key: str, value: str | int) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value} if isinstance(value, str) else {"intValue": str(value)}}


def _dump_line(rank: int, reason: str, requested_by: int | None = None) -> str:
    """One export line holding rank ``rank``'s dump record (a ``torch.dump`` span, spec/torch.md §7.3)."""
    attrs: dict[str, str | int] = {"tempotrace.rank": rank, "tempotrace.host": f"node{rank}",
                                   "tempotrace.torch.dump.reason": reason, "tempotrace.torch.dump.ops": 14,
                                   "tempotrace.torch.dump.pending": 0 if rank == STUCK_RANK else 1}
    if requested_by is not None:
        attrs["tempotrace.torch.dump.requested_by"] = requested_by
    t = 1_800_000_000_000_000_000
    span = {"traceId": f"{0xD0D0 + rank:032x}", "spanId": f"{0xD000 + rank:016x}", "name": "torch.dump", "kind": 1,
            "startTimeUnixNano": str(t), "endTimeUnixNano": str(t),
            "attributes": [_kv(k, v) for k, v in attrs.items()], "status": {}}
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []},
                                          "scopeSpans": [{"scope": {"name": "test"}, "spans": [span]}]}]}) + "\n"


def _append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def _events(path: Path, before: str, after: str, then: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The ranks' events as the coordinator reads them: ``before`` is in the file when rank 2 stops,
    ``after`` lands while the others hang, then come ``then``."""
    _append(path, before)
    yield {"kind": "step", "step": 0, "ms": 5.0, "all_reduces": 3}
    yield {"kind": "stalled", "rank": STUCK_RANK, "step": 1, "all_reduce": 1}
    _append(path, after)
    yield {"kind": "idle"}
    yield from then


def test_dumps_written_before_the_stall_do_not_count(tmp_path: Path) -> None:
    """A dump from before the stall (a slow step's, an exception's) is not the hang's: every rank dumped
    before it, only rank 0 after it, and the wait goes on for the others."""
    trace = tmp_path / "trace.jsonl"
    early = "".join(_dump_line(r, "hang") for r in range(4))
    said: list[str] = []
    watch = DumpWatch(trace)
    cut = _dump_line(1, "exc")  # being written when rank 2 stops: its end lands after
    wait = watch_hang(_events(trace, early + cut[:40], cut[40:] + _dump_line(0, "hang"), []), watch, 4,
                      DEFAULT_HANG_TIMEOUT_S, said.append)
    assert watch.dumped() == {0} and watch.unreadable == 0
    assert wait.stalled is not None and wait.dumps_s is None and wait.failure is None
    assert [line for line in said if "dumped" in line] == [
        "rank 0 dumped its flight recorder (hang): 14 ops, 1 pending"]


def test_every_rank_dumping_after_the_stall_ends_the_wait(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    dumps = _dump_line(0, "hang") + "".join(_dump_line(r, "peer", requested_by=0) for r in (1, 2, 3))
    said: list[str] = []
    never = [{"kind": "failed", "rank": 1, "error": "read past the end of the wait"}]
    wait = watch_hang(_events(trace, "", dumps, never), DumpWatch(trace), 4, DEFAULT_HANG_TIMEOUT_S, said.append)
    assert wait.dumps_s is not None and wait.failure is None
    assert "every rank's dump is in trace.jsonl" in said[-1]


def test_a_rank_failing_after_the_stall_ends_the_wait_and_what_was_dumped_is_kept(tmp_path: Path) -> None:
    """A ``failed`` event after the stall (the group's timeout, a dump's error) is no failure before the hang:
    the wait ends and the dumps so far are analysed."""
    trace = tmp_path / "trace.jsonl"
    failed = [{"kind": "failed", "rank": 3, "error": "RuntimeError: Timed out\x1b[2J"}]
    said: list[str] = []
    watch = DumpWatch(trace)
    wait = watch_hang(_events(trace, "", _dump_line(0, "hang"), failed), watch, 4, DEFAULT_HANG_TIMEOUT_S,
                      said.append)
    assert wait.failed_before is None and wait.stalled is not None
    assert wait.failure == "rank 3 failed: RuntimeError: Timed out\x1b[2J"
    assert watch.dumped() == {0}
    assert "\x1b" not in said[-1]
    assert "rank 3 failed: RuntimeError: Timed out\\x1b[2J (after rank 2 stopped)" in said[-1]


def test_a_rank_failing_before_the_stall_is_the_jobs_failure(tmp_path: Path) -> None:
    events = [{"kind": "failed", "rank": 1, "error": "ImportError: no torch"},
              {"kind": "stalled", "rank": STUCK_RANK, "step": 1, "all_reduce": 1}]
    wait = watch_hang(iter(events), DumpWatch(tmp_path / "trace.jsonl"), 4, DEFAULT_HANG_TIMEOUT_S, lambda _: None)
    assert (wait.failed_before, wait.failure, wait.stalled) == (1, "ImportError: no torch", None)


def test_values_read_back_from_the_trace_and_paths_are_shown_escaped(tmp_path: Path) -> None:
    """The op, group and dump reason come from the trace, the paths from the user: none can drive the terminal."""
    folder = tmp_path / "out\x1b]0;pwned\x07"
    result = _result(folder, "TempoTrace analysis of trace.jsonl\n")
    result.watch.pending = [PendingOp(0, "all_reduce\x1b[2J", "0-3\u202e", 13)]
    result.watch.dumps[0] = [DumpInfo("hang\x1b[31m", 14, 1)]
    result.failure = "rank 3 failed: \x1b[2Jgone"
    result.checks = hang_checks(result, STUCK_RANK)
    text = render_hang(result, STUCK_RANK)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "pending in all_reduce\\x1b[2J seq 13 of group 0-3\\u202e" in text
    assert "hang\\x1b[31m 1" in text and "out\\x1b]0;pwned\\x07/trace " in text
    assert "the wait for the dumps ended when rank 3 failed: \\x1b[2Jgone" in text
