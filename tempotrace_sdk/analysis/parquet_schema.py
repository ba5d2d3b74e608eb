"""The span table in Arrow: the schema of parquet_layout.py's columns, a RowBlock as a record batch, and how
the files are written (spec/parquet.md §2, §6).

pyarrow is the engine (the ``analysis`` extra): Arrow's C++ Parquet writer and reader, kept by the Apache
Arrow project and read by every tool that reads Parquet; this module is the only place that says which
Arrow type each column has.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa

from . import parquet_layout as L
from .parquet_layout import ID8, ID16, JSON, MAP, SENDS, Column, Notes
from .parquet_rows import RowBlock
from .schema import BOOL, HEX, INT, INT_ARRAY, STRING

__all__ = ["SCHEMA", "WRITE_OPTIONS", "arrow_type", "conform", "metadata", "notes_of", "to_batch"]

#: zstd (level 3: a tenth smaller than its default of 1 on real exports, still hundreds of MB/s) over Parquet's
#: dictionary encoding: what makes a span table a fifth of its OTLP JSON (spec/parquet.md §6).
WRITE_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    # Statistics (min/max per column chunk) only where a query filters: the times. Elsewhere they would be a
    # few hundred bytes of footer per column and row group, for nothing.
    "write_statistics": [L.START, L.END],
}

_STRING_DICT = pa.dictionary(pa.int32(), pa.string())
_SEND = pa.struct([("lts", pa.int64()), ("ptp_ns", pa.int64()), ("uncertainty_ns", pa.int64()),
                   ("clk_quality", pa.string())])
assert tuple(_SEND.names) == L.SEND_FIELDS


def arrow_type(column: Column) -> pa.DataType:
    """The Arrow type of one column."""
    kind = column.kind
    if kind == STRING:
        return _STRING_DICT if column.dictionary else pa.string()
    simple: dict[str, pa.DataType] = {
        INT: pa.int64(), BOOL: pa.bool_(), INT_ARRAY: pa.list_(pa.int64()), ID16: pa.binary(16), ID8: pa.binary(8),
        JSON: pa.string(), MAP: pa.map_(pa.string(), pa.string()), SENDS: pa.list_(_SEND),
    }
    if kind == HEX:
        return pa.binary(column.size)
    return simple[kind]


SCHEMA = pa.schema([pa.field(c.name, arrow_type(c)) for c in L.COLUMNS])
_TYPES = {c.name: SCHEMA.field(c.name).type for c in L.COLUMNS}


def metadata(notes: Notes) -> dict[bytes, bytes]:
    """The key-value metadata of a span table: its version and its notes."""
    return {L.VERSION_KEY.encode(): L.VERSION.encode(), L.NOTES_KEY.encode(): msgspec.json.encode(notes)}


def notes_of(meta: dict[bytes, bytes] | None) -> Notes | str:
    """The notes of a file's key-value metadata, or why it is not a span table this version reads."""
    meta = meta or {}
    version = meta.get(L.VERSION_KEY.encode())
    if version is None:
        return f"a Parquet file without '{L.VERSION_KEY}' in its metadata: not a TempoTrace span table"
    text = version.decode("utf-8", "replace")
    name, _, major = text.partition("/")
    if name != L.VERSION.partition("/")[0] or major.partition(".")[0] != L.VERSION.partition("/")[2]:
        return f"a span table of version {text!r}; this reader reads {L.VERSION}"
    try:
        return msgspec.json.decode(meta.get(L.NOTES_KEY.encode(), b"{}"), type=Notes)
    except msgspec.DecodeError as err:
        return f"its '{L.NOTES_KEY}' metadata is not what spec/parquet.md §3 says ({err})"


def to_batch(block: RowBlock) -> pa.RecordBatch:
    """A block's rows as one record batch of SCHEMA (every column; those no row has are all null)."""
    n = block.rows
    full: dict[str, list[Any]] = {}
    get = full.get
    for i, row in enumerate(block.spans):  # one pass over the cells, each put in its place
        for name, v in row.items():
            column = get(name)
            if column is None:
                column = full[name] = [None] * n
            column[i] = v
    for first, end, run in block.runs:
        for name, value in run.items():
            if value is None:
                continue
            if name not in full:
                full[name] = [None] * n
            full[name][first:end] = [value] * (end - first)
    arrays = [pa.array(full[c.name], type=_TYPES[c.name]) if c.name in full else pa.nulls(n, type=_TYPES[c.name])
              for c in L.COLUMNS]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def conform(table: pa.Table) -> pa.Table:
    """A span table read from a file as SCHEMA: its columns in order, those it lacks (an older writer within
    this version) as nulls, those this version does not know dropped."""
    n = table.num_rows
    names = set(table.column_names)
    columns = [table.column(c.name).cast(_TYPES[c.name]) if c.name in names else pa.nulls(n, type=_TYPES[c.name])
               for c in L.COLUMNS]
    return pa.Table.from_arrays(columns, schema=SCHEMA)
