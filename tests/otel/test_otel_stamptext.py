"""The ``tempotrace.stamps`` text (stamptext.py, semantic-conventions §1.4): exact texts, the round trip,
and a clear StampsError -- never another exception -- for any text that breaks a rule."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk import semconv as S
from tempotrace_sdk.errors import StampsError
from tempotrace_sdk.stamptext import TAI_UTC_BASE_NS, Reading, Received, SpanStamps, decode, encode, expand

T = 1_798_761_600_000_000_000  # an OTel (UTC) start time
B = T + TAI_UTC_BASE_NS  # the TAI reading our decorators make it from

#: (name, encode keyword arguments, the text): each case names what it shows.
TEXTS: list[tuple[str, dict[str, Any], str]] = [
    ("a decorator's span: the OTel times are the readings", dict(end=(8, B + 500, 220, 0), end_ns=T + 500), "s7,0 e1"),
    ("the SDK's start time read 1.5 us before ours", dict(start_ns=T - 1_500), "s7,0,1500"),
    ("an end read before the SDK's end time", dict(end=(9, B + 400, 220, 0), end_ns=T + 500), "s7,0 e2,-100"),
    ("an end whose clock degraded mid-span", dict(end=(8, B + 500, 900, 1), end_ns=T + 500), "s7,0 e1,0,900,1"),
    ("a merged receive: back = start lts - recv lts",
     dict(remote=(B - 80_000, 40, 0, 0, 3, 500), recv_lts=6), "s7,0 r500,-80000,40,0,0,3,1"),
    ("an unmerged receive has no back field", dict(remote=(B - 1, 40, 0, 0, 3, 2**62), recv_lts=None),
     f"s7,0 r{2**62},-1,40,0,0,3"),
    ("the sketch of a receiving span: 43 base64url characters", dict(sketch=bytes(31) + b"\x10"),
     "s7,0 k" + "A" * 41 + "BA"),
    ("sends: relative to the start; bound and quality only where they differ",
     dict(sends=[(8, B + 10, 220, 0), (9, B + 20, 65535, 2)]), "s7,0 x1,10 x2,20,65535,2"),
]  # fmt: skip


def _encode(**over: Any) -> str:
    args: dict[str, Any] = dict(lts=7, ptp_ns=B, uncertainty_ns=220, clk_quality=0, ts_source=0, start_ns=T)
    args.update(over)
    return encode(**args)


@pytest.mark.parametrize(("name", "over", "text"), TEXTS, ids=[t[0] for t in TEXTS])
def test_the_text_of_each_case(name: str, over: dict[str, Any], text: str) -> None:
    assert _encode(**over) == text, name
    got = decode(text, over.get("start_ns", T), over.get("end_ns", 0), 220, 0)
    assert got.start == Reading(B, 220, 0, 7)


u63 = st.integers(0, 2**63 - 1)
quality = st.integers(0, 2)
unc = st.integers(0, 65535)
sent = st.tuples(u63, u63, unc, quality)


@settings(max_examples=400, deadline=None)
@given(
    start=st.tuples(u63, u63, unc, quality, quality),
    start_ns=st.integers(0, 2**64 - 1),
    end=st.none() | sent,
    end_ns=st.integers(0, 2**64 - 1),
    remote=st.none() | st.tuples(u63, unc, quality, quality, st.integers(0, 15), u63),
    recv=st.none() | u63,
    sketch=st.none() | st.binary(min_size=32, max_size=32),
    sends=st.lists(sent, max_size=4),
)
def test_decode_gives_back_what_was_encoded(
    start: tuple[int, int, int, int, int],
    start_ns: int,
    end: tuple[int, int, int, int] | None,
    end_ns: int,
    remote: tuple[int, int, int, int, int, int] | None,
    recv: int | None,
    sketch: bytes | None,
    sends: list[tuple[int, int, int, int]],
) -> None:
    lts, ptp, u, q, source = start
    if ptp - start_ns - TAI_UTC_BASE_NS >= 10**20 or (end and end[1] - end_ns - TAI_UTC_BASE_NS >= 10**20):
        return  # beyond any OTel time a reading can be made from (|dt| has at most 20 digits)
    text = encode(lts, ptp, u, q, source, start_ns, end, end_ns, remote, recv if remote else None, sketch, sends)
    got = decode(text, start_ns, end_ns, u, q)
    assert got == SpanStamps(
        Reading(ptp, u, q, lts),
        source,
        None if end is None else Reading(end[1], end[2], end[3], end[0]),
        None if remote is None else Received(*remote, recv),
        sketch,
        tuple(Reading(p, su, sq, sl) for sl, p, su, sq in sends),
    )
    assert encode(lts, ptp, u, q, source, start_ns, end, end_ns, remote, recv if remote else None, sketch,
                  sends) == text  # fmt: skip


#: (name, text, the token named, the rule's stable class): every rule a reader checks.
BAD = [
    ("empty", "", "s", "STAMPS_START"),
    ("no start token", "e1", "e", "STAMPS_START"),
    ("a leading zero", "s07,0", "s", "STAMPS_START"),
    ("minus zero", "s7,0,-0", "s", "STAMPS_START"),
    ("a quality outside the enum", "s7,0 e1,0,220,3", "e", "STAMPS_END"),
    ("a source outside the enum", "s7,5", "s", "STAMPS_START"),
    ("more than 20 digits", "s7,0," + "9" * 21, "s", "STAMPS_START"),
    ("lts above 2^63-1", f"s{2**63},0", "s", "STAMPS_RANGE"),
    ("an end lts below 0", "s7,0 e-8", "e", "STAMPS_RANGE"),
    ("uncertainty above 65535", "s7,0 e1,0,65536,0", "e", "STAMPS_RANGE"),
    ("a tenant above 15", "s7,0 r1,0,0,0,0,16", "r", "STAMPS_RANGE"),
    ("a receive lts below 0", "s7,0 r1,0,0,0,0,1,8", "r", "STAMPS_RANGE"),
    ("a remote time before 1970", f"s7,0 r1,-{B + 1},0,0,0,1", "r", "STAMPS_RANGE"),
    ("a sketch of 42 characters", "s7,0 k" + "A" * 42, "k", "STAMPS_SKETCH"),
    ("a sketch with non-zero padding bits", "s7,0 k" + "A" * 42 + "B", "k", "STAMPS_SKETCH"),
    ("tokens out of order", "s7,0 r1,0,0,0,0,1 e1", "e", "STAMPS_ORDER"),
    ("a token twice", "s7,0 e1 e2", "e", "STAMPS_ORDER"),
    ("a send before the end", "s7,0 x1,1 e1", "e", "STAMPS_ORDER"),
    ("an unknown tag", "s7,0 z1", "z", "STAMPS_TOKEN"),
    ("two spaces", "s7,0  e1", " ", "STAMPS_TOKEN"),
    ("a trailing space", "s7,0 ", " ", "STAMPS_TOKEN"),
]


@pytest.mark.parametrize(("name", "text", "token", "error_class"), BAD, ids=[b[0] for b in BAD])
def test_a_text_that_breaks_a_rule_is_refused_naming_the_token_and_class(
    name: str, text: str, token: str, error_class: str
) -> None:
    with pytest.raises(StampsError) as info:
        decode(text, T, T, 220, 0)
    assert info.value.token == token, name
    assert info.value.error_class == error_class, name
    assert isinstance(info.value, ValueError) and info.value.field == S.STAMPS


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="serkx0123456789,- AQw_", max_size=60) | st.text(max_size=30))
def test_any_text_decodes_or_raises_stamps_error(text: str) -> None:
    try:
        decode(text, T, T, None, None)
    except StampsError:
        pass


def test_expand_writes_a_span_out_under_the_previous_names() -> None:
    attrs = {S.STAMPS: "s7,0 e1 r500,-80000,40,0,0,3,1 x1,10", S.CLK_QUALITY: "OK", S.UNCERTAINTY_NS: 220, "k": 1}
    got = expand(attrs, T, T + 500)
    assert got == {
        "k": 1, S.CLK_QUALITY: "OK", S.UNCERTAINTY_NS: 220,
        S.PTP_NS: B, S.LTS: 7, S.TS_SOURCE: "GTE",
        S.END_PTP_NS: B + 500, S.END_UNCERTAINTY_NS: 220, S.END_CLK_QUALITY: "OK", S.END_LTS: 8,
        S.REMOTE_PTP_NS: B - 80_000, S.REMOTE_UNCERTAINTY_NS: 40, S.REMOTE_CLK_QUALITY: "OK",
        S.REMOTE_TS_SOURCE: "GTE", S.REMOTE_TENANT_ID: 3, S.REMOTE_LTS: 500, S.RECV_LTS: 6,
        S.SEND_LTS: (8,), S.SEND_PTP_NS: (B + 10,), S.SEND_UNCERTAINTY_NS: (220,),
    }  # fmt: skip
    assert expand({"k": 1}, T, T) == {"k": 1}


@pytest.mark.parametrize(
    ("plain", "why"),
    [
        ({S.UNCERTAINTY_NS: 70_000}, "a bound above 65535 is not clamped"),
        ({S.UNCERTAINTY_NS: -1}, "a negative bound"),
        ({S.UNCERTAINTY_NS: "220"}, "a bound that is a string, not an int"),
        ({S.UNCERTAINTY_NS: True}, "a bool is no bound"),
        ({S.CLK_QUALITY: "ok"}, "quality names are exact"),
        ({S.CLK_QUALITY: "GOOD"}, "a quality nobody defined is not taken for absent"),
        ({S.CLK_QUALITY: 0}, "the quality attribute is the name, not the number"),
    ],
)
def test_expand_refuses_a_plain_attribute_outside_its_range(plain: dict[str, Any], why: str) -> None:
    """semantic-conventions §1.4 (issue 20): a present plain attribute is the start's value, range-checked."""
    attrs = {S.STAMPS: "s7,0 e1", S.CLK_QUALITY: "OK", S.UNCERTAINTY_NS: 220, **plain}
    with pytest.raises(StampsError) as info:
        expand(attrs, T, T)
    assert info.value.error_class == "STAMPS_RANGE", why
    assert "tempotrace." in info.value.rule, "the message names the attribute"


def test_each_absent_plain_attribute_defaults_on_its_own() -> None:
    only_quality = expand({S.STAMPS: "s7,0 e1", S.CLK_QUALITY: "DEGRADED"}, T, T)
    assert (only_quality[S.END_UNCERTAINTY_NS], only_quality[S.END_CLK_QUALITY]) == (65535, "DEGRADED")
    only_bound = expand({S.STAMPS: "s7,0 e1", S.UNCERTAINTY_NS: 40}, T, T)
    assert (only_bound[S.END_UNCERTAINTY_NS], only_bound[S.END_CLK_QUALITY]) == (40, "UNKNOWN")


def test_more_sends_than_a_span_records_are_refused_before_any_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    from tempotrace_sdk import stamptext

    monkeypatch.setattr(stamptext, "MAX_SENDS", 2)
    assert len(decode("s7,0 x1,1 x2,2", T, T, 220, 0).sends) == 2
    with pytest.raises(StampsError) as info:
        decode("s7,0 x1,1 x2,2 x3,3", T, T, 220, 0)
    assert info.value.token == "x" and "at most 2 sends" in info.value.rule
    assert info.value.error_class == "STAMPS_TOO_MANY_SENDS"
