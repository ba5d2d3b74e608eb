"""Trace inputs -> span records, in input order, with every bad line counted (spec/analysis.md §5).

``TraceReader`` reads its sources (inputs.py) line by line, decodes each
line (otlp.py, the one decoder) and yields the records. By default a line
that cannot be read (not JSON, not OTLP traces, longer than the cap: a writer
killed mid-line leaves one) is skipped, and a span that breaks a value rule is
refused, each counted in the report with its ``path:line`` (the first few) and
a warning; ``strict=True`` raises ``TraceFileError`` at the first instead.
Exporter loss records (lines whose resource says how many spans an exporter
dropped) are noted in the report, never read as spans.

Span tables (Parquet, spec/parquet.md) are read in the same stream: each row group
is one item (parquet_read.Piece) whose rows become the records the JSON they came
from would give (parquet_records.py), its bad-line notes counted where they fell,
so the report of a converted trace is the report of the original.

Positions: each span object read takes the next position (kept, refused or
owned by another partition), so every partition of a split run numbers spans
alike (analyzer.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Union

from .events import SpanRecord
from .inputs import (
    DEFAULT_MAX_LINE,
    STDIN,
    Source,
    TraceFileError,
    TraceIOError,
    block_for,
    interleave,
    open_source,
    read_lines,
)
from .otlp import BadLine, LineResult, decode_line, parse
from .progress import Progress
from .report import AnalysisReport

if TYPE_CHECKING:
    from .parquet_read import Piece

#: An item of the input stream: (source, line number, the line | its length when too long | a span table piece).
Item = tuple[Source, int, Union[memoryview, int, "Piece"]]

__all__ = ["TraceFileError", "TraceIOError", "TraceReader", "check_found", "iter_spans"]

#: A block of the columnar reader: lines decoded together (bounded in bytes, for memory; in lines, so a
#: trickle of short lines still reaches the analysis). Each block pays a few hundred Arrow calls whatever its
#: size: 8 MiB blocks decoded the torch demo's export 7-17% faster than 4 MiB ones, for 12-20 MB more peak
#: memory at 10^5 spans.
BLOCK_BYTES = 8 << 20
BLOCK_LINES = 8192


class TraceReader:
    """Iterate the records of ``sources``; counts go to ``report`` (bad lines, loss) and to attributes."""

    def __init__(
        self,
        sources: list[Source],
        report: AnalysisReport,
        *,
        strict: bool = False,
        max_line: int = DEFAULT_MAX_LINE,
        shard: tuple[int, int] | None = None,
        progress: Progress | None = None,
        columnar: bool = False,
        plain: bool = False,
    ) -> None:
        self.sources = sources
        #: decode lines a block at a time as columns (the records are the same: columnar/lines.py)
        self.columnar = columnar
        #: hand a line of plain rows on as a PlainRun, not records (columnar/plain.py: an Analyzer with a lane)
        self.plain = plain
        self.report = report
        self.strict = strict
        self.max_line = max_line
        self.shard = shard
        self.progress = progress
        # Bad lines are every partition's to see; partition 0 alone counts them (refused spans go by owner).
        self.count_lines = shard is None or shard[0] == 0
        self.lines = 0  #: lines read (their ordinal orders the bad-line samples)
        self.trace_lines = 0  #: lines that were OTLP trace lines
        self.positions = 0  #: span objects read (the next position)
        self.kept = 0  #: records handed on
        self.bytes_read = 0
        #: the span table columns read (None: every column); the analysis reads parquet_records.COLUMNS_READ
        self.columns: tuple[str, ...] | None = None

    def __iter__(self) -> Iterator[SpanRecord]:
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[SpanRecord]]:
        """The records line by line (a list per line: cheaper to hand on than one record at a time)."""
        if self.columnar:
            yield from self._blocks()
            return
        for source, number, item in self.items():
            if not isinstance(item, (int, memoryview)):
                yield from self._piece(item)
                continue
            data = self._line(source, number, item)
            if data is None:
                continue
            result: LineResult | BadLine
            try:
                result = decode_line(data, number, self.positions, self.shard)
            except BadLine as err:
                result = err
            records = self._took(source, number, data, result)
            if records:
                yield records

    def _blocks(self) -> Iterator[list[SpanRecord]]:
        """``batches`` with lines decoded a block at a time as columns (columnar/lines.py: the same results)."""
        from .columnar.lines import decode_block

        pending: list[tuple[Source, int, bytes | memoryview | int]] = []
        size = 0

        def flush() -> Iterator[list[SpanRecord]]:
            lines = [(number, item) for _, number, item in pending if isinstance(item, bytes) and item]
            results = iter(decode_block(lines, self.positions, self.shard, plain=self.plain)) if lines else iter(())
            for source, number, item in pending:
                data = self._line(source, number, item)
                if data is None:
                    continue
                records = self._took(source, number, data, next(results))
                if records:
                    yield records
            pending.clear()

        for source, number, item in self.items():
            if not isinstance(item, (int, memoryview)):
                yield from flush()
                size = 0
                yield from self._piece(item)
                continue
            # (a line is a view of the reader's buffer, which the next read reuses: copied)
            line = bytes(item) if isinstance(item, memoryview) else item
            size += len(line) if isinstance(line, bytes) else 0
            pending.append((source, number, line))
            if size >= BLOCK_BYTES or len(pending) >= BLOCK_LINES:
                yield from flush()
                size = 0
        yield from flush()

    def _line(self, source: Source, number: int, item: bytes | memoryview | int) -> bytes | memoryview | None:
        """Count one line read; the line to decode, or None (one too long, counted bad; a blank one)."""
        self.lines += 1
        self.bytes_read += (item if isinstance(item, int) else len(item)) + 1
        if self.progress is not None:
            self.progress.update(self.positions, self.bytes_read)
        if isinstance(item, int):
            self._bad(source, number, f"line of {item:,} bytes is longer than the cap ({self.max_line:,} bytes;"
                      " --max-line-mb)")
            return None
        return item or None

    def _took(self, source: Source, number: int, data: bytes | memoryview,
              result: LineResult | BadLine) -> list[SpanRecord] | None:
        """Count what one line held (its refusals, loss records, positions); its records."""
        if isinstance(result, BadLine):
            if not bytes(data).isspace():  # a blank line is no line
                self._bad(source, number, result.reason)
            return None
        rep = self.report
        self.trace_lines += 1
        self.positions += result.spans
        if result.bad is not None:
            for index, reason in result.bad:
                if self.strict:
                    raise TraceFileError(source.name, number, f"malformed span: {reason}")
                rep.note_bad(source.name, number, reason, True, (self.lines, index))
        if result.loss is not None:
            for writer, dropped in result.loss:
                rep.note_loss(writer, dropped)
        if result.records:
            self.kept += len(result.records)
        return result.records

    def _bad(self, source: Source, number: int, reason: str) -> None:
        self.bad(source.name, number, reason)

    def bad(self, path: str, number: int, reason: str) -> None:
        """A line that cannot be read: raised (strict), else counted once (by partition 0 of a split run)."""
        if self.strict:
            raise TraceFileError(path, number, reason)
        if self.count_lines:
            self.report.note_bad(path, number, reason, False, (self.lines, -1))

    def _piece(self, piece: Piece) -> Iterator[list[SpanRecord]]:
        """The records of one span table piece, its notes counted where they fell among its rows (a bad line
        noted before row p of the file is counted after rows ..p-1, as it was read)."""
        rep = self.report
        head = piece.head
        if head is not None:
            self.trace_lines += head.trace_lines
            for writer, dropped in head.loss.items():
                rep.note_loss(writer, dropped)
            rep.not_traces.extend(head.not_traces)
            rest = head.bad_lines - len(head.bad_first)  # counted, never sampled (the file keeps its first SAMPLES)
            if rest > 0 and self.count_lines and not self.strict:
                rep.bad_lines += rest
        self.bytes_read += piece.nbytes
        at, end = piece.first, piece.first + piece.rows
        for note in piece.notes:
            upto = max(at, min(note.pos, end))
            yield from self._rows(piece, at, upto)
            at = upto
            self.lines += 1
            self.bad(note.path, note.line, note.reason)
        yield from self._rows(piece, at, end)
        if piece.lost is not None:
            self.lines += 1
            self.bad(piece.source.name, 0, piece.lost)
        if self.progress is not None:
            self.progress.update(self.positions, self.bytes_read)

    def _rows(self, piece: Piece, lo: int, hi: int) -> Iterator[list[SpanRecord]]:
        """Rows lo..hi-1 of the piece's file, read as one line: a position per row, refusals counted."""
        if hi <= lo or piece.table is None:
            return
        self.lines += 1
        if self.columnar:
            result = piece.columnar_view().records(lo - piece.first, hi - piece.first, self.positions, self.shard,
                                                   self.plain)
        else:
            result = piece.rows_view().records(lo - piece.first, hi - piece.first, self.positions, self.shard)
        self.positions += hi - lo
        rep = self.report
        for index, path, line, reason in result.bad or ():
            if self.strict:
                raise TraceFileError(path, line, f"malformed span: {reason}")
            rep.note_bad(path, line, reason, True, (self.lines, index))
        for writer, dropped in result.loss or ():
            rep.note_loss(writer, dropped)
        if result.batches is not None:
            for batch in result.batches:
                if batch:
                    self.kept += len(batch)
                    yield batch
        elif result.records:
            self.kept += len(result.records)
            yield result.records

    def items(self) -> Iterator[Item]:
        """(source, line number, line) in the input order: several sources are interleaved by progress
        (inputs.interleave), not read one after the other; a span table gives its row groups as items."""
        fds: list[int] = []
        try:
            block = block_for(len(self.sources))
            streams: list[tuple[int, Iterator[Item]]] = []
            for group in _streams(self.sources):
                source = group[0]
                if source.parquet:
                    streams.append(_parquet_stream(group, self.columns))
                    continue
                fd = open_source(source)
                fds.append(fd)
                lines = enumerate(read_lines(fd, source.name, self.max_line, block), 1)
                found = _trace_file(source, lines, self.report) if source.found else lines
                streams.append((source.size or 0, _tagged(source, found)))
            if len(streams) == 1:
                yield from streams[0][1]
                return
            for _, item in interleave(streams, _length):
                yield item
        finally:
            for fd in fds:
                if fd != 0 or self.sources[0].path != STDIN:
                    os.close(fd)

    def check_found(self) -> None:
        check_found(self.sources, self.report, self.trace_lines, self.kept)


def check_found(sources: list[Source], report: AnalysisReport, trace_lines: int, kept: int) -> None:
    """Raise TraceFileError when the input held no trace lines or no span that could be read (§5: no trace)."""
    where = sources[0].name if len(sources) == 1 else f"{len(sources)} inputs"
    skipped = ""
    if report.samples:
        first = report.bad_samples[0]
        skipped = (f"; skipped {report.bad_lines:,} bad lines and {report.bad_spans:,} spans (first: "
                   f"{first['path']}:{first['line']}: {first['reason']})")
    if not trace_lines:
        raise TraceFileError(where, 0, f"no OTLP trace lines (empty?){skipped}")
    if not kept:
        loss = report.export_dropped_spans
        dropped = f" (the exporters said they dropped {loss:,})" if loss else ""
        raise TraceFileError(where, 0, f"no spans{dropped}{skipped}")


def _trace_file(source: Source, lines: Iterator[tuple[int, memoryview | int]],
                report: AnalysisReport) -> Iterator[tuple[int, memoryview | int]]:
    """The lines of a file a directory gave, or none when its first non-blank line is not an OTLP trace
    line (a report, a metrics export: not a trace file; named in the report, not counted as bad lines).
    Leading blank lines are held back until that is known (dask_engine.read_chunk decides alike)."""
    leading: list[tuple[int, memoryview | int]] = []
    for number, item in lines:
        if isinstance(item, int):
            reason: str | None = f"line of {item:,} bytes"
        elif not item:
            leading.append((number, memoryview(b"")))
            continue
        else:
            try:
                parse(item)
                reason = None
            except BadLine as err:
                if bytes(item).isspace():
                    leading.append((number, memoryview(bytes(item))))
                    continue
                reason = err.reason
        if reason is not None:
            report.not_traces.append(f"{source.name}: {reason}")
            return
        yield from leading
        yield number, item
        break
    else:
        yield from leading
        return
    yield from lines


def _length(item: Item) -> int:
    """An item's length in its input (inputs.interleave's measure): a line's bytes, newline included; a span
    table piece's rows (a stream of span tables is as long as its rows)."""
    line = item[2]
    if isinstance(line, int):
        return line + 1
    if isinstance(line, memoryview):
        return len(line) + 1
    return max(1, line.rows)


def _tagged(source: Source, lines: Iterator[tuple[int, memoryview | int]]) -> Iterator[Item]:
    for number, line in lines:
        yield source, number, line


def _streams(sources: list[Source]) -> list[list[Source]]:
    """The input streams: each file alone, except a writer's parts (one ``stream``), read in order."""
    out: list[list[Source]] = []
    for source in sources:
        if source.stream and out and out[-1][0].stream == source.stream:
            out[-1].append(source)
        else:
            out.append([source])
    return out


def _parquet_stream(sources: list[Source], columns: tuple[str, ...] | None) -> tuple[int, Iterator[Item]]:
    """(rows, items) of span table sources read one after the other; pyarrow is imported for them only."""
    try:
        from .parquet_read import ParquetStream
    except ImportError as err:
        raise TraceFileError(sources[0].name, 0, f"a span table (Parquet): reading it needs pyarrow "
                                                 f"(pip install 'tempotrace-sdk[analysis]'; {err})") from err
    stream = ParquetStream(sources, columns)
    return stream.rows, ((piece.source, 0, piece) for piece in stream.pieces())


def iter_spans(path: str, *, strict: bool = True, max_line: int = DEFAULT_MAX_LINE) -> Iterator[SpanRecord]:
    """The span records of one trace file or directory ('-' reads stdin); strict by default: a library
    caller gets TraceFileError for the first bad line rather than a count."""
    from .inputs import expand

    reader = TraceReader(expand([path]), AnalysisReport(source=path), strict=strict, max_line=max_line)
    yield from reader
    reader.check_found()

