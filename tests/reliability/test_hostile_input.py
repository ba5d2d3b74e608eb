"""Hostile arguments and files end with a clear message and exit 2 (3 for I/O failures), bounded (issue 13 item 7).

Each case runs the real command in a child with an address-space limit and a
timeout: before the fixes, /dev/zero grew ``decode`` to 5 GB, a FIFO without
a writer hung it, a 300-character argument was an ``OSError`` traceback, a
50 MB policy took 16 s and 760 MB, and ``clock --clock sim:offset=1e400``
was an ``OverflowError``. (``tempotrace analyze`` is the analysis layer's.)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from _rel_helpers import subprocess_env

from tempotrace_sdk._bounded import InputRefused, read_regular_file

#: Far above what the CLI needs (~100-300 MB of address space with its imports), far below 5 GB.
ADDRESS_SPACE_LIMIT = 3 << 30
TIMEOUT_S = 60


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def _run(argv: list[str], stdin: bytes = b"", **env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "tempotrace_sdk", *argv],
        input=stdin.decode("latin-1"),
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        preexec_fn=_limited,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)  # nobody ever opens it for writing
    return path


@pytest.fixture
def sparse_50mb(tmp_path: Path) -> Path:
    path = tmp_path / "big"
    with open(path, "wb") as handle:
        handle.truncate(50 << 20)
    return path


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x" * 300, "text"),  # was: OSError File name too long, from Path.is_file()
        ("A" * 300, "LENGTH"),  # 300 hex digits: 150 bytes, not 53
        ("/" + "a" * 300, "File name too long"),
        ("/dev/zero", "character device, not a regular file"),  # was: 5 GB, then MemoryError
        ("FIFO", "a FIFO, not a regular file"),  # was: a hang in open()
        ("DIR", "a directory, not a regular file"),
        ("BIG", "over the limit of 8192"),
        ("x" * 20_000, "at most 8192"),
    ],
    ids=["300-chars", "300-hex", "long-path", "dev-zero", "fifo", "directory", "50MB-file", "20k-chars"],
)
def test_decode_refuses_hostile_values_with_exit_2(
    value: str, message: str, fifo: Path, sparse_50mb: Path, tmp_path: Path
) -> None:
    value = {"FIFO": str(fifo), "DIR": str(tmp_path), "BIG": str(sparse_50mb)}.get(value, value)
    result = _run(["decode", value])
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("tempotrace decode: ") and message in result.stderr


def test_decode_stdin_is_read_bounded() -> None:
    result = _run(["decode", "-"], stdin=b"\0" * 100_000)
    assert result.returncode == 2 and "stdin holds more than 8192 bytes" in result.stderr


def test_decode_io_failure_exits_3() -> None:
    """/proc/self/mem is a regular file whose first page cannot be read (EIO): an I/O failure, not bad input."""
    result = _run(["decode", "/proc/self/mem"])
    assert result.returncode == 3, result.stderr
    assert "Input/output error" in result.stderr


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("sim:offset=1e400", "offset='1e400' is outside"),  # was: OverflowError
        ("sim:drift=nan", "drift='nan' is outside"),  # was: ValueError from round(nan)
        ("sim:noise=1e400", "outside"),
        ("sim:seed=" + "9" * 5000, "is not an integer"),
        ("phc:" + "a" * 300, "cannot use clock source"),
    ],
    ids=["offset-1e400", "drift-nan", "noise-1e400", "seed-5000-digits", "phc-300-chars"],
)
def test_clock_refuses_hostile_specs_with_exit_2(spec: str, message: str) -> None:
    result = _run(["clock", "--clock", spec])
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr) < 2_000, "the message quotes hostile input cut short"


@pytest.mark.parametrize("leap_file", ["/dev/zero", "FIFO", "BIG"])
def test_a_hostile_leap_seconds_file_is_a_warning_not_a_hang(leap_file: str, fifo: Path, sparse_50mb: Path) -> None:
    """TEMPOTRACE_LEAP_SECONDS_FILE=/dev/zero hung ``tempotrace clock``; now: the built-in table and a warning."""
    path = {"FIFO": str(fifo), "BIG": str(sparse_50mb)}.get(leap_file, leap_file)
    result = _run(["clock", "--clock", "sim:ptp", "--json"], TEMPOTRACE_LEAP_SECONDS_FILE=path)
    assert result.returncode == 0, result.stderr
    assert f"TEMPOTRACE_LEAP_SECONDS_FILE={path} cannot be used" in result.stderr


LOAD_POLICY = """
import sys
from tempotrace_sdk.errors import PolicyError
from tempotrace_sdk.otel import load_policy
try:
    load_policy(sys.argv[1])
except PolicyError as err:
    print(err)
    sys.exit(2)
"""


@pytest.mark.parametrize(
    ("content", "rule"),
    [
        ("a = " + "[" * 100_000 + "\n", "nested too deep"),  # was: RecursionError
        ("version = " + "9" * 5000 + "\n", ":1: <toml>: a value TOML cannot hold"),  # was: a bare ValueError
        ("[tenants.1]\nmax_uncertainty_ns = " + "9" * 5000 + "\n", ":2: <toml>: a value TOML cannot hold"),
        ("version = true\n", "version: must be the integer 1"),  # was: accepted (True == 1)
        ("BIG", "over the limit of 1048576"),  # was: 16 s and 760 MB
        ("FIFO", "a FIFO, not a regular file"),  # was: a hang
        ("/dev/zero", "a character device, not a regular file"),
    ],
    ids=["deep-nesting", "huge-version", "huge-field", "version-true", "50MB-file", "fifo", "dev-zero"],
)
def test_policy_loader_raises_policy_error_naming_file_and_rule(
    content: str, rule: str, tmp_path: Path, fifo: Path, sparse_50mb: Path
) -> None:
    if content in ("BIG", "FIFO", "/dev/zero"):
        path = {"BIG": str(sparse_50mb), "FIFO": str(fifo)}.get(content, content)
    else:
        path = str(tmp_path / "policy.toml")
        Path(path).write_text(content)
    result = subprocess.run(
        [sys.executable, "-c", LOAD_POLICY, path],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        preexec_fn=_limited,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout.startswith(path) and rule in result.stdout


# -- _bounded.read_regular_file: a file that is not regular is refused before it is opened -------------------------
_IN_OPEN = 0x20
_IN_NONBLOCK = os.O_NONBLOCK


def _opens_seen(path: Path, action: Callable[[], object]) -> int:
    """How many times ``path`` was opened (inotify IN_OPEN) while ``action`` ran."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(_IN_NONBLOCK)
    if fd < 0:
        pytest.skip(f"inotify unavailable: errno {ctypes.get_errno()}")
    try:
        if libc.inotify_add_watch(fd, os.fsencode(path), _IN_OPEN) < 0:
            pytest.skip(f"cannot watch {path}: errno {ctypes.get_errno()}")
        with contextlib.suppress(OSError, ValueError):
            action()
        try:
            events = os.read(fd, 4096)
        except BlockingIOError:
            return 0
        seen, at = 0, 0
        while at < len(events):  # struct inotify_event: wd, mask, cookie, len, name[len]
            _wd, mask, _cookie, length = struct.unpack_from("iIII", events, at)
            seen += bool(mask & _IN_OPEN)
            at += 16 + length
        return seen
    finally:
        os.close(fd)


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    """Opening is the side effect (spec/reliability.md §7): a FIFO's open wakes a writer waiting for a
    reader, a watchdog device arms on open, a terminal can become the controlling one. Before the fix
    the file was opened first and its type checked after."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert _opens_seen(fifo, lambda: os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))) == 1  # the probe sees opens
    refused: list[Exception] = []

    def read() -> None:
        try:
            read_regular_file(fifo, 1024)
        except InputRefused as err:
            refused.append(err)

    assert _opens_seen(fifo, read) == 0
    assert refused and "FIFO" in refused[0].rule


SESSION_LEADER = r"""
import os, sys
from tempotrace_sdk._bounded import InputRefused, read_regular_file
os.setsid()  # a session leader without a controlling terminal: opening a tty would acquire it
master, slave = os.openpty()
name = os.ttyname(slave)
os.close(slave)
try:
    read_regular_file(name, 1024)
except InputRefused as err:
    print("refused:", err.rule)
try:
    os.close(os.open("/dev/tty", os.O_RDWR))
    print("acquired a controlling terminal")
except OSError:
    print("no controlling terminal")
"""


def test_a_terminal_is_refused_without_becoming_the_controlling_terminal() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SESSION_LEADER], env=subprocess_env(), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert result.returncode == 0, result.stderr
    assert "refused: a character device" in result.stdout
    assert "no controlling terminal" in result.stdout, result.stdout
