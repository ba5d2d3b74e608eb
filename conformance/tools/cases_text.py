"""Text-form vectors: decoding the 71-character form (spec §5.2, §9.1).

Like cases_header.py, each case states its outcome and reference.py checks it.
"""

from __future__ import annotations

from typing import Any

from cases_header import DASHES, FULL, I63, NOW, TYPICAL, _poke
from reference import B64URL, Raw, b64url, expected_fields, normalised, text_decode


def _text_valid(comment: str, flags: list[str], text: str, raw: Raw) -> dict[str, Any]:
    wire, error = text_decode(text)
    assert error is None and wire == raw.pack(), (comment, error)
    again = normalised(raw).pack()
    return {
        "comment": comment,
        "flags": flags,
        "text": text,
        "result": "valid",
        "wire": wire.hex(),
        "fields": expected_fields(raw),
        "reencoded": again.hex(),
    }


def _text_invalid(comment: str, flags: list[str], text: str, error: str) -> dict[str, Any]:
    assert text_decode(text) == (None, error), (comment, text_decode(text), error)
    return {"comment": comment, "flags": flags, "text": text, "result": "invalid", "errorClass": error}


def _set_last(text: str, char: str) -> str:
    return text[:-1] + char


def text_decode_cases() -> list[dict[str, Any]]:
    t = TYPICAL
    good = b64url(t.pack())
    dashes = b64url(DASHES.pack())
    full = b64url(Raw(ptp_ns=NOW, sketch=FULL).pack())
    standard = good.replace("-", "+").replace("_", "/")
    return [
        _text_valid("canonical text of the typical header", ["Typical"], good, t),
        _text_valid("text with many '-' (sketch bytes fb ef be)", ["Alphabet"], dashes, DASHES),
        _text_valid("text with many '_' (full sketch)", ["Alphabet", "Sketch"], full, Raw(ptp_ns=NOW, sketch=FULL)),
        _text_valid("one leading space", ["Ows"], " " + good, t),
        _text_valid("one trailing space", ["Ows"], good + " ", t),
        _text_valid("leading and trailing tabs", ["Ows"], "\t" + good + "\t", t),
        _text_valid("mixed spaces and tabs both sides", ["Ows"], " \t \t" + good + "\t  \t", t),
        _text_valid(
            "256 characters in all (185 spaces of OWS): the cap is inclusive", ["Ows", "InputCap"], good + " " * 185, t
        ),
        _text_valid(
            "UNKNOWN quality with uncertainty 7: reported as 65535",
            ["UnknownQuality"],
            b64url(Raw(ptp_ns=NOW, clk_quality=2, uncertainty_ns=7).pack()),
            Raw(ptp_ns=NOW, clk_quality=2, uncertainty_ns=7),
        ),
        _text_valid(
            "every field at its largest valid value",
            ["FieldLimit", "Tenant"],
            b64url(Raw(15, 3, I63 - 1, 2, 1, 0xFFFF, I63 - 1, FULL).pack()),
            Raw(15, 3, I63 - 1, 2, 1, 0xFFFF, I63 - 1, FULL),
        ),
        # -- length and the input cap ----------------------------------------------
        _text_invalid("empty string", ["TextLength"], "", "TEXT_LENGTH"),
        _text_invalid("only OWS", ["TextLength", "Ows"], " \t ", "TEXT_LENGTH"),
        _text_invalid("70 characters: last one missing", ["TextLength"], good[:70], "TEXT_LENGTH"),
        _text_invalid("72 characters: one extra 'A'", ["TextLength"], good + "A", "TEXT_LENGTH"),
        _text_invalid("4 characters", ["TextLength"], "AAAA", "TEXT_LENGTH"),
        _text_invalid("142 characters: two texts back to back", ["TextLength"], good + good, "TEXT_LENGTH"),
        _text_invalid(
            "257 characters (valid text + 186 spaces): over the input cap before stripping",
            ["InputCap", "Ows"],
            good + " " * 186,
            "TEXT_LENGTH",
        ),
        _text_invalid("1000 x 'A': over the input cap", ["InputCap"], "A" * 1000, "TEXT_LENGTH"),
        _text_invalid(
            "300 characters with commas and '+': the cap comes first",
            ["InputCap", "Precedence"],
            ("+," * 150),
            "TEXT_LENGTH",
        ),
        # -- multiple values ---------------------------------------------------------
        _text_invalid("two values joined by ','", ["MultipleValues"], good + "," + good, "TEXT_MULTIPLE"),
        _text_invalid("two values joined by ', '", ["MultipleValues"], good + ", " + good, "TEXT_MULTIPLE"),
        _text_invalid("trailing comma", ["MultipleValues"], good + ",", "TEXT_MULTIPLE"),
        _text_invalid("leading comma", ["MultipleValues"], "," + good, "TEXT_MULTIPLE"),
        _text_invalid(
            "comma and padding: TEXT_MULTIPLE first", ["MultipleValues", "Precedence"], good + "=,", "TEXT_MULTIPLE"
        ),
        # -- padding ------------------------------------------------------------------
        _text_invalid("padded with '=' (72 characters)", ["Padding"], good + "=", "TEXT_PADDING"),
        _text_invalid("last character replaced by '='", ["Padding"], _set_last(good, "="), "TEXT_PADDING"),
        _text_invalid(
            "standard padded base64 of the 53 bytes", ["Padding", "Alphabet"], standard + "=", "TEXT_PADDING"
        ),
        _text_invalid(
            "padding and '+': TEXT_PADDING first", ["Padding", "Precedence"], "+" + good[1:] + "=", "TEXT_PADDING"
        ),
        # -- alphabet -----------------------------------------------------------------
        _text_invalid(
            "standard alphabet '+' and '/' instead of '-' '_'", ["Alphabet"], _std(dashes, full)[0], "TEXT_ALPHABET"
        ),
        _text_invalid("'/' instead of '_'", ["Alphabet"], _std(dashes, full)[1], "TEXT_ALPHABET"),
        _text_invalid("space inside the value", ["Alphabet"], good[:30] + " " + good[31:], "TEXT_ALPHABET"),
        _text_invalid("tab inside the value", ["Alphabet"], good[:30] + "\t" + good[31:], "TEXT_ALPHABET"),
        _text_invalid("trailing LF is not OWS", ["Alphabet", "Ows"], good + "\n", "TEXT_ALPHABET"),
        _text_invalid("trailing CR LF is not OWS", ["Alphabet", "Ows"], good + "\r\n", "TEXT_ALPHABET"),
        _text_invalid("leading NBSP U+00A0 is not OWS", ["Alphabet", "Ows"], "\u00a0" + good, "TEXT_ALPHABET"),
        _text_invalid("leading vertical tab is not OWS", ["Alphabet", "Ows"], "\x0b" + good, "TEXT_ALPHABET"),
        _text_invalid("NUL character inside", ["Alphabet"], good[:10] + "\x00" + good[11:], "TEXT_ALPHABET"),
        _text_invalid("'.' inside", ["Alphabet"], good[:10] + "." + good[11:], "TEXT_ALPHABET"),
        _text_invalid("non-ASCII letter U+00E9", ["Alphabet"], good[:10] + "\u00e9" + good[11:], "TEXT_ALPHABET"),
        _text_invalid("fullwidth 'A' U+FF21", ["Alphabet"], good[:10] + "\uff21" + good[11:], "TEXT_ALPHABET"),
        _text_invalid("Arabic-Indic digit U+0663", ["Alphabet"], good[:10] + "\u0663" + good[11:], "TEXT_ALPHABET"),
        _text_invalid(
            "Kelvin sign U+212A (folds to 'k')", ["Alphabet"], good[:10] + "\u212a" + good[11:], "TEXT_ALPHABET"
        ),
        _text_invalid(
            "'+' and wrong length: TEXT_ALPHABET first", ["Alphabet", "Precedence"], "+" + good[1:60], "TEXT_ALPHABET"
        ),
        # -- canonical trailing bits ---------------------------------------------------
        *[
            _text_invalid(
                f"last character '{c}' has low bits {_low(c)}",
                ["NonCanonical"],
                _set_last(good, c),
                "TEXT_NON_CANONICAL",
            )
            for c in ("B", "C", "D", "_", "-", "9")
        ],
        # -- well-formed text, bad bytes -----------------------------------------------
        _text_invalid(
            "text of version-2 bytes", ["TextThenBinary", "Version"], b64url(_poke(t, 0, b"\x02")), "VERSION"
        ),
        _text_invalid(
            "text of negative ptp_ns", ["TextThenBinary", "NegativePtp"], b64url(_poke(t, 1, b"\xff")), "PTP_NS_RANGE"
        ),
        _text_invalid("text of ts_source 3", ["TextThenBinary", "BadEnum"], b64url(_poke(t, 9, b"\x03")), "TS_SOURCE"),
        _text_invalid(
            "text of clk_quality 3", ["TextThenBinary", "BadEnum"], b64url(_poke(t, 10, b"\x03")), "CLK_QUALITY"
        ),
        _text_invalid(
            "text of lts 2^63", ["TextThenBinary", "LtsPoisoning"], b64url(_poke(t, 13, b"\x80")), "LTS_RANGE"
        ),
        _text_invalid(
            "257 x U+00E9: 514 UTF-8 octets, over the cap",
            ["InputCap", "Alphabet"],
            "\u00e9" * 257,
            "TEXT_LENGTH",
        ),
        # The next two were within the cap while it counted characters (until
        # generator 1.1.0); it counts octets now (spec §5.2 step 1).
        _text_invalid(
            "256 x U+00E9: 256 characters but 512 UTF-8 octets: over the cap, which counts octets",
            ["InputCap", "OctetCount"],
            "\u00e9" * 256,
            "TEXT_LENGTH",
        ),
        _text_invalid(
            "256 x U+1F600 (4 UTF-8 octets each): 1024 octets, over the cap",
            ["InputCap", "OctetCount"],
            "\U0001f600" * 256,
            "TEXT_LENGTH",
        ),
        # Only space and tab are OWS: an implementation that also strips CR
        # or FF (C's isspace does) must fail these.
        _text_invalid("trailing lone CR is not OWS", ["Alphabet", "Ows"], good + "\r", "TEXT_ALPHABET"),
        _text_invalid("leading lone CR is not OWS", ["Alphabet", "Ows"], "\r" + good, "TEXT_ALPHABET"),
        _text_invalid("trailing form feed is not OWS", ["Alphabet", "Ows"], good + "\f", "TEXT_ALPHABET"),
        # -- appended: the cap counts UTF-8 octets (spec §5.2 step 1) ------------------
        *_octet_cap_cases(good),
    ]


def _octet_cap_cases(good: str) -> list[dict[str, Any]]:
    """Inputs that sit at the cap only when counted in UTF-8 octets (a lone surrogate: 3).

    Each pair is one octet apart across the cap; an implementation counting
    characters, UTF-16 code units, or a lone surrogate as 1 octet (Java's
    getBytes writes '?') or as 6 gets one of the pair wrong.
    """
    e, smile, hi, lo = "\u00e9", "\U0001f600", "\ud800", "\udc00"
    cap, over = ["InputCap", "OctetCount"], "TEXT_LENGTH"
    return [
        _text_invalid("128 x U+00E9: 256 octets, at the cap", [*cap, "Alphabet"], e * 128, "TEXT_ALPHABET"),
        _text_invalid("128 x U+00E9 + 'A': 129 characters, 257 octets", cap, e * 128 + "A", over),
        _text_invalid(
            "valid text + 183 spaces + U+00E9: 256 octets",
            [*cap, "Ows", "Alphabet"],
            good + " " * 183 + e,
            "TEXT_ALPHABET",
        ),
        _text_invalid(
            "valid text + 184 spaces + U+00E9: 256 characters, 257 octets", [*cap, "Ows"], good + " " * 184 + e, over
        ),
        _text_invalid(
            "64 x U+1F600: 256 octets (128 UTF-16 code units)", [*cap, "Alphabet"], smile * 64, "TEXT_ALPHABET"
        ),
        _text_invalid(
            "64 x U+1F600 + 'A': 257 octets (129 UTF-16 code units, 65 characters)", cap, smile * 64 + "A", over
        ),
        _text_invalid(
            "71 x U+1F600: 71 characters but 284 octets: the cap comes before the length rule", cap, smile * 71, over
        ),
        _text_invalid(
            "128 x U+00E9 + ',': 257 octets: the cap comes before TEXT_MULTIPLE",
            [*cap, "Precedence"],
            e * 128 + ",",
            over,
        ),
        _text_invalid(
            "252 x 'A' + U+1F600 (a surrogate pair in JSON): one 4-octet character, 256 octets",
            [*cap, "Alphabet"],
            "A" * 252 + smile,
            "TEXT_ALPHABET",
        ),
        _text_invalid("253 x 'A' + U+1F600: 257 octets", cap, "A" * 253 + smile, over),
        _text_invalid(
            "253 x 'A' + lone surrogate U+D800: 256 octets (a lone surrogate counts 3)",
            [*cap, "LoneSurrogate", "Alphabet"],
            "A" * 253 + hi,
            "TEXT_ALPHABET",
        ),
        _text_invalid("254 x 'A' + lone surrogate U+D800: 257 octets", [*cap, "LoneSurrogate"], "A" * 254 + hi, over),
        _text_invalid(
            "250 x 'A' + U+DC00 U+D800 (low then high: two lone surrogates, not a pair): 256 octets",
            [*cap, "LoneSurrogate", "Alphabet"],
            "A" * 250 + lo + hi,
            "TEXT_ALPHABET",
        ),
        _text_invalid("251 x 'A' + U+DC00 U+D800: 257 octets", [*cap, "LoneSurrogate"], "A" * 251 + lo + hi, over),
        _text_invalid(
            "lone surrogate U+D800 in place of one character of a valid text",
            ["LoneSurrogate", "Alphabet"],
            good[:10] + hi + good[11:],
            "TEXT_ALPHABET",
        ),
        _text_invalid(
            "lone low surrogate U+DC00 after a valid text",
            ["LoneSurrogate", "Alphabet"],
            good + lo,
            "TEXT_ALPHABET",
        ),
    ]


def _std(dashes: str, full: str) -> tuple[str, str]:
    return dashes.replace("-", "+"), full.replace("_", "/")


def _low(c: str) -> str:
    return f"{B64URL.index(c) & 3:02b}"
