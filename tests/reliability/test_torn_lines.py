"""Torn lines and full disks (issue 13 item 3; spec/reliability.md §Export file).

A short write (a file size limit, a full tmpfs) or SIGKILL in the middle of a
large write leaves a fragment without a newline. A writer must never let the
next line join it, must keep a batch whose write failed and write it whole
when space returns, and must count and rate-limit rather than print one
traceback per span.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _rel_helpers import CHILD_TIMEOUT_S, FileContents, as_json, describe, run_python, subprocess_env, tmpfs

#: Fill a limited file with ~4 KB spans (one line each: sync export), then make room and flush.
FILL = r"""
import json, os, resource, signal, sys
from tempotrace_sdk.otel import configure, span

spans, limit, filler = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if limit:  # a file size limit: writes past it are short, then fail with EFBIG
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
handle = configure()
for i in range(spans):
    with span(f"s{i}", attributes={"pad": "x" * 4000}):
        pass
flushed_while_full = handle.force_flush()  # batch mode: the writes happen (and fail) here
full = dict(handle.errors())
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
if filler:
    os.unlink(filler)  # the disk has room again
flushed = handle.force_flush()
handle.shutdown()
print(json.dumps({"while_full": full, "final": handle.errors(), "flushed": [flushed_while_full, flushed]}))
"""


def _check_fill(path: Path, result: subprocess.CompletedProcess[str], spans: int) -> dict[str, int]:
    assert result.returncode == 0, describe(result)
    report = as_json(result)
    contents = FileContents(path)
    assert not contents.merged_lines(), "a line ran into a torn fragment"
    assert len(contents.fragments) <= 1  # the one short write, terminated
    assert len(contents.names) + contents.dropped == spans, "a span vanished without a count"
    assert contents.dropped == report["final"].get("export_dropped", 0)
    assert report["while_full"]["export_write_failed"] >= 1
    assert report["flushed"] == [False, True], "force_flush says whether everything reached the file"
    assert "Traceback" not in result.stderr
    assert result.stderr.count("tempotrace export") <= 3, "the full disk must be rate-limited, not one line per span"
    return report["final"]


def test_a_short_write_never_merges_and_the_kept_batches_are_written_when_room_returns(tmp_path: Path) -> None:
    """RLIMIT_FSIZE (no root needed): 300 spans hit the limit after ~64 KB; nothing is lost once it lifts."""
    path = tmp_path / "spans.jsonl"
    result = run_python(FILL, "300", str(64 * 1024), "", TEMPOTRACE_EXPORT_PATH=str(path), TEMPOTRACE_EXPORT_SYNC="1")
    final = _check_fill(path, result, 300)
    assert final.get("export_dropped", 0) == 0
    assert len(FileContents(path).names) == 300


def test_beyond_the_kept_bytes_spans_are_dropped_and_counted(tmp_path: Path) -> None:
    """3,000 x 4 KB spans against a full file: ~8 MB are kept, the rest is counted (errors + drop record)."""
    path = tmp_path / "spans.jsonl"
    result = run_python(FILL, "3000", str(64 * 1024), "", TEMPOTRACE_EXPORT_PATH=str(path), TEMPOTRACE_EXPORT_SYNC="1")
    final = _check_fill(path, result, 3000)
    assert final["export_dropped"] > 0 and final["export_dropped"] == final["export_dropped_write_failed"]


@pytest.mark.parametrize("sync", ["1", "0"], ids=["sync-export", "batch-export"])
def test_a_full_tmpfs_is_counted_without_tracebacks_and_nothing_is_lost_when_space_returns(
    tmp_path: Path, sync: str
) -> None:
    """A 2 MiB tmpfs, 1.5 MiB taken by another file: 300 x 4 KB spans fill it (ENOSPC), then the file goes."""
    with tmpfs(tmp_path / "disk", "size=2m", "a small tmpfs") as disk:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * (1536 * 1024))
        path = disk / "spans.jsonl"
        env = {"TEMPOTRACE_EXPORT_PATH": str(path), "TEMPOTRACE_EXPORT_SYNC": sync}
        result = run_python(FILL, "300", "0", str(filler), **env)
        final = _check_fill(path, result, 300)
        assert final.get("export_dropped", 0) == 0
        assert len(FileContents(path).names) == 300


#: Writes ~4 MB lines without pause until killed.
BIG_WRITER = r"""
from tempotrace_sdk.otel import configure, span
configure()
print("ready", flush=True)
i = 0
while True:
    with span(f"big-{i}", attributes={"pad": "y" * 4_000_000}):
        pass
    i += 1
"""

SMALL_WRITER = r"""
import sys
from tempotrace_sdk.otel import configure, span
h = configure()
for i in range(5):
    with span(f"{sys.argv[1]}-{i}"):
        pass
h.shutdown()
"""


def test_sigkill_in_the_middle_of_large_writes_never_merges_the_next_line(tmp_path: Path) -> None:
    """Six writers of 4 MB lines killed at random moments, each followed by a small writer: no merged line."""
    path = tmp_path / "spans.jsonl"
    env = subprocess_env(TEMPOTRACE_EXPORT_PATH=str(path), TEMPOTRACE_EXPORT_SYNC="1")
    rng = random.Random(13)
    for round_ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", BIG_WRITER], env=env, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        # Kill as soon as the file grows (most often inside the 4 MB write(2)),
        # or a little later (between writes) in some rounds.
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        start = path.stat().st_size if path.exists() else 0
        while (path.stat().st_size if path.exists() else 0) <= start and time.monotonic() < deadline:
            pass
        if round_ % 3 == 2:
            time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=CHILD_TIMEOUT_S)
        argv = [sys.executable, "-c", SMALL_WRITER, f"after{round_}"]
        small = subprocess.run(argv, env=env, capture_output=True, timeout=CHILD_TIMEOUT_S)
        assert small.returncode == 0, small.stderr
    contents = FileContents(path)
    assert not contents.merged_lines()
    for round_ in range(6):
        assert {f"after{round_}-{i}" for i in range(5)} <= set(contents.names)


def test_a_fragment_left_by_a_dead_writer_is_terminated_before_the_next_line(tmp_path: Path) -> None:
    """The file already ends in a fragment (a writer died mid-line): our first line starts on a line of its own."""
    path = tmp_path / "spans.jsonl"
    path.write_bytes(b'{"resourceSpans":[{"resource":{"attrib')
    result = run_python(SMALL_WRITER, "next", TEMPOTRACE_EXPORT_PATH=str(path), TEMPOTRACE_EXPORT_SYNC="1")
    assert result.returncode == 0, describe(result)
    contents = FileContents(path)
    assert contents.fragments == ['{"resourceSpans":[{"resource":{"attrib']
    assert sorted(contents.names) == [f"next-{i}" for i in range(5)]


BUSY_WRITER = r"""
import sys
from tempotrace_sdk.otel import configure, span
h = configure()
for i in range(int(sys.argv[2])):
    with span(f"{sys.argv[1]}-{i}", attributes={"pad": "z" * 200_000}):
        pass
h.shutdown()
"""


def test_concurrent_writers_leave_neither_empty_nor_merged_lines(tmp_path: Path) -> None:
    """Six processes appending 200 KB lines at once: the tail check must not see another's line half-written."""
    path = tmp_path / "spans.jsonl"
    env = subprocess_env(TEMPOTRACE_EXPORT_PATH=str(path), TEMPOTRACE_EXPORT_SYNC="1")
    procs = [subprocess.Popen([sys.executable, "-c", BUSY_WRITER, f"p{n}", "80"], env=env) for n in range(6)]
    for proc in procs:
        assert proc.wait(timeout=CHILD_TIMEOUT_S * 4) == 0
    data = path.read_bytes()
    assert data.endswith(b"\n") and b"\n\n" not in data and not data.startswith(b"\n"), "an empty line"
    contents = FileContents(path)
    assert not contents.fragments and not contents.merged_lines()
    assert len(contents.names) == 6 * 80
