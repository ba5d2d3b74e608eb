"""Trace inputs -> span records, in input order, with every bad line counted (spec/analysis.md §5).

``TraceReader`` reads its sources (inputs.py) line by line, decodes each
line (otlp.py, the one decoder) and yields the records. By default a line
that cannot be read (not JSON, not OTLP traces, longer than the cap: a writer
killed mid-line leaves one) is skipped, and a span that breaks a value rule is
refused, each counted in the report with its ``path:line`` (the first few) and
a warning; ``strict=True`` raises ``TraceFileError`` at the first instead.
Exporter loss records (lines whose resource says how many spans an exporter
dropped) are noted in the report, never read as spans.

Positions: each span object read takes the next position (kept, refused or
owned by another partition), so every partition of a split run numbers spans
alike (analyzer.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

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
from .otlp import BadLine, decode_line, parse
from .progress import Progress
from .report import AnalysisReport

__all__ = ["TraceFileError", "TraceIOError", "TraceReader", "check_found", "iter_spans"]


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
    ) -> None:
        self.sources = sources
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

    def __iter__(self) -> Iterator[SpanRecord]:
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[SpanRecord]]:
        """The records line by line (a list per line: cheaper to hand on than one record at a time)."""
        rep, strict, shard = self.report, self.strict, self.shard
        progress = self.progress
        for source, number, item in self._lines():
            self.lines += 1
            self.bytes_read += (item if isinstance(item, int) else len(item)) + 1
            if progress is not None:
                progress.update(self.positions, self.bytes_read)
            if isinstance(item, int):
                self._bad(source, number, f"line of {item:,} bytes is longer than the cap ({self.max_line:,} bytes;"
                          " --max-line-mb)")
                continue
            if not item:
                continue
            try:
                result = decode_line(item, number, self.positions, shard)
            except BadLine as err:
                if not bytes(item).isspace():  # a blank line is no line
                    self._bad(source, number, err.reason)
                continue
            self.trace_lines += 1
            self.positions += result.spans
            if result.bad is not None:
                for index, reason in result.bad:
                    if strict:
                        raise TraceFileError(source.name, number, f"malformed span: {reason}")
                    rep.note_bad(source.name, number, reason, True, (self.lines, index))
            if result.loss is not None:
                for writer, dropped in result.loss:
                    rep.note_loss(writer, dropped)
            if result.records:
                self.kept += len(result.records)
                yield result.records

    def _bad(self, source: Source, number: int, reason: str) -> None:
        if self.strict:
            raise TraceFileError(source.name, number, reason)
        if self.count_lines:
            self.report.note_bad(source.name, number, reason, False, (self.lines, -1))

    def _lines(self) -> Iterator[tuple[Source, int, memoryview | int]]:
        """(source, line number, line) in the input order: several sources are interleaved by progress
        (inputs.interleave), not read one after the other."""
        fds: list[int] = []
        try:
            block = block_for(len(self.sources))
            streams = []
            for source in self.sources:
                fd = open_source(source)
                fds.append(fd)
                lines = enumerate(read_lines(fd, source.name, self.max_line, block), 1)
                streams.append((source.size or 0, _trace_file(source, lines, self.report) if source.found else lines))
            if len(streams) == 1:
                source = self.sources[0]
                for number, item in streams[0][1]:
                    yield source, number, item
                return
            for i, (number, item) in interleave(streams, _length):
                yield self.sources[i], number, item
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


def _length(item: tuple[int, memoryview | int]) -> int:
    """An enumerated line's length in the input, newline included (inputs.interleave's measure)."""
    line = item[1]
    return (line if isinstance(line, int) else len(line)) + 1


def iter_spans(path: str, *, strict: bool = True, max_line: int = DEFAULT_MAX_LINE) -> Iterator[SpanRecord]:
    """The span records of one trace file or directory ('-' reads stdin); strict by default: a library
    caller gets TraceFileError for the first bad line rather than a count."""
    from .inputs import expand

    reader = TraceReader(expand([path]), AnalysisReport(source=path), strict=strict, max_line=max_line)
    yield from reader
    reader.check_found()

