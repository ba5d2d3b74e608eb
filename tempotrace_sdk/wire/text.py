"""The 71-character text form of tt-ext (spec/tt-ext-v3.md §5).

base64url (RFC 4648 §5) without padding. The decoder is strict. The stdlib's
base64 decoders silently skip characters outside the alphabet and accept
non-canonical trailing bits, so the fast path is arranged so that skipping
cannot go unnoticed (see ``_DECODE_TABLE``), and every rejected value is then
classified by the rules in the order of spec §9.1, so every implementation
reports the same class.
"""

from __future__ import annotations

import binascii
import re
from typing import Any

from ..errors import TextFormError
from .layout import HEADER_LEN, TEXT_LEN

__all__ = ["MAX_TEXT_INPUT", "decode_text", "encode_text"]

#: HTTP optional whitespace (RFC 9110 §5.6.3): spaces and horizontal tabs.
_OWS = " \t"

#: Inputs longer than this many octets (of the value's UTF-8 form, a lone
#: surrogate counting 3) are rejected before any other rule (spec §5.2 step 1):
#: a hostile peer may send megabytes; 256 is generous for any amount of OWS
#: around 71 characters. Octets, not characters, so that every implementation
#: counts alike whatever its string type (spec §5.2.1).
MAX_TEXT_INPUT = 256

_URL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

#: 53 bytes are 424 bits; 71 characters carry 426, so the last character's
#: two low bits are spare and must be 0 or two different texts would decode
#: to one header. These are the 16 characters whose low bits are 00.
_CANONICAL_LAST = frozenset(_URL_ALPHABET[::4])
#: One search finds the first stray character; a Python-level scan of a
#: hostile 256-character value cost several µs on the rejection path.
_STRAY = re.compile(r"[^A-Za-z0-9_-]")


def _decode_table() -> bytes:
    # base64url -> standard base64 for binascii. The bytes that are valid in
    # standard base64 but not in a tt-ext text ('+', '/', '=') and ',' are
    # mapped to '*', which binascii skips: a value holding any of them (or
    # any other stray byte) then yields fewer than 53 bytes or a padding
    # error, and goes to the slow path. No invalid value can decode. Values
    # are encoded as UTF-8 (the codec's fastest path): a non-ASCII character
    # becomes bytes >= 0x80, which binascii skips the same way, and a lone
    # surrogate raises UnicodeEncodeError, which the caller catches.
    table = bytearray(range(256))
    for byte in b"+/=,":
        table[byte] = ord("*")
    table[ord("-")] = ord("+")
    table[ord("_")] = ord("/")
    return bytes(table)


_DECODE_TABLE = _decode_table()
_TO_URL = bytes.maketrans(b"+/", b"-_")
_a2b = binascii.a2b_base64
_b2a = binascii.b2a_base64


def encode_text(raw: bytes) -> str:
    """base64url of the 53-byte binary form, without padding."""
    return _b2a(raw, newline=False).translate(_TO_URL).rstrip(b"=").decode("ascii")


def decode_text(value: Any) -> bytes:
    """The 53 bytes a received text value stands for, or ``TextFormError``."""
    if type(value) is not str:
        # issubclass on the real type: an object can fake isinstance through
        # a __class__ property. A str subclass is copied to a plain str
        # without running any of its (possibly overridden) methods.
        if not issubclass(type(value), str):
            raise TextFormError("text", "must be a single string", error_class="TEXT_TYPE", remote=True)
        value = str.__str__(value)
    text = value
    if len(value) != TEXT_LEN:
        # Every character is at least one octet: no need to count them.
        if len(value) > MAX_TEXT_INPUT:
            raise _over_cap()
        text = value.strip(_OWS)
    if len(text) == TEXT_LEN and text[-1] in _CANONICAL_LAST:
        try:
            raw = _a2b(text.encode().translate(_DECODE_TABLE) + b"=")
        except (UnicodeEncodeError, binascii.Error):
            pass
        else:
            if len(raw) == HEADER_LEN:
                return raw
    raise _classify(value)


def _over_cap() -> TextFormError:
    return TextFormError("text", f"longer than {MAX_TEXT_INPUT} octets", error_class="TEXT_LENGTH", remote=True)


def _first_stray(text: str) -> str | None:
    """The first character outside the base64url alphabet, or None."""
    match = _STRAY.search(text)
    return None if match is None else match.group()


def _classify(value: str) -> TextFormError:
    # Slow path: only for values already known to be bad and at most 256
    # characters long (spec §5.2, §9.1 order). Non-ASCII characters take 2 to
    # 4 octets each, so such a value may still be over the cap.
    if not value.isascii() and len(value.encode("utf-8", "surrogatepass")) > MAX_TEXT_INPUT:
        return _over_cap()
    text = value.strip(_OWS)
    if "," in text:
        return TextFormError("text", "holds several values", error_class="TEXT_MULTIPLE", remote=True)
    if "=" in text:
        return TextFormError("text", "padding is not allowed", error_class="TEXT_PADDING", remote=True)
    stray = _first_stray(text)
    if stray is not None:
        return TextFormError(
            "text", f"character {stray!r} is outside the base64url alphabet", error_class="TEXT_ALPHABET", remote=True
        )
    if len(text) != TEXT_LEN:
        return TextFormError(
            "text", f"must be {TEXT_LEN} characters, got {len(text)}", error_class="TEXT_LENGTH", remote=True
        )
    if text[-1] not in _CANONICAL_LAST:
        return TextFormError(
            "text",
            "non-canonical: unused low bits of the last character must be zero",
            error_class="TEXT_NON_CANONICAL",
            remote=True,
        )
    # Unreachable for any input the fast path can see; kept so that a
    # mistake there shows up as an error, not as a wrong header.
    raise AssertionError(f"valid-looking tt-ext text refused: {text!r}")  # pragma: no cover


assert len(encode_text(bytes(HEADER_LEN))) == TEXT_LEN
assert len(_CANONICAL_LAST) == 16 and "A" in _CANONICAL_LAST and "8" in _CANONICAL_LAST
