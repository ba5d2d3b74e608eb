"""Strings from outside shown on a terminal (issue 22; spec/analysis.md §6, spec/reliability.md §7):
``_terminal_text.shown`` case by case, then the printers outside the analysis that use it (error lines,
log records, ``tempotrace clock``). tests/analysis/test_analyze_terminal_text.py runs ``tempotrace analyze``
on a hostile trace."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import pytest

from tempotrace_sdk._terminal_text import LIMIT, shown, shown_lines
from tempotrace_sdk.cli._common import fail, shown_log_records

#: What must never reach a terminal from outside: C0 (but the line structure \n and \t), DEL, C1, the
#: bidirectional marks, embeddings, overrides and isolates, lone surrogates.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
ESC_HOST = "evil\x1b[2J\x1b[31mFAKE OK\x1b[0m"

#: (what it shows, value, limit, how it is shown)
CASES = [
    ("ESC and CSI sequences", ESC_HOST, LIMIT, "evil\\x1b[2J\\x1b[31mFAKE OK\\x1b[0m"),
    ("an OSC title sequence ended by BEL", "\x1b]0;pwned\x07", LIMIT, "\\x1b]0;pwned\\x07"),
    ("C1 CSI 0x9b", "\x9b31m", LIMIT, "\\x9b31m"),
    ("DEL", "a\x7fb", LIMIT, "a\\x7fb"),
    ("NUL", "a\x00b", LIMIT, "a\\x00b"),
    ("line breaks and tabs: a value is one field on one line", "a\nb\r\tc", LIMIT, "a\\nb\\r\\tc"),
    ("bidi override U+202E", "abc\u202edef", LIMIT, "abc\\u202edef"),
    ("bidi isolate U+2066 and its end U+2069", "\u2066x\u2069", LIMIT, "\\u2066x\\u2069"),
    ("bidi marks U+200E, U+200F, U+061C", "\u200e\u200f\u061c", LIMIT, "\\u200e\\u200f\\u061c"),
    ("a lone surrogate (a file name byte surrogateescape kept)", "spans-\udcff.jsonl", LIMIT, "spans-\\udcff.jsonl"),
    ("a character beyond the BMP that is not printable (a tag)", "a\U000e0041", LIMIT, "a\\U000e0041"),
    ("letters of other scripts kept as they are", "nœud-é-ノード-узел", LIMIT, "nœud-é-ノード-узел"),
    ("a backslash kept: an escape already made is not made twice", "got 'a\\x1b'", LIMIT, "got 'a\\x1b'"),
    ("a long value cut, saying how much", "h" * 300, LIMIT, "h" * LIMIT + "...(+44 chars)"),
    ("a long hostile value cut once its escapes fill the limit", "\x1b" * 10, 9, "\\x1b\\x1b...(+8 chars)"),
    ("no limit", "h" * 5000, None, "h" * 5000),
    ("a value that is not a string, by str()", 42, LIMIT, "42"),
]


@pytest.mark.parametrize(("what", "value", "limit", "expected"), CASES, ids=[c[0] for c in CASES])
def test_shown(what: str, value: object, limit: int | None, expected: str) -> None:
    assert shown(value, limit) == expected, what
    assert not CONTROL.search(shown(value, limit))


def test_shown_twice_is_shown_once() -> None:
    """A printer may show a line whose values were shown already (fail() does): nothing changes."""
    for _, value, limit, _ in CASES:
        once = shown(value, limit)
        assert shown(once, None) == once


def test_shown_lines_keeps_the_lines_and_escapes_within_them() -> None:
    text = f"rank 3 failed:\n  {ESC_HOST}\n  \u202eeno"
    assert shown_lines(text) == "rank 3 failed:\n  evil\\x1b[2J\\x1b[31mFAKE OK\\x1b[0m\n  \\u202eeno"


def test_a_hostile_megabyte_costs_a_cut_not_a_scan() -> None:
    huge = "\x1b" + "h" * (1 << 20)
    assert shown(huge) == "\\x1b" + "h" * (LIMIT - 4) + f"...(+{(1 << 20) + 1 - (LIMIT - 3):,} chars)"


def test_fail_shows_each_line_of_its_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert fail("analyze", f"cannot open {ESC_HOST}\nworker log: \x9b2J", 2) == 2
    err = capsys.readouterr().err
    assert err == "tempotrace analyze: cannot open evil\\x1b[2J\\x1b[31mFAKE OK\\x1b[0m\nworker log: \\x9b2J\n"


def test_log_records_are_shown_while_a_command_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """A library warning quoting the environment (the leap-second file's path) while no logging is set up."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()  # as in the `tempotrace` process (pytest's own handlers set aside)
    try:
        with shown_log_records():
            logging.getLogger("tempotrace_sdk.clocks.leapseconds").warning("%s cannot be used", ESC_HOST)
        assert root.handlers == []
    finally:
        root.handlers[:] = saved
    assert capsys.readouterr().err == "evil\\x1b[2J\\x1b[31mFAKE OK\\x1b[0m cannot be used\n"


def _clock(*args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TEMPOTRACE_")}
    return subprocess.run([sys.executable, "-m", "tempotrace_sdk", "clock", *args], capture_output=True,
                          env={**environ, **env}, timeout=60, check=False)


def _text(stream: bytes) -> str:
    text = stream.decode("utf-8")  # strict: a surrogate printed raw would be a byte that is no UTF-8
    found = CONTROL.search(text)
    assert found is None, f"{found.group()!r} reached the terminal in {text!r}"
    return text


def test_clock_shows_paths_from_the_environment_escaped() -> None:
    """$TEMPOTRACE_CHRONY (chronyd's socket: in the survey, several times) and $TEMPOTRACE_LEAP_SECONDS_FILE
    (a warning on stderr), one with an ESC and one with a byte that is no UTF-8 (a lone surrogate here)."""
    out = _clock(TEMPOTRACE_CHRONY="/tmp/chrony\x1b[31m\udcff.sock",
                 TEMPOTRACE_LEAP_SECONDS_FILE="/tmp/leap\x1b[2J\u202e.list")
    assert out.returncode == 0, out.stderr
    assert "chronyd (unix:/tmp/chrony\\x1b[31m\\udcff.sock)" in _text(out.stdout)
    assert "TEMPOTRACE_LEAP_SECONDS_FILE=/tmp/leap\\x1b[2J\\u202e.list cannot be used" in _text(out.stderr)


@pytest.mark.parametrize("spec", ["sim:\x1b[2Jptp", "sim:ptp,name=\x1b[2J", "phc:\x1b[2J\u202e"])
def test_clock_shows_a_hostile_spec_escaped(spec: str) -> None:
    out = _clock("--clock", spec)
    assert out.returncode == 2
    err = _text(out.stderr)
    assert err.startswith("tempotrace clock: ") and "\\x1b[2J" in err and err.count("\n") == 1
