"""Span table rows -> span records, by the analysis's own rules (spec/parquet.md §5).

A row is handed to the rules as the OTLP values it came from: each typed column's value becomes the
AnyValue it was (``{"intValue": 5}``), each map entry the analysis knows is decoded from its JSON text, the
decoded stamps are written back as their one canonical text (stamptext.encode, which stamptext.decode
reads back to the same values), and the Resource's values likewise. So ``SPAN.read_otlp`` /
``build_record`` (values.py) build the record, or refuse the span for the reason, that they would from
the original JSON; a row that kept its span as written (``otlp_json``) goes through the JSON decoder
itself (otlp.decode_line). One difference: a refused span is named by its span id in hex, where the JSON
reader quotes the id as written (base64 where the file used it).

Columns are turned into Python lists once per row group (``RowGroup``); the rows are then read in order,
in as many stretches as the bad-line notes between them ask for.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from .. import semconv as S
from ..stamptext import MAX_SENDS, Reading, Received, SpanStamps
from ..wire.layout import LTS_MAX, TENANT_MAX, UNCERTAINTY_SATURATED
from . import parquet_layout as L
from .events import SpanRecord
from .otlp import STATUS_ERROR, AnyValue, ArrayValue, KeyValue, decode_line, error_text
from .parquet_stamps import QUALITY_NAMES, SOURCE_NAMES
from .schema import BOOL, HEX, INT, INT_ARRAY, STRING
from .values import READ, RESOURCE, SPAN, AttributeRuleError, build_record, span_kind

__all__ = ["COLUMNS_READ", "RowGroup", "RowsResult"]

_ANY = msgspec.json.Decoder(AnyValue, strict=False)
_QUALITY = {name: i for i, name in enumerate(QUALITY_NAMES)}
_UNKNOWN = _QUALITY["UNKNOWN"]
#: where SPAN.read_otlp puts the stamps text among the common values it returns
_STAMPS_SLOT = [name for name in READ if name not in SPAN.rare].index(S.STAMPS)
_SOURCE = {name: i for i, name in enumerate(SOURCE_NAMES)}
#: the Resource columns the analysis reads (values.RESOURCE_RULES), in RESOURCE.read order or not: by name
_RESOURCE_READ = tuple(c for c in L.RESOURCE_COLUMNS if c.attribute in RESOURCE.rules)
_SPAN_READ = tuple(c for c in L.SPAN_ATTRIBUTE_COLUMNS if c.attribute in SPAN.rules)
_STAMPS = (L.STAMPS_SOURCE, *L.STAMPS_START, *L.STAMPS_END, *L.STAMPS_REMOTE, L.STAMPS_RECV_LTS, L.STAMPS_SKETCH,
           L.STAMPS_SENDS)
#: a column with more distinct values than this among its first few thousand is not worth a cache of them
_DISTINCT = 256
#: the columns the analysis needs (a reader asks the file for these only)
COLUMNS_READ = (L.TRACE_ID, L.SPAN_ID, L.PARENT_SPAN_ID, L.NAME, L.KIND, L.START, L.END, L.STATUS_CODE,
                L.STATUS_MESSAGE, L.EVENTS, L.ATTRIBUTES, L.RESOURCE_ATTRIBUTES, L.OTLP_JSON, L.INPUT_PATH,
                L.INPUT_LINE, *_STAMPS, *(c.name for c in _SPAN_READ), *(c.name for c in _RESOURCE_READ))


class RowsResult(msgspec.Struct, gc=False):
    """What a stretch of rows gave: the records of the owned traces, the refused spans (index of the row in
    the stretch, path, line, reason) and exporter loss records (writer id, count)."""

    records: list[SpanRecord]
    bad: list[tuple[int, str, int, str]] | None = None
    loss: list[tuple[str, int]] | None = None
    #: the stretch in input order as the analyzer takes it: lists of records and plain runs (columnar/parquet.py,
    #: asked for plain rows); None: ``records`` is all of it
    batches: list[Any] | None = None


def _any(kind: str, value: Any) -> AnyValue:
    """The AnyValue a typed column's value was."""
    if kind == INT:
        return AnyValue(intValue=value)
    if kind == STRING:
        return AnyValue(stringValue=value)
    if kind == BOOL:
        return AnyValue(boolValue=value)
    if kind == HEX:
        return AnyValue(stringValue=value.hex())
    assert kind == INT_ARRAY
    return AnyValue(arrayValue=ArrayValue([AnyValue(intValue=v) for v in value]))


def _values(table: pa.Table, name: str, hex_ids: bool = False) -> list[Any] | None:
    """A column as Python values, None when the file lacks it or it is all null; ``hex_ids``: a fixed-size
    binary column as hex strings. The common shapes are read from the buffers (to_pylist makes an object per
    value through the generic path: a few times slower)."""
    if name not in table.column_names:
        return None
    column = table.column(name)
    if column.null_count == len(column):
        return None
    array = column.combine_chunks()
    kind = array.type
    if pa.types.is_fixed_size_binary(kind):
        size = kind.byte_width
        data = array.buffers()[1]
        assert data is not None
        raw = data.to_pybytes()[array.offset * size:(array.offset + len(array)) * size]
        if hex_ids:
            text = raw.hex()
            values: list[Any] = [text[2 * size * i:2 * size * (i + 1)] for i in range(len(array))]
        else:
            values = [raw[size * i:size * (i + 1)] for i in range(len(array))]
        if array.null_count:
            for i in pc.indices_nonzero(array.is_null()).to_pylist():
                values[i] = None
        return values
    if pa.types.is_integer(kind) and not array.null_count:
        return array.to_numpy().tolist()  # type: ignore[no-any-return]
    return array.to_pylist()  # type: ignore[no-any-return]


def _map_entries(table: pa.Table, name: str, keys: frozenset[str]) -> dict[int, list[KeyValue]]:
    """Row -> the entries of map column ``name`` whose key is in ``keys``, decoded (rows with none left out)."""
    if name not in table.column_names:
        return {}
    column = table.column(name).combine_chunks()
    if column.null_count == len(column) or not len(column.keys):
        return {}
    hits = pc.indices_nonzero(pc.is_in(column.keys, value_set=pa.array(sorted(keys), pa.string()))).to_pylist()
    if not hits:
        return {}
    offsets = column.offsets.to_pylist()
    flat_keys, flat_values = column.keys, column.items
    out: dict[int, list[KeyValue]] = {}
    row = 0
    for j in hits:
        while offsets[row + 1] <= j:
            row += 1
        key, text = flat_keys[j].as_py(), flat_values[j].as_py()
        try:
            value = _ANY.decode(text) if text is not None else AnyValue()
        except msgspec.DecodeError:
            value = AnyValue()  # not an AnyValue's JSON (or none): read as no value of any kind (the rule refuses it)
        out.setdefault(row, []).append(KeyValue(key, value))
    return out


class RowGroup:
    """One row group's columns as Python values, ready to be read stretch by stretch (``records``); ``first``:
    its first row's index in the file (a row an exporter wrote is named by its number there)."""

    def __init__(self, table: pa.Table, path: str, first: int = 0) -> None:
        self.path = path
        self.first = first
        self.n = n = table.num_rows
        none = [None] * n
        get = _values
        self.trace_id = get(table, L.TRACE_ID, True) or none
        self.span_id = get(table, L.SPAN_ID, True) or none
        self.parent = get(table, L.PARENT_SPAN_ID, True) or none
        self.name = get(table, L.NAME) or none
        self.kind = get(table, L.KIND) or none
        self.start = get(table, L.START) or none
        self.end = get(table, L.END) or none
        self.status = get(table, L.STATUS_CODE) or none
        self.message = get(table, L.STATUS_MESSAGE) or none
        self.events = get(table, L.EVENTS) or none
        self.otlp_json = get(table, L.OTLP_JSON)
        self.input_path = get(table, L.INPUT_PATH) or none
        self.input_line = get(table, L.INPUT_LINE) or none
        self.attributes = self._attribute_rows(table)
        self.stamps = self._stamps(table)
        self.resources = self._resources(table)

    def _attribute_rows(self, table: pa.Table) -> list[list[KeyValue]]:
        """Each row's attributes the analysis knows, as the KeyValues they were."""
        rows: list[list[KeyValue]] = [[] for _ in range(self.n)]
        for column in _SPAN_READ:
            values = _values(table, column.name)
            if values is None:
                continue
            kind, key = column.kind, column.attribute
            cells = [(row, v) for row, v in zip(rows, values, strict=True) if v is not None]
            if kind == INT_ARRAY or (len(cells) > _DISTINCT * 4 and len(set(values[:_DISTINCT * 4])) > _DISTINCT):
                for row, v in cells:  # values that seldom repeat (times, Lamport values): made one by one
                    row.append(KeyValue(key, _any(kind, v)))
                continue
            known: dict[Any, KeyValue] = {}  # one KeyValue per distinct value (they are frozen)
            for row, v in cells:
                kv = known.get(v)
                if kv is None:
                    kv = known[v] = KeyValue(key, _any(kind, v))
                row.append(kv)
        for i, entries in _map_entries(table, L.ATTRIBUTES, frozenset(SPAN.rules)).items():
            rows[i].extend(entries)
        return rows

    def _stamps(self, table: pa.Table) -> list[tuple[Any, ...] | None] | None:
        """Each row's decoded stamps columns (in _STAMPS order), None for a row without (no ``stamps.start.lts``)."""
        lts = _values(table, L.STAMPS_START[3])
        if lts is None:
            return None
        cols = [_values(table, name) or [None] * self.n for name in _STAMPS]
        return [row if lts[i] is not None else None for i, row in enumerate(zip(*cols, strict=True))]

    def _resources(self, table: pa.Table) -> list[tuple[Any, ...] | str]:
        """Each row's Resource as the analysis reads it (RESOURCE.read_otlp), or why it is refused; rows of one
        Resource share one answer. ``resource_kvs`` keeps each row's KeyValues (for rows kept as written)."""
        present = [(c, v) for c, v in ((c, _values(table, c.name)) for c in _RESOURCE_READ) if v is not None]
        misfits = _map_entries(table, L.RESOURCE_ATTRIBUTES, frozenset(RESOURCE.rules))
        keys = zip(*(v for _, v in present), strict=True) if present else iter([()] * self.n)
        out: list[tuple[Any, ...] | str] = []
        self.resource_kvs: list[list[KeyValue]] = []
        known: dict[tuple[Any, ...], tuple[tuple[Any, ...] | str, list[KeyValue]]] = {}
        for i, key in enumerate(keys):
            extra = misfits.get(i)
            answer = known.get(key) if extra is None else None
            if answer is None:
                kvs = [KeyValue(c.attribute, _any(c.kind, v)) for (c, _), v in zip(present, key, strict=True)
                       if v is not None] + (extra or [])
                answer = (_read_resource(kvs), kvs)
                if extra is None:
                    known[key] = answer
            out.append(answer[0])
            self.resource_kvs.append(answer[1])
        return out

    def records(self, lo: int, hi: int, pos: int, shard: tuple[int, int] | None) -> RowsResult:
        """The records of rows lo..hi-1, the first at input position ``pos``; ``shard=(k, n)`` keeps only the
        traces partition k owns (and their refusals), as otlp.decode_line does."""
        out = RowsResult([])
        records = out.records
        read = SPAN.read_otlp
        trace_id, span_id, parent, name = self.trace_id, self.span_id, self.parent, self.name
        kind, start, end, status, attributes = self.kind, self.start, self.end, self.status, self.attributes
        resources, fallback, stamps = self.resources, self.otlp_json, self.stamps
        for i in range(lo, hi):
            if fallback is not None and fallback[i] is not None:
                self._as_written(i, i - lo, pos + i - lo, shard, out)
                continue
            tid = trace_id[i]
            sid = span_id[i] or "?"
            if tid is None:
                if shard is None or shard[0] == 0:
                    self._refuse(out, i, i - lo, f"span {sid}: attribute traceId must be 16 bytes, got None")
                continue
            if shard is not None and int(tid[-8:], 16) % shard[1] != shard[0]:
                continue
            resource = resources[i]
            if isinstance(resource, str):
                self._refuse(out, i, i - lo, f"span {sid}: {resource}")
                continue
            try:
                k, t0, t1 = kind[i], start[i], end[i]
                if k is None or not 0 <= k <= 5:
                    k = span_kind(k if k is not None else "")
                if t0 is None or t1 is None or t0 < 0 or t1 < 0:
                    raise AttributeRuleError("startTimeUnixNano" if t0 is None or t0 < 0 else "endTimeUnixNano",
                                             f"nanoseconds 0..{2**64 - 1}", t0 if t0 is None or t0 < 0 else t1)
                if span_id[i] is None:
                    raise AttributeRuleError("spanId", "8 bytes", None)
                host, rank, clock, job, restart, domain = resource
                line = self.input_line[i]
                slots = read(attributes[i])
                decoded = None if stamps is None else stamps[i]
                if decoded is not None:
                    slots[_STAMPS_SLOT] = span_stamps(decoded, slots[1], slots[2])
                record = build_record(tid, sid, parent[i] or "", name[i] or "", k, slots, t0, t1, host, rank,
                                      self.first + i + 1 if line is None else line, pos + i - lo, clock, job,
                                      restart, domain)
                if status[i] in STATUS_ERROR:
                    events = self.events[i]
                    record.error = error_text(self.message[i] or "",
                                              msgspec.Raw(events.encode()) if events else None)
                records.append(record)
            except AttributeRuleError as err:
                self._refuse(out, i, i - lo, f"span {sid}: {err}")
        return out

    def _where(self, i: int) -> tuple[str, int]:
        """The input path and line of row i: where convert read it, else this file and the row's number."""
        path, line = self.input_path[i], self.input_line[i]
        return (self.path if path is None else path), (self.first + i + 1 if line is None else line)

    def _refuse(self, out: RowsResult, i: int, index: int, reason: str) -> None:
        if out.bad is None:
            out.bad = []
        out.bad.append((index, *self._where(i), reason))

    def _as_written(self, i: int, index: int, pos: int, shard: tuple[int, int] | None, out: RowsResult) -> None:
        """A span kept as written: decoded by the JSON reader itself, in a line of its own with its Resource."""
        assert self.otlp_json is not None
        path, line = self._where(i)
        data = b'{"resourceSpans":[{"resource":{"attributes":' + msgspec.json.encode(self.resource_kvs[i]) + \
            b'},"scopeSpans":[{"spans":[' + self.otlp_json[i].encode() + b"]}]}]}"
        result = decode_line(data, line, pos, shard)
        out.records.extend(result.records)
        for _, reason in result.bad or ():
            if out.bad is None:
                out.bad = []
            out.bad.append((index, path, line, reason))
        if result.loss:
            out.loss = [*(out.loss or ()), *result.loss]


def _read_resource(kvs: list[KeyValue]) -> tuple[Any, ...] | str:
    """(host, rank, clock, job, restart, domain) of a Resource, as otlp._resource reads them, or why it is refused."""
    from .clockdomain import domain_of

    if not kvs:
        return (None, None, None, None, None, None)
    try:
        host, host_name, rank, _dropped, _writer, clock, job, restart, *domain = RESOURCE.read_otlp(kvs)
    except AttributeRuleError as err:
        return f"resource: {err}"
    return (host or host_name, rank, clock, job, restart, domain_of(*domain))


def _check(name: str, value: Any, hi: int) -> int:
    if value.__class__ is not int or not 0 <= value <= hi:
        raise AttributeRuleError(S.STAMPS, f"decoded, with {name} an int 0..{hi}", value)
    return int(value)


def _name(name: str, value: Any, names: dict[str, int]) -> int:
    number = names.get(value) if isinstance(value, str) else None
    if number is None:
        raise AttributeRuleError(S.STAMPS, f"decoded, with {name} one of {'/'.join(names)}", value)
    return number


def span_stamps(row: tuple[Any, ...], unc: int | None, qual: str | None) -> SpanStamps:
    """A row's decoded stamps as stamptext.decode would give them from the text, every value checked as the text
    rules check it (semantic-conventions §1.4); the start's bound and quality are the span's plain attributes
    (``unc``, ``qual``: the values the rules read, None when absent), as in the text."""
    (source, ptp, _unc, _qual, lts, eptp, eunc, equal, elts, rptp, runc, rqual, rsource, rtenant, rlts, recv, sketch,
     sends) = row
    start = Reading(_check("stamps.start.ptp_ns", ptp, LTS_MAX), UNCERTAINTY_SATURATED if unc is None else unc,
                    _UNKNOWN if qual is None else _QUALITY[qual], _check("stamps.start.lts", lts, LTS_MAX))
    end = None if elts is None else Reading(
        _check("stamps.end.ptp_ns", eptp, LTS_MAX), _check("stamps.end.uncertainty_ns", eunc, UNCERTAINTY_SATURATED),
        _name("stamps.end.clk_quality", equal, _QUALITY), _check("stamps.end.lts", elts, LTS_MAX))
    remote = None if rlts is None else Received(
        _check("stamps.remote.ptp_ns", rptp, LTS_MAX),
        _check("stamps.remote.uncertainty_ns", runc, UNCERTAINTY_SATURATED),
        _name("stamps.remote.clk_quality", rqual, _QUALITY), _name("stamps.remote.ts_source", rsource, _SOURCE),
        _check("stamps.remote.tenant_id", rtenant, TENANT_MAX), _check("stamps.remote.lts", rlts, LTS_MAX),
        None if recv is None else _check("stamps.recv.lts", recv, LTS_MAX))
    if sketch is not None and len(sketch) != 32:
        raise AttributeRuleError(S.STAMPS, "decoded, with stamps.sketch 32 octets", sketch)
    sent: tuple[Reading, ...] = ()
    if sends:
        if len(sends) > MAX_SENDS:
            raise AttributeRuleError(S.STAMPS, f"decoded, with at most {MAX_SENDS:,} sends", len(sends))
        if any(x is None for x in sends):
            raise AttributeRuleError(S.STAMPS, "decoded, with every send a reading", None)
        sent = tuple(Reading(_check("stamps.sends.ptp_ns", x["ptp_ns"], LTS_MAX),
                             _check("stamps.sends.uncertainty_ns", x["uncertainty_ns"], UNCERTAINTY_SATURATED),
                             _name("stamps.sends.clk_quality", x["clk_quality"], _QUALITY),
                             _check("stamps.sends.lts", x["lts"], LTS_MAX)) for x in sends)
    return SpanStamps(start, _name("stamps.ts_source", source, _SOURCE), end, remote, sketch, sent)
