"""SVC sketch properties (spec §8): no false negatives, OR-merge algebra, estimate."""

from __future__ import annotations

import pickle
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tempotrace_sdk import FieldError, Sketch
from tempotrace_sdk.wire import sketch_indices

span_ids = st.integers(0, 2**64 - 1)
sketches = st.integers(0, 2**256 - 1).map(Sketch)


@given(st.lists(span_ids, max_size=40))
def test_no_false_negatives(ids: list[int]) -> None:
    """Every added span id is a member, whichever way the sketch was built (spec §8.4)."""
    built = Sketch.EMPTY
    for span_id in ids:
        built = built.with_span(span_id)
    assert built == Sketch.of(*ids)
    for span_id in ids:
        assert span_id in built
        assert span_id.to_bytes(8, "big") in built


@given(sketches, sketches, sketches)
def test_merge_is_a_semilattice(a: Sketch, b: Sketch, c: Sketch) -> None:
    """OR merge: commutative, associative, idempotent, EMPTY is the identity (spec §8.3)."""
    assert a | b == b | a
    assert (a | b) | c == a | (b | c)
    assert a | a == a
    assert a | Sketch.EMPTY == a
    assert a.issubset(a | b) and b.issubset(a | b)
    assert (a | b).popcount >= max(a.popcount, b.popcount)


@given(sketches)
def test_bytes_and_int_forms_agree(sketch: Sketch) -> None:
    """Bit j is byte j//8 under 0x80 >> (j % 8), i.e. the big-endian int (spec §8.1)."""
    raw = sketch.to_bytes()
    assert len(raw) == 32
    assert int.from_bytes(raw, "big") == int(sketch)
    from_wire = Sketch.from_bytes(raw)
    assert from_wire == sketch and hash(from_wire) == hash(sketch)
    assert from_wire.popcount == sketch.popcount == bin(int(sketch)).count("1")
    assert pickle.loads(pickle.dumps(from_wire)) == sketch
    assert bool(sketch) == (int(sketch) != 0)


@given(span_ids)
def test_indices_set_exactly_those_bits(span_id: int) -> None:
    indices = sketch_indices(span_id)
    assert len(indices) == 4 and all(0 <= j < 256 for j in indices)
    raw = Sketch.of(span_id).to_bytes()
    expected = bytearray(32)
    for j in indices:
        expected[j // 8] |= 0x80 >> (j % 8)
    assert raw == bytes(expected)


def test_false_positive_estimate_tracks_reality() -> None:
    """(popcount/256)^4 predicts the measured false-positive rate of random ids (spec §8.4)."""
    rng = random.Random(7)
    sketch = Sketch.of(*(rng.getrandbits(64) for _ in range(40)))
    trials = 20_000
    hits = sum(rng.getrandbits(64) in sketch for _ in range(trials))
    estimate = sketch.false_positive_rate()
    assert 0.02 < estimate < 0.5
    assert abs(hits / trials - estimate) < 0.25 * estimate
    assert Sketch.EMPTY.false_positive_rate() == 0.0
    assert Sketch((1 << 256) - 1).false_positive_rate() == 1.0
    assert Sketch((1 << 256) - 1).fill == 1.0


@pytest.mark.parametrize(
    "bad",
    [-1, 2**64, 1.0, "00f067aa0ba902b7", b"\x00" * 7, b"\x00" * 9, None, True],
)
def test_bad_span_ids_are_refused(bad: object) -> None:
    with pytest.raises(FieldError) as info:
        Sketch.EMPTY.with_span(bad)  # type: ignore[arg-type]
    assert info.value.error_class == "SPAN_ID" and info.value.field == "span_id"


@pytest.mark.parametrize("bad", [-1, 2**256, 1.5, True, "0"])
def test_bad_sketch_values_are_refused(bad: object) -> None:
    with pytest.raises(FieldError) as info:
        Sketch(bad)  # type: ignore[arg-type]
    assert info.value.error_class == "SVC_SKETCH"


@pytest.mark.parametrize("bad", [b"", b"\x00" * 31, b"\x00" * 33, "00" * 32, 0])
def test_bad_sketch_bytes_are_refused(bad: object) -> None:
    with pytest.raises(FieldError) as info:
        Sketch.from_bytes(bad)  # type: ignore[arg-type]
    assert info.value.error_class == "SVC_SKETCH"


def test_sketch_has_no_public_mutable_state() -> None:
    sketch = Sketch.of(1)
    with pytest.raises(AttributeError):
        sketch.bits = 5  # type: ignore[attr-defined]
    assert sketch.with_span(2) != sketch and sketch == Sketch.of(1)
