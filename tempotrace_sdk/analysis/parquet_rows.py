"""OTLP JSON trace lines -> span table rows: one row per span object, every value in its typed column or, as
written, in the catch-all map (spec/parquet.md §2, §5).

A line is read by the analysis's own decoder first (otlp.py: ``parse`` and its span decoder), so a line it
calls bad is bad here, for the same reason, and what each row holds is what the analysis reads. A second
msgspec decoder of the same bytes keeps what the analysis skips (the values as written, trace state,
flags, links, the scope). A value goes to its typed column when it is of the column's kind (the
``tempotrace.*`` rules' kinds, values.py); any other value, and every attribute no column names, goes to
the map as its OTLP JSON AnyValue text. The ``tempotrace.stamps`` text is decoded (stamptext.decode, with
the bases the analysis gives it) into the ``stamps.*`` columns; a text that does not decode stays in the
map as written. A span object the typed columns cannot hold as written (one the analysis calls malformed,
ids that are not 16 / 8 bytes, times beyond int64, a status code of no known name) keeps its OTLP JSON in
``otlp_json`` and is decoded again by the analysis's decoder when read (parquet_read.py).

``RowBlock`` gathers rows column by column in Python lists; parquet_schema.py turns a block into Arrow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from .. import semconv as S
from . import otlp
from . import parquet_layout as L
from .parquet_stamps import QUALITY_NAMES, StampsColumns
from .schema import BOOL, HEX, INT, INT_ARRAY, STRING
from .values import RESOURCE, AttributeRuleError, norm_id, span_kind

__all__ = ["STATUS_NAMES", "LineFacts", "RowBlock"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: OTLP StatusCode by its proto enum name (the protobuf JSON mapping may write names)
STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_QUALITY_NUMBER = {name: i for i, name in enumerate(QUALITY_NAMES)}


class _RawKeyValue(msgspec.Struct, frozen=True, gc=False):
    key: str
    value: msgspec.Raw = msgspec.Raw()


class _Resource(msgspec.Struct, frozen=True, gc=False):
    attributes: list[_RawKeyValue] = []


class _ScopeSpans(msgspec.Struct, frozen=True, gc=False):
    scope: msgspec.Raw = msgspec.Raw()
    spans: list[msgspec.Raw] = []


class _ResourceSpans(msgspec.Struct, frozen=True, gc=False):
    resource: _Resource = _Resource()
    scopeSpans: list[_ScopeSpans] = []


class _Traces(msgspec.Struct, frozen=True, gc=False):
    resourceSpans: list[_ResourceSpans]


class _Scope(msgspec.Struct, frozen=True, gc=False):
    name: str | None = None
    version: str | None = None


class _Extras(msgspec.Struct, frozen=True, gc=False):
    """What the analysis's span decoder skips: the values as written, and the fields it never reads."""

    attributes: list[_RawKeyValue] = []
    traceState: str | None = None
    flags: int | None = None
    droppedAttributesCount: int | None = None
    droppedEventsCount: int | None = None
    links: msgspec.Raw = msgspec.Raw()
    droppedLinksCount: int | None = None


# strict=False as otlp.py: 64-bit integers as strings or numbers.
_TRACES = msgspec.json.Decoder(_Traces, strict=False)
_EXTRAS = msgspec.json.Decoder(_Extras, strict=False)
_SCOPE = msgspec.json.Decoder(_Scope, strict=False)
_SPAN = msgspec.json.Decoder(otlp.Span, strict=False)  # the analysis's span shape (otlp.py)

_SPAN_TYPED = {c.attribute: c for c in L.SPAN_ATTRIBUTE_COLUMNS}
_RESOURCE_TYPED = {c.attribute: c for c in L.RESOURCE_COLUMNS}
_MISFIT = object()


class _NotUTF8(Exception):
    """A span's decode met a string that is not UTF-8 (add_line turns it into the line's BadLine)."""


class LineFacts(msgspec.Struct, gc=False):
    """What one line held besides its rows: its span objects, and its exporter loss records (writer, count)."""

    spans: int = 0
    loss: list[tuple[str, int]] | None = None


def _text(raw: msgspec.Raw) -> str:
    # Bytes not UTF-8 can lie only where the analysis never reads (its decoder refuses the line for any other:
    # _span): there, U+FFFD for them reads the same.
    return bytes(raw).decode("utf-8", "replace")


def _only(av: otlp.AnyValue) -> str | None:
    """The one kind an AnyValue holds among those the analysis reads, None when it holds none or several."""
    kinds = [k for k, v in (("s", av.stringValue), ("i", av.intValue), ("a", av.arrayValue), ("b", av.boolValue))
             if v is not None]
    return kinds[0] if len(kinds) == 1 else None


def _int(column: L.Column, av: otlp.AnyValue) -> Any:
    """typed_value for an INT column, its one case (the hot one: most ``tempotrace.*`` values are ints)."""
    i = av.intValue
    if i is not None and av.stringValue is None and av.arrayValue is None and av.boolValue is None \
            and INT64_MIN <= i <= INT64_MAX:
        return i
    return _MISFIT


def _string(column: L.Column, av: otlp.AnyValue) -> Any:
    """typed_value for a STRING column, its one case."""
    s = av.stringValue
    if s is not None and av.intValue is None and av.arrayValue is None and av.boolValue is None:
        return s
    return _MISFIT


def converter(column: L.Column) -> Callable[[L.Column, otlp.AnyValue], Any]:
    """The function that gives ``typed_value(column, av)``: the kind's own for the common kinds."""
    return _int if column.kind == INT else _string if column.kind == STRING else typed_value


def typed_value(column: L.Column, av: otlp.AnyValue) -> Any:
    """The value ``av`` puts in ``column`` (an int, str, bool, bytes or list of ints), or _MISFIT when it is not
    of the column's kind as written (then it goes to the map, and the analysis reads it from there)."""
    kind = column.kind
    s, i, a, b = av.stringValue, av.intValue, av.arrayValue, av.boolValue
    if kind == INT:
        if i is not None and s is None and a is None and b is None and INT64_MIN <= i <= INT64_MAX:
            return i
    elif kind == STRING:
        if s is not None and i is None and a is None and b is None:
            return s
    elif kind == BOOL:
        if b is not None and s is None and i is None and a is None:
            return b
    elif kind == HEX:
        if s is not None and i is None and a is None and b is None and len(s) == 2 * column.size:
            try:
                data = bytes.fromhex(s)
            except ValueError:
                return _MISFIT
            if len(data) == column.size:  # whitespace would have made it shorter
                return data
    elif kind == INT_ARRAY and a is not None and s is None and i is None and b is None:
        if all(_only(e) == "i" and INT64_MIN <= (e.intValue or 0) <= INT64_MAX for e in a.values):
            return [e.intValue for e in a.values]
    return _MISFIT


#: each typed span attribute's column and the function that puts a value in it
_SPAN_CONVERT = {c.attribute: (c, converter(c)) for c in L.SPAN_ATTRIBUTE_COLUMNS}


def _latest(attrs: list[otlp.KeyValue], raws: list[_RawKeyValue]) -> dict[str, tuple[otlp.AnyValue, msgspec.Raw]]:
    """Each key's value as the analysis reads it and as written; the last of a repeated key wins, as in the
    analysis (schema.py)."""
    return {kv.key: (kv.value, raw.value) for kv, raw in zip(attrs, raws, strict=True)}


def _plain(av: otlp.AnyValue | None, number: bool) -> int | None:
    """A span's plain uncertainty / quality as the analysis hands them to stamptext.decode (values.py): the
    value its rule reads, -1 (out of every range: decode refuses) when that is not one."""
    if av is None:
        return None
    if number:
        return av.intValue if av.intValue is not None else -1
    return _QUALITY_NUMBER.get(av.stringValue or "", -1)


class RowBlock:
    """Rows gathered as Python values: ``spans`` holds each row's span columns (those it has a value in);
    ``runs`` the columns constant over a run of rows (a resourceSpans' Resource, a scope, the input line)."""

    def __init__(self) -> None:
        self.stamps = StampsColumns()
        self.spans: list[dict[str, Any]] = []
        #: (first row, end row, {column: value}) of each run, in order
        self.runs: list[tuple[int, int, dict[str, Any]]] = []

    @property
    def rows(self) -> int:
        return len(self.spans)

    def add_line(self, data: bytes | memoryview, path: str | None = None, line: int | None = None) -> LineFacts:
        """Append the rows of one OTLP JSON line (``path``/``line``: where it came from, for ``input.*``).
        Raises otlp.BadLine (and appends nothing) for a line the analysis would call bad."""
        rows, runs = len(self.spans), len(self.runs)
        try:
            return self._add_line(data, path, line)
        except _NotUTF8:  # met after rows of the line were appended: they go, as the analysis drops the line
            del self.spans[rows:], self.runs[runs:]
            raise otlp.not_utf8(data) or otlp.BadLine("malformed OTLP: a span that is not JSON") from None

    def _add_line(self, data: bytes | memoryview, path: str | None, line: int | None) -> LineFacts:
        doc = otlp.parse(data)
        mine = _TRACES.decode(data)  # the analysis's decoder took it: this more lenient one does too
        facts = LineFacts()
        where: dict[str, Any] = {}
        if path is not None:
            where = {L.INPUT_PATH: path, L.INPUT_LINE: line}
        for rs, rs_mine in zip(doc.resourceSpans, mine.resourceSpans, strict=True):
            resource = dict(where)
            resource.update(self._resource(rs.resource.attributes, rs_mine.resource.attributes, facts))
            for ss in rs_mine.scopeSpans:
                run = dict(resource)
                if len(ss.scope):
                    try:
                        scope = _SCOPE.decode(ss.scope)
                        run[L.SCOPE_NAME], run[L.SCOPE_VERSION] = scope.name, scope.version
                    except msgspec.DecodeError:  # the analysis never reads a scope: not carried, not refused
                        pass
                first = self.rows
                for raw in ss.spans:
                    facts.spans += 1
                    self.spans.append(self._span(raw))
                if self.rows > first:
                    self.runs.append((first, self.rows, run))
        return facts

    def _resource(self, attrs: list[otlp.KeyValue], raws: list[_RawKeyValue], facts: LineFacts) -> dict[str, Any]:
        """The Resource's columns; notes its loss record as the analysis does (otlp._resource)."""
        out: dict[str, Any] = {}
        other: list[tuple[str, str]] = []
        for key, (av, value_raw) in _latest(attrs, raws).items():
            column = _RESOURCE_TYPED.get(key)
            value = _MISFIT if column is None else typed_value(column, av)
            if value is _MISFIT:
                other.append((key, _text(value_raw)))
            else:
                assert column is not None
                out[column.name] = value
        if other:
            out[L.RESOURCE_ATTRIBUTES] = other
        if attrs:
            try:
                _host, _name, _rank, dropped, writer, *_ = RESOURCE.read_otlp(attrs)
            except AttributeRuleError:
                return out  # the analysis refuses the Resource, and notes no loss from it
            if writer is not None and dropped is not None:
                if facts.loss is None:
                    facts.loss = []
                facts.loss.append((writer, dropped))
        return out

    def _span(self, raw: msgspec.Raw) -> dict[str, Any]:
        """One span object's columns (``otlp_json`` alone when the typed columns cannot hold it)."""
        try:
            span = _SPAN.decode(raw)
        except (msgspec.ValidationError, RecursionError):
            return {L.OTLP_JSON: _text(raw)}
        except msgspec.DecodeError:  # a string not UTF-8: the analysis calls the line bad (otlp.decode_line)
            raise _NotUTF8 from None
        try:
            extras = _EXTRAS.decode(raw)
            row = _otlp_fields(span, extras)
        except (msgspec.DecodeError, RecursionError, AttributeRuleError, ValueError):
            return {L.OTLP_JSON: _text(raw)}
        latest = _latest(span.attributes, extras.attributes)
        other: list[tuple[str, str]] = []
        typed = _SPAN_CONVERT.get
        for key, (av, value_raw) in latest.items():
            if key == S.STAMPS:
                decoded = self._stamps(av, latest, span.startTimeUnixNano, span.endTimeUnixNano)
                if decoded is not None:
                    row.update(decoded)
                    continue
            else:
                found = typed(key)
                if found is not None:
                    value = found[1](found[0], av)
                    if value is not _MISFIT:
                        row[found[0].name] = value
                        continue
            other.append((key, _text(value_raw)))
        if other:
            row[L.ATTRIBUTES] = other
        return row

    def _stamps(self, av: otlp.AnyValue, latest: dict[str, tuple[otlp.AnyValue, msgspec.Raw]], start: int,
                end: int) -> dict[str, Any] | None:
        """The decoded columns of a stamps text, decoded with the bases the analysis gives it (values.py);
        None when it is no text or does not decode (it stays in the map as written)."""
        if _only(av) != "s" or av.stringValue is None:
            return None
        unc, qual = latest.get(S.UNCERTAINTY_NS), latest.get(S.CLK_QUALITY)
        return self.stamps.row(av.stringValue, start, end, _plain(None if unc is None else unc[0], True),
                               _plain(None if qual is None else qual[0], False))


def _otlp_fields(span: otlp.Span, extras: _Extras) -> dict[str, Any]:
    """The OTLP fields' columns; raises (AttributeRuleError, ValueError) where a typed column cannot hold one."""
    parent = span.parentSpanId
    kind = span.kind
    if not isinstance(kind, int) or not 0 <= kind <= 5:
        kind = span_kind(kind)
    start, end = span.startTimeUnixNano, span.endTimeUnixNano
    if not (0 <= start <= INT64_MAX and 0 <= end <= INT64_MAX):
        raise ValueError("a time beyond int64")
    row: dict[str, Any] = {
        L.TRACE_ID: _id(span.traceId, 16, "traceId"), L.SPAN_ID: _id(span.spanId, 8, "spanId"),
        L.NAME: span.name, L.KIND: kind, L.START: start, L.END: end,
    }
    if parent:
        row[L.PARENT_SPAN_ID] = _id(parent, 8, "parentSpanId")
    status = span.status
    if status is not None:
        code = status.code
        if isinstance(code, str):
            if code not in STATUS_NAMES:
                raise ValueError("a status code of no known name")
            code = STATUS_NAMES[code]
        row[L.STATUS_CODE], row[L.STATUS_MESSAGE] = _int64(code), status.message
    if len(span.events):
        row[L.EVENTS] = _text(span.events)
    if len(extras.links):
        row[L.LINKS] = _text(extras.links)
    for name, value in ((L.TRACE_STATE, extras.traceState), (L.FLAGS, extras.flags),
                        (L.DROPPED_ATTRIBUTES, extras.droppedAttributesCount),
                        (L.DROPPED_EVENTS, extras.droppedEventsCount), (L.DROPPED_LINKS, extras.droppedLinksCount)):
        if value is not None:
            row[name] = value if isinstance(value, str) else _int64(value)
    return row


def _id(raw: str, size: int, what: str) -> bytes:
    """An OTLP id's bytes: norm_id's, hex digits taken directly (what our exporter writes)."""
    if len(raw) == 2 * size:
        try:
            data = bytes.fromhex(raw)
        except ValueError:
            data = b""
        if len(data) == size:  # whitespace would have made it shorter: hex digits only, as norm_id reads them
            return data
    return bytes.fromhex(norm_id(raw, size, what))


def _int64(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError("an integer beyond int64")
    return value
