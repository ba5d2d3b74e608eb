"""``tempotrace analyze`` on hostile input (issue 13 item 7, spec/analysis.md §5.1): every case ends with
a clear message and exit 2 (3 for an I/O failure), in bounded time (a timeout fails the test) and
bounded memory (the process runs under a 1 GiB address-space limit: a MemoryError would exit 3)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from .otlpgen import line, span, stamp

LIMIT = 1 << 30
TIMEOUT = 120  # seconds; each case takes well under a few on an idle machine


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tempotrace_sdk", "analyze", "--quiet", *args], capture_output=True,
                          text=True, timeout=TIMEOUT, preexec_fn=_limit, stdin=subprocess.DEVNULL, check=False)


GOOD = line([span(1, 0xA1, attrs=stamp("", 1_000, lts=1))])
DEEP_VALUE = ('{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + "1" * 32 + '","spanId":"' + "2" * 16
              + '","attributes":[{"key":"user.x","value":{"kvlistValue":' + "[" * 100_000 + "]" * 100_000
              + "}}]}]}]}]}")

_START = '"startTimeUnixNano":"1800000000000000000"'
#: (name, line, reason, what is skipped: the line, or the one span in it -- the line's JSON is sound)
HOSTILE = [
    ("100,000 nested [", "[" * 100_000, "not an OTLP trace line: not a JSON object", "lines"),
    ("100,000 nested [ inside a value the analysis skips", DEEP_VALUE, "nested too deep", "lines"),
    ("a 5,000-digit integer", GOOD.replace('"intValue":"1000"', '"intValue":' + "9" * 5000), "out of range", "spans"),
    ("a 5,000-digit integer as a string", GOOD.replace('"intValue":"1000"', '"intValue":"' + "9" * 5000 + '"'),
     "out of range", "spans"),
    ("an Infinity timestamp", GOOD.replace(_START, '"startTimeUnixNano":Infinity'), "not JSON", "lines"),
    ("a 1e400 timestamp", GOOD.replace(_START, '"startTimeUnixNano":1e400'), "Number out of range", "spans"),
    ('a "1e400" timestamp', GOOD.replace(_START, '"startTimeUnixNano":"1e400"'), "Number out of range", "spans"),
]


@pytest.mark.parametrize(("name", "text", "why", "skipped"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_lines_are_bad_lines_not_crashes(tmp_path: Path, name: str, text: str, why: str,
                                                 skipped: str) -> None:
    assert text != GOOD, name
    path = tmp_path / "t.jsonl"
    path.write_text(text + "\n")
    out = _analyze(str(path))
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("tempotrace analyze: ") and "Traceback" not in out.stderr
    assert f"{path}:1: " in out.stderr and why in out.stderr, out.stderr
    path.write_text(GOOD + "\n" + text + "\n")  # beside a good line: skipped and counted, the rest analysed
    out = _analyze(str(path), "--json")
    assert out.returncode == 0 and f"{path}:2: " in out.stderr, out.stderr
    bad = json.loads(out.stdout)["bad"]
    assert bad[skipped] == 1 and bad["lines"] + bad["spans"] == 1 and why in bad["first"][0]["reason"]


def test_dev_zero_is_refused_before_it_is_read() -> None:
    out = _analyze("/dev/zero")
    assert out.returncode == 2 and "/dev/zero: not a regular file (a character device)" in out.stderr, out.stderr


def test_a_one_gigabyte_line_is_read_past_not_held(tmp_path: Path) -> None:
    """A 1 GiB line (a sparse file: no disk) is longer than the line cap: skipped unheld, counted."""
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as fh:
        fh.write(GOOD.encode() + b"\n")
        fh.truncate(len(GOOD) + 1 + (1 << 30))
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n" + GOOD.replace("0" * 31 + "1", "0" * 31 + "2").encode() + b"\n")
    out = _analyze(str(path), "--json")
    assert out.returncode == 0, out.stderr
    assert '"lines": 1' in out.stdout and '"spans": 2' in out.stdout
    assert f"{path}:2: line of 1,073,741,824 bytes is longer than the cap" in out.stderr
    out = _analyze(str(path), "--strict")
    assert out.returncode == 2 and f"{path}:2: line of 1,073,741,824 bytes" in out.stderr


def test_a_fifo_with_no_writer_reads_as_empty_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    out = _analyze(str(fifo))
    assert out.returncode == 2 and f"{fifo}: no OTLP trace lines (empty?)" in out.stderr, out.stderr


def test_a_fifo_with_a_writer_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen([sys.executable, "-m", "tempotrace_sdk", "analyze", "--quiet", "--json", str(fifo)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with fifo.open("w") as fh:  # blocks until the analysis has opened it: then it is a writer
            fh.write(GOOD + "\n")
        out, err = reader.communicate(timeout=TIMEOUT)
    finally:
        reader.kill()
        reader.wait()
    assert reader.returncode == 0 and '"spans": 1' in out, err


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc")
def test_an_io_failure_exits_3() -> None:
    """A file that fails to read (here /proc/self/mem at offset 0: EIO) is an I/O failure, not bad input."""
    out = _analyze("/proc/self/mem")
    assert out.returncode == 3 and "/proc/self/mem: read failed" in out.stderr, out.stderr
