"""A block of OTLP JSON trace lines -> each line's ``otlp.LineResult``, decoded as columns (spec/analysis.md
§5.6): the records ``otlp.decode_line`` makes of each line, equal field for field.

The lines are decoded together (decode.py), their values checked by the vectorised rule prefilter (rules.py)
and the stamps texts read as one column (stamps.py); a line all of whose spans keep every rule is made into
records from those columns. A line with anything else goes to ``decode_line`` whole, so the reference
names what it breaks: a span whose OTLP fields it reads otherwise (decode.SpanFields.marked), a span
the prefilter marks, a stamps text the C decoder refuses, a torch op build_record
refuses, a span whose status is ERROR (its error text is read from its events), the previous attribute set's
send arrays of different lengths, an exporter loss record, a Resource with no spans, a line the skeleton does
not decode. Taking the whole line keeps its refusals, loss records and positions exactly the reference's.

This is the stage the analysis's later stages still read as records (analyzer.py); they are next to become
columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import semconv as S
from ..otlp import BadLine, LineResult, decode_line
from .arrow import scalar
from .decode import ATTRIBUTE_PREFIX, SpanColumns, SpanFields
from .plain import PlainRows, plain_candidates, plain_run
from .records import torch_refusals
from .rows import Records, TextStamps
from .rules import may_break

__all__ = ["decode_block"]

_INT63 = 2**63
#: the loss record's attributes start so (values.EXPORT_DROPPED_SPANS, EXPORT_WRITER_ID)
_LOSS = b'"tempotrace.export.'


def decode_block(lines: Sequence[tuple[int, bytes]], pos: int, shard: tuple[int, int] | None = None,
                 native: bool = True, plain: bool = False) -> list[LineResult | BadLine]:
    """``[decode_line(data, number, p, shard) ...]`` for the (line number, bytes) ``lines``, each line's first
    position ``p`` following from ``pos`` as the reference's would (a BadLine takes none), as values; with
    ``plain``, a line whose rows are all plain holds a ``PlainRun`` (plain.py) in place of its records."""
    cols = SpanColumns(native)
    rows: list[tuple[int, int]] = []  # each line's rows in the table (start, count); count 0: the reference's
    for number, data in lines:
        first, resources = len(cols.line), len(cols.resources)
        n = cols.add_line(data, number)  # (a line left to the reference keeps its rows in the table, unread)
        rows.append((first, n if n and _resources_plain(cols, first, resources) else 0))
    table = cols.table() if cols.line else None
    clean = _clean_rows(cols.fields(), table) if table is not None else np.zeros(0, dtype=bool)
    made = lane = None
    if table is not None and clean.any():
        stamps = TextStamps(table, native)
        taken = _plain_lines(table, clean, stamps, rows) if plain else None
        if taken is not None and not taken.any():
            taken = None
        made = Records(table, clean, shard, stamps, cols.fields(), taken)
        if taken is not None:
            assert stamps.block is not None  # (plain rows have a decoded text)
            lane = PlainRows(made, stamps.block, taken)
            if not lane.usable():  # (the rows' records are made as the others' are)
                made = Records(table, clean, shard, stamps, cols.fields())
                lane = taken = None
    out: list[LineResult | BadLine] = []
    for (number, data), (first, n) in zip(lines, rows, strict=True):
        if n and clean[first:first + n].all():
            assert made is not None
            if lane is not None and taken is not None and taken[first]:
                out.append(LineResult(plain_run(lane, first, n, pos, shard), n))  # type: ignore[arg-type]
            else:
                out.append(LineResult(made.stretch(first, n, pos), n))
            pos += n
            continue
        try:
            result = decode_line(data, number, pos, shard)
        except BadLine as err:
            out.append(err)
            continue
        out.append(result)
        pos += result.spans
    return out


def _plain_lines(table: pa.Table, clean: np.ndarray, stamps: TextStamps, rows: list[tuple[int, int]]) -> np.ndarray:
    """The rows of the lines whose rows are all plain (plain.py; a line is taken whole or not at all)."""
    if stamps.block is None:  # (no text the C decoder read)
        return np.zeros(len(clean), dtype=bool)
    candidates = plain_candidates(table, clean & stamps.present & ~stamps.refused)
    taken = np.zeros(len(clean), dtype=bool)
    for first, n in rows:
        if n and candidates[first:first + n].all():
            taken[first:first + n] = True
    return taken


def _resources_plain(cols: SpanColumns, first_row: int, first: int) -> bool:
    """Every Resource of the line just added has spans and holds no loss record (a Resource without spans is
    read by the reference alone: its rules and its loss record count with no row to mark)."""
    with_spans = set(cols.resource[first_row:])
    return all(r in with_spans and _LOSS not in bytes(cols.resources[r]) for r in range(first, len(cols.resources)))


def _clean_rows(fields: SpanFields, table: pa.Table) -> np.ndarray:
    """Rows the columns can make records of (module doc): every rule kept, nothing only the reference reads."""
    marked = fields.marked | fields.errors | may_break(table) | torch_refusals(table)
    has_text = pc.is_valid(table.column(ATTRIBUTE_PREFIX + S.STAMPS)).to_numpy(zero_copy_only=False)
    for name in ("start", "end"):  # (the stamps reader takes times below 2^63; the reference reads a later one)
        late = pc.greater_equal(pc.fill_null(table.column(name), scalar(0, pa.uint64())), scalar(_INT63, pa.uint64()))
        marked |= has_text & late.to_numpy(zero_copy_only=False)
    clean: np.ndarray = ~marked
    return clean
