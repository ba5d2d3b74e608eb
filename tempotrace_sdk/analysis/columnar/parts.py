"""Trace parts as the streaming analysis forms them, for whole columns at once (spec/analysis.md §5.2, §5.6).

A part holds the spans of one trace that arrive within ``window`` input positions of its first span; the
first span at or beyond that opens the next part. Only positions decide it (analyzer.py), so it is computed
here from the rows' trace and position alone: sorted by trace then position, a trace whose spans all lie
within one window is one part (most traces), and only a longer one is walked, one search per part.
"""

from __future__ import annotations

import numpy as np

__all__ = ["part_starts"]


def part_starts(trace: np.ndarray, pos: np.ndarray, window: int) -> np.ndarray:
    """Each row's part, named by the position of the part's first span (with its trace, a part's key).

    ``trace``: an integer code per row (equal for the rows of one trace); ``pos``: each row's input position
    (distinct, any order); ``window`` >= 1."""
    if window < 1:
        raise ValueError("window must be >= 1")
    n = len(pos)
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return out
    order = np.lexsort((pos, trace))
    t, p = trace[order], pos[order].astype(np.int64)
    starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    ends = np.r_[starts[1:], n]
    first = p[starts]
    spread = p[ends - 1] - first
    sorted_out = np.repeat(first, ends - starts)  # one part a trace, where its spans lie within a window
    for g in np.flatnonzero(spread >= window):  # the others, walked part by part
        i, end = starts[g], ends[g]
        while i < end:
            opened = p[i]
            j = i + int(np.searchsorted(p[i:end], opened + window, side="left"))
            sorted_out[i:j] = opened
            i = j
    out[order] = sorted_out
    return out
