"""Spans' OTLP JSON attribute arrays -> one list per column, for the ``tempotrace.*`` keys the analysis reads
(spec/analysis.md §5.6).

``Pivot`` is the C one (native/columns/tt_attrs.c) where the extension is built, which takes the exporter's
plain shape and refuses a span holding anything else; ``PythonPivot`` reads every shape msgspec reads
(otlp.py's AnyValue) and is what a refused span, or every span without the extension, goes through. A span
whose value for a column is not of the column's kind as written (two kinds, another kind, an integer beyond
int64), or that repeats a key, is refused by both: the analysis's rules (values.py) decide what it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from ..otlp import AnyValue, KeyValue
from ..schema import BOOL, INT, INT_ARRAY, STRING

try:
    from ... import _columns
except ImportError:  # not built (not Linux, no compiler): the Python pivot alone
    _columns = None

__all__ = ["ARROW_TYPES", "KINDS", "NATIVE", "PythonPivot", "make_pivot", "pivot_arrays"]

#: whether the C pivot is built here
NATIVE = _columns is not None

#: the pivot's kind codes (tt_attrs.c), by schema kind
KINDS = {INT: 0, STRING: 1, BOOL: 2, INT_ARRAY: 3}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: the Arrow type of a column of each kind code
ARROW_TYPES = (pa.int64(), pa.string(), pa.bool_(), pa.list_(pa.int64()))

_KEY_VALUES = msgspec.json.Decoder(list[KeyValue], strict=False)
_MISFIT = object()


def _int(v: AnyValue) -> Any:
    i = v.intValue
    if i is None or v.stringValue is not None or v.arrayValue is not None or v.boolValue is not None:
        return _MISFIT
    return i if INT64_MIN <= i <= INT64_MAX else _MISFIT


def _string(v: AnyValue) -> Any:
    if v.stringValue is None or v.intValue is not None or v.arrayValue is not None or v.boolValue is not None:
        return _MISFIT
    return v.stringValue


def _bool(v: AnyValue) -> Any:
    if v.boolValue is None or v.stringValue is not None or v.intValue is not None or v.arrayValue is not None:
        return _MISFIT
    return v.boolValue


def _ints(v: AnyValue) -> Any:
    a = v.arrayValue
    if a is None or v.stringValue is not None or v.intValue is not None or v.boolValue is not None:
        return _MISFIT
    out = [_int(e) for e in a.values]
    return _MISFIT if any(x is _MISFIT for x in out) else out


_CELL = {0: _int, 1: _string, 2: _bool, 3: _ints}


class PythonPivot:
    """The pivot in Python: ``columns`` a sequence of (key, kind code)."""

    def __init__(self, columns: Sequence[tuple[str, int]]) -> None:
        self._index = {key: (i, _CELL[kind]) for i, (key, kind) in enumerate(columns)}
        if len(self._index) != len(columns):
            raise ValueError("Pivot: each key once")
        self._n = len(columns)

    def scan(self, attributes: Sequence[bytes | memoryview | msgspec.Raw]) -> tuple[list[list[Any]], list[int]]:
        """(one list per column of one cell per span, the spans refused), as the C pivot answers."""
        n = len(attributes)
        cols: list[list[Any]] = [[None] * n for _ in range(self._n)]
        refused = []
        index = self._index
        for row, raw in enumerate(attributes):
            try:
                kvs = _KEY_VALUES.decode(raw)
            except (msgspec.DecodeError, RecursionError):
                refused.append(row)
                continue
            taken: list[int] = []
            for kv in kvs:
                found = index.get(kv.key)
                if found is None:
                    continue
                col, cell = found
                value = _MISFIT if cols[col][row] is not None else cell(kv.value)
                if value is _MISFIT:
                    for c in taken:
                        cols[c][row] = None
                    refused.append(row)
                    break
                cols[col][row] = value
                taken.append(col)
        return cols, refused


def make_pivot(columns: Sequence[tuple[str, int]], native: bool = True) -> Any:
    """The C pivot where it is built (and ``native``), else the Python one."""
    if native and _columns is not None:
        return _columns.Pivot(list(columns))
    return PythonPivot(columns)


def from_buffers(kind: int, n: int, out: tuple[Any, ...]) -> pa.Array:
    """One column of the C pivot's answer as an Arrow array (its buffers taken as they are)."""
    if kind == 3:
        return pa.array(out[1], type=ARROW_TYPES[3])
    return pa.Array.from_buffers(ARROW_TYPES[kind], n, [pa.py_buffer(b) for b in out])


def pivot_arrays(pivot: Any, python: PythonPivot, kinds: Sequence[int], attributes: Sequence[Any]
                 ) -> tuple[list[pa.Array], list[int]]:
    """Each column as an Arrow array, and the rows both pivots refused: ``pivot``'s answer, the rows it refused
    answered by ``python``."""
    n = len(attributes)
    if isinstance(pivot, PythonPivot):
        cols, refused = pivot.scan(attributes)
        return [pa.array(c, type=ARROW_TYPES[k]) for c, k in zip(cols, kinds, strict=True)], refused
    outs, refused = pivot.scan(attributes)
    arrays = [from_buffers(k, n, o) for k, o in zip(kinds, outs, strict=True)]
    if not refused:
        return arrays, refused
    again, still = python.scan([attributes[i] for i in refused])
    # row i from C's array, or (a refused row) from Python's answers appended after it: one take a column
    at = np.arange(n, dtype=np.int64)
    at[refused] = n + np.arange(len(refused), dtype=np.int64)
    index = pa.array(at)
    arrays = [pa.concat_arrays([a, pa.array(redone, type=a.type)]).take(index)
              for a, redone in zip(arrays, again, strict=True)]
    return arrays, [refused[i] for i in still]
