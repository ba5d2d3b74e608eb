"""Span ids' sketch bits over a column (columnar/sketchmask.py, in C: native/columns/tt_ownsketch.c) are
order.span_mask's, id for id (spec/tt-ext-v3.md §8.1: MurmurHash3 x64 128 through mmh3): on drawn ids, the
extremes of the id space, and with and without parents; an id that is not 16 hex digits is span_mask's to
refuse."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tempotrace_sdk.analysis.columnar import sketchmask
from tempotrace_sdk.analysis.columnar.sketchmask import own_masks, own_sketches
from tempotrace_sdk.analysis.order import span_mask

native = pytest.mark.skipif(sketchmask._columns is None, reason="the native columns module is not built")

EXTREMES = ["0000000000000000", "ffffffffffffffff", "8000000000000000", "0000000000000001", "00000000ffffffff",
            "FFFFFFFF00000000"]


def _reference(span_id: str, parent: str) -> int:
    return span_mask(span_id) | span_mask(parent) if parent else span_mask(span_id)


@native
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.one_of(st.none(), st.integers(0, 2**64 - 1))),
                min_size=1, max_size=40))
def test_own_masks_are_span_masks_of_the_id_and_its_parent(pairs: list[tuple[int, int | None]]) -> None:
    ids = [f"{s:016x}" for s, _ in pairs]
    parents = ["" if p is None else f"{p:016x}" for _, p in pairs]
    want = [_reference(s, p) for s, p in zip(ids, parents, strict=True)]
    assert own_masks(ids, parents, list(range(len(ids)))) == want


@native
def test_the_extremes_and_a_large_column_agree_with_span_mask() -> None:
    rng = random.Random("sketchmask")
    ids = EXTREMES + [f"{rng.getrandbits(64):016x}" for _ in range(20_000)]
    parents = [rng.choice(["", *EXTREMES, f"{rng.getrandbits(64):016x}"]) for _ in ids]
    rows = [*range(0, len(ids), 3), 1]  # some rows, out of order
    assert own_masks(ids, parents, rows) == [_reference(ids[i], parents[i]) for i in rows]


@native
@pytest.mark.parametrize("bad", ["abc", "0123456789abcdeg", "0123456789abcdef0", "0123456789abcdef01",
                                 " 123456789abcdef", "0123456789ab    ", "01234567 89abcde",
                                 "０１２３４５６７８９ａｂｃｄｅｆ", "0123456789abcdé0", "0x23456789abcdef"])
def test_an_id_not_of_16_hex_digits_goes_to_span_mask(bad: str) -> None:
    """own_masks declines (None); own_sketches then asks span_mask: what the reference gets, bits or refusal."""
    assert own_masks([bad], [""], [0]) is None
    assert own_masks(["0123456789abcdef"], [bad], [0]) is None
    try:
        want = span_mask(bad)
    except ValueError:
        with pytest.raises(ValueError):
            own_sketches([bad], [""], [0], np.array([True]))
    else:
        assert own_sketches([bad], [""], [0], np.array([True])) == [want]


@native
def test_ids_whose_lengths_only_add_up_are_not_hashed_as_others() -> None:
    """14 and 18 digits join to two ids' worth of hex: hashing the joined bytes would give other ids' bits."""
    assert own_masks(["0123456789abcd", "ef0123456789abcdef"], ["", ""], [0, 1]) is None


def test_own_sketches_fill_only_the_rows_asked_for() -> None:
    ids, parents = ["00000000000000aa", "00000000000000bb", "00000000000000cc"], ["", "00000000000000aa", ""]
    got = own_sketches(ids, parents, [2, 1, 0], np.array([True, False, True]))
    assert got == [_reference(ids[2], ""), None, _reference(ids[0], "")]
    assert own_sketches(ids, parents, [0], np.array([False])) == [None]


@native
def test_an_id_that_is_no_str_declines_and_a_row_past_the_lists_raises() -> None:
    assert own_masks([b"0123456789abcdef"], [""], [0]) is None  # type: ignore[list-item]
    assert own_masks(["0123456789abcdef"], [None], [0]) is None  # type: ignore[list-item]
    with pytest.raises(IndexError):
        own_masks(["0123456789abcdef"], [""], [1])


def test_without_the_module_own_mask_answers_span_by_span(monkeypatch: pytest.MonkeyPatch) -> None:
    """No native module (another platform): own_masks declines and own_sketches asks own_mask, the same bits."""
    monkeypatch.setattr(sketchmask, "_columns", None)
    ids, parents = ["00000000000000aa", "00000000000000bb"], ["", "00000000000000aa"]
    assert own_masks(ids, parents, [0, 1]) is None
    assert own_sketches(ids, parents, [1, 0], np.array([True, True])) == [_reference(ids[1], parents[1]),
                                                                       _reference(ids[0], "")]


# -- membership tests (edgebatch.in_sketches, in C: tt_ownsketch.c in_sketches) ---------------------------------
def _python_in(sketches: list[int | None], ids: list[str]) -> list[bool]:
    return [s is not None and s & span_mask(i) == span_mask(i) for s, i in zip(sketches, ids, strict=True)]


_SKETCHES = st.one_of(st.none(), st.integers(0, 2**256 - 1), st.just(2**256 - 1), st.just(0))


@native
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), _SKETCHES, st.booleans()), max_size=40))
def test_in_sketches_answers_as_span_mask_does(drawn: list[tuple[int, int | None, bool]]) -> None:
    """On drawn sketches, half of them holding the id's bits (a member) among others."""
    from tempotrace_sdk.analysis.edgebatch import in_sketches

    ids = [f"{s:016x}" for s, _, _ in drawn]
    sketches = [None if sk is None else (sk | span_mask(i) if member else sk)
                for i, (_, sk, member) in zip(ids, drawn, strict=True)]
    got = sketchmask._columns.in_sketches(sketches, ids)
    assert got is not None and [bool(x) for x in got] == _python_in(sketches, ids)
    assert in_sketches(sketches, ids).tolist() == _python_in(sketches, ids)


@native
@pytest.mark.parametrize("sketch, span_id", [(-1, "0123456789abcdef"), (2**256, "0123456789abcdef"),
                                             (True, "0123456789abcdef"), (1.0, "0123456789abcdef"),
                                             (2**255, "0123456789abcdeg"), (2**255, ""), (2**255, None)])
def test_in_sketches_leaves_to_python_what_is_no_sketch_or_id_of_ours(sketch: object, span_id: object) -> None:
    """C declines (None) a sketch that is not an int within 256 bits and an id that is not 16 hex digits; the
    Python test then answers, or refuses, as the reference does."""
    from tempotrace_sdk.analysis.edgebatch import in_sketches

    assert sketchmask._columns.in_sketches([0, sketch], ["0123456789abcdef", span_id]) is None
    try:
        want = _python_in([sketch], [span_id])  # type: ignore[list-item]
    except (TypeError, ValueError, AttributeError) as err:
        with pytest.raises(type(err)):
            in_sketches([sketch], [span_id])  # type: ignore[list-item]
        return
    assert in_sketches([sketch], [span_id]).tolist() == want  # type: ignore[list-item]
