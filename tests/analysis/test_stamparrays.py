"""Stamps gathered as arrays (stamparrays.py): the C gather (native/columns/tt_stampfields.c) equals the Python
comprehensions field for field on drawn stamps, answers for the plain stamps the analysis makes, and leaves to
the comprehensions what only they read as Python does (a reading that is not an int, one beyond int64, an item
that is not a Stamp)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tempotrace_sdk.analysis.clockdomain import Domain
from tempotrace_sdk.analysis.events import Stamp
from tempotrace_sdk.analysis.stamparrays import StampArrays
from tempotrace_sdk.wire.layout import UNCERTAINTY_SATURATED

_columns = pytest.importorskip("tempotrace_sdk._columns", reason="the native columns module is not built")

FIELDS = ("have", "ptp", "unc", "unknown", "degraded", "lts")
DOMAIN = Domain("kernel:host-a", 37_000_000_000, 900, 120)
INT64 = st.integers(-(2**63), 2**63 - 1)

stamps = st.builds(
    Stamp,
    st.one_of(st.none(), INT64, st.sampled_from([0, -1, 2**62 - 1, 2**62, 2**63 - 1])),
    st.one_of(st.integers(0, UNCERTAINTY_SATURATED), INT64),
    st.sampled_from(["OK", "DEGRADED", "UNKNOWN", "unknown", "UNKNOWN ", ""]),
    st.one_of(st.none(), st.integers(-1, 2**32), INT64),
    st.booleans(),
    st.one_of(st.none(), st.just(DOMAIN)),
)


def _assert_same(native: StampArrays, python: StampArrays) -> None:
    for name in FIELDS:
        got, want = getattr(native, name), getattr(python, name)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), name
    assert native.domain == python.domain and native.domains is python.domains
    assert native.reading().tolist() == python.reading().tolist()
    assert native.usable().tolist() == python.usable().tolist()
    assert native.safe() is python.safe()


@given(st.lists(stamps, max_size=60))
def test_the_c_gather_equals_the_comprehensions(drawn: list[Stamp]) -> None:
    assert _columns.stamp_fields(drawn, Stamp) is not None  # plain stamps: C answers
    _assert_same(StampArrays(drawn), StampArrays(drawn, native=False))


def test_a_batch_of_the_analysis_own_stamps_is_gathered_in_c() -> None:
    batch = [Stamp(1_700_000_000_000_000_000 + k, 250 + k % 7, "OK", k, k % 5 == 0) for k in range(4096)]
    batch[7] = Stamp(None)
    batch[9] = Stamp(5, 10, "UNKNOWN", None, False, DOMAIN)
    fields = _columns.stamp_fields(batch, Stamp)
    assert fields is not None and len(fields) == 4 * 8 * len(batch)
    native = StampArrays(batch)
    _assert_same(native, StampArrays(batch, native=False))
    assert native.domains and native.domain[9] is DOMAIN and native.domain.count(None) == len(batch) - 1
    assert native.have.tolist().count(False) == 1 and native.lts[9] == -1


class _Reading(int):
    pass


@pytest.mark.parametrize("odd", [
    Stamp(1.5),  # a float reading: numpy truncates it
    Stamp(2**63),  # beyond int64: numpy raises, as the comprehensions did
    Stamp(-(2**63) - 1),
    Stamp(5, 2**64),
    Stamp(5, None),  # type: ignore[arg-type]
    Stamp(5, 10, "OK", 2**70),
    Stamp(5, 10, "OK", 1.0),  # type: ignore[arg-type]
    (5, 10, "OK", 1, False, None),  # not a Stamp
])
def test_what_is_not_the_plain_case_is_left_to_the_comprehensions(odd: Any) -> None:
    """C declines (None) and StampArrays answers, or raises, as the comprehensions alone do."""
    batch = [Stamp(1, 2), odd]
    assert _columns.stamp_fields(batch, Stamp) is None
    try:
        python: StampArrays | None = StampArrays(batch, native=False)
    except (OverflowError, TypeError, AttributeError) as err:
        with pytest.raises(type(err)):
            StampArrays(batch)
        return
    assert python is not None
    _assert_same(StampArrays(batch), python)


def test_an_int_subclass_and_a_tuple_of_stamps_read_as_python_reads_them() -> None:
    """A reading of an int subclass is an int to C too; a sequence that is not a list goes to the comprehensions."""
    batch = [Stamp(_Reading(7), 3), Stamp(None)]
    _assert_same(StampArrays(batch), StampArrays(batch, native=False))
    as_tuple = tuple(batch)
    _assert_same(StampArrays(as_tuple), StampArrays(as_tuple, native=False))


def test_bad_arguments_raise_a_type_error() -> None:
    with pytest.raises(TypeError, match="stamp_fields"):
        _columns.stamp_fields((Stamp(1),), Stamp)
    with pytest.raises(TypeError, match="stamp_fields"):
        _columns.stamp_fields([Stamp(1)])
    assert _columns.stamp_fields([Stamp(1)], Domain) is None  # a type without Stamp's fields: declined
    assert np.frombuffer(_columns.stamp_fields([], Stamp), dtype=np.int64).size == 0


class _Quality(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


class _Index(int):
    def __index__(self) -> int:
        return 7


class _NoneLike:
    def __eq__(self, other: object) -> bool:
        return other is None

    __hash__ = object.__hash__


@pytest.mark.parametrize("odd", [
    Stamp(5, 10, _Quality("OK")),  # a str subclass whose == says UNKNOWN
    Stamp(_Index(5), 10),  # an int subclass numpy reads through __index__
    Stamp(5, 10, "OK", 1, 1),  # type: ignore[arg-type]  # a degraded flag that is no bool
    Stamp(5, 10, "OK", 1, []),  # type: ignore[arg-type]
])
def test_odd_field_types_are_left_to_the_comprehensions(odd: Stamp) -> None:
    """Only exact ints, bools and strs are read in C (anything else could compare or convert otherwise, or run
    Python code while C holds borrowed items): the comprehensions answer, as they alone would."""
    batch = [Stamp(1, 2), odd]
    assert _columns.stamp_fields(batch, Stamp) is None
    try:
        python = StampArrays(batch, native=False)
    except (TypeError, ValueError) as err:
        with pytest.raises(type(err)):
            StampArrays(batch)
        return
    native = StampArrays(batch)
    for name in FIELDS:
        assert np.array_equal(getattr(native, name), getattr(python, name)), name


def test_a_domain_that_compares_equal_to_none_counts_as_the_comprehension_counts_it() -> None:
    batch = [Stamp(1, 2, "OK", None, False, _NoneLike()), Stamp(3, 4)]  # type: ignore[arg-type]
    _assert_same(StampArrays(batch), StampArrays(batch, native=False))


def test_a_flag_whose_truth_would_change_the_list_is_never_asked() -> None:
    """A degraded flag with a __bool__ that empties the list being read: C declines before asking it (a crash
    before the fix), the comprehensions ask it."""
    stamps: list[Any] = []

    class Emptying:
        def __bool__(self) -> bool:
            stamps.clear()
            return True

    stamps += [Stamp(1, 2, "UNKNOWN", 3, Emptying())] + [Stamp(k, 1) for k in range(1000)]  # type: ignore[arg-type]
    assert _columns.stamp_fields(stamps, Stamp) is None
    assert len(stamps) == 1001
