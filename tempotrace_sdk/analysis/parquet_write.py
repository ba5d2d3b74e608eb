"""Writing span tables: a file of bounded row groups with its notes in the footer, and the one-batch part
the exporter writes (spec/parquet.md §3, §4, §6).

``SpanTableWriter`` takes rows (``RowBlock``, or Arrow tables of the schema read from other span tables),
gathers them into row groups of at most ``row_group_rows`` rows and writes each as soon as it is full, so
memory holds one row group whatever the input's size; ``close`` writes the footer with the notes, and
the file appears under its name only then (written beside it and renamed). ``encode_part`` is the
exporter's: one OTLP JSON line (a batch, or a drop record) as a complete Parquet file in memory.
"""

from __future__ import annotations

import os
import tempfile
from types import TracebackType

import pyarrow as pa
import pyarrow.parquet as pq

from . import parquet_layout as L
from .parquet_layout import Notes
from .parquet_rows import LineFacts, RowBlock
from .parquet_schema import SCHEMA, WRITE_OPTIONS, metadata, to_batch

__all__ = ["BLOCK_ROWS", "ROW_GROUP_ROWS", "SpanTableWriter", "encode_part", "note_loss"]

#: Rows per row group: big enough that dictionaries and zstd see many repeats (a footer entry per column and
#: row group is a few hundred bytes), small enough that convert's memory stays flat: ~170 MB above the
#: interpreter's for demo spans, held as Arrow arrays until the row group is written, whatever the input.
ROW_GROUP_ROWS = 1 << 16
#: The columns every part has, null or not: a row's identity and times (a drop record's part has no rows).
ALWAYS = frozenset((L.TRACE_ID, L.SPAN_ID, L.PARENT_SPAN_ID, L.NAME, L.KIND, L.START, L.END))
#: Rows gathered as Python values before they become Arrow (then a row group is a few such batches).
BLOCK_ROWS = 8192


class SpanTableWriter:
    """A span table at ``path``, written row group by row group; ``notes`` is written with the footer."""

    def __init__(self, path: str, *, row_group_rows: int = ROW_GROUP_ROWS) -> None:
        if row_group_rows < 1:
            raise ValueError("row_group_rows must be >= 1")
        self.path = path
        self.row_group_rows = row_group_rows
        self.notes = Notes()
        self.block = RowBlock()
        self._written = 0
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        folder = os.path.dirname(os.path.abspath(path))
        fd, self._tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".parquet.part", dir=folder)
        os.close(fd)
        try:
            self._writer = pq.ParquetWriter(self._tmp, SCHEMA, store_schema=False, **WRITE_OPTIONS)
        except BaseException:
            os.unlink(self._tmp)
            raise
        self._closed = False

    def __enter__(self) -> SpanTableWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()

    @property
    def rows(self) -> int:
        """Rows added so far: the position of the next one."""
        return self._written + self._pending_rows + self.block.rows

    def add_line(self, data: bytes | memoryview, path: str | None = None, line: int | None = None) -> LineFacts:
        """Append the rows of one OTLP JSON line (RowBlock.add_line; raises otlp.BadLine)."""
        facts = self.block.add_line(data, path, line)
        if self.block.rows >= BLOCK_ROWS:
            self._take_block()
        return facts

    def add_table(self, table: pa.Table) -> None:
        """Append the rows of a table of SCHEMA (parquet_schema.conform)."""
        self._take_block()
        for batch in table.to_batches():
            self._add_batch(batch)

    def _take_block(self) -> None:
        if self.block.rows:
            batch = to_batch(self.block)
            self.block = RowBlock()
            self._add_batch(batch)

    def _add_batch(self, batch: pa.RecordBatch) -> None:
        while batch.num_rows:
            room = self.row_group_rows - self._pending_rows
            head, batch = batch.slice(0, room), batch.slice(room)
            self._pending.append(head)
            self._pending_rows += head.num_rows
            if self._pending_rows >= self.row_group_rows:
                self._flush()

    def _flush(self) -> None:
        if self._pending_rows:
            self._writer.write_table(pa.Table.from_batches(self._pending, SCHEMA), row_group_size=self._pending_rows)
            self._written += self._pending_rows
        self._pending, self._pending_rows = [], 0

    def close(self) -> None:
        """Write what is left, the footer with the notes, and put the file in place."""
        if self._closed:
            return
        try:
            self._take_block()
            self._flush()
            self._writer.add_key_value_metadata(metadata(self.notes))
            self._writer.close()
            os.chmod(self._tmp, 0o666 & ~_umask())
            os.replace(self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        self._closed = True

    def abort(self) -> None:
        """Stop without leaving a file (nor the temporary one)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.close()
        except Exception:  # already broken: the file is removed either way
            pass
        try:
            os.unlink(self._tmp)
        except OSError:
            pass


def note_loss(notes: Notes, loss: list[tuple[str, int]] | None) -> None:
    """Keep each writer's largest drop count (the reading rule, semantic-conventions §10)."""
    for writer, dropped in loss or ():
        if dropped > notes.loss.get(writer, -1):
            notes.loss[writer] = dropped


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def encode_part(line: bytes) -> bytes:
    """One OTLP JSON line (an export batch, or a drop record) as a complete span table in memory: one row group,
    its notes (one trace line, the drop record's count) in the footer. Raises otlp.BadLine for a line the
    analysis could not read (never one our encoder writes)."""
    block = RowBlock()
    facts = block.add_line(line.rstrip(b"\n"))
    notes = Notes(trace_lines=1)
    note_loss(notes, facts.loss)
    table = pa.Table.from_batches([to_batch(block)])
    # Only the columns this batch has a value in (and the span's own): each column costs a part ~200 bytes of
    # pages and footer, and most of the 160 are null in any one batch (spec/parquet.md §4: readers take a
    # missing column as all null).
    table = table.select([name for name in table.column_names
                          if name in ALWAYS or table.column(name).null_count < table.num_rows])
    sink = pa.BufferOutputStream()
    writer = pq.ParquetWriter(sink, table.schema, store_schema=False, **WRITE_OPTIONS)
    if table.num_rows:
        writer.write_table(table, row_group_size=table.num_rows)
    writer.add_key_value_metadata(metadata(notes))
    writer.close()
    return bytes(sink.getvalue())
