"""Which decoded spans might break a value rule (values.py's table), as vectorised expressions over the
decoded columns (decode.py; spec/analysis.md §5.6).

Conservative by contract: a row not marked keeps every rule of its span's attributes and its Resource's, so
the columnar stages may read its values as the rules would have returned them; a marked row goes to the
reference path, which names the rule it breaks (or finds it keeps them all: a false alarm costs time, never a
different report). Marked: a row the pivots refused, an integer outside its range, a string not among its
choices, longer than its limit or not of its shape, hex digits of another count or not hex, an integer array
holding a value outside its range.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..schema import BOOL, HEX, INT, INT_ARRAY, STRING, Rule
from ..values import RESOURCE_RULES, SPAN_RULES
from .arrow import scalar
from .decode import ATTRIBUTE_PREFIX, RESOURCE_PREFIX

__all__ = ["may_break"]


def _breaks(column: Any, rule: Rule) -> Any:
    """Per row: the value is present and breaks ``rule`` (a boolean array, no nulls)."""
    kind = rule.kind
    if kind == INT:
        bad = pc.or_(pc.less(column, scalar(rule.lo)), pc.greater(column, scalar(rule.hi)))
    elif kind == STRING:
        if rule.choices is not None:
            among = pc.is_in(column, value_set=pa.array(sorted(rule.choices), type=pa.string()))
            bad = pc.and_(pc.is_valid(column), pc.invert(among))  # (is_in says False, not null, for a null)
        else:
            # (max_chars 0: free text, any length)
            longest = rule.max_chars if rule.max_chars else 2**31 - 1
            bad = pc.greater(pc.utf8_length(column), scalar(longest, pa.int32()))
            if rule.pattern is not None:  # RE2 here, Python's re in the rules: an ASCII-only \d marks more, not less
                shape = pc.invert(pc.match_substring_regex(column, f"^(?:{rule.pattern})$"))
                bad = pc.or_(bad, shape)
    elif kind == HEX:
        bad = pc.invert(pc.match_substring_regex(column, f"^[0-9a-fA-F]{{{rule.digits}}}$"))
    elif kind == INT_ARRAY:
        values = pc.list_flatten(column)
        outside = pc.or_(pc.less(values, scalar(rule.lo)), pc.greater(values, scalar(rule.hi)))
        # (a null element, which a span table may hold, is no integer: the rule refuses it)
        outside = pc.fill_null(outside, scalar(True)).to_numpy(zero_copy_only=False)
        rows = pc.list_parent_indices(column).to_numpy(zero_copy_only=False)
        bad_rows = np.zeros(len(column), dtype=bool)
        bad_rows[rows[outside]] = True
        return bad_rows
    elif kind == BOOL:
        return np.zeros(len(column), dtype=bool)
    else:  # (a kind the pivot does not take: every present value goes to the reference)
        bad = pc.is_valid(column)
    return pc.fill_null(bad, scalar(False)).to_numpy(zero_copy_only=False)


def may_break(table: pa.Table) -> np.ndarray:
    """One flag per row of a decode.SpanColumns table: True where a value rule may be broken (the OTLP fields are
    checked where they are read: decode.SpanFields.marked, parquet.py)."""
    marked: np.ndarray = np.array(table.column("refused").to_numpy(zero_copy_only=False), dtype=bool)
    for prefix, rules in ((ATTRIBUTE_PREFIX, SPAN_RULES), (RESOURCE_PREFIX, RESOURCE_RULES)):
        for key, rule in rules.items():
            column = table.column(prefix + key).combine_chunks()
            if column.null_count == len(column):
                continue
            marked |= _breaks(column, rule)
    return marked
