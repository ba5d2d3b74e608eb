"""Reading a file a user named, with a bound on what it may cost (spec/reliability.md §Hostile input).

``/dev/zero`` as a header file or a leap-second table grew the process to
gigabytes; a FIFO without a writer hung ``open()`` forever. Where a file is
meant, only a regular file is read, at most ``limit`` bytes; anything else is
refused from ``stat`` before it is opened, and the open itself never waits
(``O_NONBLOCK``) nor takes a terminal (``O_NOCTTY``).
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["InputRefused", "read_regular_file"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class InputRefused(OSError):
    """A file that is not read at all: not a regular file, or larger than the limit. ``rule`` says which."""

    def __init__(self, code: int, rule: str, path: str) -> None:
        super().__init__(code, rule, path)
        self.rule = rule


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refuse_unless_regular(st: os.stat_result, name: str, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise InputRefused(errno.EINVAL, f"{_kind(st.st_mode)}, not a regular file", name)
    if st.st_size > limit:
        raise InputRefused(errno.EFBIG, f"{st.st_size} bytes, over the limit of {limit}", name)


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of regular file ``path`` if it holds at most ``limit`` of them.

    Raises ``InputRefused`` (EINVAL: not a regular file; EFBIG: too large)
    or the ``OSError`` of opening/reading it. Anything but a regular file is
    refused before it is opened: opening is itself an action for a FIFO (it
    wakes a writer waiting for a reader), a watchdog device (it arms) or a
    terminal (it can become the controlling one).
    """
    name = os.fspath(path)
    _refuse_unless_regular(os.stat(name), name, limit)
    # Checked again on what was opened: the path may name something else by now.
    # O_NONBLOCK and O_NOCTTY keep even that open from waiting or taking a terminal.
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        _refuse_unless_regular(os.fstat(fd), name, limit)
        chunks: list[bytes] = []
        size = 0
        while True:  # the size may change while we read: keep the bound on what is read
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise InputRefused(errno.EFBIG, f"more than {limit} bytes", name)
        return b"".join(chunks)
    finally:
        os.close(fd)
