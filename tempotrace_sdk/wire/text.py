"""The 71-character text form of tt-ext (spec/tt-ext-v3.md §5).

base64url (RFC 4648 §5) without padding. The decoder is strict: the stdlib's
base64 decoders silently skip characters outside the alphabet and accept
non-canonical trailing bits, so the rules are checked here first, in the
order the spec fixes (§7.1) so every implementation reports the same class.
"""

from __future__ import annotations

import binascii
import re
from typing import Any

from ..errors import TextFormError
from ._layout import HEADER_LEN, TEXT_LEN

__all__ = ["decode_text", "encode_text"]

#: HTTP optional whitespace (RFC 9110 §5.6.3): spaces and horizontal tabs.
_OWS = " \t"

#: 70 base64url characters, then one whose two low bits are zero: 53 bytes
#: are 424 bits, 71 characters carry 426, and the two spare bits must be 0
#: or two different texts would decode to one header.
_CANONICAL = re.compile(r"[A-Za-z0-9_-]{70}[AEIMQUYcgkosw048]")
_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")

#: Inputs longer than this are rejected before any scanning (a hostile peer
#: may send megabytes); generous enough for any amount of OWS around 71 chars.
MAX_TEXT_INPUT = 256

_TO_STD = str.maketrans("-_", "+/")
_TO_URL = bytes.maketrans(b"+/", b"-_")


def encode_text(raw: bytes) -> str:
    """base64url of the 53-byte binary form, without padding."""
    return binascii.b2a_base64(raw, newline=False).translate(_TO_URL).rstrip(b"=").decode("ascii")


def decode_text(value: Any) -> bytes:
    """The 53 bytes a received text value stands for, or ``TextFormError``."""
    if not isinstance(value, str):
        raise TextFormError("text", "must be a single string", error_class="TEXT_TYPE", remote=True)
    if len(value) > MAX_TEXT_INPUT:
        raise TextFormError("text", f"longer than {MAX_TEXT_INPUT} characters", error_class="TEXT_LENGTH", remote=True)
    text = value.strip(_OWS)
    if _CANONICAL.fullmatch(text) is None:
        raise _classify(text)
    return binascii.a2b_base64(text.translate(_TO_STD) + "=")


def _classify(text: str) -> TextFormError:
    # Slow path: only for values already known to be bad (spec §7.1 order).
    if "," in text:
        return TextFormError("text", "holds several values", error_class="TEXT_MULTIPLE", remote=True)
    if "=" in text:
        return TextFormError("text", "padding is not allowed", error_class="TEXT_PADDING", remote=True)
    if _ALPHABET.fullmatch(text) is None:
        return TextFormError(
            "text", "character outside the base64url alphabet", error_class="TEXT_ALPHABET", remote=True
        )
    if len(text) != TEXT_LEN:
        return TextFormError(
            "text", f"must be {TEXT_LEN} characters, got {len(text)}", error_class="TEXT_LENGTH", remote=True
        )
    return TextFormError(
        "text",
        "non-canonical: unused low bits of the last character must be zero",
        error_class="TEXT_NON_CANONICAL",
        remote=True,
    )


assert len(encode_text(bytes(HEADER_LEN))) == TEXT_LEN
