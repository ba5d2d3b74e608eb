"""The text input cap counts UTF-8 octets of the value as received (spec §5.2 step 1, §5.2.1).

The vectors pin the cap one octet either side of 256 for each kind of
character; this checks the rule on any string, surrogates included, and that
the fast path (values of exactly 71 characters) does not skip it.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk.errors import TextFormError
from tempotrace_sdk.wire import decode_text
from tempotrace_sdk.wire.text import MAX_TEXT_INPUT

TEXT = "AxeXnQbTiTJ7AAAA3AAAAAAAAAAqAAAAAAAAAAAEAAIAAQAAgAAAAAAAAQAIAEACAAAAAAA"
# 1-, 2-, 3- (a lone surrogate), 4-octet characters, OWS and the separators of steps 3-4.
CHARS = st.sampled_from(["A", "z", "-", " ", "\t", "\u00e9", "\u20ac", "\ud800", "\udc00", "\U0001f600", ",", "="])


def _octets(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def _error_class(value: str) -> str | None:
    try:
        decode_text(value)
    except TextFormError as err:
        return err.error_class
    return None


@settings(max_examples=400, deadline=None)
@given(value=st.lists(CHARS, max_size=300).map("".join))
def test_cap_is_octets_and_then_the_alphabet_speaks(value: str) -> None:
    got = _error_class(value)
    rest = value.strip(" \t")
    if _octets(value) > MAX_TEXT_INPUT:
        assert got == "TEXT_LENGTH"
    elif not rest.isascii() and "," not in rest and "=" not in rest:
        assert got == "TEXT_ALPHABET"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("\U0001f600" * 71, "TEXT_LENGTH", id="71-chars-284-octets"),
        pytest.param("\u00e9" * 71, "TEXT_ALPHABET", id="71-chars-142-octets"),
        pytest.param(TEXT[:70] + "\ud800", "TEXT_ALPHABET", id="71-chars-lone-surrogate-last"),
        pytest.param("\u20ac" * 85 + "A", "TEXT_ALPHABET", id="86-chars-256-octets"),
        pytest.param("\u20ac" * 85 + "AB", "TEXT_LENGTH", id="87-chars-257-octets"),
    ],
)
def test_values_the_length_shortcuts_must_not_misjudge(value: str, expected: str) -> None:
    """Exactly 71 characters skip the first length check in the codec; the cap must still apply."""
    assert _error_class(value) == expected


def test_error_names_octets() -> None:
    with pytest.raises(TextFormError, match="longer than 256 octets"):
        decode_text("\u00e9" * 129)
