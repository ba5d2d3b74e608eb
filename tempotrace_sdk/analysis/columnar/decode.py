"""OTLP JSON trace lines -> Arrow columns: one msgspec decode of each line's skeleton, every span's attributes
pivoted into columns in C (spec/analysis.md §5.6).

The skeleton is the OTLP fields the analysis reads, each span's ``attributes`` and each Resource's kept as
``msgspec.Raw`` (JSON msgspec has checked, not yet read); ``pivot.py`` puts the values of the keys the
analysis's rule table knows (values.py) in their columns. No span becomes a Python object beyond its skeleton.
What this stage cannot take goes to the reference reader (otlp.py) whole: a line whose skeleton does not
decode (``SpanColumns.left_lines``), a span whose attributes neither pivot takes (the ``refused`` column).
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from ..otlp import Status
from ..schema import HEX, STRING
from ..values import FIXED64_MAX, RESOURCE_RULES, SPAN_RULES
from .pivot import KINDS, PythonPivot, make_pivot, pivot_arrays

__all__ = ["ATTRIBUTE_COLUMNS", "ATTRIBUTE_PREFIX", "RESOURCE_COLUMNS", "RESOURCE_PREFIX", "SpanColumns"]

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


class SpanColumns:
    """Lines in, columns out: ``add_line`` for each line, ``table()`` for what they held."""

    def __init__(self, native: bool = True) -> None:
        self._pivot = make_pivot(ATTRIBUTE_COLUMNS, native)
        self._resource_pivot = make_pivot(RESOURCE_COLUMNS, native)
        self._python = PythonPivot(ATTRIBUTE_COLUMNS)
        self._python_resource = PythonPivot(RESOURCE_COLUMNS)
        self.line: list[int] = []
        self.trace_id: list[str] = []
        self.span_id: list[str] = []
        self.parent: list[str] = []
        self.name: list[str] = []
        self.kind: list[Any] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.status: list[Any] = []
        self.message: list[str | None] = []
        self.attributes: list[msgspec.Raw] = []
        self.resource: list[int] = []  #: each span's Resource, an index into resources
        self.resources: list[msgspec.Raw] = []
        #: lines whose skeleton did not decode: the reference reader's
        self.left_lines: list[int] = []

    def add_line(self, data: bytes | memoryview, number: int) -> int:
        """The spans of line ``number``; how many (0 for a line left to the reference reader)."""
        try:
            doc = _SKELETON.decode(data)
        except (msgspec.DecodeError, RecursionError):
            self.left_lines.append(number)
            return 0
        first = len(self.line)
        for rs in doc.resourceSpans:
            self.resources.append(rs.resource.attributes)
            r = len(self.resources) - 1
            for ss in rs.scopeSpans:
                for sp in ss.spans:
                    self.trace_id.append(sp.traceId)
                    self.span_id.append(sp.spanId)
                    self.parent.append(sp.parentSpanId)
                    self.name.append(sp.name)
                    self.kind.append(sp.kind)
                    self.start.append(sp.startTimeUnixNano)
                    self.end.append(sp.endTimeUnixNano)
                    status = sp.status
                    self.status.append(None if status is None else status.code)
                    self.message.append(None if status is None else status.message)
                    self.attributes.append(sp.attributes)
                    self.resource.append(r)
        n = len(self.trace_id) - first
        self.line.extend([number] * n)
        return n

    def table(self) -> pa.Table:
        """The spans so far as one table: the OTLP fields, ``attribute.<key>`` and ``resource.<key>`` per key
        the rules know, ``refused`` (a span whose attributes the rules must read as written)."""
        cols, refused = pivot_arrays(self._pivot, self._python, _KINDS, self.attributes)
        rcols, rrefused = pivot_arrays(self._resource_pivot, self._python_resource, _RESOURCE_KINDS, self.resources)
        take = pa.array(self.resource, type=pa.int64())
        refused_rows = np.zeros(len(self.line), dtype=bool)
        refused_rows[refused] = True
        refused_resources = np.zeros(len(self.resources), dtype=bool)
        refused_resources[rrefused] = True
        data: dict[str, Any] = {
            "line": pa.array(self.line, type=pa.int64()), "trace_id": self.trace_id, "span_id": self.span_id,
            "parent_span_id": self.parent, "name": self.name,
            "kind": pa.array([k if isinstance(k, int) else None for k in self.kind], type=pa.int64()),
            "start": _times(self.start), "end": _times(self.end),
            "status.code": pa.array([c if isinstance(c, int) else None for c in self.status], type=pa.int64()),
            "status.message": self.message,
            "refused": refused_rows | refused_resources[np.asarray(self.resource, dtype=np.int64)],
        }
        for (key, _), col in zip(ATTRIBUTE_COLUMNS, cols, strict=True):
            data[ATTRIBUTE_PREFIX + key] = col
        for (key, _), col in zip(RESOURCE_COLUMNS, rcols, strict=True):
            data[RESOURCE_PREFIX + key] = col.take(take)
        return pa.table(data)
