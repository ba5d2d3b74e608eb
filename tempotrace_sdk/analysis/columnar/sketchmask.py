"""The sketch a span without a recorded one holds, over a column (spec/tt-ext-v3.md §8.1; spec/analysis.md §5.6
item 7): what ``order.own_mask`` gives one span at a time, for many at once.

Such a span is known to have its own id and its parent's in its causal past (values.py); the reference hashes
both ids for every such span, a Python call each (1.5 µs, as many span ids as spans: no cache holds them).
Here the C codec's sketch code does it over the column (native/columns/tt_ownsketch.c, in
``tempotrace_sdk._columns``); test_columnar_sketchmask.py checks it against mmh3. Without the module, or for
an id that is not 16 hex digits, ``own_mask`` answers.
"""

from __future__ import annotations

import numpy as np

from ..order import own_mask

try:
    from ... import _columns
except ImportError:  # (not built: own_mask answers, one span at a time)
    _columns = None

__all__ = ["own_masks", "own_sketches"]


def own_masks(span_id: list[str], parent: list[str], rows: list[int]) -> list[int] | None:
    """``order.own_mask(span_id[i], parent[i])`` for each i in ``rows``; None when an id is not 16 hex digits (the
    caller asks own_mask, which says what is wrong) or the native module is not built."""
    if _columns is None:
        return None
    masks: list[int] | None = _columns.own_masks(span_id, parent, rows)
    return masks


def own_sketches(span_id: list[str], parent: list[str], rows: list[int], which: np.ndarray) -> list[int | None]:
    """A list over ``rows``: where ``which`` holds, the sketch a span without a recorded one is known to hold
    (its own id and its parent's, values.build_record), else None."""
    out: list[int | None] = [None] * len(rows)
    at = np.flatnonzero(which).tolist()
    if not at:
        return out
    want = [rows[k] for k in at]
    masks = own_masks(span_id, parent, want)
    if masks is None:  # an id that is not 16 hex digits: own_mask (span_mask) says what is wrong with it
        masks = [own_mask(span_id[i], parent[i]) for i in want]
    for k, mask in zip(at, masks, strict=True):
        out[k] = mask
    return out
