"""``ParquetSpanExporter``: each export batch as one Parquet part, every loss counted (spec/parquet.md §4).

A Parquet file cannot be appended to by several processes, nor read without the footer its writer
writes last, so a killed writer would lose a whole file. Instead each batch is a complete span table of
one row group (parquet_write.encode_part: the rows ``tempotrace convert`` makes of the batch's OTLP JSON
line), written beside its final name as ``part-<writer>-<seq>.parquet.tmp`` and renamed when whole: a
part is there entirely or not at all, and a SIGKILL loses at most the batch being written, whose ``.tmp``
the reader counts as lost (as it counts a torn JSON line). The directory is the export's JSON path with
``.parquet.d`` for its extension: processes of a job share it, each writing parts of its own (its pid and a
random token name them, so a reused pid never overwrites a part).

Keeping, retrying and counting are the JSON exporter's (file_export.JsonLinesSpanExporter): a failed write
keeps the part and retries it whole, spans beyond the limit are dropped and counted in the LossLedger, and
a drop record (a part with no rows whose notes carry the count) says how many.
"""

from __future__ import annotations

import errno
import math
import os
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from .appender import REOPEN_INTERVAL_S
from .file_export import JsonLinesSpanExporter, encode_batch
from .loss import drop_record_line

__all__ = ["FORMATS", "PARTS_SUFFIX", "ParquetSpanExporter", "PartDirectory", "parts_directory"]

#: TEMPOTRACE_EXPORT_FORMAT's values: OTLP JSON lines (the default), Parquet parts.
FORMATS = ("jsonl", "parquet")
PARTS_SUFFIX = ".parquet.d"
#: errors that mean the part cannot be created at all (the directory is missing or read-only): "unavailable"
_CANNOT_CREATE = frozenset((errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR, errno.EISDIR))


def parts_directory(json_path: str) -> str:
    """Where the parts go for an export the JSON exporter would write at ``json_path``."""
    return os.path.splitext(json_path)[0] + PARTS_SUFFIX


class PartDirectory:
    """Records (complete Parquet files) as parts of the directory ``path_for_pid(os.getpid())``: the record
    sink of ParquetSpanExporter (file_export.RecordSink)."""

    def __init__(self, path_for_pid: Callable[[int], str]) -> None:
        self._path_for_pid = path_for_pid
        self.open_failures = 0
        self._open_error: OSError | None = None
        self._failed_at = -math.inf
        self.closed = False
        self._renew()
        try:
            os.makedirs(self._path, exist_ok=True)
        except OSError as err:
            self._failed(err)

    def _renew(self) -> None:
        """This process's writer: its pid, a random token, parts from 0 (again after fork)."""
        self._pid = os.getpid()
        self._path = self._path_for_pid(self._pid)
        self.writer = f"{self._pid}-{secrets.token_hex(4)}"
        self.seq = 0

    @property
    def path(self) -> str:
        return self._path

    @property
    def open_error(self) -> OSError | None:
        """Why parts cannot be created now (None when they can)."""
        return self._open_error

    def _failed(self, err: OSError) -> None:
        self._open_error = err
        self._failed_at = time.monotonic()
        self.open_failures += 1

    def append(self, record: bytes) -> None:
        """Write ``record`` as the next part, whole or not at all (OSError)."""
        if self.closed:
            raise ValueError("append to a closed PartDirectory")
        if os.getpid() != self._pid:  # forked: the child is a writer of its own
            self._renew()
        if self._open_error is not None and time.monotonic() - self._failed_at < REOPEN_INTERVAL_S:
            raise self._open_error
        from ..analysis.parquet_layout import part_name

        final = os.path.join(self._path, part_name(self.writer, self.seq))
        tmp = final + ".tmp"
        try:
            os.makedirs(self._path, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError as err:
            if err.errno in _CANNOT_CREATE:
                self._failed(err)
            raise
        self._open_error = None
        try:
            try:
                view = memoryview(record)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.rename(tmp, final)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self.seq += 1

    def close(self) -> None:
        self.closed = True

    def after_fork_in_child(self) -> None:
        self._renew()


class ParquetSpanExporter(JsonLinesSpanExporter):
    """Writes each batch as one Parquet part (module doc); never raises into the export path."""

    def encode(self, spans: Sequence[ReadableSpan]) -> bytes | None:
        # The batch's OTLP JSON line, as the JSON exporter writes it, made rows as convert makes them.
        from ..analysis.parquet_write import encode_part

        line = encode_batch(spans)
        return None if line is None else encode_part(line)

    def encode_drop_record(self, resource_attributes: dict[str, Any], count: int) -> bytes:
        from ..analysis.parquet_write import encode_part

        return encode_part(drop_record_line(resource_attributes, count, self.ledger.writer_id))
