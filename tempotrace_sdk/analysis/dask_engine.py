"""``analyze --engine dask``: the analysis split by trace id over a Dask cluster (spec/analysis.md §5.3).

Map, shuffle, reduce:

1. read: one task per chunk of an input file (``CHUNK`` bytes, cut at line
   starts) decodes its lines (a block at a time as columns, columnar/lines.py,
   as ``--engine dask`` runs; or one at a time by otlp.py: the same records)
   and sorts the records by partition (``shard_of(trace_id, n)``), encoded with msgpack; it
   also returns each line's length, span count and fate (blank, trace line,
   bad line and why), and its refused spans and loss records;
2. analyse: one task per partition replays the input order from the lines'
   lengths (inputs.interleave, exactly as one process reads), which gives every
   record its input position and line number, and runs the Analyzer on its
   records: the same trace parts, hops and duplicates as one process;
3. the client merges the partitions' results (merge.py).

So the report equals the single-process one. Where an input is a span table
(Parquet: row groups, no lines to cut), each partition's task reads every
input itself, keeping its partition's traces (``engine.run`` with a shard, as
``--jobs`` does): the same records in the same order, so the same report.
A span table is read by columns and its rows are sorted into partitions
before any record is made, so each task pays for its own spans only (JSON
lines in such a run are decoded by every task). The workers open the input
files by path: they must see the same files (a shared file system); stdin and
FIFOs cannot be split. A partition task holds its partition's records in
pickled form (a few hundred bytes a span): choose enough partitions (``--jobs``
workers, two partitions each by default) for that to fit a worker.
"""

from __future__ import annotations

import importlib
import os
import pickle
from collections.abc import Iterator
from typing import Any

import msgspec

from .analyzer import Analyzer
from .engine import Options, Outcome, describe, gc_paused, outcomes_of, run
from .events import SpanRecord
from .inputs import Source, TraceFileError, interleave, open_source, read_lines
from .otlp import BadLine, LineResult, decode_line
from .progress import Progress
from .topology import Topology

__all__ = ["CHUNK", "analyze_dask"]

#: Bytes of input per read task.
CHUNK = 64 << 20

BLANK, TRACE, BAD = 0, 1, 2


class Chunk(msgspec.Struct, frozen=True):
    source: int
    index: int  # the chunk's index among its file's chunks
    start: int
    stop: int


class ChunkLines(msgspec.Struct):
    """What the analyse tasks all need of a chunk: its lines' lengths, span counts and fates."""

    lengths: list[int]
    spans: list[int]
    fates: list[int]
    reasons: dict[int, str]  # line index -> why it is bad
    bad_spans: dict[int, list[tuple[int, str]]]  # line index -> (index in line, reason), every partition's
    loss: list[tuple[str, int]]
    not_trace: str | None = None  # chunk 0 of a file a directory gave: why it is not a trace file




def _skip_to_line_start(fd: int, start: int) -> int:
    """The offset of the first line that starts at or after ``start`` (reading past a partial line)."""
    if start == 0:
        return 0
    os.lseek(fd, start - 1, os.SEEK_SET)
    offset = start - 1
    while True:
        block = os.read(fd, 1 << 16)
        if not block:
            return offset
        nl = block.find(b"\n")
        if nl >= 0:
            return offset + nl + 1
        offset += len(block)


def read_chunk(source: Source, chunk: Chunk, parts: int, max_line: int,
               columnar: bool = False) -> tuple[ChunkLines, list[bytes]]:
    """Decode the lines that start in the chunk (``columnar``: a block at a time as columns, columnar/lines.py:
    the same results); records sorted into ``parts`` pickled blobs."""
    fd = open_source(source)
    try:
        meta = ChunkLines([], [], [], {}, {}, [])
        by_part: list[list[SpanRecord]] = [[] for _ in range(parts)]
        seen_trace_line = False
        lines = _chunk_lines(fd, source, chunk, max_line)
        for j, (item, result) in enumerate(_decoded_blocks(lines) if columnar else _decoded(lines)):
            length = item if isinstance(item, int) else len(item)
            meta.lengths.append(length + 1)
            fate, spans = _read_line(item, result, j, parts, meta, by_part)
            meta.fates.append(fate)
            meta.spans.append(spans)
            if chunk.index == 0 and source.found and not seen_trace_line and fate != BLANK:
                seen_trace_line = True
                if fate == BAD:
                    meta.not_trace = meta.reasons[j]
                    break
    finally:
        os.close(fd)
    return meta, [pickle.dumps(records, protocol=pickle.HIGHEST_PROTOCOL) for records in by_part]


#: A line read (its bytes, or its length when too long) and what decoding it gave (None: too long, or empty).
Decoded = tuple[bytes | memoryview | int, LineResult | BadLine | None]


def _chunk_lines(fd: int, source: Source, chunk: Chunk, max_line: int) -> Iterator[memoryview | int]:
    """The lines that start in the chunk (a view of the reader's buffer, or the length of one too long)."""
    offset = _skip_to_line_start(fd, chunk.start)
    os.lseek(fd, offset, os.SEEK_SET)
    for item in read_lines(fd, source.name, max_line):
        if offset >= chunk.stop:
            return
        offset += (item if isinstance(item, int) else len(item)) + 1
        yield item


def _decoded(lines: Iterator[memoryview | int]) -> Iterator[Decoded]:
    """Each line decoded alone (line = its index in the chunk, positions from 0 in the line: the replay fixes
    both)."""
    for j, item in enumerate(lines):
        if isinstance(item, int) or not item:
            yield item, None
            continue
        try:
            yield item, decode_line(item, j, 0)
        except BadLine as err:
            yield item, err


def _decoded_blocks(lines: Iterator[memoryview | int]) -> Iterator[Decoded]:
    """``_decoded``, the lines decoded a block at a time as columns (the reader's blocks, reader.py)."""
    from .columnar.lines import decode_block
    from .reader import BLOCK_BYTES, BLOCK_LINES

    pending: list[bytes | int] = []
    size = first = 0

    def flush() -> Iterator[Decoded]:
        block = [(first + k, item) for k, item in enumerate(pending) if isinstance(item, bytes) and item]
        results = iter(decode_block(block, 0)) if block else iter(())
        at = 0  # the block's positions run on from line to line: each line's are made to start at 0
        for item in pending:
            if isinstance(item, int) or not item:
                yield item, None
                continue
            result = next(results)
            if isinstance(result, LineResult):
                for record in result.records:
                    record.pos -= at
                at += result.spans
            yield item, result

    for item in lines:
        # (a line is a view of the reader's buffer, which the next read reuses: copied)
        line = item if isinstance(item, int) else bytes(item)
        pending.append(line)
        size += 0 if isinstance(line, int) else len(line)
        if size >= BLOCK_BYTES or len(pending) >= BLOCK_LINES:
            yield from flush()
            first += len(pending)
            pending, size = [], 0
    yield from flush()


def _read_line(item: bytes | memoryview | int, result: LineResult | BadLine | None, j: int, parts: int,
               meta: ChunkLines, by_part: list[list[SpanRecord]]) -> tuple[int, int]:
    if isinstance(item, int):
        meta.reasons[j] = f"line of {item:,} bytes is longer than the cap"
        return BAD, 0
    if result is None:
        return BLANK, 0
    if isinstance(result, BadLine):
        if bytes(item).isspace():
            return BLANK, 0
        meta.reasons[j] = result.reason
        return BAD, 0
    for record in result.records:  # line = index in the chunk, pos = index in the line: the replay fixes both
        by_part[int(record.trace_id[-8:], 16) % parts].append(record)
    if result.bad:
        meta.bad_spans[j] = result.bad
    if result.loss:
        meta.loss += result.loss
    return TRACE, result.spans


def _source_lines(chunks: list[tuple[int, tuple[Chunk, ChunkLines]]]) -> Iterator[tuple[int, int, int]]:
    """One file's lines in order: (chunk number in the plan, line index in its chunk, length)."""
    for number, (_, meta) in chunks:
        for j, length in enumerate(meta.lengths):
            yield number, j, length


def analyse_partition(k: int, parts: int, sources: list[Source], plan: list[Chunk], metas: list[ChunkLines],
                      blobs: list[bytes], topology: Topology | None, options: Options) -> Outcome:
    """Partition k's analysis, records in the input order one process reads them in."""
    with gc_paused():
        analyzer = Analyzer(topology, window_spans=options.window, keep=options.keep, source=describe(sources),
                            dedup_spans=options.dedup, batch_edges=options.columnar)
        rep = analyzer.report
        rep.inputs = len(sources)
        per_source: list[list[tuple[int, tuple[Chunk, ChunkLines]]]] = [[] for _ in sources]
        for number, (chunk, meta) in enumerate(zip(plan, metas, strict=True)):
            per_source[chunk.source].append((number, (chunk, meta)))
        streams = []
        for i, chunks in enumerate(per_source):
            first = chunks[0][1][1] if chunks else None
            if first is not None and first.not_trace is not None:
                rep.not_traces.append(f"{sources[i].name}: {first.not_trace}")
                chunks = []
            streams.append((sources[i].size or 0, _source_lines(chunks)))
        line_base = [0] * len(plan)  # line numbers before each chunk, in its file
        for chunks in per_source:
            total = 0
            for number, (_, meta) in chunks:
                line_base[number] = total
                total += len(meta.lengths)
        decoded: dict[int, Iterator[SpanRecord]] = {}
        pending: dict[int, SpanRecord | None] = {}
        positions = trace_lines = ordinal = 0
        batches: list[list[SpanRecord]] = []
        for i, (number, j, _) in interleave(streams, lambda item: item[2]):
            ordinal += 1
            meta = metas[number]
            name, line = sources[i].name, line_base[number] + j + 1
            fate = meta.fates[j]
            if fate == BAD:
                if options.strict:
                    raise TraceFileError(name, line, meta.reasons[j])
                if k == 0:
                    rep.note_bad(name, line, meta.reasons[j], False, (ordinal, -1))
                continue
            if fate == BLANK:
                continue
            trace_lines += 1
            for index, reason in meta.bad_spans.get(j, ()):
                if options.strict:
                    raise TraceFileError(name, line, f"malformed span: {reason}")
                if k == 0:  # every partition sees them: one counts (their owner is not known here)
                    rep.note_bad(name, line, reason, True, (ordinal, index))
            batch = _records_of_line(number, j, blobs, decoded, pending)
            for record in batch:
                record.line, record.pos = line, positions + record.pos
            positions += meta.spans[j]
            if batch:
                batches.append(batch)
            if len(batches) >= 64:
                analyzer.add_batches(batches)
                batches = []
        analyzer.add_batches(batches)
        for meta in metas:
            for writer, dropped in meta.loss:
                rep.note_loss(writer, dropped)
        analyzer.finish()
        return Outcome((rep, analyzer.ledger), trace_lines, positions)


def _records_of_line(number: int, j: int, blobs: list[bytes], decoded: dict[int, Iterator[SpanRecord]],
                     pending: dict[int, SpanRecord | None]) -> list[SpanRecord]:
    """This partition's records of line j of chunk ``number`` (chunk blobs are decoded when first needed)."""
    it = decoded.get(number)
    if it is None:
        it = decoded[number] = iter(pickle.loads(blobs[number]))  # our own bytes, from our own read task
        pending[number] = next(it, None)
        blobs[number] = b""  # decoded: the records are all that is kept
    out = []
    record = pending[number]
    while record is not None and record.line == j:
        out.append(record)
        record = next(it, None)
    pending[number] = record
    return out


def _read_partition(opened: list[Source], sources: list[Source], topology: Topology | None, options: Options,
                    k: int, parts: int) -> Outcome:
    """Partition k's analysis of inputs it reads itself (span tables among them): ``run`` with a shard."""
    with gc_paused():
        outcome = run(opened, topology, options, (k, parts))
    outcome.partial[0].source = describe(sources)  # the names as given, not the workers' absolute paths
    return outcome


def _workers_can_open(sources: list[Source]) -> None:
    for source in sources:
        if source.size is None:
            raise TraceFileError(source.name, 0, "--engine dask reads files the workers open: not stdin or a FIFO")


def plan_chunks(sources: list[Source], chunk_bytes: int) -> list[Chunk]:
    """Every file cut into chunks of ``chunk_bytes`` (a line belongs to the chunk it starts in)."""
    _workers_can_open(sources)
    plan = []
    for i, source in enumerate(sources):
        starts = range(0, max(source.size or 0, 1), chunk_bytes)  # a size: checked above
        plan += [Chunk(i, n, start, start + chunk_bytes) for n, start in enumerate(starts)]
    return plan


def _meta(out: tuple[ChunkLines, list[bytes]]) -> ChunkLines:
    return out[0]


def _part(out: tuple[ChunkLines, list[bytes]], k: int) -> bytes:
    return out[1][k]


def analyze_dask(sources: list[Source], topology: Topology | None, options: Options, *, scheduler: str | None = None,
                 workers: int = 2, partitions: int | None = None, chunk_bytes: int = CHUNK,
                 progress: Progress | None = None) -> list[Outcome]:
    """The partitions' outcomes, analysed on the Dask cluster at ``scheduler`` (or a local one)."""
    distributed: Any = importlib.import_module("distributed")  # the optional [dask] extra; untyped
    direct = any(s.parquet for s in sources)  # each partition reads the inputs itself (module doc)
    if direct:
        _workers_can_open(sources)
    plan = [] if direct else plan_chunks(sources, chunk_bytes)
    # Workers may run elsewhere, in another directory: they get absolute paths (names stay as given).
    opened = [msgspec.structs.replace(s, path=os.path.abspath(s.path)) for s in sources]
    cluster: Any = None
    if scheduler is None:
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
    client = distributed.Client(cluster if cluster is not None else scheduler)
    try:
        parts = partitions or max(2, 2 * len(client.scheduler_info().get("workers", {})))
        if direct:
            results = outcomes_of([client.submit(_read_partition, opened, sources, topology, options, k, parts,
                                                 pure=False) for k in range(parts)])
        else:
            results = _map_shuffle_reduce(client, opened, sources, plan, parts, topology, options)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    if progress is not None:
        progress.close()
    return results


def _map_shuffle_reduce(client: Any, opened: list[Source], sources: list[Source], plan: list[Chunk], parts: int,
                        topology: Topology | None, options: Options) -> list[Outcome]:
    """The read tasks, then one analyse task per partition (module doc)."""
    reads = [client.submit(read_chunk, opened[c.source], c, parts, options.max_line, options.columnar, pure=False)
             for c in plan]
    metas = [client.submit(_meta, r, pure=False) for r in reads]
    outcomes = [
        client.submit(analyse_partition, k, parts, sources, plan, metas,
                      [client.submit(_part, r, k, pure=False) for r in reads], topology, options, pure=False)
        for k in range(parts)
    ]
    results: list[Outcome] = client.gather(outcomes)
    return results
