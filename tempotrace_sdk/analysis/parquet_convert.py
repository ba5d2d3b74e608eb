"""``tempotrace convert``: trace inputs -> one span table, in input order (spec/parquet.md §5.2).

The inputs are read as the analysis reads them (reader.TraceReader's stream: files side by side, a
directory's files, its not-trace files named, lines longer than the cap skipped), each OTLP JSON line
into rows (parquet_rows.py) and each span table's rows as they are (compacting an exporter's parts into
one file). A line the analysis could not read is counted as it would be, and its place noted (spec
§3), so ``tempotrace analyze`` on the output reports what it reports on the input. Memory is bounded by a
row group (parquet_write.py), not by the input.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from . import parquet_layout as L
from .inputs import DEFAULT_MAX_LINE, Source, TraceFileError, expand
from .otlp import BadLine
from .parquet_layout import BadNote
from .parquet_read import Piece
from .parquet_schema import conform
from .parquet_write import ROW_GROUP_ROWS, SpanTableWriter, note_loss
from .progress import Progress
from .reader import TraceReader
from .report import SAMPLES, AnalysisReport

__all__ = ["Converted", "convert"]


@dataclass
class Converted:
    """What a conversion wrote: rows (span objects), the OTLP trace lines they came from, the report that
    counted the input's bad lines, not-trace files and exporter loss as the analysis would."""

    rows: int
    trace_lines: int
    report: AnalysisReport


class _Conversion:
    def __init__(self, sources: list[Source], writer: SpanTableWriter, strict: bool, max_line: int,
                 progress: Progress | None) -> None:
        self.report = AnalysisReport(source=sources[0].name, inputs=len(sources))
        self.reader = TraceReader(sources, self.report, strict=strict, max_line=max_line, progress=progress)
        self.reader.columns = tuple(c.name for c in L.COLUMNS)  # every column, not only those the analysis reads
        self.writer = writer
        self.notes = writer.notes

    def run(self) -> None:
        reader, writer, notes = self.reader, self.writer, self.notes
        progress = reader.progress
        for source, number, item in reader.items():
            if not isinstance(item, (int, memoryview)):
                self._piece(item)
                continue
            reader.lines += 1
            reader.bytes_read += (item if isinstance(item, int) else len(item)) + 1
            if progress is not None:
                progress.update(writer.rows, reader.bytes_read)
            if isinstance(item, int):
                self._bad(source.name, number, f"line of {item:,} bytes is longer than the cap ({reader.max_line:,} "
                                               "bytes; --max-line-mb)")
                continue
            if not item:
                continue
            try:
                facts = writer.add_line(item, source.name, number)
            except BadLine as err:
                if not bytes(item).isspace():
                    self._bad(source.name, number, err.reason)
                continue
            notes.trace_lines += 1
            note_loss(notes, facts.loss)
            for writer_id, dropped in facts.loss or ():
                self.report.note_loss(writer_id, dropped)
        notes.not_traces = list(self.report.not_traces)

    def _bad(self, path: str, line: int, reason: str) -> None:
        """A line the analysis could not read: counted (raised when strict) and its place noted."""
        self.reader.bad(path, line, reason)
        self.notes.bad_lines += 1
        if len(self.notes.bad_first) < SAMPLES:
            self.notes.bad_first.append(BadNote(self.writer.rows, path, line, reason))

    def _piece(self, piece: Piece) -> None:
        """A span table's row group, copied with its notes; rows an exporter wrote get their part as input."""
        head, notes, rep = piece.head, self.notes, self.report
        if head is not None:
            notes.trace_lines += head.trace_lines
            note_loss(notes, list(head.loss.items()))
            for writer_id, dropped in head.loss.items():
                rep.note_loss(writer_id, dropped)
            rep.not_traces.extend(head.not_traces)
            rest = head.bad_lines - len(head.bad_first)
            if rest > 0 and not self.reader.strict:
                notes.bad_lines += rest
                rep.bad_lines += rest
        table = None if piece.table is None else _with_input(conform(piece.table), piece)
        at, end = piece.first, piece.first + piece.rows
        for note in piece.notes:
            upto = max(at, min(note.pos, end))
            self._copy(table, at - piece.first, upto - at)
            at = upto
            self._bad(note.path, note.line, note.reason)
        self._copy(table, at - piece.first, end - at)
        if piece.lost is not None:
            self._bad(piece.source.name, 0, piece.lost)

    def _copy(self, table: pa.Table | None, offset: int, rows: int) -> None:
        if table is not None and rows > 0:
            self.writer.add_table(table.slice(offset, rows))


def _with_input(table: pa.Table, piece: Piece) -> pa.Table:
    """Rows an exporter wrote (no ``input.path``) named by their part and row, as the analysis names them there."""
    path = table.column(L.INPUT_PATH)
    if not path.null_count:
        return table
    missing = pc.is_null(path)
    where = pa.array([piece.source.name] * table.num_rows, pa.string())
    rows = pa.array(range(piece.first + 1, piece.first + 1 + table.num_rows), pa.int64())
    i, j = table.schema.get_field_index(L.INPUT_PATH), table.schema.get_field_index(L.INPUT_LINE)
    table = table.set_column(i, L.INPUT_PATH, pc.if_else(missing, where, path.cast(pa.string()))
                             .cast(table.schema.field(i).type))
    return table.set_column(j, L.INPUT_LINE, pc.if_else(missing, rows, table.column(L.INPUT_LINE)))


def convert(inputs: list[str], out: str, *, strict: bool = False, max_line: int = DEFAULT_MAX_LINE,
            row_group_rows: int = ROW_GROUP_ROWS, progress: Progress | None = None) -> Converted:
    """Convert ``inputs`` (OTLP JSON lines, span tables: files, directories, globs) into the span table ``out``.

    Raises TraceFileError for input the analysis would refuse whole (nothing to read, no trace line) or, with
    ``strict``, at the first bad line; then no file is left at ``out``."""
    sources = expand(inputs)
    target = os.path.realpath(out)
    if any(os.path.realpath(s.path) == target for s in sources):
        raise TraceFileError(out, 0, "the output is also an input")
    with SpanTableWriter(out, row_group_rows=row_group_rows) as writer:
        conversion = _Conversion(sources, writer, strict, max_line, progress)
        conversion.run()
        if not writer.notes.trace_lines:
            where = sources[0].name if len(sources) == 1 else f"{len(sources)} inputs"
            raise TraceFileError(where, 0, "no OTLP trace lines (empty?)")
        rows = writer.rows
    if progress is not None:
        progress.close()
    return Converted(rows, writer.notes.trace_lines, conversion.report)
