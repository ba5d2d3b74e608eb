"""Header vectors: binary decode and encode (spec §2-§4, §9); text cases are in cases_text.py.

Each case states its expected outcome explicitly; reference.py then checks
the statement against the rules written out from the spec, so a typo in a
case and a slip in the reference would both have to happen, the same way,
for a wrong vector to be written.
"""

from __future__ import annotations

import random
from typing import Any

from reference import (
    HEADER_LEN,
    QUALITY_VALUES,
    TS_SOURCE_VALUES,
    Raw,
    b64url,
    binary_error,
    encode_error,
    expected_fields,
    normalised,
    sketch_of,
)

I63 = 2**63
NOW = 1_700_000_037_000_000_123  # TAI ns: 2023-11-14 22:13:20.000000123 UTC (TAI - UTC = 37 s)
SPAN_A = bytes.fromhex("00f067aa0ba902b7")  # the W3C traceparent example span id
SPAN_B = bytes.fromhex("b7ad6b7169203331")
SKETCH_AB = sketch_of(SPAN_A, SPAN_B)
FULL = b"\xff" * 32
TYPICAL = Raw(tenant=0, ptp_ns=NOW, ts_source=0, clk_quality=0, uncertainty_ns=220, lts=42, sketch=SKETCH_AB)
# Sketch bytes fb ef be ... encode as '-' characters: 21 is a multiple of 3,
# so the sketch starts on a character boundary (character 28).
DASHES = Raw(ptp_ns=NOW, sketch=bytes.fromhex("fbefbe" * 10 + "fbef"))


def _valid(comment: str, flags: list[str], raw: Raw) -> dict[str, Any]:
    wire = raw.pack()
    assert binary_error(wire) is None, comment
    again = normalised(raw).pack()
    return {
        "comment": comment,
        "flags": flags,
        "wire": wire.hex(),
        "result": "valid",
        "fields": expected_fields(raw),
        "reencoded": again.hex(),
        "text": b64url(again),
    }


def _invalid(comment: str, flags: list[str], wire: bytes, error: str) -> dict[str, Any]:
    assert binary_error(wire) == error, (comment, binary_error(wire), error)
    return {"comment": comment, "flags": flags, "wire": wire.hex(), "result": "invalid", "errorClass": error}


def _poke(base: Raw | bytes, offset: int, value: bytes) -> bytes:
    wire = bytearray(base.pack() if isinstance(base, Raw) else base)
    wire[offset : offset + len(value)] = value
    return bytes(wire)


def binary_decode() -> list[dict[str, Any]]:
    t = TYPICAL
    out = [
        _valid("typical GTE/OK header, two spans in the sketch", ["Typical"], t),
        _valid("tenant 0 (default tenant)", ["Tenant"], Raw(tenant=0, ptp_ns=NOW)),
        _valid("tenant 15, the largest", ["Tenant", "FieldLimit"], Raw(tenant=15, ptp_ns=NOW)),
        _valid("tenant 7", ["Tenant"], Raw(tenant=7, ptp_ns=NOW, lts=7)),
        _valid("ptp_ns 0, the PTP epoch", ["FieldLimit"], Raw(ptp_ns=0)),
        _valid("ptp_ns 1", ["FieldLimit"], Raw(ptp_ns=1)),
        _valid("ptp_ns 2^63-1, the largest", ["FieldLimit"], Raw(ptp_ns=I63 - 1)),
        _valid("ptp_ns 2^32 (carries into byte 4)", ["FieldLimit"], Raw(ptp_ns=2**32)),
        _valid("ts_source 0 GTE", ["EnumValue"], Raw(ptp_ns=NOW, ts_source=0)),
        _valid("ts_source 1 SW_GCC", ["EnumValue"], Raw(ptp_ns=NOW, ts_source=1)),
        _valid("ts_source 2 CPU", ["EnumValue"], Raw(ptp_ns=NOW, ts_source=2, uncertainty_ns=50_000)),
        _valid("clk_quality 0 OK", ["EnumValue"], Raw(ptp_ns=NOW, clk_quality=0)),
        _valid("clk_quality 1 DEGRADED", ["EnumValue"], Raw(ptp_ns=NOW, clk_quality=1, uncertainty_ns=9_000)),
        _valid(
            "clk_quality 2 UNKNOWN with 0xFFFF", ["EnumValue"], Raw(ptp_ns=NOW, clk_quality=2, uncertainty_ns=0xFFFF)
        ),
        _valid(
            "UNKNOWN with uncertainty 0 on the wire: reported as 65535, re-encoded as 0xFFFF",
            ["UnknownQuality"],
            Raw(ptp_ns=NOW, clk_quality=2, uncertainty_ns=0),
        ),
        _valid(
            "UNKNOWN with uncertainty 1234 on the wire: reported as 65535",
            ["UnknownQuality"],
            Raw(ptp_ns=NOW, ts_source=2, clk_quality=2, uncertainty_ns=1234),
        ),
        _valid("uncertainty 0", ["FieldLimit"], Raw(ptp_ns=NOW, uncertainty_ns=0)),
        _valid("uncertainty 1", ["FieldLimit"], Raw(ptp_ns=NOW, uncertainty_ns=1)),
        _valid("uncertainty 65534, the largest unsaturated", ["FieldLimit"], Raw(ptp_ns=NOW, uncertainty_ns=0xFFFE)),
        _valid("uncertainty 0xFFFF with OK: saturated", ["Saturated"], Raw(ptp_ns=NOW, uncertainty_ns=0xFFFF)),
        _valid(
            "uncertainty 0xFFFF with DEGRADED: saturated",
            ["Saturated"],
            Raw(ptp_ns=NOW, clk_quality=1, uncertainty_ns=0xFFFF),
        ),
        _valid("lts 0", ["FieldLimit"], Raw(ptp_ns=NOW, lts=0)),
        _valid("lts 2^63-1, the largest", ["FieldLimit"], Raw(ptp_ns=NOW, lts=I63 - 1)),
        _valid("lts 2^32", ["FieldLimit"], Raw(ptp_ns=NOW, lts=2**32)),
        _valid("empty sketch", ["Sketch"], Raw(ptp_ns=NOW, sketch=bytes(32))),
        _valid("full sketch", ["Sketch"], Raw(ptp_ns=NOW, sketch=FULL)),
        _valid("sketch with only bit 0 (0x80 of byte 0)", ["Sketch"], Raw(ptp_ns=NOW, sketch=b"\x80" + bytes(31))),
        _valid("sketch with only bit 255 (0x01 of byte 31)", ["Sketch"], Raw(ptp_ns=NOW, sketch=bytes(31) + b"\x01")),
        _valid("sketch of one span id", ["Sketch"], Raw(ptp_ns=NOW, sketch=sketch_of(SPAN_A))),
        _valid(
            "every field at its largest valid value",
            ["FieldLimit", "Tenant", "Saturated", "Sketch"],
            Raw(tenant=15, ptp_ns=I63 - 1, ts_source=2, clk_quality=1, uncertainty_ns=0xFFFF, lts=I63 - 1, sketch=FULL),
        ),
        _valid("every field zero but the version", ["FieldLimit"], Raw(ptp_ns=0, uncertainty_ns=0, lts=0)),
        # -- length --------------------------------------------------------------
        _invalid("empty", ["Length"], b"", "LENGTH"),
        _invalid("1 byte", ["Length"], t.pack()[:1], "LENGTH"),
        _invalid("52 bytes: last sketch byte missing", ["Length"], t.pack()[:52], "LENGTH"),
        _invalid("54 bytes: one trailing byte", ["Length"], t.pack() + b"\x00", "LENGTH"),
        _invalid("106 bytes: two headers back to back", ["Length"], t.pack() * 2, "LENGTH"),
        _invalid("71 bytes: the text form passed as binary", ["Length"], b64url(t.pack()).encode(), "LENGTH"),
        _invalid(
            "52 bytes with a bad version: length is checked first",
            ["Length", "Precedence"],
            _poke(t, 0, b"\x02")[:52],
            "LENGTH",
        ),
        # -- version -------------------------------------------------------------
        _invalid("version 0", ["Version"], _poke(t, 0, b"\x00"), "VERSION"),
        _invalid("version 2 (previous major)", ["Version"], _poke(t, 0, b"\x02"), "VERSION"),
        _invalid("version 4 (future major)", ["Version"], _poke(t, 0, b"\x04"), "VERSION"),
        _invalid("version 15", ["Version"], _poke(t, 0, b"\x0f"), "VERSION"),
        _invalid("tenant 15, version 0 (byte 0xf0)", ["Version", "Tenant"], _poke(t, 0, b"\xf0"), "VERSION"),
        _invalid(
            "byte 0 = 0x30: nibbles swapped (tenant 3, version 0)",
            ["Version", "NibbleOrder"],
            _poke(t, 0, b"\x30"),
            "VERSION",
        ),
        # -- ptp_ns --------------------------------------------------------------
        _invalid("ptp_ns -1", ["NegativePtp"], _poke(t, 1, b"\xff" * 8), "PTP_NS_RANGE"),
        _invalid("ptp_ns -2^63", ["NegativePtp"], _poke(t, 1, b"\x80" + bytes(7)), "PTP_NS_RANGE"),
        # -- enums ---------------------------------------------------------------
        _invalid("ts_source 3", ["BadEnum"], _poke(t, 9, b"\x03"), "TS_SOURCE"),
        _invalid("ts_source 0x80", ["BadEnum"], _poke(t, 9, b"\x80"), "TS_SOURCE"),
        _invalid("ts_source 0xff", ["BadEnum"], _poke(t, 9, b"\xff"), "TS_SOURCE"),
        _invalid("clk_quality 3", ["BadEnum"], _poke(t, 10, b"\x03"), "CLK_QUALITY"),
        _invalid("clk_quality 0xff", ["BadEnum"], _poke(t, 10, b"\xff"), "CLK_QUALITY"),
        # -- lts -----------------------------------------------------------------
        _invalid("lts 2^63", ["LtsPoisoning"], _poke(t, 13, b"\x80" + bytes(7)), "LTS_RANGE"),
        _invalid("lts 2^63+1", ["LtsPoisoning"], _poke(t, 13, b"\x80" + bytes(6) + b"\x01"), "LTS_RANGE"),
        _invalid("lts 2^64-1", ["LtsPoisoning"], _poke(t, 13, b"\xff" * 8), "LTS_RANGE"),
        # -- precedence (spec §9.1: length, then wire order) ----------------------
        _invalid(
            "bad version and negative ptp_ns: VERSION",
            ["Precedence"],
            _poke(_poke(t, 0, b"\x04"), 1, b"\xff"),
            "VERSION",
        ),
        _invalid(
            "negative ptp_ns and ts_source 3: PTP_NS_RANGE",
            ["Precedence"],
            _poke(_poke(t, 1, b"\xff"), 9, b"\x03"),
            "PTP_NS_RANGE",
        ),
        _invalid("ts_source 3 and clk_quality 3: TS_SOURCE", ["Precedence"], _poke(t, 9, b"\x03\x03"), "TS_SOURCE"),
        _invalid(
            "clk_quality 3 and lts 2^64-1: CLK_QUALITY",
            ["Precedence"],
            _poke(_poke(t, 10, b"\x03"), 13, b"\xff" * 8),
            "CLK_QUALITY",
        ),
        _invalid("53 bytes of 0xff: VERSION", ["Precedence"], b"\xff" * HEADER_LEN, "VERSION"),
        _invalid(
            "version 3 and every later field broken: PTP_NS_RANGE",
            ["Precedence"],
            b"\x03" + b"\xff" * (HEADER_LEN - 1),
            "PTP_NS_RANGE",
        ),
    ]
    out += [_valid(f"pseudo-random valid header #{i}", ["Typical"], raw) for i, raw in enumerate(_random_raws(11, 8))]
    return out


def _random_raws(seed: int, n: int) -> list[Raw]:
    """Deterministic valid headers with every field drawn over its whole range."""
    rng = random.Random(seed)
    return [
        Raw(
            tenant=rng.randrange(16),
            ptp_ns=rng.randrange(I63),
            ts_source=rng.randrange(3),
            clk_quality=rng.randrange(3),
            uncertainty_ns=rng.randrange(0x10000),
            lts=rng.randrange(I63),
            sketch=rng.getrandbits(256).to_bytes(32, "big"),
        )
        for _ in range(n)
    ]


def _enc(comment: str, flags: list[str], **f: Any) -> dict[str, Any]:
    fields = {
        "tenantId": f.get("tenant", 0),
        "ptpNs": str(f.get("ptp", NOW)),
        "tsSource": f.get("ts", "GTE"),
        "clkQuality": f.get("q", "OK"),
        "uncertaintyNs": f.get("u", 220),
        "lts": str(f.get("lts", 42)),
        "svcSketch": f.get("sketch", SKETCH_AB).hex(),
    }
    ts = TS_SOURCE_VALUES.get(fields["tsSource"], fields["tsSource"])
    q = QUALITY_VALUES.get(fields["clkQuality"], fields["clkQuality"])
    error = encode_error(fields["tenantId"], int(fields["ptpNs"]), ts, q, fields["uncertaintyNs"], int(fields["lts"]))
    test: dict[str, Any] = {"comment": comment, "flags": flags, "fields": fields}
    if error:
        assert f.get("error") == error, (comment, error)
        return {**test, "result": "invalid", "errorClass": error}
    raw = normalised(
        Raw(
            fields["tenantId"],
            3,
            int(fields["ptpNs"]),
            ts,
            q,
            fields["uncertaintyNs"],
            int(fields["lts"]),
            f.get("sketch", SKETCH_AB),
        )
    )
    return {**test, "result": "valid", "wire": raw.pack().hex(), "text": b64url(raw.pack())}


def encode() -> list[dict[str, Any]]:
    return [
        _enc("typical header", ["Typical"]),
        _enc("tenant 15", ["Tenant", "FieldLimit"], tenant=15),
        _enc("SW_GCC / DEGRADED", ["EnumValue"], ts="SW_GCC", q="DEGRADED", u=9000),
        _enc("CPU / OK", ["EnumValue"], ts="CPU", u=40_000),
        _enc("UNKNOWN with uncertainty 5: the encoder writes 0xFFFF", ["UnknownQuality"], q="UNKNOWN", u=5),
        _enc("UNKNOWN with uncertainty 0xFFFF", ["UnknownQuality", "EnumValue"], q="UNKNOWN", u=0xFFFF),
        _enc(
            "every field at its largest valid value",
            ["FieldLimit"],
            tenant=15,
            ptp=I63 - 1,
            ts="CPU",
            q="DEGRADED",
            u=0xFFFF,
            lts=I63 - 1,
            sketch=FULL,
        ),
        _enc("every field zero", ["FieldLimit", "Sketch"], ptp=0, u=0, lts=0, sketch=bytes(32)),
        _enc("tenant 16", ["CallerError", "Tenant"], tenant=16, error="TENANT_ID"),
        _enc("tenant -1", ["CallerError", "Tenant"], tenant=-1, error="TENANT_ID"),
        _enc("ptp_ns -1", ["CallerError", "NegativePtp"], ptp=-1, error="PTP_NS_RANGE"),
        _enc("ptp_ns 2^63", ["CallerError", "FieldLimit"], ptp=I63, error="PTP_NS_RANGE"),
        _enc("ts_source 3", ["CallerError", "BadEnum"], ts=3, error="TS_SOURCE"),
        _enc("ts_source -1", ["CallerError", "BadEnum"], ts=-1, error="TS_SOURCE"),
        _enc("clk_quality 3", ["CallerError", "BadEnum"], q=3, error="CLK_QUALITY"),
        _enc("uncertainty 65536", ["CallerError", "FieldLimit"], u=65536, error="UNCERTAINTY_RANGE"),
        _enc("uncertainty -1", ["CallerError", "FieldLimit"], u=-1, error="UNCERTAINTY_RANGE"),
        _enc(
            "uncertainty 70000 with UNKNOWN: still a caller error",
            ["CallerError", "UnknownQuality"],
            q="UNKNOWN",
            u=70_000,
            error="UNCERTAINTY_RANGE",
        ),
        _enc("lts 2^63", ["CallerError", "LtsPoisoning"], lts=I63, error="LTS_RANGE"),
        _enc("lts 2^64", ["CallerError", "LtsPoisoning"], lts=2**64, error="LTS_RANGE"),
        _enc("lts -1", ["CallerError"], lts=-1, error="LTS_RANGE"),
        _enc("tenant 16 and ptp_ns -1: TENANT_ID", ["CallerError", "Precedence"], tenant=16, ptp=-1, error="TENANT_ID"),
        _enc(
            "ptp_ns -1 and lts 2^63: PTP_NS_RANGE", ["CallerError", "Precedence"], ptp=-1, lts=I63, error="PTP_NS_RANGE"
        ),
        _enc("ts_source 9 and clk_quality 9: TS_SOURCE", ["CallerError", "Precedence"], ts=9, q=9, error="TS_SOURCE"),
        _enc(
            "uncertainty -1 and lts -1: UNCERTAINTY_RANGE",
            ["CallerError", "Precedence"],
            u=-1,
            lts=-1,
            error="UNCERTAINTY_RANGE",
        ),
        *[
            _enc(
                f"pseudo-random valid fields #{i}",
                ["Typical"],
                tenant=r.tenant,
                ptp=r.ptp_ns,
                ts=["GTE", "SW_GCC", "CPU"][r.ts_source],
                q=["OK", "DEGRADED", "UNKNOWN"][r.clk_quality],
                u=r.uncertainty_ns,
                lts=r.lts,
                sketch=r.sketch,
            )
            for i, r in enumerate(_random_raws(12, 8))
        ],
    ]
