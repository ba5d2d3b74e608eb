"""Where trace lines come from: files, directories, globs or stdin, read in bounded memory
(spec/analysis.md §5.1).

- ``expand`` turns the command line's inputs into a list of ``Source``: a
  directory gives every ``*.jsonl`` / ``*.json`` file under it (hidden names
  skipped; one whose first line is not an OTLP trace line is not a trace file,
  reader.py skips it whole and names it) and every span table (``*.parquet``, and the
  parts an exporter did not finish, ``*.parquet.tmp``: spec/parquet.md §4), a pattern with ``*?[`` that
  names no file is a glob, ``-`` is stdin (alone). The same file named twice is read once. A file named
  ``*.parquet`` or starting with Parquet's magic is a span table; the parts of one writer are one stream,
  in order.
- Only regular files, FIFOs and stdin are read. A device (``/dev/zero``), a
  socket or anything else is refused before it is opened; a FIFO is opened
  without waiting for a writer (with none, it reads as empty).
- ``read_lines`` cuts a file into lines in blocks; a line longer than
  ``max_line`` bytes is never held: its length is yielded instead.
- ``interleave`` reads several files at once, always from the one whose
  progress (bytes read / size) is least, so per-process files written side by
  side are read side by side and a trace's spans from different files arrive
  close together.
"""

from __future__ import annotations

import errno
import glob
import heapq
import os
import stat
import sys
from collections.abc import Callable, Iterator
from typing import TypeVar

import msgspec

from ..errors import TempoTraceError
from .parquet_layout import PART_SUFFIX, UNFINISHED_SUFFIX, part_of

__all__ = [
    "DEFAULT_MAX_LINE", "STDIN", "Source", "TraceFileError", "TraceIOError", "expand", "interleave", "open_source",
    "read_lines",
]

#: The longest line read (64 MiB, about 40,000 spans of 1.6 KB): a longer one is skipped (counted) unread.
DEFAULT_MAX_LINE = 64 << 20
#: Read block size: 1 MiB, less per file when many files are read side by side.
BLOCK = 1 << 20
#: What all the blocks of files read side by side may hold at once.
BLOCKS_BUDGET = 64 << 20
#: File names a directory contributes: OTLP JSON lines, span tables (spec/parquet.md).
SUFFIXES = (".jsonl", ".json")
FOUND_SUFFIXES = (*SUFFIXES, PART_SUFFIX, UNFINISHED_SUFFIX)
PARQUET_MAGIC = b"PAR1"
STDIN = "-"


class TraceFileError(TempoTraceError, ValueError):
    """The trace input cannot be read as OTLP JSON trace lines (bad input: exit 2).

    ``line`` is the 1-based line number (0 when the file could not be opened
    or the problem is not one line's), ``reason`` says what is wrong in words.
    """

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {reason}")

    def __reduce__(self) -> tuple[type[TraceFileError], tuple[str, int, str]]:
        # Rebuilt from its fields when it crosses a process boundary (analyze --jobs, --engine dask).
        return (type(self), (self.path, self.line, self.reason))


class TraceIOError(TraceFileError):
    """Reading an input failed part-way (an I/O error, not bad content: exit 3)."""


class Source(msgspec.Struct, frozen=True, gc=False):
    """One input: a path (``-`` for stdin), its size when known (a regular file), and whether a directory
    gave it (such a file that does not start with a trace line is not a trace file: skipped whole);
    ``parquet``: a span table (parquet_read.py); ``stream``: the writer whose parts it is one of (its parts
    are read as one stream, in order), "" for a file of its own."""

    path: str
    size: int | None = None
    found: bool = False
    parquet: bool = False
    stream: str = ""

    @property
    def name(self) -> str:
        return "<stdin>" if self.path == STDIN else self.path


_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket",
          stat.S_IFDIR: "a directory"}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def expand(args: list[str]) -> list[Source]:
    """The inputs named on the command line, in order, each file once (raises TraceFileError)."""
    if not args:
        raise TraceFileError("<inputs>", 0, "no input named")
    if STDIN in args:
        if len(args) > 1:
            raise TraceFileError(STDIN, 0, "stdin ('-') cannot be combined with other inputs")
        return [Source(STDIN)]
    out: list[Source] = []
    seen: set[tuple[int, int]] = set()
    for arg in args:
        found = os.path.isdir(arg)
        for path in _paths(arg):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                if path.endswith(UNFINISHED_SUFFIX):  # a part its writer finished since (renamed): not lost
                    continue
                raise TraceFileError(path, 0, "cannot open: No such file or directory") from None
            except OSError as err:
                raise TraceFileError(path, 0, f"cannot open: {err.strerror or err}") from err
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            if stat.S_ISREG(st.st_mode):
                if _is_parquet(path):
                    part = part_of(os.path.basename(path))
                    stream = "" if part is None else os.path.join(os.path.dirname(path), part[0])
                    out.append(Source(path, st.st_size, found, parquet=True, stream=stream))
                    continue
                out.append(Source(path, st.st_size, found))
            elif stat.S_ISFIFO(st.st_mode):
                out.append(Source(path, None, found))
            else:
                raise TraceFileError(path, 0, f"not a regular file ({_kind(st.st_mode)}): refused; "
                                              "name a file, or pipe the data to stdin with '-'")
    return out


def _is_parquet(path: str) -> bool:
    """A span table: named so, or a regular file that starts with Parquet's magic."""
    if path.endswith((PART_SUFFIX, UNFINISHED_SUFFIX)):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == PARQUET_MAGIC
    except OSError:
        return False  # opened (and its error reported) when it is read


def _order(path: str) -> tuple[str, str, int]:
    """Sort key of a directory's files: by name, a writer's parts by their sequence number."""
    folder, name = os.path.split(path)
    part = part_of(name)
    return (folder, name, 0) if part is None else (folder, f"part-{part[0]}", part[1])


def _paths(arg: str) -> list[str]:
    """One argument's paths: itself, a directory's trace files, or a glob's matches (sorted)."""
    if os.path.isdir(arg):
        found = sorted(
            (os.path.join(root, name)
             for root, dirs, names in os.walk(arg)
             for name in names
             if not name.startswith(".") and name.endswith(FOUND_SUFFIXES)),
            key=_order,
        )
        if not found:
            raise TraceFileError(arg, 0, f"a directory with no {' / '.join('*' + s for s in FOUND_SUFFIXES)} files")
        return found
    if os.path.lexists(arg) or not glob.has_magic(arg):
        return [arg]
    matches = sorted(p for p in glob.glob(arg, recursive=True) if not os.path.isdir(p))
    if not matches:
        raise TraceFileError(arg, 0, "no file matches this pattern")
    return matches


def open_source(source: Source) -> int:
    """A file descriptor to read ``source`` from, never blocking on a FIFO without a writer."""
    if source.path == STDIN:
        if os.isatty(sys.stdin.fileno()):
            raise TraceFileError("<stdin>", 0, "stdin is a terminal: pipe a trace in (... | tempotrace analyze -)")
        return sys.stdin.fileno()
    try:
        fd = os.open(source.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise TraceFileError(source.path, 0, f"cannot open: {err.strerror or err}") from err
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):  # swapped since expand() looked
            raise TraceFileError(source.path, 0, f"not a regular file ({_kind(mode)}): refused")
        os.set_blocking(fd, True)  # a FIFO with no writer now reads as end of file
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_lines(fd: int, name: str, max_line: int = DEFAULT_MAX_LINE, block: int = BLOCK) -> Iterator[memoryview | int]:
    """The lines of ``fd`` without their newlines, as views into one reused buffer (valid until the next
    line is asked for: no line is copied); a line longer than ``max_line`` bytes comes as its length (an
    int), read past but never held. Memory: the buffer, at most ``max_line`` plus one block."""
    block = max(1, block)
    buf = bytearray(2 * block)
    view = memoryview(buf)
    start = end = 0  # buf[start:end] holds bytes read and not yet yielded
    scan = 0  # where to look for the next newline (bytes before it hold none)
    skipped = -1  # while a too-long line is read past: its length so far
    while True:
        nl = buf.find(b"\n", scan, end)
        if nl >= 0:
            if skipped >= 0:
                yield skipped + nl - start
                skipped = -1
            elif nl - start > max_line:
                yield nl - start
            else:
                yield view[start:nl]
            start = scan = nl + 1
            continue
        if skipped >= 0:  # still inside a too-long line: drop what was read of it
            skipped += end - start
            start = scan = end = 0
        elif end - start > max_line:
            skipped, start, scan, end = end - start, 0, 0, 0
        elif start:  # keep the unfinished line, at the front
            buf[: end - start] = view[start:end]
            end -= start
            scan, start = end, 0
        else:
            scan = end
        if len(buf) - end < block:  # no room for a block: a long line; a bigger buffer (never resized: a
            bigger = bytearray(2 * len(buf))  # view of the old one may still be held by the consumer)
            bigger[:end] = view[:end]
            buf, view = bigger, memoryview(bigger)
        try:
            got = os.readv(fd, [view[end:end + block]])
        except OSError as err:
            if err.errno == errno.EINTR:
                continue
            raise TraceIOError(name, 0, f"read failed: {err.strerror or err}") from err
        if not got:
            break
        end += got
    if skipped >= 0:
        yield skipped + end - start
    elif end > start:
        if end - start > max_line:
            yield end - start
        else:
            yield view[start:end]


T = TypeVar("T")


def interleave(streams: list[tuple[int, Iterator[T]]], length: Callable[[T], int]) -> Iterator[tuple[int, T]]:
    """Items of several streams (size, items) as (stream index, item): next from the stream whose
    progress (``length`` of its items so far / its size) is least, ties to the lower index. A pure
    function of the sizes and item lengths, so a partition that knows them replays the same order."""
    heap = [(0, i) for i, (size, _) in enumerate(streams)]
    done = [0] * len(streams)
    sizes = [max(1, size) for size, _ in streams]
    iters = [it for _, it in streams]
    end = object()
    while heap:
        i = heap[0][1]
        item = next(iters[i], end)
        if item is end:
            heapq.heappop(heap)
            continue
        yield i, item  # type: ignore[misc]
        done[i] += length(item)  # type: ignore[arg-type]
        heapq.heapreplace(heap, ((done[i] << 32) // sizes[i], i))


def block_for(sources: int) -> int:
    """The read block size when ``sources`` files are read side by side."""
    return max(64 << 10, min(BLOCK, BLOCKS_BUDGET // max(1, sources)))
