"""The span table's schema (spec/parquet.md §2-§4): a typed column for every ``tempotrace.*`` attribute the SDK
writes, values in their column only when of its kind, the stamps text decoded and read back to the same
values, the version and notes in the footer, the exporter's part names."""

from __future__ import annotations

import io
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tempotrace_sdk import semconv as S
from tempotrace_sdk.analysis import parquet_layout as L
from tempotrace_sdk.analysis.otlp import AnyValue, ArrayValue
from tempotrace_sdk.analysis.values import RESOURCE_RULES, SPAN_RULES
from tempotrace_sdk.stamptext import MAX_SENDS, decode, encode
from tempotrace_sdk.wire.layout import LTS_MAX, UNCERTAINTY_SATURATED

from .otlpgen import line, span

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
from tempotrace_sdk.analysis import parquet_rows  # noqa: E402
from tempotrace_sdk.analysis import parquet_schema as PS  # noqa: E402  (needs pyarrow)
from tempotrace_sdk.analysis.parquet_records import RowGroup, span_stamps  # noqa: E402
from tempotrace_sdk.analysis.parquet_rows import RowBlock, typed_value  # noqa: E402
from tempotrace_sdk.analysis.parquet_write import encode_part  # noqa: E402

SPAN_TYPED = {c.attribute: c for c in L.SPAN_ATTRIBUTE_COLUMNS}
RESOURCE_TYPED = {c.attribute: c for c in L.RESOURCE_COLUMNS}


def test_every_tempotrace_attribute_the_sdk_writes_has_a_typed_column() -> None:
    """§2.2: the names come from semconv.py (what the SDK writes) and values.py (what the analysis reads)."""
    names = {v for k, v in vars(S).items() if k.isupper() and isinstance(v, str) and v.startswith("tempotrace.")
             and v != S.PREFIX}
    resource_only = {S.EXPORT_DROPPED_SPANS, S.EXPORT_WRITER_ID}
    assert names - resource_only - {S.STAMPS} <= set(SPAN_TYPED)
    assert set(RESOURCE_RULES) <= set(RESOURCE_TYPED) and resource_only <= set(RESOURCE_TYPED)
    for name, column in SPAN_TYPED.items():
        assert column.kind == SPAN_RULES[name].kind and column.name == name
    assert {c.name for c in L.COLUMNS} == set(PS.SCHEMA.names)


def test_ids_are_fixed_size_binary_and_strings_that_repeat_are_dictionaries() -> None:
    assert PS.SCHEMA.field(L.TRACE_ID).type == pa.binary(16) and PS.SCHEMA.field(L.SPAN_ID).type == pa.binary(8)
    assert pa.types.is_dictionary(PS.SCHEMA.field("resource.tempotrace.host").type)
    assert PS.SCHEMA.field(L.STAMPS_SKETCH).type == pa.binary(32)
    assert PS.SCHEMA.field(L.ATTRIBUTES).type == pa.map_(pa.string(), pa.string())


INT = SPAN_TYPED[S.RANK]
STR = SPAN_TYPED[S.HOST]
HEX = SPAN_TYPED[S.SVC_SKETCH]
ARR = SPAN_TYPED[S.SEND_LTS]
BOOL = SPAN_TYPED[S.CLOCK_STEPPED]
MISFIT = object()


@pytest.mark.parametrize(("column", "value", "want"), [
    pytest.param(INT, AnyValue(intValue=3), 3, id="an-int"),
    pytest.param(INT, AnyValue(intValue=-(2**31)), -(2**31), id="an-int-out-of-the-rules-range-still-an-int"),
    pytest.param(INT, AnyValue(intValue=2**63), MISFIT, id="beyond-int64-to-the-map"),
    pytest.param(INT, AnyValue(stringValue="3"), MISFIT, id="a-string-for-an-int-to-the-map"),
    pytest.param(INT, AnyValue(intValue=3, stringValue="3"), MISFIT, id="two-kinds-to-the-map"),
    pytest.param(INT, AnyValue(), MISFIT, id="no-kind-the-analysis-reads-to-the-map"),
    pytest.param(STR, AnyValue(stringValue="node1"), "node1", id="a-string"),
    pytest.param(BOOL, AnyValue(boolValue=False), False, id="a-bool"),
    pytest.param(BOOL, AnyValue(intValue=0), MISFIT, id="an-int-for-a-bool"),
    pytest.param(HEX, AnyValue(stringValue="aB" * 32), bytes([0xAB] * 32), id="hex-any-case"),
    pytest.param(HEX, AnyValue(stringValue="ab " * 21 + "a"), MISFIT, id="hex-with-spaces"),
    pytest.param(HEX, AnyValue(stringValue="ab" * 31), MISFIT, id="hex-too-short"),
    pytest.param(ARR, AnyValue(arrayValue=ArrayValue([AnyValue(intValue=1), AnyValue(intValue=2)])), [1, 2],
                 id="an-int-array"),
    pytest.param(ARR, AnyValue(arrayValue=ArrayValue([AnyValue(stringValue="1")])), MISFIT, id="an-array-of-strings"),
])
def test_a_value_goes_to_its_typed_column_only_when_of_its_kind(column: L.Column, value: AnyValue, want: Any) -> None:
    """§2.2: anything else stays in the map as written, where the analysis reads it (and refuses it) as before."""
    got = typed_value(column, value)
    if want is MISFIT:
        assert got is parquet_rows._MISFIT
    else:
        assert got == want


def _rows(text_line: str) -> RowGroup:
    block = RowBlock()
    block.add_line(text_line.encode())
    table = PS.conform(pa.Table.from_batches([PS.to_batch(block)]))
    return RowGroup(table, "t")


readings = st.tuples(st.integers(0, LTS_MAX), st.integers(0, LTS_MAX), st.integers(0, UNCERTAINTY_SATURATED),
                     st.integers(0, 2))


@given(start=readings, source=st.integers(0, 2), end=st.none() | readings, sends=st.lists(readings, max_size=3),
       remote=st.none() | st.tuples(st.integers(0, 2**62), st.integers(0, UNCERTAINTY_SATURATED), st.integers(0, 2),
                                    st.integers(0, 2), st.integers(0, 15), st.integers(0, LTS_MAX)),
       recv=st.none() | st.integers(0, LTS_MAX), sketch=st.none() | st.binary(min_size=32, max_size=32))
def test_the_stamps_columns_read_back_as_the_text_decodes(start: tuple[int, ...], source: int,
                                                          end: tuple[int, ...] | None, sends: list[tuple[int, ...]],
                                                          remote: tuple[int, ...] | None, recv: int | None,
                                                          sketch: bytes | None) -> None:
    """§2.3: decoded at convert with the bases the analysis uses, checked and rebuilt when read."""
    t0 = 1_700_000_000_000_000_000
    lts, ptp, unc, qual = start
    text = encode(lts, ptp, unc, qual, source, t0, None if end is None else (end[0], end[1], end[2], end[3]), t0 + 5,
                  remote, None if remote is None else recv, sketch, [(s[0], s[1], s[2], s[3]) for s in sends])
    try:
        want = decode(text, t0, t0 + 5, unc, qual)
    except ValueError:
        return  # values the text cannot hold (a dt beyond 20 digits): the text stays in the map
    attrs = {S.STAMPS: text, S.UNCERTAINTY_NS: unc, S.CLK_QUALITY: ("OK", "DEGRADED", "UNKNOWN")[qual]}
    group = _rows(line([span(1, 2, start=t0, end=t0 + 5, attrs=attrs)]))
    assert group.stamps is not None and group.stamps[0] is not None
    assert span_stamps(group.stamps[0], unc, attrs[S.CLK_QUALITY]) == want  # type: ignore[arg-type]


def test_a_stamps_text_that_does_not_decode_stays_as_written() -> None:
    group = _rows(line([span(1, 2, attrs={S.STAMPS: "s1,0 e-5"})]))
    assert group.stamps is None
    assert sorted((kv.key, kv.value.stringValue) for kv in group.attributes[0]) == [(S.HOST, "h"),
                                                                                   (S.STAMPS, "s1,0 e-5")]


@pytest.mark.parametrize(("row", "why"), [
    pytest.param({"lts": -1}, "stamps.start.lts", id="negative-lts"),
    pytest.param({"qual": "ok"}, "stamps.end.clk_quality", id="unknown-quality"),
    pytest.param({"source": "GPS"}, "stamps.ts_source", id="unknown-source"),
    pytest.param({"sends": [{"lts": 1, "ptp_ns": 1, "uncertainty_ns": 70_000, "clk_quality": "OK"}]},
                 "stamps.sends.uncertainty_ns", id="a-send-bound-out-of-range"),
])
def test_decoded_columns_another_writer_got_wrong_are_refused(row: dict[str, Any], why: str) -> None:
    """§5.1: a span table is input too; its stamps columns are checked as the text's fields are."""
    from tempotrace_sdk.analysis.values import AttributeRuleError

    values = {"source": "GTE", "lts": 1, "qual": "OK", "sends": None, **row}
    stamps = (values["source"], 5, 220, "OK", values["lts"], 9, 220, values["qual"], 3, *([None] * 7), None,
              values["sends"])
    with pytest.raises(AttributeRuleError, match=why):
        span_stamps(stamps, 220, "OK")
    assert MAX_SENDS == 1 << 20


def test_the_footer_says_the_version_and_the_notes() -> None:
    data = encode_part(line([span(1, 2)]).encode())
    meta = pq.ParquetFile(io.BytesIO(data)).metadata.metadata
    assert meta[L.VERSION_KEY.encode()] == b"tempotrace.parquet/1"
    assert msgspec.json.decode(meta[L.NOTES_KEY.encode()]) == {"trace_lines": 1}


@pytest.mark.parametrize(("meta", "said"), [
    pytest.param({}, "not a TempoTrace span table", id="no-version"),
    pytest.param({b"tempotrace.parquet": b"tempotrace.parquet/2"}, "this reader reads tempotrace.parquet/1",
                 id="a-newer-major-version"),
    pytest.param({b"tempotrace.parquet": b"other/1"}, "version 'other/1'", id="another-format"),
    pytest.param({b"tempotrace.parquet": b"tempotrace.parquet/1", b"tempotrace.notes": b"{\"bad_lines\": \"x\"}"},
                 "is not what spec/parquet.md", id="notes-of-the-wrong-shape"),
])
def test_a_file_that_is_no_span_table_of_this_version_says_why(meta: dict[bytes, bytes], said: str) -> None:
    notes = PS.notes_of(meta)
    assert isinstance(notes, str) and said in notes


def test_part_names_sort_by_sequence_and_parse_back() -> None:
    assert L.part_name("41-9f3a0c11", 7) == "part-41-9f3a0c11-00000007.parquet"
    assert L.part_of("part-41-9f3a0c11-00000007.parquet") == ("41-9f3a0c11", 7)
    assert L.part_of("part-41-9f3a0c11-123456789.parquet.tmp") == ("41-9f3a0c11", 123456789)
    assert L.part_of("spans-41.parquet") is None and L.part_of("part-x-00000001.parquet") is None
