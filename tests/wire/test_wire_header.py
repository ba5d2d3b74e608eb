"""TTExt: construction rules, round trips and hostile input (spec §2-§5, §9).

The vectors (test_wire_vectors.py) fix exact bytes; these tests add what a
table cannot: arbitrary values, arbitrary garbage, Python-level types, and the
value semantics a caller relies on (equality, hashing, pickling, frozenness).
"""

from __future__ import annotations

import copy
import pickle
import string

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk import ClockQuality, FieldError, HeaderError, Sketch, TsSource, TTExt
from tempotrace_sdk.wire import decode_text, encode_text

I63 = 2**63

sketches = st.integers(0, 2**256 - 1).map(Sketch)
headers = st.builds(
    TTExt,
    ptp_ns=st.integers(0, I63 - 1),
    ts_source=st.sampled_from(TsSource),
    clk_quality=st.sampled_from(ClockQuality),
    uncertainty_ns=st.integers(0, 0xFFFF),
    lts=st.integers(0, I63 - 1),
    svc_sketch=sketches,
    tenant_id=st.integers(0, 15),
)


@given(headers)
def test_binary_and_text_round_trip(header: TTExt) -> None:
    """decode(encode(h)) == h and from_header(to_header(h)) == h (spec §4, §5)."""
    raw = header.encode()
    assert len(raw) == 53
    assert TTExt.decode(raw) == header
    text = header.to_header()
    assert len(text) == 71
    assert TTExt.from_header(text) == header
    assert TTExt.from_header(f" \t {text}\t") == header
    assert encode_text(raw) == text and decode_text(text) == raw


@given(headers)
def test_value_semantics(header: TTExt) -> None:
    """Equal values hash alike; pickle and copy give equal values; replace() re-validates."""
    clone = pickle.loads(pickle.dumps(header))
    assert clone == header and hash(clone) == hash(header) and type(clone) is TTExt
    assert copy.deepcopy(header) == header
    bumped = msgspec.structs.replace(header, lts=(header.lts + 1) % I63)
    assert bumped != header
    with pytest.raises(FieldError):
        msgspec.structs.replace(header, lts=I63)


def test_fields_are_frozen_and_enums_are_members() -> None:
    """An invalid header cannot be made by assignment after construction."""
    header = TTExt(5, 2, 1, 9, 3)  # type: ignore[arg-type]
    assert header.ts_source is TsSource.CPU and header.clk_quality is ClockQuality.DEGRADED
    assert header.svc_sketch == Sketch.EMPTY and header.tenant_id == 0
    with pytest.raises(AttributeError):
        header.lts = I63  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        header.extra = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kwargs", "error_class", "field"),
    [
        ({"tenant_id": True}, "TENANT_ID", "tenant_id"),
        ({"tenant_id": 1.0}, "TENANT_ID", "tenant_id"),
        ({"ptp_ns": "1"}, "PTP_NS_RANGE", "ptp_ns"),
        ({"ptp_ns": 1.5}, "PTP_NS_RANGE", "ptp_ns"),
        ({"ts_source": True}, "TS_SOURCE", "ts_source"),
        ({"ts_source": 1.0}, "TS_SOURCE", "ts_source"),
        ({"ts_source": "GTE"}, "TS_SOURCE", "ts_source"),
        ({"clk_quality": ClockQuality.OK.value + 0.0}, "CLK_QUALITY", "clk_quality"),
        ({"clk_quality": None}, "CLK_QUALITY", "clk_quality"),
        ({"uncertainty_ns": 2.0}, "UNCERTAINTY_RANGE", "uncertainty_ns"),
        ({"lts": None}, "LTS_RANGE", "lts"),
        ({"svc_sketch": b"\x00" * 32}, "SVC_SKETCH", "svc_sketch"),
        ({"svc_sketch": 0}, "SVC_SKETCH", "svc_sketch"),
    ],
)
def test_wrong_python_types_are_caller_errors(kwargs: dict[str, object], error_class: str, field: str) -> None:
    """Bools, floats, strings and None are refused, naming the field (spec §9.2)."""
    values: dict[str, object] = {"ptp_ns": 1, "ts_source": 0, "clk_quality": 0, "uncertainty_ns": 1, "lts": 1}
    values.update(kwargs)
    with pytest.raises(FieldError) as info:
        TTExt(**values)  # type: ignore[arg-type]
    assert info.value.error_class == error_class
    assert info.value.field == field
    assert not info.value.remote
    assert "header value" in str(info.value) and field in str(info.value)


def test_int_subclasses_and_plain_ints_are_normalised() -> None:
    """IntEnum members of the right value and int subclasses are accepted and stored as plain values."""

    class MyInt(int):
        pass

    header = TTExt(MyInt(7), MyInt(1), 0, MyInt(3), MyInt(4), tenant_id=MyInt(2))  # type: ignore[arg-type]
    assert type(header.ptp_ns) is int and header.ts_source is TsSource.SW_GCC
    assert header == TTExt(7, TsSource.SW_GCC, ClockQuality.OK, 3, 4, tenant_id=2)


def test_interval_and_saturation() -> None:
    """interval() is None for UNKNOWN and for a saturated bound (spec §3.5, §11)."""
    ok = TTExt(1000, TsSource.GTE, ClockQuality.OK, 20, 1)
    assert ok.interval() == (980, 1020) and ok.has_physical_time and not ok.saturated
    saturated = TTExt(1000, TsSource.CPU, ClockQuality.OK, 0xFFFF, 1)
    assert saturated.saturated and saturated.interval() is None and saturated.has_physical_time
    unknown = TTExt(1000, TsSource.CPU, ClockQuality.UNKNOWN, 3, 1)
    assert unknown.uncertainty_ns == 0xFFFF and unknown.interval() is None and not unknown.has_physical_time


def test_subclass_instances_are_built_and_validated() -> None:
    """A subclass goes through the same rules (portable construction path)."""

    class Tagged(TTExt):
        pass

    tagged = Tagged(1, 0, 0, 1, 1)  # type: ignore[arg-type]
    assert type(tagged) is Tagged and tagged.ts_source is TsSource.GTE
    with pytest.raises(FieldError):
        Tagged(-1, 0, 0, 1, 1)  # type: ignore[arg-type]


# -- hostile input: never anything but HeaderError (spec §12.5) ------------------
URL = string.ascii_letters + string.digits + "-_"
near_text = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=URL + " \t,=+/\n", min_size=60, max_size=80),
    st.text(alphabet=URL, min_size=71, max_size=71),
    st.builds(lambda h, pre, post: pre + h.to_header() + post, headers, st.text(" \t\r\n,"), st.text(" \t\r\n,=")),
)


@settings(max_examples=400)
@given(near_text)
def test_from_header_only_ever_raises_header_error(value: str) -> None:
    """Arbitrary strings: a TTExt or a remote HeaderError with a known class, never another exception."""
    try:
        header = TTExt.from_header(value)
    except HeaderError as err:
        assert err.remote and err.error_class.startswith(("TEXT_", "VERSION", "PTP_", "TS_", "CLK_", "LTS_"))
        assert err.field and err.rule
    else:
        assert TTExt.from_header(header.to_header()) == header
        assert value.strip(" \t") == header.to_header() or header.clk_quality is ClockQuality.UNKNOWN


@settings(max_examples=400)
@given(st.one_of(st.binary(max_size=120), st.binary(min_size=53, max_size=53)))
def test_decode_only_ever_raises_header_error(data: bytes) -> None:
    """Arbitrary bytes, 53 long or not: a TTExt or a remote HeaderError, never another exception."""
    try:
        header = TTExt.decode(data)
    except HeaderError as err:
        assert err.remote
    else:
        assert len(data) == 53 and (header.encode() == data or header.clk_quality is ClockQuality.UNKNOWN)
    for form in (bytearray(data), memoryview(data)):
        try:
            TTExt.decode(form)
        except HeaderError:
            pass


@given(
    st.one_of(
        st.none(), st.integers(), st.floats(), st.binary(), st.lists(st.text()), st.dictionaries(st.text(), st.text())
    )
)
def test_non_text_values_are_text_type_errors(value: object) -> None:
    """Lists (several carrier values), bytes, numbers: TEXT_TYPE, not TypeError (spec §9.3)."""
    with pytest.raises(HeaderError) as info:
        TTExt.from_header(value)
    assert info.value.error_class == "TEXT_TYPE"


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers(0, 255))))
def test_non_bytes_values_are_binary_type_errors(value: object) -> None:
    with pytest.raises(HeaderError) as info:
        TTExt.decode(value)  # type: ignore[arg-type]
    assert info.value.error_class == "BINARY_TYPE"


def test_str_subclass_is_accepted() -> None:
    class Header(str):
        pass

    text = TTExt(1, 0, 0, 1, 1).to_header()  # type: ignore[arg-type]
    assert TTExt.from_header(Header(text)) == TTExt.from_header(text)


def test_huge_input_is_refused_before_scanning() -> None:
    """A megabyte of valid-looking characters is TEXT_LENGTH (spec §5.2 step 1)."""
    with pytest.raises(HeaderError) as info:
        TTExt.from_header("A" * 1_000_000)
    assert info.value.error_class == "TEXT_LENGTH"


def test_decode_refusals_are_the_peers_and_name_the_field() -> None:
    """The decoder builds through the validating constructor; a refusal is re-labelled remote (spec §9.1)."""
    raw = bytearray(TTExt(1, 0, 0, 1, 1).encode())  # type: ignore[arg-type]
    for offset, value, error_class in ((9, 3, "TS_SOURCE"), (10, 7, "CLK_QUALITY"), (1, 0x80, "PTP_NS_RANGE")):
        bad = bytearray(raw)
        bad[offset] = value
        with pytest.raises(FieldError) as info:
            TTExt.decode(bytes(bad))
        assert info.value.error_class == error_class and info.value.remote
        assert "received header" in str(info.value)


def test_a_huge_buffer_is_measured_before_it_is_copied() -> None:
    """A 100 MB bytearray is refused as LENGTH from its size alone (issue 13 item 8)."""
    import tracemalloc

    big = bytearray(100_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(HeaderError) as info:
            TTExt.decode(big)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.error_class == "LENGTH" and peak < 1_000_000


@pytest.mark.parametrize("odd", ["\ud800", "\udfff", "\x80", "\u00ff", "\U0010ffff"])
def test_non_ascii_inside_a_71_character_value_is_alphabet_error(odd: str) -> None:
    """Lone surrogates and non-ASCII code points take the classifying path (spec §5.2 step 5)."""
    text = TTExt(1, 0, 0, 1, 1).to_header()  # type: ignore[arg-type]
    for position in (0, 35, 70):
        with pytest.raises(HeaderError) as info:
            TTExt.from_header(text[:position] + odd + text[position + 1 :])
        assert info.value.error_class == "TEXT_ALPHABET"


def test_memoryview_with_wide_items_is_measured_in_bytes() -> None:
    """53 four-byte items are 212 bytes: LENGTH, not a struct.error (spec §4)."""
    import array

    wide = memoryview(array.array("I", [0] * 53))
    with pytest.raises(HeaderError) as info:
        TTExt.decode(wide)
    assert info.value.error_class == "LENGTH"
    raw = TTExt(1, 0, 0, 1, 1).encode()  # type: ignore[arg-type]
    assert TTExt.decode(memoryview(raw)) == TTExt.decode(bytearray(raw)) == TTExt.decode(raw)


def test_hostile_objects_get_header_errors() -> None:
    """Objects that fake their class or override str/bytes methods never leak other exceptions (spec §12.5)."""

    class FakeStr:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return str

    class EvilStr(str):
        def strip(self, *args: object) -> str:
            raise RuntimeError("boom")

        def __str__(self) -> str:
            raise RuntimeError("boom")

        def encode(self, *args: object, **kwargs: object) -> bytes:
            raise RuntimeError("boom")

    class EvilBytes(bytes):
        def __bytes__(self) -> bytes:
            raise RuntimeError("boom")

        def __len__(self) -> int:
            raise RuntimeError("boom")

    assert isinstance(FakeStr(), str)
    with pytest.raises(HeaderError):
        TTExt.from_header(FakeStr())
    text = TTExt(1, 0, 0, 1, 1).to_header()  # type: ignore[arg-type]
    assert TTExt.from_header(EvilStr(text)) == TTExt.from_header(text)
    with pytest.raises(HeaderError):
        TTExt.from_header(EvilStr(" " + text[1:]))
    raw = TTExt(1, 0, 0, 1, 1).encode()  # type: ignore[arg-type]
    assert TTExt.decode(EvilBytes(raw)) == TTExt.decode(raw)
    with pytest.raises(HeaderError):
        TTExt.decode(FakeStr())  # type: ignore[arg-type]
