"""A span table's row group -> the records of its rows, made from its columns (spec/analysis.md §5.6,
spec/parquet.md §5): what ``parquet_records.RowGroup.records`` gives, equal field for field, without a
KeyValue or an AnyValue per value.

The row group is recast in the decode stage's shape (decode.SpanColumns' table: ids as hex text, each attribute
the rules know in ``attribute.<key>``, the Resource's in ``resource.<key>``), so the rule prefilter (rules.py)
and the records (rows.py) are the JSON path's own; the decoded stamps columns are checked as
``parquet_records.span_stamps`` checks them, as vectorised expressions, and read where they pass. A row with
anything else is read by ``RowGroup`` itself, in runs of such rows: a span kept as written (``otlp_json``), a
known attribute in a map column, an id, kind or time the reference refuses or reads otherwise, status ERROR,
stamps a check refuses, a value the prefilter marks, the previous attribute set's send arrays of different
lengths. A row group
whose columns are not of the schema's types (a file another tool wrote) is read by ``RowGroup`` whole.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import semconv as S
from ...stamptext import MAX_SENDS
from ...wire.layout import LTS_MAX, TENANT_MAX, UNCERTAINTY_SATURATED
from .. import parquet_layout as L
from ..events import QUALITIES, Stamp
from ..parquet_records import RowGroup, RowsResult
from ..parquet_schema import SCHEMA
from ..parquet_stamps import QUALITY_NAMES, SOURCE_NAMES
from ..values import RESOURCE, SPAN
from .arrow import scalar
from .decode import ATTRIBUTE_COLUMNS, ATTRIBUTE_PREFIX, RESOURCE_COLUMNS, RESOURCE_PREFIX
from .pivot import ARROW_TYPES
from .plain import PlainRows, plain_candidates, plain_run
from .records import torch_refusals
from .rows import Records
from .rules import may_break
from .sketchmask import own_sketches
from .stamps import StampsBlock

__all__ = ["ParquetRows"]

assert QUALITIES == QUALITY_NAMES  # (a quality's name is its reading's)
_LUT = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_STATUS_ERROR = 2
_QUALITY_SET = pa.array(QUALITIES, pa.string())
# the slots of a decoded stamps text (native/stamp tt_stamps_read.h), which the plain lane reads
_SLOTS, _START, _HAS_END, _HAS_REMOTE, _REMOTE_LTS, _MERGED, _HAS_SKETCH = 22, 2, 6, 11, 17, 18, 20
#: Runs of rows for RowGroup a group reads over a slice each (a few ms a run), up to this or one a this many rows;
#: beyond, one RowGroup of the whole group (about 20 us a row) reads them all.
_FEW_RUNS, _ROWS_A_RUN = 8, 512


def _hex(column: pa.ChunkedArray) -> pa.Array:
    """A fixed-size binary column as lower-case hex text (nulls kept): what ``bytes.hex`` gives, per value."""
    array = column.combine_chunks()
    n, size = len(array), array.type.byte_width
    data = array.buffers()[1]
    raw = np.zeros((n, size), dtype=np.uint8) if data is None else \
        np.frombuffer(data, dtype=np.uint8)[array.offset * size:(array.offset + n) * size].reshape(n, size)
    text = np.empty((n, 2 * size), dtype=np.uint8)
    text[:, 0::2] = _LUT[raw >> 4]
    text[:, 1::2] = _LUT[raw & 15]
    large = 2 * size * n >= 2**31  # (beyond 32-bit offsets: a table of tens of millions of rows)
    offsets = np.arange(0, 2 * size * (n + 1), 2 * size, dtype=np.int64 if large else np.int32)
    kind = pa.LargeStringArray if large else pa.StringArray
    out = kind.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text))
    if array.null_count:
        out = pc.if_else(pc.is_valid(array), out, scalar(None, out.type))
    return out


def _conforms(table: pa.Table) -> bool:
    """Every column the table has is of the schema's type (a string column also dictionary-encoded)."""
    for field in table.schema:
        want = SCHEMA.field(field.name).type if field.name in SCHEMA.names else None
        have = field.type
        if want is None or have == want:
            continue
        if pa.types.is_dictionary(want) and have == want.value_type:
            continue
        if want == pa.string() and pa.types.is_dictionary(have) and have.value_type == pa.string():
            continue
        return False
    return True


class _Columns:
    """The table's columns by name; a column it lacks is all null of the schema's type."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.n = table.num_rows

    def __call__(self, name: str) -> pa.ChunkedArray:
        if name in self.table.column_names:
            return self.table.column(name)
        return pa.chunked_array([pa.nulls(self.n, SCHEMA.field(name).type)])

    def valid(self, name: str) -> np.ndarray:
        if name not in self.table.column_names:
            return np.zeros(self.n, dtype=bool)
        return pc.is_valid(self.table.column(name)).to_numpy(zero_copy_only=False)  # type: ignore[no-any-return]


def _flag(values: Any) -> np.ndarray:
    """A boolean expression's values, null as False."""
    return pc.fill_null(values, scalar(False)).to_numpy(zero_copy_only=False)  # type: ignore[no-any-return]


def _outside(column: Any, hi: int) -> np.ndarray:
    """Null, or an integer outside 0..hi (``parquet_records._check`` refuses it)."""
    bad = pc.or_(pc.less(column, scalar(0)), pc.greater(column, scalar(hi)))
    return _flag(pc.or_kleene(pc.is_null(column), bad))


def _not_named(column: Any, names: tuple[str, ...]) -> np.ndarray:
    """Null, or not one of ``names`` (``parquet_records._name`` refuses it)."""
    among = pc.is_in(pc.cast(column, pa.string()), value_set=pa.array(names, pa.string()))
    return ~_flag(among)


def _map_known(cols: _Columns, name: str, keys: frozenset[str]) -> np.ndarray:
    """Rows of map column ``name`` holding an entry whose key is in ``keys`` (an attribute the rules read)."""
    if name not in cols.table.column_names:
        return np.zeros(cols.n, dtype=bool)
    column = cols.table.column(name).combine_chunks()
    out = np.zeros(cols.n, dtype=bool)
    if column.null_count == len(column) or not len(column.keys):
        return out
    # (the keys are the whole child array, the offsets index into it: a slice's too)
    hits = np.flatnonzero(_flag(pc.is_in(column.keys, value_set=pa.array(sorted(keys), pa.string()))))
    offsets = column.offsets.to_numpy(zero_copy_only=False)
    rows = np.searchsorted(offsets, hits, side="right") - 1
    out[rows[(hits >= offsets[0]) & (hits < offsets[-1])]] = True
    return out


def _decode_shaped(cols: _Columns, first: int, to_reference: np.ndarray) -> pa.Table:
    """The row group as a decode.SpanColumns table (its ``refused``: ``to_reference``)."""
    n = cols.n
    row_line = pa.array(np.arange(first + 1, first + 1 + n, dtype=np.int64))
    data: dict[str, Any] = {
        "line": pc.coalesce(cols(L.INPUT_LINE), row_line),
        "trace_id": _hex(cols(L.TRACE_ID)), "span_id": _hex(cols(L.SPAN_ID)),
        "parent_span_id": pc.fill_null(_hex(cols(L.PARENT_SPAN_ID)), scalar("")),
        "name": pc.fill_null(pc.cast(cols(L.NAME), pa.string()), scalar("")),
        "kind": cols(L.KIND),
        # (negative times go to the reference: to_reference)
        "start": pc.cast(pc.max_element_wise(cols(L.START), scalar(0)), pa.uint64()),
        "end": pc.cast(pc.max_element_wise(cols(L.END), scalar(0)), pa.uint64()),
        "refused": to_reference,
    }
    for prefix, keys, columns in ((ATTRIBUTE_PREFIX, ATTRIBUTE_COLUMNS, ""), (RESOURCE_PREFIX, RESOURCE_COLUMNS,
                                                                                L.RESOURCE_PREFIX)):
        for key, kind in keys:
            name = columns + key
            want = ARROW_TYPES[kind]
            if key == S.STAMPS or name not in cols.table.column_names:  # (the stamps: decoded, in stamps.*)
                data[prefix + key] = pa.nulls(n, want)
                continue
            column = cols(name)
            data[prefix + key] = _hex(column) if pa.types.is_fixed_size_binary(column.type) else pc.cast(column, want)
    return pa.table(data)


class _TableStamps:
    """A span table's decoded stamps columns as rows.Records reads stamps (rows.StampsSource): present where
    ``stamps.start.lts`` is, refused where ``parquet_records.span_stamps`` would refuse them."""

    def __init__(self, cols: _Columns, shaped: pa.Table) -> None:
        self.present = cols.valid(L.STAMPS_START[3])
        self.cols = cols
        self.shaped = shaped
        if not self.present.any():
            self.refused = self.present
            return
        bad = _not_named(cols(L.STAMPS_SOURCE), SOURCE_NAMES)
        bad |= _outside(cols(L.STAMPS_START[0]), LTS_MAX) | _outside(cols(L.STAMPS_START[3]), LTS_MAX)
        end = cols.valid(L.STAMPS_END[3])
        eptp, eunc, equal, elts = (cols(c) for c in L.STAMPS_END)
        bad |= end & (_outside(eptp, LTS_MAX) | _outside(eunc, UNCERTAINTY_SATURATED) | _not_named(equal, QUALITIES)
                      | _outside(elts, LTS_MAX))
        remote = cols.valid(L.STAMPS_REMOTE[5])
        rptp, runc, rqual, rsource, rtenant, rlts = (cols(c) for c in L.STAMPS_REMOTE)
        recv = cols(L.STAMPS_RECV_LTS)
        bad |= remote & (_outside(rptp, LTS_MAX) | _outside(runc, UNCERTAINTY_SATURATED)
                         | _not_named(rqual, QUALITIES) | _not_named(rsource, SOURCE_NAMES)
                         | _outside(rtenant, TENANT_MAX) | _outside(rlts, LTS_MAX)
                         | (cols.valid(L.STAMPS_RECV_LTS) & _outside(recv, LTS_MAX)))
        bad |= self._bad_sends()
        self.refused = self.present & bad

    def _bad_sends(self) -> np.ndarray:
        """Rows with more sends than a text may hold, or a send a check refuses."""
        cols = self.cols
        out = np.zeros(cols.n, dtype=bool)
        if not cols.valid(L.STAMPS_SENDS).any():
            return out
        sends = cols(L.STAMPS_SENDS).combine_chunks()
        out |= _flag(pc.greater(pc.list_value_length(sends), scalar(MAX_SENDS, pa.int32())))
        flat = pc.list_flatten(sends)
        if not len(flat):
            return out
        each = np.zeros(len(flat), dtype=bool)
        if flat.null_count:
            each |= ~pc.is_valid(flat).to_numpy(zero_copy_only=False)
        each |= _outside(pc.struct_field(flat, "lts"), LTS_MAX) | _outside(pc.struct_field(flat, "ptp_ns"), LTS_MAX)
        each |= _outside(pc.struct_field(flat, "uncertainty_ns"), UNCERTAINTY_SATURATED)
        each |= _not_named(pc.struct_field(flat, "clk_quality"), QUALITIES)
        parents = pc.list_parent_indices(sends).to_numpy(zero_copy_only=False)
        out[parents[each]] = True
        return out

    def exact(self) -> np.ndarray:
        """The rows whose stamps the plain lane reads as slots (plain.py): present and not refused, each reading
        with its value (a reading the table left null makes a Stamp without one, which the lane does not take)."""
        cols = self.cols
        out: np.ndarray = self.present & ~self.refused & cols.valid(L.STAMPS_START[0])
        for has, fields in ((L.STAMPS_END[3], L.STAMPS_END[:3]), (L.STAMPS_REMOTE[5], L.STAMPS_REMOTE[:3])):
            there = cols.valid(has)
            for name in fields:
                out &= ~there | cols.valid(name)
        return out

    def block(self) -> StampsBlock:
        """The stamps as the JSON path's decoded texts' slots (stamps.StampsBlock), for the rows ``exact`` takes."""
        cols, shaped, n = self.cols, self.shaped, self.cols.n
        slots = np.zeros((n, _SLOTS), dtype=np.int64)

        def ints(column: Any, fill: int = 0) -> np.ndarray:
            values: np.ndarray = pc.fill_null(column, scalar(fill, column.type)).to_numpy(zero_copy_only=False)
            return values.astype(np.int64)

        def quality(column: Any) -> np.ndarray:
            index = pc.index_in(pc.cast(column, pa.string()), value_set=_QUALITY_SET)
            return ints(index, QUALITIES.index("UNKNOWN"))

        slots[:, _START] = ints(cols(L.STAMPS_START[0]))
        slots[:, _START + 1] = ints(shaped.column(ATTRIBUTE_PREFIX + S.UNCERTAINTY_NS), UNCERTAINTY_SATURATED)
        slots[:, _START + 2] = quality(shaped.column(ATTRIBUTE_PREFIX + S.CLK_QUALITY))
        slots[:, _START + 3] = ints(cols(L.STAMPS_START[3]))
        for has, at, fields in ((_HAS_END, _HAS_END + 1, L.STAMPS_END),
                                (_HAS_REMOTE, _HAS_REMOTE + 1, (*L.STAMPS_REMOTE[:3], L.STAMPS_REMOTE[5]))):
            slots[:, has] = cols.valid(fields[3])
            slots[:, at], slots[:, at + 1] = ints(cols(fields[0])), ints(cols(fields[1]))
            slots[:, at + 2] = quality(cols(fields[2]))
            slots[:, at + 3 if has == _HAS_END else _REMOTE_LTS] = ints(cols(fields[3]))
        slots[:, _MERGED] = cols.valid(L.STAMPS_RECV_LTS)
        slots[:, _MERGED + 1] = ints(cols(L.STAMPS_RECV_LTS))
        sketch = np.zeros((n, 32), dtype=np.uint8)
        written = cols.valid(L.STAMPS_SKETCH)
        slots[:, _HAS_SKETCH] = written
        if written.any():
            array = cols(L.STAMPS_SKETCH).combine_chunks()  # (fixed-size binary: its values' octets in one buffer)
            data = array.buffers()[1]
            octets = np.frombuffer(data, dtype=np.uint8)[array.offset * 32:(array.offset + n) * 32].reshape(n, 32)
            sketch[written] = octets[written]
        offsets = np.zeros(n + 1, dtype=np.int64)
        sends = np.zeros((0, 4), dtype=np.int64)
        if cols.valid(L.STAMPS_SENDS).any():
            column = cols(L.STAMPS_SENDS).combine_chunks()
            lengths = ints(pc.list_value_length(column))
            offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
            flat = pc.list_flatten(column)  # (a null list's values are not among them: its length counts 0)
            sends = np.zeros((len(flat), 4), dtype=np.int64)
            for k, name in enumerate(("lts", "ptp_ns", "uncertainty_ns")):
                sends[:, k] = ints(pc.struct_field(flat, name))
        return StampsBlock(slots, sketch, sends, offsets)

    def fill(self, rows: np.ndarray, span_id: list[str], parent: list[str], degraded: list[bool],
             out: list[Any]) -> None:
        """values._from_stamps of each row's decoded stamps (a SpanStamps, as parquet_records builds it)."""
        if not len(rows):
            return
        cols, index = self.cols, pa.array(rows)

        def take(name: str) -> list[Any]:
            return cols(name).take(index).to_pylist()  # type: ignore[no-any-return]

        def shaped(key: str) -> list[Any]:
            return self.shaped.column(ATTRIBUTE_PREFIX + key).take(index).to_pylist()  # type: ignore[no-any-return]

        ptp, lts = take(L.STAMPS_START[0]), take(L.STAMPS_START[3])
        unc, qual = shaped(S.UNCERTAINTY_NS), shaped(S.CLK_QUALITY)
        eptp, eunc, equal, elts = (take(c) for c in L.STAMPS_END)
        rptp, runc, rqual, rlts = (take(c) for c in (*L.STAMPS_REMOTE[:3], L.STAMPS_REMOTE[5]))
        recv, sketch, sends = take(L.STAMPS_RECV_LTS), take(L.STAMPS_SKETCH), take(L.STAMPS_SENDS)
        sat = UNCERTAINTY_SATURATED
        at = rows.tolist()
        own = own_sketches(span_id, parent, at, np.array([x is None for x in sketch], dtype=bool))
        for k, i in enumerate(at):
            d = degraded[i]
            start = Stamp(ptp[k], sat if unc[k] is None else unc[k], qual[k] or "UNKNOWN", lts[k], d)
            end = None if elts[k] is None else Stamp(eptp[k], eunc[k], equal[k], elts[k], d)
            remote = None if rlts[k] is None else Stamp(rptp[k], runc[k], rqual[k], rlts[k])
            sent = tuple((x["lts"], x["ptp_ns"], x["uncertainty_ns"]) for x in sends[k]) if sends[k] else ()
            written = sketch[k]
            mask = own[k] if written is None else int.from_bytes(written, "big")
            out[i] = (start, end, remote, None if remote is None else recv[k], sent, mask, None)


class ParquetRows:
    """One row group's rows, read stretch by stretch as ``RowGroup.records`` reads them (module doc); with
    ``plain``, a stretch of plain rows (plain.py) comes as a PlainRun, not as records."""

    def __init__(self, table: pa.Table, path: str, first: int = 0) -> None:
        self.table = table
        self.path = path
        self.first = first
        self._made: dict[tuple[int, int] | None, Records] = {}
        self._lane: dict[tuple[int, int] | None, tuple[Records, PlainRows | None, np.ndarray]] = {}
        self._whole: RowGroup | None = None
        self.plain = _conforms(table)
        if not self.plain:
            return
        cols = _Columns(table)
        reference = cols.valid(L.OTLP_JSON)
        for name in (L.TRACE_ID, L.SPAN_ID, L.START, L.END, L.KIND):
            reference |= ~cols.valid(name)
        for name in (L.START, L.END):
            reference |= _flag(pc.less(cols(name), scalar(0)))
        reference |= _flag(pc.greater(cols(L.KIND), scalar(5))) | _flag(pc.less(cols(L.KIND), scalar(0)))
        reference |= _flag(pc.equal(cols(L.STATUS_CODE), scalar(_STATUS_ERROR)))
        reference |= _map_known(cols, L.ATTRIBUTES, frozenset(SPAN.rules))
        reference |= _map_known(cols, L.RESOURCE_ATTRIBUTES, frozenset(RESOURCE.rules))
        shaped = self._shaped = _decode_shaped(cols, first, reference)
        self._stamps = _TableStamps(cols, shaped)
        marked = may_break(shaped) | torch_refusals(shaped)
        self.clean: np.ndarray = ~marked
        self._runs: int | None = None

    def _records(self, shard: tuple[int, int] | None) -> Records:
        made = self._made.get(shard)
        if made is None:
            made = self._made[shard] = Records(self._shaped, self.clean, shard, self._stamps)
        return made

    def _plain(self, shard: tuple[int, int] | None) -> tuple[Records, PlainRows | None, np.ndarray]:
        """Records whose plain rows' readings are left to the lane, the rows as arrays, and which rows are plain."""
        got = self._lane.get(shard)
        if got is None:
            stamps = self._stamps
            plain = plain_candidates(self._shaped, self.clean & stamps.exact())
            made = Records(self._shaped, self.clean, shard, stamps, None, plain)
            lane = PlainRows(made, stamps.block(), plain) if plain.any() else None
            if lane is not None and not lane.usable():
                made, lane = self._records(shard), None
            got = self._lane[shard] = (made, lane, plain if lane is not None else np.zeros(len(plain), bool))
        return got

    def records(self, lo: int, hi: int, pos: int, shard: tuple[int, int] | None, plain: bool = False) -> RowsResult:
        """The records of rows lo..hi-1, the first at input position ``pos`` (``RowGroup.records``); with ``plain``,
        the stretches of plain rows as PlainRuns, all of it in ``batches``."""
        if not self.plain:
            return self._whole_group().records(lo, hi, pos, shard)
        # (clean is final once Records has taken the stamps' refusals)
        made, lane, taken = self._plain(shard) if plain else (self._records(shard), None, None)
        out = RowsResult([], batches=[] if plain else None)
        if hi <= lo:
            return out
        # each row's way: 0 the reference's, 1 records from the columns, 2 the plain lane; stretches of one way
        way = self.clean[lo:hi].astype(np.int8)
        if lane is not None and taken is not None:
            way[taken[lo:hi]] = 2
        cuts = [0, *(np.flatnonzero(np.diff(way)) + 1).tolist(), hi - lo]
        batches: list[Any] = []
        for a, b in pairwise(cuts):
            i, j, kind = lo + a, lo + b, int(way[a])
            if kind == 2:
                assert lane is not None
                batches.append(plain_run(lane, i, j - i, pos + i - lo, shard))
            elif kind == 1:
                records = made.stretch(i, j - i, pos + i - lo)
                out.records.extend(records)
                batches.append(records)
            else:
                before = len(out.records)
                self._by_reference(i, j, pos + i - lo, i - lo, shard, out)
                batches.append(out.records[before:])
        if plain:
            out.batches = batches
        return out

    def _whole_group(self) -> RowGroup:
        """RowGroup over every row of the group, made once."""
        if self._whole is None:
            self._whole = RowGroup(self.table, self.path, self.first)
        return self._whole

    def _by_reference(self, lo: int, hi: int, pos: int, index: int, shard: tuple[int, int] | None,
                      out: RowsResult) -> None:
        """Rows lo..hi-1 read by RowGroup; refusals named by their index in the stretch. RowGroup reads every column
        of the rows it is made of: over just these rows where the group has a few such runs, over the whole group
        (made once) where it has many (ERROR spans scattered through a trace)."""
        if self._runs is None:  # (once Records has taken the stamps' refusals: clean is final)
            clean = self.clean
            self._runs = int(np.count_nonzero(~clean & np.concatenate(([True], clean[:-1]))))
        if self._whole is None and self._runs <= max(_FEW_RUNS, self.table.num_rows // _ROWS_A_RUN):
            got = RowGroup(self.table.slice(lo, hi - lo), self.path, self.first + lo).records(0, hi - lo, pos, shard)
        else:
            got = self._whole_group().records(lo, hi, pos, shard)
        out.records.extend(got.records)
        if got.bad:
            if out.bad is None:
                out.bad = []
            out.bad.extend((index + k, path, line, reason) for k, path, line, reason in got.bad)
        if got.loss:
            if out.loss is None:
                out.loss = []
            out.loss.extend(got.loss)
