"""Stamps-text vectors (spec/semantic-conventions.md §1.4), from reference_stamps.py.

Each case states its outcome (the error class, or for a valid text its
canonical form) and the reference checks the statement: a case whose
statement the reference does not share stops the generator. New cases go at
the end of their group (tcIds never move). The texts a reader refuses are in
cases_stamps_refused.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from reference_stamps import (
    I63,
    TAI_UTC_BASE_NS,
    Reading,
    Received,
    Stamps,
    decode,
    encode,
)

T = 1_700_000_000_000_000_000  # the span's OpenTelemetry start time (Unix ns)
E = T + 5_000_000  # its end time
B = T + TAI_UTC_BASE_NS  # the start's ptp_ns when dt is 0
EB = E + TAI_UTC_BASE_NS
U64 = 2**64 - 1
SOURCES = ("GTE", "SW_GCC", "CPU")
QUALITIES = ("OK", "DEGRADED", "UNKNOWN")
ZERO_SKETCH = "k" + "A" * 43
FULL_SKETCH = "k" + "_" * 42 + "8"  # 256 one bits, then the two zero padding bits
# 0x00, 0x01, ..., 0x1f: every character position carries a different value.
COUNTING = bytes(range(32))

NOTES: dict[str, tuple[str, str]] = {
    "Typical": ("BASIC", "A text as the SDK writes it for an ordinary span (semantic-conventions 1.4 examples)."),
    "TokenKind": ("BASIC", "Each token (s, e, r, k, x) and the combinations of the ones that are optional."),
    "OptionalField": (
        "BASIC",
        "An optional field left out takes its default: dt 0, the start's bound and quality, no back (1.4).",
    ),
    "NotCanonical": (
        "MALLEABILITY",
        "A reader also accepts optional fields written out with their default; the canonical text leaves them out.",
    ),
    "Relative": ("EDGE_CASE", "dt, dlts, dptp and back negative, zero and positive: each relative to its base."),
    "PlainAttributes": (
        "EDGE_CASE",
        "Without the plain tempotrace.uncertainty_ns / clk_quality attributes the start reads as 65535, UNKNOWN; "
        "each absent one defaults on its own.",
    ),
    "PlainRange": (
        "BASIC",
        "A present plain attribute is the start's bound or quality: outside 0..65535 / OK, DEGRADED, UNKNOWN it is "
        "STAMPS_RANGE, checked with the start token's values, never clamped or taken for absent (1.4).",
    ),
    "Sketch": ("EDGE_CASE", "Sketches of 43 base64url characters: empty, full, every position, - and _."),
    "Sends": ("BASIC", "One or many x tokens, each relative to the start, in send order."),
    "FieldLimit": ("EDGE_CASE", "An absolute value at the end of its range: ptp_ns, lts 0 and 2^63-1, 65535, 15."),
    "OtelTime": (
        "EDGE_CASE",
        "OpenTelemetry times at 0 and 2^64-1 (OTLP fixed64): dt needs up to 20 digits and 66-bit arithmetic.",
    ),
    "Digits": ("MALLEABILITY", "Numbers are canonical decimals: no leading zero, no -0, no +, at most 20 digits."),
    "Enum": ("BASIC", "ts_source and clk_quality are 0, 1 or 2."),
    "Grammar": ("BASIC", "A token's fields: how many, separated by single commas (1.4 ABNF)."),
    "Spaces": ("BASIC", "Tokens are separated by exactly one space; nothing before the first or after the last."),
    "Order": ("BASIC", "s first, then e, r, k at most once each in that order, then x tokens."),
    "UnknownTag": ("BASIC", "A token whose tag is not s, e, r, k or x."),
    "SketchForm": ("MALLEABILITY", "A sketch is 43 characters of A-Z a-z 0-9 - _, the last two bits 0."),
    "Range": ("BASIC", "An absolute value outside its field's range once the deltas are added (1.4)."),
    "TooManySends": (
        "DOS",
        "More than MAX_SENDS = 2^20 'SP x' in a text are refused before anything is decoded (1.4).",
    ),
    "Precedence": ("PRECEDENCE", "Several rules broken: the first token at fault, and within it grammar before range."),
    "Encode": ("BASIC", "Writing the one canonical text of a span's absolute values."),
}


def _reading(r: Reading) -> dict[str, Any]:
    return {
        "ptpNs": str(r.ptp_ns),
        "uncertaintyNs": r.uncertainty_ns,
        "clkQuality": QUALITIES[r.clk_quality],
        "lts": str(r.lts),
    }


def stamps_json(st: Stamps) -> dict[str, Any]:
    """The vectors' form of decoded stamps (conformance/README.md)."""
    out: dict[str, Any] = {"tsSource": SOURCES[st.ts_source], "start": _reading(st.start)}
    if st.end is not None:
        out["end"] = _reading(st.end)
    if st.remote is not None:
        r = st.remote
        out["receive"] = {
            **_reading(Reading(r.ptp_ns, r.uncertainty_ns, r.clk_quality, r.lts)),
            "tsSource": SOURCES[r.ts_source],
            "tenantId": r.tenant_id,
        }
        if r.recv_lts is not None:
            out["receive"]["recvLts"] = str(r.recv_lts)
    if st.sketch is not None:
        out["sketch"] = st.sketch.hex()
    out["sends"] = [_reading(x) for x in st.sends]
    return out


def _bases(start_ns: int, end_ns: int, unc: int | None, qual: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(end_ns)}
    if unc is not None:
        out["uncertaintyNs"] = unc
    if qual is not None:  # a name; a number where the value has none (out of range)
        out["clkQuality"] = QUALITIES[qual] if 0 <= qual < len(QUALITIES) else qual
    return out


def valid(
    comment: str,
    flags: list[str],
    text: str,
    canonical: str | None = None,
    *,
    start_ns: int = T,
    end_ns: int = E,
    unc: int | None = 220,
    qual: int | None = 0,
) -> dict[str, Any]:
    """A text the reference decodes; canonical (default: the text itself) is what encode gives back."""
    st = decode(text, start_ns, end_ns, unc, qual)
    again = encode(st, start_ns, end_ns)
    assert again == (canonical or text), (comment, again)
    assert decode(again, start_ns, end_ns, unc, qual) == st, comment
    if canonical is not None and "NotCanonical" not in flags:
        flags = [*flags, "NotCanonical"]
    return {
        "comment": comment,
        "flags": flags,
        "text": text,
        **_bases(start_ns, end_ns, unc, qual),
        "result": "valid",
        "stamps": stamps_json(st),
        "canonical": again,
    }


def _k(octets: bytes) -> str:
    """The canonical sketch token of 32 octets (written here once, checked by the reference's decode)."""
    st = decode("s0,0 k" + "A" * 43, T, E, 0, 0)
    return encode(replace(st, sketch=octets), T, E).split(" ")[1]


def decode_valid() -> list[dict[str, Any]]:
    big = str(I63)
    return [
        valid("a @traced span: GTE clock, lts 81234, ended 3 ticks later", ["Typical"], "s81234,0 e3"),
        valid(
            "an instrumentation's span on a CPU clock: start 1523 ns, end 812 ns after the SDK's times",
            ["Typical"],
            "s81234,2,1523 e3,812",
            unc=65535,
            qual=2,
        ),
        valid(
            "a server span: received a header 233 us before its start, merged at lts 56, sent one at lts 58",
            ["Typical"],
            f"s57,2,4797 e2,3445 r2,-233096,65535,2,2,1,1 {_k(COUNTING)} x1,20681",
            unc=65535,
            qual=2,
        ),
        valid("start only, ts_source GTE", ["TokenKind", "Enum"], "s5,0"),
        valid("start only, ts_source SW_GCC", ["TokenKind", "Enum"], "s5,1"),
        valid("start only, ts_source CPU", ["TokenKind", "Enum"], "s5,2"),
        valid("start dt negative", ["Relative"], "s5,1,-1523"),
        valid("start dt 0 written out", ["OptionalField"], "s5,1,0", "s5,1"),
        valid("end dlts 0", ["TokenKind", "Relative"], "s5,0 e0"),
        valid("end dlts negative: the end's lts below the start's", ["Relative"], "s5,0 e-3"),
        valid("end dt negative", ["Relative"], "s5,0 e3,-812"),
        valid("end dt 0 written out", ["OptionalField"], "s5,0 e3,0", "s5,0 e3"),
        valid("end with its own bound and quality: dt 0 must then be written", ["OptionalField"], "s5,0 e3,0,4000,1"),
        valid("end with only its own quality", ["OptionalField", "Enum"], "s5,0 e3,7,220,2"),
        valid("end with only its own bound", ["OptionalField"], "s5,0 e3,7,221,0"),
        valid(
            "end bound and quality written out equal to the start's", ["OptionalField"], "s5,0 e3,7,220,0", "s5,0 e3,7"
        ),
        valid("receive not merged (no back)", ["TokenKind", "OptionalField"], "s9,0 r4,-80000,40,0,0,3"),
        valid("receive merged: back 5, the receive at lts 4", ["TokenKind"], "s9,0 r4,-80000,40,0,0,3,5"),
        valid("receive back 0", ["Relative"], "s9,0 r4,0,40,1,1,3,0"),
        valid("receive back negative: the receive's lts above the start's", ["Relative"], "s9,0 r4,80000,40,2,2,3,-2"),
        valid("receive dptp 0, quality DEGRADED, source SW_GCC", ["Relative", "Enum"], "s9,0 r4,0,40,1,1,0"),
        valid("receive tenant 15, uncertainty 65535", ["FieldLimit"], "s9,0 r4,-1,65535,2,2,15,1"),
        valid("receive tenant 0, uncertainty 0, lts 0", ["FieldLimit"], "s9,0 r0,-1,0,0,0,0,1"),
        valid("receive lts 2^63-1", ["FieldLimit"], f"s9,0 r{big},-1,0,0,0,0,1"),
        valid("sketch all zero", ["TokenKind", "Sketch"], "s9,0 " + ZERO_SKETCH),
        valid(
            "sketch all one bits: the last character holds 1111 and two zero bits", ["Sketch"], "s9,0 " + FULL_SKETCH
        ),
        valid("sketch of octets 0x00..0x1f", ["Sketch"], "s9,0 " + _k(COUNTING)),
        valid("sketch using - and _", ["Sketch"], "s9,0 " + _k(bytes([0xFB, 0xFF, 0xBF] * 10 + [0xFB, 0xF0]))),
        valid("one send", ["TokenKind", "Sends"], "s5,0 x1,20681"),
        valid("a send with dlts and dptp 0", ["Sends", "Relative"], "s5,0 x0,0"),
        valid("a send with dlts and dptp negative", ["Sends", "Relative"], "s5,0 x-1,-20681"),
        valid("a send with its own bound and quality", ["Sends", "OptionalField"], "s5,0 x1,10,4000,1"),
        valid(
            "a send's bound and quality written out equal to the start's",
            ["Sends", "OptionalField"],
            "s5,0 x1,10,220,0",
            "s5,0 x1,10",
        ),
        valid(
            "five sends in send order, some with their own bound",
            ["Sends"],
            "s5,0 x1,10 x2,20,300,1 x2,25 x9,-4,65535,2 x1000,99999",
        ),
        valid("every token", ["TokenKind"], f"s5,0 e9,1 r3,-5,6,1,2,7,2 {FULL_SKETCH} x1,2 x3,4"),
        valid("start and receive", ["TokenKind"], "s5,0 r3,-5,6,1,2,7"),
        valid("start and sketch", ["TokenKind"], "s5,0 " + ZERO_SKETCH),
        valid("start, end and sends", ["TokenKind"], "s5,0 e4 x1,2"),
        valid("start, receive and sends", ["TokenKind"], "s5,0 r3,-5,6,1,2,7,1 x1,2"),
        valid("end and sketch, no receive", ["TokenKind"], f"s5,0 e4 {ZERO_SKETCH} x1,2"),
        valid(
            "without the plain attributes: 65535 and UNKNOWN, inherited by the end and sends",
            ["PlainAttributes"],
            "s5,0 e3 x1,1",
            unc=None,
            qual=None,
        ),
        valid(
            "without the plain attributes, an end with its own bound",
            ["PlainAttributes"],
            "s5,0 e3,0,10,0",
            unc=None,
            qual=None,
        ),
        valid("plain attributes DEGRADED, 0", ["PlainAttributes"], "s5,0 e3 x1,1,5,0", unc=0, qual=1),
        valid("start lts 0", ["FieldLimit"], "s0,0"),
        valid("start lts 2^63-1", ["FieldLimit"], f"s{big},0"),
        valid("start ptp_ns 2^63-1", ["FieldLimit"], f"s5,0,{I63 - B}"),
        valid("start ptp_ns 0", ["FieldLimit"], f"s5,0,-{B}"),
        valid("end lts 2^63-1", ["FieldLimit"], f"s5,0 e{I63 - 5}"),
        valid("end lts 0", ["FieldLimit"], "s5,0 e-5"),
        valid("end ptp_ns 2^63-1 and uncertainty 65535", ["FieldLimit"], f"s5,0 e1,{I63 - EB},65535,2"),
        valid("end ptp_ns 0", ["FieldLimit"], f"s5,0 e1,-{EB}"),
        valid("send ptp_ns 2^63-1 and lts 2^63-1", ["FieldLimit"], f"s5,0 x{I63 - 5},{I63 - B}"),
        valid("send lts 0 and ptp_ns 0, uncertainty 65535", ["FieldLimit"], f"s5,0 x-5,-{B},65535,2"),
        valid("remote ptp_ns 0", ["FieldLimit"], f"s5,0 r3,-{B},6,1,2,7"),
        valid("remote ptp_ns 2^63-1", ["FieldLimit"], f"s5,0 r3,{I63 - B},6,1,2,7"),
        valid("receive lts 2^63-1 through back", ["FieldLimit"], f"s5,0 r3,0,6,1,2,7,-{I63 - 5}"),
        valid("receive lts 0 through back", ["FieldLimit"], f"s{big},0 r3,0,6,1,2,7,{big}"),
        valid("OpenTelemetry start 0: ptp_ns is dt + 37 s", ["OtelTime"], "s5,0,1", start_ns=0, end_ns=0),
        valid(
            "OpenTelemetry start 2^64-1 (year 2554): a 20-digit negative dt brings ptp_ns to 1",
            ["OtelTime"],
            f"s5,0,-{U64 + TAI_UTC_BASE_NS - 1}",
            start_ns=U64,
            end_ns=U64,
        ),
        valid(
            "OpenTelemetry end 2^64-1: end ptp_ns 2^63-1 through a 20-digit dt",
            ["OtelTime"],
            f"s5,0 e1,-{U64 + TAI_UTC_BASE_NS - I63}",
            end_ns=U64,
        ),
        valid("dlts of 19 digits", ["Digits"], f"s0,0 e{10**18 * 9}"),
    ]


def encode_cases() -> list[dict[str, Any]]:
    """Absolute values -> the canonical text; each checked by decoding it back to the same values."""
    s = Reading(B, 220, 0, 81234)

    def case(
        comment: str, flags: list[str], st: Stamps, text: str, start_ns: int = T, end_ns: int = E
    ) -> dict[str, Any]:
        assert encode(st, start_ns, end_ns) == text, (comment, encode(st, start_ns, end_ns))
        assert decode(text, start_ns, end_ns, st.start.uncertainty_ns, st.start.clk_quality) == st, comment
        return {
            "comment": comment,
            "flags": ["Encode", *flags],
            "startTimeUnixNano": str(start_ns),
            "endTimeUnixNano": str(end_ns),
            "stamps": stamps_json(st),
            "result": "valid",
            "text": text,
        }

    remote = Received(B - 233_096, 65535, 2, 2, 1, 2, 81230)
    return [
        case("start only, read at the OpenTelemetry time: dt left out", ["Typical"], Stamps(s, 0), "s81234,0"),
        case(
            "start 1523 ns after the OpenTelemetry time",
            ["Relative"],
            Stamps(replace(s, ptp_ns=B + 1523), 2),
            "s81234,2,1523",
        ),
        case("start before the OpenTelemetry time", ["Relative"], Stamps(replace(s, ptp_ns=B - 7), 1), "s81234,1,-7"),
        case(
            "end at the OpenTelemetry end time with the start's bound",
            ["OptionalField"],
            Stamps(s, 0, Reading(EB, 220, 0, 81237)),
            "s81234,0 e3",
        ),
        case("end 812 ns late", ["Relative"], Stamps(s, 0, Reading(EB + 812, 220, 0, 81237)), "s81234,0 e3,812"),
        case(
            "end with its own bound at dt 0: dt is written",
            ["OptionalField"],
            Stamps(s, 0, Reading(EB, 4000, 0, 81237)),
            "s81234,0 e3,0,4000,0",
        ),
        case(
            "end with only its own quality",
            ["OptionalField"],
            Stamps(s, 0, Reading(EB - 5, 220, 1, 81234)),
            "s81234,0 e0,-5,220,1",
        ),
        case(
            "receive not merged",
            ["OptionalField"],
            Stamps(s, 0, None, replace(remote, recv_lts=None)),
            "s81234,0 r2,-233096,65535,2,2,1",
        ),
        case(
            "receive merged 4 ticks before the start",
            ["Typical"],
            Stamps(s, 0, None, remote),
            "s81234,0 r2,-233096,65535,2,2,1,4",
        ),
        case(
            "receive merged after the start's lts: back negative",
            ["Relative"],
            Stamps(s, 0, None, replace(remote, recv_lts=81240, ptp_ns=B + 9)),
            "s81234,0 r2,9,65535,2,2,1,-6",
        ),
        case("sketch 0x00..0x1f", ["Sketch"], Stamps(s, 0, None, None, COUNTING), f"s81234,0 {_k(COUNTING)}"),
        case("sketch all ones", ["Sketch"], Stamps(s, 0, None, None, b"\xff" * 32), f"s81234,0 {FULL_SKETCH}"),
        case(
            "sends with and without their own bound",
            ["Sends"],
            Stamps(
                s,
                0,
                sends=(Reading(B + 10, 220, 0, 81235), Reading(B + 5, 300, 0, 81236), Reading(B - 4, 220, 2, 81233)),
            ),
            "s81234,0 x1,10 x2,5,300,0 x-1,-4,220,2",
        ),
        case(
            "every token",
            ["TokenKind"],
            Stamps(s, 2, Reading(EB + 1, 220, 0, 81240), remote, bytes(32), (Reading(B + 20681, 220, 0, 81235),)),
            f"s81234,2 e6,1 r2,-233096,65535,2,2,1,4 {ZERO_SKETCH} x1,20681",
        ),
        case(
            "values at their limits",
            ["FieldLimit"],
            Stamps(
                Reading(I63, 65535, 2, I63),
                2,
                Reading(0, 0, 0, 0),
                Received(0, 65535, 2, 2, 15, I63, 0),
                None,
                (Reading(I63, 65535, 2, 0),),
            ),
            f"s{I63},2,{I63 - B} e-{I63},-{EB},0,0 r{I63},-{I63},65535,2,2,15,{I63} x-{I63},0",
        ),
        case(
            "OpenTelemetry times 2^64-1: 20-digit dt",
            ["OtelTime"],
            Stamps(Reading(1, 0, 0, 0), 0, Reading(2, 0, 0, 0)),
            f"s0,0,-{U64 + TAI_UTC_BASE_NS - 1} e0,-{U64 + TAI_UTC_BASE_NS - 2}",
            U64,
            U64,
        ),
        case("OpenTelemetry times 0", ["OtelTime"], Stamps(Reading(TAI_UTC_BASE_NS, 0, 0, 0), 0), "s0,0", 0, 0),
    ]
