"""A stamps column's readings as the records hold them (columnar/rows.py TextStamps.fill): made in C from the
decoded slots (native/columns/tt_readings.c), they equal the Python fill's, Stamp for Stamp, on drawn texts
(ends with their own bound, receives merged or refused, recorded sketches, sends, degraded spans); C answers
for every text the decoder passes and declines what it does not read as Python does."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk import semconv as S
from tempotrace_sdk.analysis.columnar import rows
from tempotrace_sdk.analysis.columnar.decode import ATTRIBUTE_PREFIX
from tempotrace_sdk.analysis.events import QUALITIES, Stamp
from tempotrace_sdk.stamptext import TAI_UTC_BASE_NS, encode

_columns = pytest.importorskip("tempotrace_sdk._columns", reason="the native columns module is not built")

T0 = 1_800_000_000_000_000_000
QUALITY = st.integers(0, 2)
BOUND = st.integers(0, 65_535)


@st.composite
def _texts(draw: st.DrawFn) -> tuple[str, int, int]:
    """A stamps text and its span's OpenTelemetry start and end times."""
    lts = draw(st.integers(0, 2**40))
    ptp = T0 + TAI_UTC_BASE_NS + draw(st.integers(-10**6, 10**6))
    unc, qual = draw(BOUND), draw(QUALITY)
    end_ns = T0 + draw(st.integers(0, 10**6))
    end = draw(st.one_of(st.none(), st.tuples(st.integers(lts + 1, lts + 9), st.just(ptp + 500),
                                              st.one_of(st.just(unc), BOUND), st.one_of(st.just(qual), QUALITY))))
    remote = draw(st.one_of(st.none(), st.tuples(st.just(ptp - 800), BOUND, QUALITY, st.integers(0, 2),
                                                 st.integers(0, 15), st.integers(0, lts))))
    recv_lts = draw(st.one_of(st.none(), st.integers(0, lts))) if remote is not None else None
    sketch = draw(st.one_of(st.none(), st.binary(min_size=32, max_size=32)))
    sends = draw(st.lists(st.tuples(st.integers(lts, lts + 9), st.just(ptp + 100), st.one_of(st.just(unc), BOUND),
                                    st.one_of(st.just(qual), QUALITY)), max_size=3))
    text = encode(lts, ptp, unc, qual, draw(st.integers(0, 2)), T0, end, end_ns, remote, recv_lts, sketch, sends)
    return text, T0, end_ns


def _stamps(drawn: list[tuple[str, int, int]]) -> rows.TextStamps:
    n = len(drawn)
    table = pa.table({
        ATTRIBUTE_PREFIX + S.STAMPS: pa.array([t for t, _, _ in drawn], pa.string()),
        "start": pa.array([s for _, s, _ in drawn], pa.uint64()),
        "end": pa.array([e for _, _, e in drawn], pa.uint64()),
        ATTRIBUTE_PREFIX + S.UNCERTAINTY_NS: pa.nulls(n, pa.int64()),
        ATTRIBUTE_PREFIX + S.CLK_QUALITY: pa.nulls(n, pa.string()),
    })
    stamps = rows.TextStamps(table)
    assert not stamps.refused.any()
    return stamps


def _fill(stamps: rows.TextStamps, degraded: list[Any], native: bool) -> list[Any]:
    n = len(degraded)
    ids = [f"{i + 1:016x}" for i in range(n)]
    parents = ["" if i % 2 else f"{i + 100:016x}" for i in range(n)]
    out: list[Any] = [None] * n
    with mock.patch.object(rows, "_columns", _columns if native else None):
        stamps.fill(np.arange(n), ids, parents, degraded, out)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_texts(), st.booleans()), min_size=1, max_size=8))
def test_c_makes_the_readings_python_makes(drawn: list[tuple[tuple[str, int, int], bool]]) -> None:
    stamps = _stamps([t for t, _ in drawn])
    degraded = [d for _, d in drawn]
    got, want = _fill(stamps, degraded, True), _fill(stamps, degraded, False)
    assert got == want
    for readings in got:  # (the types too: a Stamp each, ints, a tuple of tuples)
        assert isinstance(readings[0], Stamp) and isinstance(readings[4], tuple) and isinstance(readings[5], int)
    block = stamps.block
    assert block is not None
    out: list[Any] = [None] * len(drawn)
    assert _columns.stamp_readings(block.slots, block.sketch, block.sends, block.send_offsets,
                                   list(range(len(drawn))), degraded, [0] * len(drawn), Stamp, QUALITIES, out) is True


def test_c_declines_a_flag_or_a_sketch_it_would_read_otherwise() -> None:
    """A degraded flag that is not exactly True or False, or a row with no recorded sketch and no int for it:
    C says False, and the Python fill answers."""
    stamps = _stamps([(encode(5, T0 + TAI_UTC_BASE_NS, 220, 0, 2, T0), T0, T0 + 10)])
    block = stamps.block
    assert block is not None
    args = (block.slots, block.sketch, block.sends, block.send_offsets, [0])
    for degraded, own in (([1], [7]), ([False], [None]), ([False], [True])):
        assert _columns.stamp_readings(*args, degraded, own, Stamp, QUALITIES, [None]) is False
    assert _fill(stamps, [1], True) == _fill(stamps, [1], False)
    with pytest.raises(IndexError):
        _columns.stamp_readings(*args[:4], [3], [False], [0], Stamp, QUALITIES, [None])
