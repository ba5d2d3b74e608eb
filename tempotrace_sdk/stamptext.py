"""The ``tempotrace.stamps`` text: every stamp of a span in one short attribute (semantic-conventions §1.4).

A span's start and end events, the header it received and the headers it
sent are written as space-separated tokens, each a tag letter and decimal
fields, most of them relative to something the span already carries:

    s<lts>,<ts_source>[,<dt>]                     the start (always first)
    e<dlts>[,<dt>[,<uncertainty_ns>,<quality>]]    the end
    r<lts>,<dptp>,<uncertainty_ns>,<quality>,<ts_source>,<tenant>[,<back>]   the received header
    k<43 base64url characters>                     the span's sketch (only where a header brought one)
    x<dlts>,<dptp>[,<uncertainty_ns>,<quality>]    one per header sent, in send order

``dt`` is the reading minus the span's OpenTelemetry time (start or end)
plus ``TAI_UTC_BASE_NS``: 0 when our decorators made the OpenTelemetry time
from the reading, a few microseconds otherwise. ``dlts`` and ``dptp`` are
relative to the start's lts and ptp_ns; ``back`` is the start's lts minus
the receive's (absent: the receive was not merged, tt-ext §10.1). The start's
bound and quality are the span's plain ``tempotrace.uncertainty_ns`` and
``tempotrace.clk_quality`` attributes, and the defaults of the end's and the
sends'. Enums are tt-ext's numbers (quality 0 OK, 1 DEGRADED, 2 UNKNOWN;
source 0 GTE, 1 SW_GCC, 2 CPU).

Sans-IO, like the wire codec: ``encode`` takes absolute values and returns
the text, ``decode`` takes the text and its bases and returns absolute
values (``decode(encode(x)) == x``). Numbers are canonical decimals (no
leading zeros, no ``-0``, at most 20 digits) and ``encode`` leaves out every
optional field that holds its default, so it writes one text per set of
values; ``decode`` also accepts those fields written out. A text that breaks
a rule raises ``StampsError`` naming the token and the rule. ``expand`` gives a
span's values under the names of the previous attribute set, for readers (and
queries) written against those.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from . import semconv as S
from .errors import StampsError
from .wire.layout import LTS_MAX, TENANT_MAX, UNCERTAINTY_SATURATED, ClockQuality, TsSource

__all__ = [
    "MAX_SENDS",
    "TAI_UTC_BASE_NS",
    "Reading",
    "Received",
    "SpanStamps",
    "decode",
    "encode",
    "expand",
    "send_tokens",
]

#: The most sends one span records (``x`` tokens): a reader refuses a text with more, so a hostile line cannot make
#: it build millions of values for one span; the SDK sends more but stops recording them (counted).
MAX_SENDS = 1 << 20

#: TAI - UTC (37 s since 2017) as a constant of this encoding, not a leap-second lookup: a reader
#: needs no leap table, and a future leap second only makes ``dt`` one second longer, still exact.
TAI_UTC_BASE_NS = 37_000_000_000
INT63_MAX = LTS_MAX
_UNKNOWN = int(ClockQuality.UNKNOWN)

Sent = tuple[int, int, int, int]  # (lts, ptp_ns, uncertainty_ns, clk_quality) of one header sent
_b2a = binascii.b2a_base64
_TO_URL = bytes.maketrans(b"+/", b"-_")
#: An enum's digit by indexing: formatting an IntEnum member in an f-string goes through Enum.__format__,
#: several times slower, and readings carry enum members or ints.
_DIGIT = ("0", "1", "2")


class Reading(msgspec.Struct, frozen=True, gc=False):
    """One event of the span, absolute: TAI ns, bound, quality (tt-ext number), Lamport value."""

    ptp_ns: int
    uncertainty_ns: int
    clk_quality: int
    lts: int


class Received(msgspec.Struct, frozen=True, gc=False):
    """The header the span's remote parent came with (bytes 0..20 of it), and the receive's lts
    (None: not merged, tt-ext §10.1)."""

    ptp_ns: int
    uncertainty_ns: int
    clk_quality: int
    ts_source: int
    tenant_id: int
    lts: int
    recv_lts: int | None


class SpanStamps(msgspec.Struct, frozen=True, gc=False):
    """Everything ``tempotrace.stamps`` says, as absolute values."""

    start: Reading
    ts_source: int
    end: Reading | None = None
    remote: Received | None = None
    sketch: bytes | None = None  #: 32 octets, tt-ext §8 layout
    sends: tuple[Reading, ...] = ()


# -- encode ------------------------------------------------------------------------------
def encode(
    lts: int,
    ptp_ns: int,
    uncertainty_ns: int,
    clk_quality: int,
    ts_source: int,
    start_ns: int,
    end: Sent | None = None,
    end_ns: int = 0,
    remote: tuple[int, int, int, int, int, int] | None = None,
    recv_lts: int | None = None,
    sketch: bytes | None = None,
    sends: Sequence[Sent] = (),
) -> str:
    """The text of a span's stamps from absolute values (values already valid: our own readings).

    ``start_ns`` / ``end_ns`` are the span's OpenTelemetry start and end times (Unix ns);
    ``end`` and each send are (lts, ptp_ns, uncertainty_ns, clk_quality); ``remote`` is the received
    header's (ptp_ns, uncertainty_ns, clk_quality, ts_source, tenant_id, lts).
    """
    dt = ptp_ns - start_ns - TAI_UTC_BASE_NS
    text = f"s{lts},{_DIGIT[ts_source]},{dt}" if dt else f"s{lts},{_DIGIT[ts_source]}"
    if end is not None:
        elts, eptp, eunc, equal = end
        edt = eptp - end_ns - TAI_UTC_BASE_NS
        if eunc != uncertainty_ns or equal != clk_quality:
            text += f" e{elts - lts},{edt},{eunc},{_DIGIT[equal]}"
        elif edt:
            text += f" e{elts - lts},{edt}"
        else:
            text += f" e{elts - lts}"
    if remote is not None:
        rptp, runc, rqual, rsource, rtenant, rlts = remote
        text += f" r{rlts},{rptp - ptp_ns},{runc},{_DIGIT[rqual]},{_DIGIT[rsource]},{rtenant}"
        if recv_lts is not None:
            text += f",{lts - recv_lts}"
    if sketch is not None:
        text += " k" + _b2a(sketch, newline=False)[:43].translate(_TO_URL).decode()
    if sends:
        text += send_tokens(sends, lts, ptp_ns, uncertainty_ns, clk_quality)
    return text


def send_tokens(sends: Iterable[Sent], lts: int, ptp_ns: int, uncertainty_ns: int, clk_quality: int) -> str:
    """`` x...`` for each send, relative to the start (lts, ptp_ns); the bound and quality only where
    they differ from the start's. Appended to a text when sends come after it was written."""
    text = ""
    for s_lts, s_ptp, s_unc, s_qual in sends:  # a loop, not a generator: most spans send once
        if s_unc == uncertainty_ns and s_qual == clk_quality:
            text += f" x{s_lts - lts},{s_ptp - ptp_ns}"
        else:
            text += f" x{s_lts - lts},{s_ptp - ptp_ns},{s_unc},{_DIGIT[s_qual]}"
    return text


# -- decode ------------------------------------------------------------------------------
# Canonical decimals: no leading zero, no "-0"; at most 20 digits (|2^64 + 37 s| fits), so no input
# makes int() work on thousands of digits.
_I = r"(0|-?[1-9][0-9]{0,19})"
_U = r"(0|[1-9][0-9]{0,19})"
_Q = r"([0-2])"
_START = re.compile(rf"s{_U},{_Q}(?:,{_I})?")
_END = re.compile(rf"e{_I}(?:,{_I}(?:,{_U},{_Q})?)?")
_REMOTE = re.compile(rf"r{_U},{_I},{_U},{_Q},{_Q},{_U}(?:,{_I})?")
#: 32 octets are 43 base64url characters; the last holds 4 bits and 2 zero bits (canonical).
_SKETCH = re.compile(r"k([A-Za-z0-9_-]{42}[AEIMQUYcgkosw048])")
_SEND = re.compile(rf"x{_I},{_I}(?:,{_U},{_Q})?")

_RULES = {
    "s": "s<lts>,<ts_source 0-2>[,<dt>]",
    "e": "e<dlts>[,<dt>[,<uncertainty_ns>,<quality 0-2>]]",
    "r": "r<lts>,<dptp>,<uncertainty_ns>,<quality 0-2>,<ts_source 0-2>,<tenant>[,<back>]",
    "k": "k<43 base64url characters (32 octets)>",
    "x": "x<dlts>,<dptp>[,<uncertainty_ns>,<quality 0-2>]",
}
#: Where each tag may come: s first, then e, r, k at most once each in that order, then x*.
_ORDER = {"s": 0, "e": 1, "r": 2, "k": 3, "x": 4}
#: The stable name of each rule (StampsError.error_class; the conformance vectors' errorClass, §1.4).
_SYNTAX = {"s": "STAMPS_START", "e": "STAMPS_END", "r": "STAMPS_RECEIVE", "k": "STAMPS_SKETCH", "x": "STAMPS_SEND"}


def _syntax(tag: str) -> StampsError:
    return StampsError(tag, "must be " + _RULES[tag], error_class=_SYNTAX[tag])


def _check(token: str, what: str, value: int, hi: int) -> int:
    if not 0 <= value <= hi:
        raise StampsError(token, f"{what} must be 0..{hi}, got {value}", error_class="STAMPS_RANGE")
    return value


#: Stands for a present plain attribute that is no value of its field: outside every range, so decode refuses it.
_NOT_A_VALUE = -1


def _check_plain(name: str, rule: str, value: int, hi: int) -> None:
    if not 0 <= value <= hi:
        got = "" if value == _NOT_A_VALUE else f", got {value}"
        raise StampsError("s", f"the span's {name} must be {rule}{got}", error_class="STAMPS_RANGE")


def decode(text: str, start_ns: int, end_ns: int, uncertainty_ns: int | None, clk_quality: int | None) -> SpanStamps:
    """The absolute values of a span's stamps text; ``start_ns``/``end_ns`` are its OpenTelemetry
    times, ``uncertainty_ns``/``clk_quality`` its plain attributes (each None when absent: saturated,
    UNKNOWN; a present one outside 0..65535 / 0..2 is refused with the start's values, STAMPS_RANGE).
    Raises StampsError (a ValueError) naming the token and the rule it breaks."""
    unc = UNCERTAINTY_SATURATED if uncertainty_ns is None else uncertainty_ns
    qual = _UNKNOWN if clk_quality is None else clk_quality
    if text.count(" x") > MAX_SENDS:  # counted before anything is built
        raise StampsError("x", f"at most {MAX_SENDS:,} sends per span", error_class="STAMPS_TOO_MANY_SENDS")
    tokens = text.split(" ")
    m = _START.fullmatch(tokens[0])
    if m is None:
        raise StampsError(tokens[0][:1] or "s", "the text must start with " + _RULES["s"], error_class="STAMPS_START")
    lts = int(m[1])
    _check("s", "lts", lts, INT63_MAX)
    ptp = _check("s", "ptp_ns", start_ns + TAI_UTC_BASE_NS + int(m[3] or 0), INT63_MAX)
    # The plain attributes are the start's bound and quality: checked as its values, never clamped (§1.4).
    _check_plain(S.UNCERTAINTY_NS, "an int 0..65535", unc, UNCERTAINTY_SATURATED)
    _check_plain(S.CLK_QUALITY, "OK, DEGRADED or UNKNOWN (tt-ext 0..2)", qual, _UNKNOWN)
    source = int(m[2])
    end: Reading | None = None
    remote: Received | None = None
    sketch: bytes | None = None
    sends: list[Reading] = []
    place = 0
    for token in tokens[1:]:
        tag = token[:1]
        order = _ORDER.get(tag, -1)
        if order <= place and not (order == place == 4):
            if order < 0:
                rule = "unknown token (tags are s, e, r, k, x; one space between tokens)"
                raise StampsError(tag or " ", rule, error_class="STAMPS_TOKEN")
            rule = "out of order or repeated (order: s, e, r, k once each, then x...)"
            raise StampsError(tag, rule, error_class="STAMPS_ORDER")
        place = order
        if tag == "x":
            x = _SEND.fullmatch(token)
            if x is None:
                raise _syntax(tag)
            s_unc = unc if x[3] is None else _check(tag, "uncertainty_ns", int(x[3]), UNCERTAINTY_SATURATED)
            sends.append(Reading(_check(tag, "ptp_ns", ptp + int(x[2]), INT63_MAX), s_unc,
                                 qual if x[4] is None else int(x[4]), _check(tag, "lts", lts + int(x[1]), INT63_MAX)))
        elif tag == "e":
            e = _END.fullmatch(token)
            if e is None:
                raise _syntax(tag)
            e_unc = unc if e[3] is None else _check(tag, "uncertainty_ns", int(e[3]), UNCERTAINTY_SATURATED)
            end = Reading(_check(tag, "ptp_ns", end_ns + TAI_UTC_BASE_NS + int(e[2] or 0), INT63_MAX), e_unc,
                          qual if e[4] is None else int(e[4]), _check(tag, "lts", lts + int(e[1]), INT63_MAX))
        elif tag == "r":
            r = _REMOTE.fullmatch(token)
            if r is None:
                raise _syntax(tag)
            back = None if r[7] is None else _check(tag, "recv lts", lts - int(r[7]), INT63_MAX)
            remote = Received(_check(tag, "ptp_ns", ptp + int(r[2]), INT63_MAX),
                              _check(tag, "uncertainty_ns", int(r[3]), UNCERTAINTY_SATURATED), int(r[4]), int(r[5]),
                              _check(tag, "tenant", int(r[6]), TENANT_MAX), _check(tag, "lts", int(r[1]), INT63_MAX),
                              back)  # fmt: skip
        else:
            k = _SKETCH.fullmatch(token)
            if k is None:
                raise _syntax(tag)
            try:
                sketch = base64.urlsafe_b64decode(k[1] + "=")
            except (binascii.Error, ValueError) as err:  # pragma: no cover - the pattern admits only valid text
                raise _syntax(tag) from err
    return SpanStamps(Reading(ptp, unc, qual, lts), source, end, remote, sketch, tuple(sends))


# -- the previous attribute set --------------------------------------------------------------
_QUALITY_NAMES = tuple(q.name for q in ClockQuality)
_QUALITY_NUMBERS = {name: i for i, name in enumerate(_QUALITY_NAMES)}
_SOURCE_NAMES = tuple(s.name for s in TsSource)


def quality_number(name: object) -> int | None:
    """A ``tempotrace.clk_quality`` string as its tt-ext number (None when it is not one)."""
    return _QUALITY_NUMBERS.get(name) if isinstance(name, str) else None


def _plain(attributes: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The span's plain bound and quality as decode takes them: None where absent; a value of the wrong type
    or an unknown quality name is out of range, never taken for absent (§1.4)."""
    unc = attributes.get(S.UNCERTAINTY_NS)
    qual = attributes.get(S.CLK_QUALITY)
    if unc is not None and (isinstance(unc, bool) or not isinstance(unc, int)):
        unc = _NOT_A_VALUE
    if qual is not None:
        number = quality_number(qual)
        qual = _NOT_A_VALUE if number is None else number
    return unc, qual


def expand(attributes: Mapping[str, Any], start_ns: int, end_ns: int) -> dict[str, Any]:
    """A span's attributes with ``tempotrace.stamps`` written out under the previous attribute set's names
    (``tempotrace.ptp_ns``, ``tempotrace.end.lts``, ``tempotrace.send.lts``, ...; semantic-conventions
    §1.5): for readers and queries written against those. Attributes without a stamps text come back as
    they are. Raises StampsError for a text that breaks a rule."""
    out = dict(attributes)
    text = out.pop(S.STAMPS, None)
    if not isinstance(text, str):
        return out
    st = decode(text, start_ns, end_ns, *_plain(out))
    out[S.PTP_NS], out[S.LTS], out[S.TS_SOURCE] = st.start.ptp_ns, st.start.lts, _SOURCE_NAMES[st.ts_source]
    out.setdefault(S.UNCERTAINTY_NS, st.start.uncertainty_ns)
    out.setdefault(S.CLK_QUALITY, _QUALITY_NAMES[st.start.clk_quality])
    if st.end is not None:
        out[S.END_PTP_NS], out[S.END_UNCERTAINTY_NS] = st.end.ptp_ns, st.end.uncertainty_ns
        out[S.END_CLK_QUALITY], out[S.END_LTS] = _QUALITY_NAMES[st.end.clk_quality], st.end.lts
    if st.remote is not None:
        h = st.remote
        out[S.REMOTE_PTP_NS], out[S.REMOTE_UNCERTAINTY_NS] = h.ptp_ns, h.uncertainty_ns
        out[S.REMOTE_CLK_QUALITY], out[S.REMOTE_TS_SOURCE] = _QUALITY_NAMES[h.clk_quality], _SOURCE_NAMES[h.ts_source]
        out[S.REMOTE_TENANT_ID], out[S.REMOTE_LTS] = h.tenant_id, h.lts
        if h.recv_lts is not None:
            out[S.RECV_LTS] = h.recv_lts
    if st.sketch is not None:
        out[S.SVC_SKETCH] = st.sketch.hex()
    if st.sends:
        out[S.SEND_LTS] = tuple(s.lts for s in st.sends)
        out[S.SEND_PTP_NS] = tuple(s.ptp_ns for s in st.sends)
        out[S.SEND_UNCERTAINTY_NS] = tuple(s.uncertainty_ns for s in st.sends)
    return out
