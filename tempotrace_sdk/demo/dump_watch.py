"""Watching the export file grow for the ranks' flight-recorder dumps (``tempotrace demo --hang``).

The ranks append OTLP JSON lines to one file; the coordinator reads what was
added since its last look, decodes each complete line with the analysis' own
decoder (analysis/otlp.py) and keeps, per rank, its dump records (``torch.dump``
spans, spec/torch.md §7.3) and its ``pending`` op spans. A rank's dump record
is the last span its dump hands to the exporter, after its op spans and
flushed with them: once it is in the file, so is everything that dump wrote.
``skip_to_end`` (called when the stuck rank stops) passes over what is in the
file already, so that only the dumps of the hang are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.events import DumpInfo, SpanRecord
from ..analysis.otlp import BadLine, decode_line

__all__ = ["DumpWatch", "PendingOp"]


@dataclass(frozen=True)
class PendingOp:
    """An op a dump found open: the rank was inside it when it dumped."""

    rank: int
    op: str  #: e.g. "all_reduce"
    group: str | None  #: the group key, e.g. "0-3"
    seq: int | None  #: the collective's sequence number in its group


@dataclass
class DumpWatch:
    path: Path
    dumps: dict[int, list[DumpInfo]] = field(default_factory=dict)  #: rank -> its dump records, in file order
    pending: list[PendingOp] = field(default_factory=list)
    unreadable: int = 0  #: complete lines that did not decode (none expected: each line is one write)
    _offset: int = field(default=0, init=False, repr=False)  #: how far the file has been read
    _partial: bytes = field(default=b"", init=False, repr=False)  #: a line not yet ended when last read
    _lines: int = field(default=0, init=False, repr=False)  #: complete lines read, for the decoder's line numbers
    _skip_partial: bool = field(default=False, init=False, repr=False)  #: _partial began before skip_to_end

    def skip_to_end(self) -> None:
        """Pass over everything in the file now, a line still being written included: the next ``poll``
        returns only what is written after this call."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._lines += len(lines) - 1
        self._partial = lines[-1]
        self._skip_partial = bool(self._partial)  # however it began, it began before this call

    def poll(self) -> list[tuple[int, DumpInfo]]:
        """Read what was appended since the last poll; return the dump records found in it, as (rank, record)."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")  # the last piece may still be written
        found: list[tuple[int, DumpInfo]] = []
        for raw in lines:
            self._lines += 1
            if self._skip_partial:  # the end of a line written before skip_to_end
                self._skip_partial = False
            elif raw.strip():
                found += self._line(raw)
        return found

    def _line(self, raw: bytes) -> list[tuple[int, DumpInfo]]:
        try:
            records = decode_line(raw, self._lines, 0).records
        except BadLine:
            self.unreadable += 1
            return []
        found = []
        for record in records:
            if record.rank is None:
                continue
            if record.dump is not None:
                self.dumps.setdefault(record.rank, []).append(record.dump)
                found.append((record.rank, record.dump))
            elif _pending(record):
                op = record.torch
                assert op is not None
                self.pending.append(PendingOp(record.rank, op.op, op.group, op.seq))
        return found

    def dumped(self) -> set[int]:
        """The ranks that have written at least one dump record."""
        return set(self.dumps)


def _pending(record: SpanRecord) -> bool:
    return record.torch is not None and record.torch.completion == "pending"
