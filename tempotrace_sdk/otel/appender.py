"""``AppendStream``: whole lines appended to a file that other processes, logrotate and full disks share.

Guarantees (spec/reliability.md §Export file):

- One record is one ``write(2)`` on an ``O_APPEND`` descriptor, so processes
  sharing a file never interleave inside a line.
- A line never merges with the next one. A write can still end early (a full
  disk, a file size limit, SIGKILL in the middle of a large write); the
  fragment it leaves has no newline. Before each write the last byte of the
  file is checked, and a missing newline is supplied first, so whatever comes
  next starts a line of its own; the fragment stays an invalid line that
  readers skip (and count). Check and write happen under ``flock`` (taken
  for at most ``LOCK_WAIT_S``), because a file grows page by page during
  another process's write: unlocked, the check could see the middle of a
  line being written and add a needless empty line.
- A short write is a failure (``TornWriteError``): the caller keeps the record
  and retries it whole. Only the missing newline is never retried, so a
  record whose bytes all arrived is not written twice.
- The file deleted or rotated away (its path now names another inode or
  nothing) is reopened at the path before the next write.
- ``path_for_pid`` names the file for a process id; a forked child asks again,
  so per-process files stay per process.

Opening is retried on each write (at most every ``REOPEN_INTERVAL_S``) when it
failed: a read-only or missing directory at start-up is an error the exporter
reports, not a crash, and it heals when the path becomes writable.
"""

from __future__ import annotations

import errno
import fcntl
import io
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["LOCK_WAIT_S", "REOPEN_INTERVAL_S", "AppendStream", "TornWriteError"]

#: After a failed open, the next attempt waits at least this long (a
#: read-only path must not cost an open() per span).
REOPEN_INTERVAL_S = 1.0
#: The longest an append waits for another writer's flock: a writer holding it
#: longer is stopped (SIGSTOP, a debugger) and must not stop us; then we write
#: unlocked, risking at worst one needless empty line.
LOCK_WAIT_S = 1.0


class TornWriteError(OSError):
    """A write ended early: ``written`` of the record's bytes are in the file as a terminated fragment."""

    def __init__(self, code: int, message: str, path: str, written: int) -> None:
        super().__init__(code, message, path)
        self.written = written


class AppendStream(io.TextIOBase):
    """Appends whole lines to ``path_for_pid(os.getpid())``; ``append()`` is the record API.

    The text-stream methods (``write`` buffers, ``flush`` appends the buffer
    as one record) remain for code that treats it as a stream.
    """

    def __init__(self, path_for_pid: Callable[[int], str]) -> None:
        super().__init__()
        self._path_for_pid = path_for_pid
        self._pid = os.getpid()
        self._path = path_for_pid(self._pid)
        self._fd = -1
        self._regular = False
        self._readable = False
        self._identity: tuple[int, int] | None = None
        self._open_error: OSError | None = None
        self._open_failed_at = -float("inf")
        self._buffer: list[str] = []
        self.reopened = 0  # times the file was found deleted/rotated and reopened
        #: Failed attempts to open the file. Between two attempts (REOPEN_INTERVAL_S) an
        #: append re-raises the last error without trying: not another failed open.
        self.open_failures = 0
        try:
            self._open()
        except OSError as err:
            self._open_failed(err)

    @property
    def path(self) -> str:
        return self._path

    @property
    def open_error(self) -> OSError | None:
        """Why the file is not open (None when it is)."""
        return self._open_error

    # -- opening --------------------------------------------------------------
    def _open(self) -> None:
        path = self._path
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            pass  # a file where a directory should be: os.open says so (ENOTDIR)
        flags = os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:  # read access lets us check the file's last byte before appending
            fd = os.open(path, flags | os.O_RDWR, 0o644)
            readable = True
        except OSError as err:
            if err.errno not in (errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENXIO):
                raise
            fd = os.open(path, flags | os.O_WRONLY, 0o644)
            readable = False
        st = os.fstat(fd)
        self._fd, self._readable = fd, readable
        self._regular = stat.S_ISREG(st.st_mode)
        self._identity = (st.st_dev, st.st_ino)
        self._open_error = None

    def _open_failed(self, err: OSError) -> None:
        self._open_error = err
        self._open_failed_at = time.monotonic()
        self.open_failures += 1

    def _close_fd(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd = -1

    def _ensure_open(self) -> int:
        pid = os.getpid()
        if pid != self._pid:
            # Forked: a per-process path names another file now, and even the
            # same file needs its own open file description, or flock would
            # not keep parent and child apart (they would share the lock).
            self._pid = pid
            self._path = self._path_for_pid(pid)
            self._close_fd()
        if self._fd >= 0 and self._regular and self._rotated():
            self._close_fd()
            self.reopened += 1
        if self._fd < 0:
            if self._open_error is not None and time.monotonic() - self._open_failed_at < REOPEN_INTERVAL_S:
                raise self._open_error
            try:
                self._open()
            except OSError as err:
                self._open_failed(err)
                raise
        return self._fd

    def _rotated(self) -> bool:
        """True when the path no longer names the file we hold open (deleted, renamed, replaced)."""
        try:
            st = os.stat(self._path)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self._identity

    def _needs_newline(self, fd: int) -> bool:
        """True when the file ends in a fragment: its last byte is not a newline."""
        if not (self._regular and self._readable):
            return False
        try:
            size = os.fstat(fd).st_size
            return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        except OSError:
            return False

    # -- the record API ---------------------------------------------------------
    def append(self, record: bytes) -> None:
        """Append ``record`` (one or more whole lines, ending in a newline) with one write.

        Raises OSError when nothing usable was written, ``TornWriteError`` when
        a prefix was written (then terminated as a fragment where possible).
        """
        if self.closed:
            raise ValueError("append to a closed AppendStream")
        fd = self._ensure_open()
        locked = self._lock(fd)
        try:
            self._append_locked(fd, record)
        finally:
            if locked:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _lock(self, fd: int) -> bool:
        """flock the file for one check-and-write; False when not possible in LOCK_WAIT_S (write anyway)."""
        if not self._regular:
            return False
        deadline = time.monotonic() + LOCK_WAIT_S
        pause = 0.0002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
            except OSError:  # ENOLCK (some network file systems): no locking there
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.01)

    def _append_locked(self, fd: int, record: bytes) -> None:
        prefix = b"\n" if self._needs_newline(fd) else b""
        data = prefix + record
        written = os.write(fd, data)
        if written == len(data):
            return
        # A short write: the disk or a limit is full. The record's bytes that
        # made it are a fragment; give it its newline (may fail too: the next
        # append checks again) and let the caller retry the record whole,
        # unless only the newline was missing.
        body_written = max(0, written - len(prefix))
        try:
            os.write(fd, b"\n")
        except OSError:
            pass
        if body_written >= len(record) - 1:
            return
        raise TornWriteError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)", self._path, body_written)

    # -- the text-stream API ----------------------------------------------------
    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buffer.append(text)
        return len(text)

    def flush(self) -> None:
        if self.closed or not self._buffer:
            return
        data = "".join(self._buffer).encode("utf-8")
        self.append(data)  # raises on failure; the buffer is kept for a retry
        self._buffer.clear()

    def fileno(self) -> int:
        return self._ensure_open()

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._fd >= 0 or self._buffer:
                self.flush()
        finally:
            self._close_fd()
            super().close()

    def after_fork_in_child(self) -> None:
        """Drop text buffered by the parent (the parent writes it)."""
        self._buffer = []
