"""Reading span tables: a Parquet file, or the parts one exporter wrote, as pieces the trace reader takes in
input order (spec/parquet.md §4, §5).

A ``ParquetStream`` is one input stream: one file, or the parts of one writer in a directory, in order
(parts are named by writer and sequence number, parquet_layout.py). Its size, for reading streams side
by side (inputs.interleave), is its rows. Each row group is one ``Piece``: its rows (RowGroup) and the
bad-line notes that fall before or among them; the file's first piece also carries its notes (trace lines,
loss, files that held no traces). A file that cannot be read is a piece of its own that says why:

- a part its writer did not finish (``*.parquet.tmp``: killed while writing that batch) is lost, counted
  as a bad line (the spans in it are unknown, as a torn line's are);
- a file pyarrow cannot open (no footer: a writer killed before closing it; truncated) likewise;
- a Parquet file that is no span table of this version is not a trace file: named in the report when a
  directory gave it, bad input (TraceFileError) when it was named.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from .inputs import Source, TraceFileError
from .parquet_layout import BadNote, Notes
from .parquet_records import COLUMNS_READ, RowGroup
from .parquet_schema import notes_of

if TYPE_CHECKING:
    from .columnar.parquet import ParquetRows

__all__ = ["ParquetStream", "Piece"]

LOST_PART = ("an unfinished part: its writer was killed while writing this batch (or is writing it now); the spans "
             "in it are lost")


class Piece:
    """One row group of a span table (``table``: rows ``first``.. of the file, ``rows`` of them), the notes
    that fall before or among its rows (``notes``, by row position in the file; the last piece also takes
    those after its rows), the file's notes on its first piece (``head``); or a file that could not be read
    (``lost``: why, counted as a bad line of ``source``)."""

    __slots__ = ("_columnar", "_view", "first", "head", "lost", "nbytes", "notes", "rows", "source", "table")

    def __init__(self, source: Source, *, table: pa.Table | None = None, first: int = 0, rows: int = 0,
                 notes: list[BadNote] | None = None, head: Notes | None = None, lost: str | None = None,
                 nbytes: int = 0) -> None:
        self.source = source
        self.table = table
        self.first = first
        self.rows = rows
        self.notes = notes or []
        self.head = head
        self.lost = lost
        self.nbytes = nbytes
        self._view: RowGroup | None = None
        self._columnar: ParquetRows | None = None

    def rows_view(self) -> RowGroup:
        """The rows as the analysis reads them (made once: a piece read in stretches reads them once)."""
        if self._view is None:
            assert self.table is not None
            self._view = RowGroup(self.table, self.source.name, self.first)
        return self._view

    def columnar_view(self) -> ParquetRows:
        """``rows_view`` made from the columns (columnar/parquet.py: the same records)."""
        if self._columnar is None:
            from .columnar.parquet import ParquetRows

            assert self.table is not None
            self._columnar = ParquetRows(self.table, self.source.name, self.first)
        return self._columnar


class ParquetStream:
    """The pieces of one or more span table sources read one after the other (a writer's parts in order)."""

    def __init__(self, sources: list[Source], columns: tuple[str, ...] | None = None) -> None:
        self.sources = sources
        #: the columns read: those the analysis reads unless told (convert reads them all)
        self.columns = COLUMNS_READ if columns is None else columns
        self.rows = 0  #: rows of all its readable files (its size, for reading streams side by side)
        for source in sources:
            if not source.path.endswith(".tmp"):
                try:
                    self.rows += pq.read_metadata(source.path).num_rows
                except (OSError, pa.ArrowException):
                    pass  # unreadable: a piece that says so, when its turn comes

    def pieces(self) -> Iterator[Piece]:
        for source in self.sources:
            yield from _pieces(source, self.columns)


def _pieces(source: Source, wanted: tuple[str, ...]) -> Iterator[Piece]:
    if source.path.endswith(".tmp"):
        yield Piece(source, lost=LOST_PART)
        return
    try:
        file = pq.ParquetFile(source.path)
    except FileNotFoundError as err:
        raise TraceFileError(source.path, 0, f"cannot open: {err.strerror or err}") from err
    except (OSError, pa.ArrowException) as err:
        yield Piece(source, lost=f"not a readable Parquet file ({_why(err)}): a writer killed before it wrote the "
                                 "footer? its spans are lost")
        return
    with file:
        notes = notes_of(file.metadata.metadata)
        if isinstance(notes, str):
            if not source.found:
                raise TraceFileError(source.path, 0, notes)
            yield Piece(source, head=Notes(not_traces=[f"{source.path}: {notes}"]))
            return
        bad = sorted(notes.bad_first, key=lambda b: b.pos)
        meta = file.metadata
        groups = meta.num_row_groups
        names = set(file.schema_arrow.names)
        columns = [c for c in wanted if c in names]
        first = 0
        head: Notes | None = notes
        for g in range(groups):
            rows = meta.row_group(g).num_rows
            last = g == groups - 1
            mine = [b for b in bad if b.pos < first + rows or last]
            bad = bad[len(mine):]
            try:
                table = file.read_row_group(g, columns=columns, use_threads=False)
            except (OSError, pa.ArrowException) as err:
                yield Piece(source, head=head, notes=mine, lost=f"row group {g} cannot be read ({_why(err)})")
                return
            share = (source.size or 0) * rows // max(1, meta.num_rows)  # its part of the file, for progress
            yield Piece(source, table=table, first=first, rows=rows, notes=mine, head=head, nbytes=share)
            head = None
            first += rows
        if groups == 0:
            yield Piece(source, notes=bad, head=head)


def _why(err: BaseException) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."

