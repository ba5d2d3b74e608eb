"""First-principles reference for the stamps-text vectors (spec/semantic-conventions.md §1.4).

Like reference.py, it imports nothing of tempotrace_sdk: the text is read
with a hand-written scanner that follows the section's ABNF production by
production (no regular expressions, no int() on unchecked text), the sketch
is base64url-decoded bit by bit from the alphabet, and each rule that can
refuse a text is written out once, with the class name the vectors use. The
generator checks ``decode(encode(x)) == x`` for every encode case and
``encode(decode(t))`` for every valid decode case.

Which rule names a text that breaks several (first failure wins):
  1. more than MAX_SENDS "SP x" in the text: TOO_MANY_SENDS, before anything else;
  2. then the tokens left to right (the text split at every SP); for each:
     the first token must be a start (START); a later one must have a known
     tag (TOKEN: an empty token, from a double, leading or trailing SP, has
     none) in its place (ORDER); its fields must match the grammar (START, END,
     RECEIVE, SKETCH, SEND); the absolute values they give must be in range
     (RANGE); the span's plain attributes, when present, are the start's
     bound and quality and are range-checked with the start's values.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_SENDS = 1 << 20  # x tokens one text may hold (§1.4)
TAI_UTC_BASE_NS = 37_000_000_000  # a constant of the encoding, not a leap-second lookup (§1.4)
I63 = 2**63 - 1  # ptp_ns and lts
UNC_MAX = 65_535  # uncertainty_ns; also the value of a span without the plain attribute
TENANT_MAX = 15
UNKNOWN = 2  # clk_quality of a span without the plain attribute
MAX_DIGITS = 20  # per number, the sign not counted
DIGITS = "0123456789"
B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
SKETCH_CHARS = 43  # 32 octets: 256 bits in 6-bit characters, the last holding 4 bits and 2 zero bits
SKETCH_OCTETS = 32
ORDER = "serk"  # each at most once, in this order; then x any number of times

CLASSES = {
    "s": "STAMPS_START",
    "e": "STAMPS_END",
    "r": "STAMPS_RECEIVE",
    "k": "STAMPS_SKETCH",
    "x": "STAMPS_SEND",
}

#: Each token's field lists, as the ABNF allows them: "u" uint, "i" int, "n" enum (0/1/2).
SHAPES = {
    "s": ("un", "uni"),
    "e": ("i", "ii", "iiun"),
    "r": ("uiunnu", "uiunnui"),
    "x": ("ii", "iiun"),
}


class Refused(Exception):
    """A text breaks a rule; ``error_class`` is the rule's name in the vectors."""

    def __init__(self, error_class: str, why: str) -> None:
        super().__init__(f"{error_class}: {why}")
        self.error_class = error_class


@dataclass(frozen=True)
class Reading:
    ptp_ns: int
    uncertainty_ns: int
    clk_quality: int
    lts: int


@dataclass(frozen=True)
class Received:
    ptp_ns: int
    uncertainty_ns: int
    clk_quality: int
    ts_source: int
    tenant_id: int
    lts: int
    recv_lts: int | None


@dataclass(frozen=True)
class Stamps:
    start: Reading
    ts_source: int
    end: Reading | None = None
    remote: Received | None = None
    sketch: bytes | None = None
    sends: tuple[Reading, ...] = ()


# -- the grammar ---------------------------------------------------------------------------------
def _number(text: str, kind: str) -> int | None:
    """One field as the ABNF reads it ("0" / ["-"] %x31-39 *19DIGIT; uint without "-"; enum 0/1/2), else None."""
    if kind == "n":
        return DIGITS.index(text) if text in ("0", "1", "2") else None
    negative = kind == "i" and text.startswith("-")
    digits = text[1:] if negative else text
    if not digits or len(digits) > MAX_DIGITS or any(c not in DIGITS for c in digits):
        return None
    if digits[0] == "0" and (len(digits) > 1 or negative):  # a leading zero, or "-0"
        return None
    value = 0
    for c in digits:
        value = value * 10 + DIGITS.index(c)
    return -value if negative else value


def _fields(token: str) -> list[int]:
    """The numbers of an s, e, r or x token, or Refused with that token's class."""
    tag = token[0]
    parts = token[1:].split(",")
    for shape in SHAPES[tag]:
        if len(shape) == len(parts):
            values = [_number(p, k) for p, k in zip(parts, shape, strict=True)]
            if all(v is not None for v in values):
                return [v for v in values if v is not None]
    raise Refused(CLASSES[tag], f"{token!r} does not match the grammar")


def _sketch(token: str) -> bytes:
    body = token[1:]
    if len(body) != SKETCH_CHARS or any(c not in B64URL for c in body):
        raise Refused("STAMPS_SKETCH", "43 base64url characters")
    bits = "".join(format(B64URL.index(c), "06b") for c in body)  # 258 bits
    if bits[SKETCH_OCTETS * 8 :] != "00":
        raise Refused("STAMPS_SKETCH", "the last character's two padding bits must be 0")
    return bytes(int(bits[i : i + 8], 2) for i in range(0, SKETCH_OCTETS * 8, 8))


def _in(value: int, top: int, what: str) -> int:
    if not 0 <= value <= top:
        raise Refused("STAMPS_RANGE", f"{what} {value} outside 0..{top}")
    return value


# -- decode -------------------------------------------------------------------------------------
def decode(text: str, start_ns: int, end_ns: int, uncertainty_ns: int | None, clk_quality: int | None) -> Stamps:
    """Absolute values of a text, given the span's OpenTelemetry times and plain attributes (None: absent)."""
    if text.count(" x") > MAX_SENDS:
        raise Refused("STAMPS_TOO_MANY_SENDS", "more than MAX_SENDS sends")
    unc = UNC_MAX if uncertainty_ns is None else uncertainty_ns
    qual = UNKNOWN if clk_quality is None else clk_quality
    tokens = text.split(" ")
    if not tokens[0].startswith("s"):
        raise Refused("STAMPS_START", "the text must begin with the start token")
    lts, source, *dt = _fields(tokens[0])
    _in(lts, I63, "start lts")
    ptp = _in(start_ns + TAI_UTC_BASE_NS + (dt[0] if dt else 0), I63, "start ptp_ns")
    _in(unc, UNC_MAX, "the plain uncertainty_ns")  # the start's bound and quality: its values, its ranges
    _in(qual, UNKNOWN, "the plain clk_quality")
    out = Stamps(Reading(ptp, unc, qual, lts), source)
    seen = "s"
    end = remote = sketch = None
    sends = []
    for token in tokens[1:]:
        tag = token[:1]
        if not tag or tag not in "serkx":
            raise Refused("STAMPS_TOKEN", f"unknown tag in {token!r}")
        if tag != "x" and (seen[-1] == "x" or ORDER.index(tag) <= ORDER.index(seen[-1])):
            raise Refused("STAMPS_ORDER", f"{tag} after {seen[-1]}")
        seen += tag
        if tag == "k":
            sketch = _sketch(token)
            continue
        f = _fields(token)
        if tag == "e":
            dlts, edt, e_unc, e_qual = (f + [0, unc, qual][len(f) - 1 :])[:4]
            end = Reading(
                _in(end_ns + TAI_UTC_BASE_NS + edt, I63, "end ptp_ns"),
                _in(e_unc, UNC_MAX, "end uncertainty_ns"),
                e_qual,
                _in(lts + dlts, I63, "end lts"),
            )
        elif tag == "r":
            recv = None if len(f) == 6 else _in(lts - f[6], I63, "receive lts")
            remote = Received(
                _in(ptp + f[1], I63, "remote ptp_ns"),
                _in(f[2], UNC_MAX, "remote uncertainty_ns"),
                f[3],
                f[4],
                _in(f[5], TENANT_MAX, "tenant_id"),
                _in(f[0], I63, "remote lts"),
                recv,
            )
        else:
            s_unc, s_qual = (f[2], f[3]) if len(f) == 4 else (unc, qual)
            sends.append(
                Reading(
                    _in(ptp + f[1], I63, "send ptp_ns"),
                    _in(s_unc, UNC_MAX, "send uncertainty_ns"),
                    s_qual,
                    _in(lts + f[0], I63, "send lts"),
                )
            )
    return Stamps(out.start, source, end, remote, sketch, tuple(sends))


# -- encode -------------------------------------------------------------------------------------
def _b64url(octets: bytes) -> str:
    bits = "".join(format(o, "08b") for o in octets) + "00"
    return "".join(B64URL[int(bits[i : i + 6], 2)] for i in range(0, len(bits), 6))


def _own(r: Reading, start: Reading) -> str:
    """An end's or a send's bound and quality, written only when they differ from the start's."""
    same = (r.uncertainty_ns, r.clk_quality) == (start.uncertainty_ns, start.clk_quality)
    return "" if same else f",{r.uncertainty_ns},{r.clk_quality}"


def encode(st: Stamps, start_ns: int, end_ns: int) -> str:
    """The one canonical text of these values: every optional field that holds its default left out."""
    s = st.start
    dt = s.ptp_ns - start_ns - TAI_UTC_BASE_NS
    tokens = [f"s{s.lts},{st.ts_source}" + (f",{dt}" if dt else "")]
    if st.end is not None:
        e = st.end
        edt, own = e.ptp_ns - end_ns - TAI_UTC_BASE_NS, _own(e, s)
        tokens.append(f"e{e.lts - s.lts}" + (f",{edt}{own}" if edt or own else ""))
    if st.remote is not None:
        r = st.remote
        back = "" if r.recv_lts is None else f",{s.lts - r.recv_lts}"
        fields = (r.lts, r.ptp_ns - s.ptp_ns, r.uncertainty_ns, r.clk_quality, r.ts_source, r.tenant_id)
        tokens.append("r" + ",".join(map(str, fields)) + back)
    if st.sketch is not None:
        tokens.append("k" + _b64url(st.sketch))
    tokens += [f"x{x.lts - s.lts},{x.ptp_ns - s.ptp_ns}{_own(x, s)}" for x in st.sends]
    return " ".join(tokens)
