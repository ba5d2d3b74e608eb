"""Stamps-text vectors that a reader refuses (spec/semantic-conventions.md §1.4), each naming its rule.

Shares the constants and helpers of cases_stamps.py; like it, each case states
its outcome (the error class) and reference_stamps.py checks the statement.
"""

from __future__ import annotations

from typing import Any

from cases_stamps import EB, U64, ZERO_SKETCH, B, E, T, _bases, valid
from reference_stamps import MAX_SENDS, Refused, decode


def invalid(
    comment: str,
    flags: list[str],
    text: str | list[tuple[str, int]],
    error: str,
    *,
    start_ns: int = T,
    end_ns: int = E,
    unc: int | None = 220,
    qual: int | None = 0,
) -> dict[str, Any]:
    """A text the reference refuses with ``error``; a list of (piece, repeat) stands for a long text."""
    whole = text if isinstance(text, str) else "".join(piece * n for piece, n in text)
    try:
        decode(whole, start_ns, end_ns, unc, qual)
    except Refused as err:
        assert err.error_class == error, (comment, err)
    else:
        raise AssertionError(f"{comment}: the reference accepts it")
    given = {"text": text} if isinstance(text, str) else {"textParts": [{"text": p, "repeat": n} for p, n in text]}
    return {
        "comment": comment,
        "flags": flags,
        **given,
        **_bases(start_ns, end_ns, unc, qual),
        "result": "invalid",
        "errorClass": error,
    }


def _parts(head: str, unit: str, n: int) -> list[tuple[str, int]]:
    return [(head, 1), (unit, n)]


def decode_invalid() -> list[dict[str, Any]]:
    big = 2**63
    sk42 = "k" + "A" * 42
    return [
        invalid("empty text", ["Spaces"], "", "STAMPS_START"),
        invalid("a space before the start", ["Spaces"], " s5,0", "STAMPS_START"),
        invalid("no start token: an end first", ["Order"], "e1", "STAMPS_START"),
        invalid("no start token: a send first", ["Order"], "x1,1", "STAMPS_START"),
        invalid("upper-case tag S", ["UnknownTag"], "S5,0", "STAMPS_START"),
        invalid("start lts with a leading zero", ["Digits"], "s05,0", "STAMPS_START"),
        invalid("start lts negative (a uint)", ["Digits"], "s-5,0", "STAMPS_START"),
        invalid("start lts with a plus sign", ["Digits"], "s+5,0", "STAMPS_START"),
        invalid("start dt -0", ["Digits"], "s5,0,-0", "STAMPS_START"),
        invalid("start dt with a leading zero", ["Digits"], "s5,0,01", "STAMPS_START"),
        invalid("start dt of 21 digits", ["Digits"], "s5,0,-" + "1" * 21, "STAMPS_START"),
        invalid("start lts of 21 digits", ["Digits"], "s1" + "0" * 20, "STAMPS_START"),
        invalid("start dt in exponent form", ["Digits"], "s5,0,1e3", "STAMPS_START"),
        invalid("start lts in full-width digits", ["Digits"], "s\uff15,0", "STAMPS_START"),
        invalid("ts_source 3", ["Enum"], "s5,3", "STAMPS_START"),
        invalid("ts_source -1", ["Enum"], "s5,-1", "STAMPS_START"),
        invalid("ts_source 00", ["Enum", "Digits"], "s5,00", "STAMPS_START"),
        invalid("start without ts_source", ["Grammar"], "s5", "STAMPS_START"),
        invalid("start with four fields", ["Grammar"], "s5,0,1,2", "STAMPS_START"),
        invalid("start with a trailing comma", ["Grammar"], "s5,0,", "STAMPS_START"),
        invalid("start with an empty field", ["Grammar"], "s5,,0", "STAMPS_START"),
        invalid("a tab after the start", ["Spaces"], "s5,0\te1", "STAMPS_START"),
        invalid("a newline at the end", ["Spaces"], "s5,0\n", "STAMPS_START"),
        invalid("a trailing space", ["Spaces"], "s5,0 ", "STAMPS_TOKEN"),
        invalid("two spaces between tokens", ["Spaces"], "s5,0  e1", "STAMPS_TOKEN"),
        invalid("a trailing space after a send", ["Spaces"], "s5,0 x1,1 ", "STAMPS_TOKEN"),
        invalid("unknown tag z", ["UnknownTag"], "s5,0 z1", "STAMPS_TOKEN"),
        invalid("upper-case tag E", ["UnknownTag"], "s5,0 E1", "STAMPS_TOKEN"),
        invalid("a non-ASCII tag", ["UnknownTag"], "s5,0 \u00e91", "STAMPS_TOKEN"),
        invalid("a digit where a tag belongs", ["UnknownTag"], "s5,0 1", "STAMPS_TOKEN"),
        invalid("receive before end", ["Order"], "s5,0 r3,-5,6,1,2,7 e1", "STAMPS_ORDER"),
        invalid("end twice", ["Order"], "s5,0 e1 e2", "STAMPS_ORDER"),
        invalid("receive twice", ["Order"], "s5,0 r3,-5,6,1,2,7 r3,-5,6,1,2,7", "STAMPS_ORDER"),
        invalid("sketch twice", ["Order"], f"s5,0 {ZERO_SKETCH} {ZERO_SKETCH}", "STAMPS_ORDER"),
        invalid("a send before the end", ["Order"], "s5,0 x1,1 e1", "STAMPS_ORDER"),
        invalid("sketch before receive", ["Order"], f"s5,0 {ZERO_SKETCH} r3,-5,6,1,2,7", "STAMPS_ORDER"),
        invalid("sketch after a send", ["Order"], f"s5,0 x1,1 {ZERO_SKETCH}", "STAMPS_ORDER"),
        invalid("start twice", ["Order"], "s5,0 s5,0", "STAMPS_ORDER"),
        invalid("end without fields", ["Grammar"], "s5,0 e", "STAMPS_END"),
        invalid("end dlts with a leading zero", ["Digits"], "s5,0 e01", "STAMPS_END"),
        invalid("end dlts -0", ["Digits"], "s5,0 e-0", "STAMPS_END"),
        invalid("end with three fields (bound without quality)", ["Grammar"], "s5,0 e1,2,3", "STAMPS_END"),
        invalid("end quality 3", ["Enum"], "s5,0 e1,0,220,3", "STAMPS_END"),
        invalid("end bound negative (a uint)", ["Digits"], "s5,0 e1,0,-3,0", "STAMPS_END"),
        invalid("end with five fields", ["Grammar"], "s5,0 e1,0,220,0,0", "STAMPS_END"),
        invalid("end with an empty dt", ["Grammar"], "s5,0 e1,,220,0", "STAMPS_END"),
        invalid("receive with five fields", ["Grammar"], "s5,0 r3,-5,6,1,2", "STAMPS_RECEIVE"),
        invalid("receive with eight fields", ["Grammar"], "s5,0 r3,-5,6,1,2,7,1,1", "STAMPS_RECEIVE"),
        invalid("receive quality 3", ["Enum"], "s5,0 r3,-5,6,3,2,7", "STAMPS_RECEIVE"),
        invalid("receive ts_source 3", ["Enum"], "s5,0 r3,-5,6,1,3,7", "STAMPS_RECEIVE"),
        invalid("receive tenant negative (a uint)", ["Digits"], "s5,0 r3,-5,6,1,2,-7", "STAMPS_RECEIVE"),
        invalid("receive lts negative (a uint)", ["Digits"], "s5,0 r-3,-5,6,1,2,7", "STAMPS_RECEIVE"),
        invalid("receive back -0", ["Digits"], "s5,0 r3,-5,6,1,2,7,-0", "STAMPS_RECEIVE"),
        invalid("sketch of 42 characters", ["SketchForm"], "s5,0 " + sk42, "STAMPS_SKETCH"),
        invalid("sketch of 44 characters", ["SketchForm"], "s5,0 " + ZERO_SKETCH + "A", "STAMPS_SKETCH"),
        invalid("sketch with base64 padding", ["SketchForm"], "s5,0 " + sk42 + "A=", "STAMPS_SKETCH"),
        invalid("sketch with standard-base64 +", ["SketchForm"], "s5,0 k+" + "A" * 42, "STAMPS_SKETCH"),
        invalid("sketch with standard-base64 /", ["SketchForm"], "s5,0 k/" + "A" * 42, "STAMPS_SKETCH"),
        invalid("sketch last character B: padding bits 01", ["SketchForm"], "s5,0 " + sk42 + "B", "STAMPS_SKETCH"),
        invalid("sketch last character _: padding bits 11", ["SketchForm"], "s5,0 " + sk42 + "_", "STAMPS_SKETCH"),
        invalid("empty sketch", ["SketchForm"], "s5,0 k", "STAMPS_SKETCH"),
        invalid("send with one field", ["Grammar"], "s5,0 x1", "STAMPS_SEND"),
        invalid("send with three fields", ["Grammar"], "s5,0 x1,2,3", "STAMPS_SEND"),
        invalid("send quality 3", ["Enum"], "s5,0 x1,2,3,3", "STAMPS_SEND"),
        invalid("send dlts -0", ["Digits"], "s5,0 x-0,1", "STAMPS_SEND"),
        invalid("second send malformed", ["Grammar"], "s5,0 x1,1 x2", "STAMPS_SEND"),
        invalid("start lts 2^63", ["Range"], f"s{big},0", "STAMPS_RANGE"),
        invalid("start lts of 20 digits", ["Range", "Digits"], "s" + "9" * 20 + ",0", "STAMPS_RANGE"),
        invalid("start ptp_ns -1", ["Range"], f"s5,0,-{B + 1}", "STAMPS_RANGE"),
        invalid("start ptp_ns 2^63", ["Range"], f"s5,0,{big - B}", "STAMPS_RANGE"),
        invalid("end lts -1", ["Range"], "s5,0 e-6", "STAMPS_RANGE"),
        invalid("end lts 2^63", ["Range"], f"s5,0 e{big - 5}", "STAMPS_RANGE"),
        invalid("end ptp_ns -1", ["Range"], f"s5,0 e1,-{EB + 1}", "STAMPS_RANGE"),
        invalid("end ptp_ns 2^63", ["Range"], f"s5,0 e1,{big - EB}", "STAMPS_RANGE"),
        invalid("end uncertainty 65536", ["Range"], "s5,0 e1,0,65536,0", "STAMPS_RANGE"),
        invalid("remote uncertainty 65536", ["Range"], "s5,0 r3,-5,65536,1,2,7", "STAMPS_RANGE"),
        invalid("tenant 16", ["Range"], "s5,0 r3,-5,6,1,2,16", "STAMPS_RANGE"),
        invalid("remote lts 2^63", ["Range"], f"s5,0 r{big},-5,6,1,2,7", "STAMPS_RANGE"),
        invalid("remote ptp_ns -1", ["Range"], f"s5,0 r3,-{B + 1},6,1,2,7", "STAMPS_RANGE"),
        invalid("receive lts -1: back above the start's lts", ["Range"], "s5,0 r3,-5,6,1,2,7,6", "STAMPS_RANGE"),
        invalid("receive lts 2^63 through back", ["Range"], f"s5,0 r3,-5,6,1,2,7,-{big - 5}", "STAMPS_RANGE"),
        invalid("send lts -1", ["Range"], "s5,0 x-6,0", "STAMPS_RANGE"),
        invalid("send ptp_ns 2^63", ["Range"], f"s5,0 x1,{big - B}", "STAMPS_RANGE"),
        invalid("send uncertainty 65536", ["Range"], "s5,0 x1,1,65536,0", "STAMPS_RANGE"),
        invalid("second send's lts -1", ["Range"], "s5,0 x1,1 x-6,1", "STAMPS_RANGE"),
        invalid(
            "a 20-digit dlts: in the grammar, out of range", ["Range", "Digits"], "s5,0 e" + "9" * 20, "STAMPS_RANGE"
        ),
        invalid(
            "OpenTelemetry start 2^64-1 and dt 0: ptp_ns beyond 2^63-1",
            ["Range", "OtelTime"],
            "s5,0",
            "STAMPS_RANGE",
            start_ns=U64,
            end_ns=U64,
        ),
        invalid(
            "OpenTelemetry start 0 and the most negative dt",
            ["Range", "OtelTime"],
            "s5,0,-" + "9" * 20,
            "STAMPS_RANGE",
            start_ns=0,
            end_ns=0,
        ),
        invalid(
            "an end out of range before a malformed send: the end's rule", ["Precedence"], "s5,0 e-9 x1", "STAMPS_RANGE"
        ),
        invalid("a send out of range before an unknown tag", ["Precedence"], "s5,0 x-9,1 z", "STAMPS_RANGE"),
        invalid(
            "lts beyond range and ts_source 9: grammar before range",
            ["Precedence"],
            "s" + "9" * 20 + ",9",
            "STAMPS_START",
        ),
        invalid("out of order and malformed: order first", ["Precedence"], "s5,0 x1,1 e", "STAMPS_ORDER"),
        invalid("a malformed end before a malformed send", ["Precedence"], "s5,0 e1,0,220 x1", "STAMPS_END"),
        invalid(
            "2^20+1 sends after a broken start: counted before anything is decoded",
            ["TooManySends", "Precedence"],
            _parts("s", " x", MAX_SENDS + 1),
            "STAMPS_TOO_MANY_SENDS",
        ),
        invalid(
            "2^20 'SP x' after a broken start: at the limit, so the start's rule",
            ["TooManySends", "Precedence"],
            _parts("s", " x", MAX_SENDS),
            "STAMPS_START",
        ),
        invalid(
            "2^20+1 well-formed sends",
            ["TooManySends"],
            _parts("s5,0", " x0,0", MAX_SENDS + 1),
            "STAMPS_TOO_MANY_SENDS",
        ),
    ]


def decode_plain() -> list[dict[str, Any]]:
    """The span's plain attributes: each absent one defaults alone; a present one is range-checked as the
    start's (semantic-conventions §1.4). Appended after the refused texts, so no earlier tcId moves."""
    return [
        valid(
            "only the quality present: the bound alone defaults to 65535",
            ["PlainAttributes"],
            "s5,0 e3",
            unc=None,
            qual=1,
        ),
        valid(
            "only the bound present: the quality alone defaults to UNKNOWN",
            ["PlainAttributes"],
            "s5,0 x1,1",
            unc=220,
            qual=None,
        ),
        valid(
            "bound 65535 with quality OK: at the top of its range",
            ["PlainRange", "FieldLimit"],
            "s5,0",
            unc=65535,
            qual=0,
        ),
        valid("bound 0 with quality UNKNOWN: read as given, not replaced", ["PlainRange"], "s5,0 e1", unc=0, qual=2),
        invalid("bound 65536", ["PlainRange"], "s5,0 e3", "STAMPS_RANGE", unc=65536),
        invalid("bound 70000", ["PlainRange"], "s5,0", "STAMPS_RANGE", unc=70000),
        invalid("bound -1", ["PlainRange"], "s5,0", "STAMPS_RANGE", unc=-1),
        invalid("bound 2^32: beyond a uint32", ["PlainRange"], "s5,0", "STAMPS_RANGE", unc=2**32),
        invalid("bound 2^64: beyond any integer type", ["PlainRange"], "s5,0", "STAMPS_RANGE", unc=2**64),
        invalid("quality 3", ["PlainRange"], "s5,0", "STAMPS_RANGE", qual=3),
        invalid("quality -1", ["PlainRange"], "s5,0", "STAMPS_RANGE", qual=-1),
        invalid("quality 2^64", ["PlainRange"], "s5,0", "STAMPS_RANGE", qual=2**64),
        invalid(
            "bound 70000 without the quality",
            ["PlainRange", "PlainAttributes"],
            "s5,0",
            "STAMPS_RANGE",
            unc=70000,
            qual=None,
        ),
        invalid(
            "quality 3 without the bound", ["PlainRange", "PlainAttributes"], "s5,0", "STAMPS_RANGE", unc=None, qual=3
        ),
        invalid(
            "bound 70000 where the end and a send have their own bound",
            ["PlainRange"],
            "s5,0 e3,0,10,0 x1,1,10,0",
            "STAMPS_RANGE",
            unc=70000,
        ),
        invalid(
            "bound 70000 and a malformed start: the start's grammar first",
            ["PlainRange", "Precedence"],
            "s5",
            "STAMPS_START",
            unc=70000,
        ),
        invalid(
            "quality 3 and a malformed end: the start's range comes first",
            ["PlainRange", "Precedence"],
            "s5,0 e",
            "STAMPS_RANGE",
            qual=3,
        ),
        invalid(
            "bound 70000 and an unknown tag after the start",
            ["PlainRange", "Precedence"],
            "s5,0 z1",
            "STAMPS_RANGE",
            unc=70000,
        ),
    ]
