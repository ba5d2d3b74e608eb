"""Decoded spans' OTLP fields (columnar/decode.py SpanFields): the C reading (native/columns/tt_skeleton.c)
equals the Python one field for field on drawn spans, ids about their shapes, kinds and times about their
ranges, each status; it shares equal trace ids and names as one object; it leaves to Python what only
Python reads as msgspec's decode never makes it (a str subclass, a float time, an item that is no span);
and what it marks is what the reference refuses or reads otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tempotrace_sdk.analysis.columnar.decode import _SKELETON, _Span, native_fields, python_fields
from tempotrace_sdk.analysis.otlp import Status
from tempotrace_sdk.analysis.values import AttributeRuleError, norm_id, span_kind, unix_nanos

pytest.importorskip("tempotrace_sdk._columns", reason="the native columns module is not built")

HEX = "0123456789abcdefABCDEF"


def _ids(digits: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(HEX, min_size=digits, max_size=digits),  # hex of its size, either case
        st.text(HEX, min_size=digits - 1, max_size=digits + 1),  # a digit short or over
        st.sampled_from(["", "AAAAAAAAAAAAAAAAAAAAAA==", "AAAAAAAAAAA=", "g" * digits, " a" * (digits // 2),
                         "\u0661" * digits, "ab" * (digits // 2 - 1) + "a\u00e9", "Ab" * (digits // 2),
                         "aB" * (digits // 2 - 1) + "aG", "F@" * (digits // 2), "`a" * (digits // 2)]),
    )


TIMES = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([-1, 0, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**100,
                                                               -(2**70)]))
KINDS = st.one_of(st.integers(-2, 6), st.sampled_from([2**31 - 1, 2**31, 2**63, -(2**63) - 1, 2**80]),
                  st.sampled_from(["SPAN_KIND_SERVER", "2", ""]))
STATUSES = st.one_of(st.none(), st.builds(Status, st.one_of(
    st.integers(0, 3), st.sampled_from([2**70, -2, "STATUS_CODE_ERROR", "STATUS_CODE_OK", "ERROR", "2"])),
    st.text(max_size=3)))
NAMES = st.sampled_from(["step", "all_reduce", "", "GET /x", "\u00e9"])

spans = st.builds(_Span, traceId=_ids(32), spanId=_ids(16), parentSpanId=st.one_of(st.just(""), _ids(16)),
                  name=NAMES, kind=KINDS, startTimeUnixNano=TIMES, endTimeUnixNano=TIMES, status=STATUSES)


def _assert_same(got: Any, want: Any) -> None:
    for name in ("trace_id", "span_id", "parent", "name", "kind", "start", "end", "attributes"):
        assert getattr(got, name) == getattr(want, name), name
    for name in ("marked", "errors"):
        assert getattr(got, name).tolist() == getattr(want, name).tolist(), name
    for name in ("start_times", "end_times"):
        assert getattr(got, name).equals(getattr(want, name)), name


@given(st.lists(spans, max_size=12))
def test_c_reads_the_fields_as_python_does(drawn: list[_Span]) -> None:
    """Field for field, on spans whose ids, kinds, times and statuses lie about the rules' edges."""
    got = native_fields(drawn)
    assert got is not None
    _assert_same(got, python_fields(drawn))


@given(st.lists(spans, max_size=12))
def test_what_is_not_marked_is_what_the_reference_reads(drawn: list[_Span]) -> None:
    """An unmarked span's ids, kind and times are the reference's readings of them (values.py); a marked one
    has one the reference refuses or reads otherwise (a base64 id, a kind's name)."""
    fields = native_fields(drawn)
    assert fields is not None
    for i, sp in enumerate(drawn):
        try:
            read = (norm_id(sp.traceId, 16, "traceId"), norm_id(sp.spanId, 8, "spanId"),
                    norm_id(sp.parentSpanId, 8, "parentSpanId") if sp.parentSpanId else "",
                    span_kind(sp.kind), unix_nanos(sp.startTimeUnixNano, "startTimeUnixNano"),
                    unix_nanos(sp.endTimeUnixNano, "endTimeUnixNano"))
        except AttributeRuleError:
            assert fields.marked[i], sp
            continue
        if fields.marked[i]:  # (read, but otherwise than as written: base64 ids, a kind by name)
            assert read[:4] != (sp.traceId.lower(), sp.spanId.lower(), sp.parentSpanId.lower(), sp.kind)
            continue
        assert read == (fields.trace_id[i], fields.span_id[i], fields.parent[i], fields.kind[i],
                        fields.start_times[i].as_py(), fields.end_times[i].as_py()), sp
        assert fields.errors[i] == (sp.status is not None and sp.status.code in (2, "STATUS_CODE_ERROR"))


def test_equal_trace_ids_and_names_are_one_object() -> None:
    """A window holds 10^5 records whose trace ids and names are a few values repeated: each distinct one is
    held once, an upper-case id lowered first."""
    a = _Span(traceId="AB" * 16, spanId="01" * 8, name="all_" + "reduce")
    b = _Span(traceId="ab" * 16, spanId="02" * 8, name="all_reduce")
    for fields in (native_fields([a, b]), python_fields([a, b])):
        assert fields is not None
        assert fields.trace_id[0] == "ab" * 16 and fields.trace_id[0] is fields.trace_id[1]
        assert fields.name[0] is fields.name[1]


class _Text(str):
    pass


class _Number(int):
    pass


@pytest.mark.parametrize("span", [
    _Span(traceId=_Text("ab" * 16), spanId="01" * 8),
    _Span(traceId="ab" * 16, spanId="01" * 8, startTimeUnixNano=1.5),  # type: ignore[arg-type]
    _Span(traceId="ab" * 16, spanId="01" * 8, endTimeUnixNano=True),
    _Span(traceId="ab" * 16, spanId="01" * 8, kind=_Number(1)),
    _Span(traceId="ab" * 16, spanId="01" * 8, kind=None),  # type: ignore[arg-type]
    _Span(traceId="ab" * 16, spanId="01" * 8, status="ERROR"),  # type: ignore[arg-type]
    _Span(traceId="ab" * 16, spanId="01" * 8, status=Status(code=2.0)),  # type: ignore[arg-type]
    "not a span",
])
def test_c_leaves_to_python_what_msgspec_never_makes(span: Any) -> None:
    """Structs built by hand hold what a decode cannot: C declines the whole list (Python reads it)."""
    plain = _Span(traceId="cd" * 16, spanId="03" * 8)
    assert native_fields([plain, span]) is None
    assert native_fields([plain]) is not None


def test_decoded_lines_are_read_in_c() -> None:
    """The skeleton msgspec decodes from a line, numbers written as strings and an error status included."""
    line = (b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + b"AB" * 16 + b'","spanId":"' + b"01" * 8
            + b'","kind":2,"startTimeUnixNano":"18446744073709551615","endTimeUnixNano":"18446744073709551616",'
            b'"status":{"code":"STATUS_CODE_ERROR"}},{"traceId":"' + b"ab" * 16 + b'","spanId":"' + b"02" * 8
            + b'","kind":"SPAN_KIND_CLIENT","startTimeUnixNano":5,"endTimeUnixNano":7}]}]}]}')
    doc = _SKELETON.decode(line)
    decoded = [sp for rs in doc.resourceSpans for ss in rs.scopeSpans for sp in ss.spans]
    fields = native_fields(decoded)
    assert fields is not None
    _assert_same(fields, python_fields(decoded))
    assert fields.trace_id == ["ab" * 16] * 2 and fields.trace_id[0] is fields.trace_id[1]
    assert fields.start_times.to_pylist() == [2**64 - 1, 5] and fields.end_times.to_pylist() == [None, 7]
    assert np.array_equal(fields.marked, [True, True]) and np.array_equal(fields.errors, [True, False])
