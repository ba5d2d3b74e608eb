"""OTLP JSON trace lines -> columns: one msgspec decode of each line's skeleton, its spans' OTLP fields read
from it in C, every span's attributes pivoted into columns in C (spec/analysis.md §5.6).

The skeleton is the OTLP fields the analysis reads, each span's ``attributes`` and each Resource's kept as
``msgspec.Raw`` (JSON msgspec has checked, not yet read). ``SpanFields`` holds the fields as the later stages
read them (native/columns/tt_skeleton.c, or ``python_fields`` where it is not built); ``pivot.py`` puts the
values of the keys the analysis's rule table knows (values.py) in their columns. No span becomes a Python
object beyond its skeleton. What this stage cannot take goes to the reference reader (otlp.py) whole: a line
whose skeleton does not decode (``SpanColumns.left_lines``), a span whose OTLP fields the reference must read
(``SpanFields.marked``), a span whose attributes neither pivot takes (the ``refused`` column).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import msgspec
import numpy as np
import pyarrow as pa

from ..otlp import STATUS_ERROR, Status
from ..schema import HEX, STRING
from ..values import FIXED64_MAX, RESOURCE_RULES, SPAN_RULES
from .pivot import KINDS, PythonPivot, make_pivot, pivot_arrays

try:
    from ... import _columns
except ImportError:  # not built: python_fields reads every span
    _columns = None

__all__ = [
    "ATTRIBUTE_COLUMNS", "ATTRIBUTE_PREFIX", "RESOURCE_COLUMNS", "RESOURCE_PREFIX", "SpanColumns", "SpanFields",
    "native_fields", "python_fields",
]

_EMPTY = msgspec.Raw(b"[]")


class _Span(msgspec.Struct, frozen=True, gc=False):
    traceId: str = ""
    spanId: str = ""
    parentSpanId: str = ""
    name: str = ""
    kind: int | str = 0
    startTimeUnixNano: int = 0
    endTimeUnixNano: int = 0
    attributes: msgspec.Raw = _EMPTY
    status: Status | None = None
    events: msgspec.Raw = msgspec.Raw()


class _ScopeSpans(msgspec.Struct, frozen=True, gc=False):
    spans: list[_Span] = []


class _Resource(msgspec.Struct, frozen=True, gc=False):
    attributes: msgspec.Raw = _EMPTY


class _ResourceSpans(msgspec.Struct, frozen=True, gc=False):
    resource: _Resource = _Resource()
    scopeSpans: list[_ScopeSpans] = []


class _Traces(msgspec.Struct, frozen=True, gc=False):
    resourceSpans: list[_ResourceSpans]


# strict=False as otlp.py: 64-bit integers as strings or numbers
_SKELETON = msgspec.json.Decoder(_Traces, strict=False)


def _kind(rule_kind: str) -> int:
    return KINDS[STRING if rule_kind == HEX else rule_kind]  # hex digits are text until the rules read them


#: (key, pivot kind) of every span attribute the rule table knows (the stamps text as a string), and of the
#: Resource's
ATTRIBUTE_COLUMNS = tuple((key, _kind(rule.kind)) for key, rule in SPAN_RULES.items())
RESOURCE_COLUMNS = tuple((key, _kind(rule.kind)) for key, rule in RESOURCE_RULES.items())
#: the table's column of a span attribute / a Resource attribute: the prefix and the key
ATTRIBUTE_PREFIX, RESOURCE_PREFIX = "attribute.", "resource."
_KINDS = [k for _, k in ATTRIBUTE_COLUMNS]
_RESOURCE_KINDS = [k for _, k in RESOURCE_COLUMNS]


def _times(values: list[int]) -> pa.Array:
    """OTLP fixed64 times as uint64; null for one outside 0..2^64-1 (its rule refuses it: rules.py marks it)."""
    if values and (min(values) < 0 or max(values) > FIXED64_MAX):
        values = [v if 0 <= v <= FIXED64_MAX else None for v in values]  # type: ignore[misc]
    return pa.array(values, type=pa.uint64())


class SpanFields(NamedTuple):
    """Each decoded span's OTLP fields as the later stages read them, one item a span."""

    trace_id: list[str]  #: in lower case (one object per distinct id); as written where ``marked``
    span_id: list[str]  #: in lower case; as written where ``marked``
    parent: list[str]  #: in lower case, "" for none; as written where ``marked``
    name: list[str]  #: one object per distinct name
    kind: list[Any]  #: as written (a number, or a name: ``marked``)
    start: list[int]  #: as written
    end: list[int]
    attributes: list[msgspec.Raw]
    marked: np.ndarray  #: the reference must read the span's OTLP fields: an id not hex of its size (base64 ones
    #: included: the reference reads them), a kind that is no number 0..2^31-1 (a name included), a time outside
    #: fixed64 (values.norm_id, span_kind, unix_nanos)
    errors: np.ndarray  #: its status is ERROR (the reference reads its error text from its events)
    start_times: pa.Array  #: uint64, null outside fixed64
    end_times: pa.Array


_ID32, _ID16 = re.compile("[0-9a-fA-F]{32}").fullmatch, re.compile("[0-9a-fA-F]{16}").fullmatch
_KIND_MAX = 2**31 - 1


def _fixed64(value: Any) -> bool:
    return type(value) is int and 0 <= value <= FIXED64_MAX


def python_fields(spans: list[_Span]) -> SpanFields:
    """SpanFields read in Python: every span msgspec decodes (native/columns/tt_skeleton.c answers the same)."""
    trace_id, span_id, parent, names, marked, errors = [], [], [], [], [], []
    shared: dict[str, str] = {}
    for sp in spans:
        t, s, p, kind = sp.traceId, sp.spanId, sp.parentSpanId, sp.kind
        ids_hex = (_ID32(t), _ID16(s), not p or _ID16(p))
        tid = t.lower() if ids_hex[0] else t
        trace_id.append(shared.setdefault(tid, tid))
        span_id.append(s.lower() if ids_hex[1] else s)
        parent.append(p.lower() if ids_hex[2] else p)
        names.append(shared.setdefault(sp.name, sp.name))
        kind_ok = type(kind) is int and 0 <= kind <= _KIND_MAX
        marked.append(not (all(ids_hex) and kind_ok and _fixed64(sp.startTimeUnixNano)
                           and _fixed64(sp.endTimeUnixNano)))
        status = sp.status
        errors.append(status is not None and status.code in STATUS_ERROR)
    start, end = [sp.startTimeUnixNano for sp in spans], [sp.endTimeUnixNano for sp in spans]
    return SpanFields(trace_id, span_id, parent, names, [sp.kind for sp in spans], start, end,
                      [sp.attributes for sp in spans], np.array(marked, dtype=bool), np.array(errors, dtype=bool),
                      _times(start), _times(end))


def native_fields(spans: list[_Span]) -> SpanFields | None:
    """SpanFields read in C (tt_skeleton.c); None where it is not built or declines (python_fields answers)."""
    if _columns is None:
        return None
    out = _columns.span_fields(spans, _Span, Status)
    if out is None:
        return None
    trace_id, span_id, parent, names, kinds, start, end, attributes, flags, times = out
    n = len(spans)
    bits = np.frombuffer(flags, dtype=np.uint8)
    both = np.frombuffer(times, dtype=np.uint64)
    start_times = pa.array(both[:n], type=pa.uint64(), mask=(bits & _NO_START) != 0)
    end_times = pa.array(both[n:], type=pa.uint64(), mask=(bits & _NO_END) != 0)
    return SpanFields(trace_id, span_id, parent, names, kinds, start, end, attributes, (bits & _MARKED) != 0,
                      (bits & _ERROR) != 0, start_times, end_times)


#: tt_skeleton.h's flags
_MARKED, _ERROR, _NO_START, _NO_END = 1, 2, 4, 8


class SpanColumns:
    """Lines in, columns out: ``add_line`` for each line, ``fields()`` for their spans' OTLP fields and
    ``table()`` for their values."""

    def __init__(self, native: bool = True) -> None:
        self.native = native
        self._pivot = make_pivot(ATTRIBUTE_COLUMNS, native)
        self._resource_pivot = make_pivot(RESOURCE_COLUMNS, native)
        self._python = PythonPivot(ATTRIBUTE_COLUMNS)
        self._python_resource = PythonPivot(RESOURCE_COLUMNS)
        self.line: list[int] = []
        self.spans: list[_Span] = []
        self.resource: list[int] = []  #: each span's Resource, an index into resources
        self.resources: list[msgspec.Raw] = []
        #: lines whose skeleton did not decode: the reference reader's
        self.left_lines: list[int] = []
        self._fields: SpanFields | None = None

    def add_line(self, data: bytes | memoryview, number: int) -> int:
        """The spans of line ``number``; how many (0 for a line left to the reference reader)."""
        try:
            doc = _SKELETON.decode(data)
        except (msgspec.DecodeError, RecursionError):
            self.left_lines.append(number)
            return 0
        spans, first = self.spans, len(self.spans)
        for rs in doc.resourceSpans:
            self.resources.append(rs.resource.attributes)
            before = len(spans)
            for ss in rs.scopeSpans:
                spans.extend(ss.spans)
            self.resource.extend([len(self.resources) - 1] * (len(spans) - before))
        n = len(spans) - first
        self.line.extend([number] * n)
        self._fields = None
        return n

    def fields(self) -> SpanFields:
        """The spans' OTLP fields so far."""
        if self._fields is None:
            fields = native_fields(self.spans) if self.native else None
            self._fields = python_fields(self.spans) if fields is None else fields
        return self._fields

    def table(self) -> pa.Table:
        """The spans so far as one table: ``line``, the times (``start``, ``end``: uint64, null outside fixed64),
        ``attribute.<key>`` and ``resource.<key>`` per key the rules know, ``refused`` (a span whose attributes
        the rules must read as written)."""
        fields = self.fields()
        cols, refused = pivot_arrays(self._pivot, self._python, _KINDS, fields.attributes)
        rcols, rrefused = pivot_arrays(self._resource_pivot, self._python_resource, _RESOURCE_KINDS, self.resources)
        take = pa.array(self.resource, type=pa.int64())
        refused_rows = np.zeros(len(self.line), dtype=bool)
        refused_rows[refused] = True
        refused_resources = np.zeros(len(self.resources), dtype=bool)
        refused_resources[rrefused] = True
        data: dict[str, Any] = {
            "line": pa.array(self.line, type=pa.int64()), "start": fields.start_times, "end": fields.end_times,
            "refused": refused_rows | refused_resources[np.asarray(self.resource, dtype=np.int64)],
        }
        for (key, _), col in zip(ATTRIBUTE_COLUMNS, cols, strict=True):
            data[ATTRIBUTE_PREFIX + key] = col
        for (key, _), col in zip(RESOURCE_COLUMNS, rcols, strict=True):
            data[RESOURCE_PREFIX + key] = col.take(take)
        return pa.table(data)
