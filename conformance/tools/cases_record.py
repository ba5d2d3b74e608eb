"""Carried-record vectors, reading (spec/torch.md §3.1, §3.2 checks 1-6), from reference_record.py.

Like cases_header.py, each case states its expected outcome and the
reference checks the statement against the rules written out from the spec.
Every CRC the generator writes is cross-checked against zlib. New cases go at
the end of their group (tcIds never move). The receiver's and the sender's
side are in cases_record_sides.py.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import replace
from typing import Any

from cases_header import FULL, I63, NOW, TYPICAL, _random_raws
from reference import Raw, normalised
from reference_record import (
    BODY_LEN,
    HEADER_AT,
    RECORD_LEN,
    Rec,
    crc32,
    crc32_msb_first,
    crc32c,
    decode_error,
    decoded,
)

TRACE_W3C = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")  # the W3C traceparent example
SPAN_W3C = bytes.fromhex("00f067aa0ba902b7")
STEP = Rec(kind=0, rank=3, seq=7, trace_id=TRACE_W3C, span_id=SPAN_W3C, header=TYPICAL)
P2P = Rec(kind=1, rank=1, seq=17, trace_id=TRACE_W3C, span_id=bytes.fromhex("b7ad6b7169203331"), header=TYPICAL)
ONES16, ONES8 = b"\xff" * 16, b"\xff" * 8
U64 = 2**64 - 1
U32 = 2**32 - 1


def _checked(rec: Rec) -> bytes:
    """The record's octets; its CRC, when computed, agrees with zlib's."""
    raw = rec.pack()
    if rec.crc is None:
        assert zlib.crc32(raw[:BODY_LEN]).to_bytes(4, "big") == raw[BODY_LEN:]
    return raw


def with_normalised(flags: list[str], rec: Rec) -> list[str]:
    """flags, plus HeaderNormalised when the header is re-encoded differently (UNKNOWN, not 0xFFFF)."""
    changed = normalised(rec.header) != rec.header
    return [*flags, "HeaderNormalised"] if changed and "HeaderNormalised" not in flags else flags


def _valid(comment: str, flags: list[str], rec: Rec) -> dict[str, Any]:
    raw = _checked(rec)
    assert decode_error(raw) == (None, None), comment
    out = decoded(rec)
    assert zlib.crc32(bytes.fromhex(out["reencoded"])[:BODY_LEN]) == int(out["reencoded"][-8:], 16)
    return {"comment": comment, "flags": with_normalised(flags, rec), "record": raw.hex(), "result": "valid", **out}


def _invalid(
    comment: str, flags: list[str], raw: Rec | bytes, error: str, header_error: str | None = None
) -> dict[str, Any]:
    octets = _checked(raw) if isinstance(raw, Rec) else raw
    assert decode_error(octets) == (error, header_error), (comment, decode_error(octets), error, header_error)
    case = {"comment": comment, "flags": flags, "record": octets.hex(), "result": "invalid", "errorClass": error}
    return {**case, "headerErrorClass": header_error} if header_error else case


def _flip(rec: Rec, offset: int, mask: int = 0x01) -> bytes:
    """One bit changed after the CRC was computed."""
    raw = bytearray(_checked(rec))
    raw[offset] ^= mask
    return bytes(raw)


def _crc_as(rec: Rec, crc: int) -> Rec:
    return replace(rec, crc=crc)


def _crc_where(want: Any, base: Rec, seq: int) -> Rec:
    """base at ``seq``, found once by counting up from base.seq: its CRC has the property ``want``."""
    rec = replace(base, seq=seq)
    assert want(crc32(rec.body())), (seq, hex(crc32(rec.body())))
    return rec


def _random_recs(seed: int, n: int) -> list[Rec]:
    """Deterministic valid records, every field drawn over its whole range (headers as cases_header draws them)."""
    rng = random.Random(seed)
    return [
        Rec(
            kind=rng.randrange(2),
            rank=rng.randrange(2**32),
            seq=rng.randrange(2**64),
            trace_id=rng.getrandbits(128).to_bytes(16, "big"),
            span_id=rng.getrandbits(64).to_bytes(8, "big"),
            header=header,
        )
        for header in _random_raws(seed, n)
    ]


def decode() -> list[dict[str, Any]]:
    s, body = STEP, STEP.body()
    bad_header = replace(s, header=replace(TYPICAL, ts_source=3))
    out = [
        _valid("typical exchange record: rank 3's record of step 7", ["Record", "RecordKindValue"], s),
        _valid("typical p2p side message: rank 1's send with p2p_seq 17", ["Record", "RecordKindValue"], P2P),
        _valid("rank 0", ["RankSeqLimit"], replace(s, rank=0)),
        _valid("rank 2^32-1, the largest", ["RankSeqLimit"], replace(s, rank=U32)),
        _valid("rank 2^31: unsigned, not negative", ["RankSeqLimit"], replace(s, rank=2**31)),
        _valid("rank 0x01020304: big-endian", ["ByteOrder"], replace(s, rank=0x01020304)),
        _valid("seq 0", ["RankSeqLimit"], replace(s, seq=0)),
        _valid("seq 2^32: carries past the low 4 octets", ["RankSeqLimit"], replace(s, seq=2**32)),
        _valid("seq 2^63: unsigned, not negative", ["RankSeqLimit"], replace(s, seq=2**63)),
        _valid("seq 2^64-1, the largest", ["RankSeqLimit"], replace(s, seq=U64)),
        _valid("seq 0x0102030405060708: big-endian", ["ByteOrder"], replace(s, seq=0x0102030405060708)),
        _valid(
            "trace and span id zero: sent outside any span",
            ["ZeroIds"],
            replace(s, trace_id=bytes(16), span_id=bytes(8)),
        ),
        _valid("trace and span id all ones", ["ZeroIds"], replace(s, trace_id=ONES16, span_id=ONES8)),
        _valid("trace id zero, span id not: ids are not checked", ["ZeroIds"], replace(s, trace_id=bytes(16))),
        _valid("span id zero, trace id not: ids are not checked", ["ZeroIds"], replace(s, span_id=bytes(8))),
        _valid(
            "header SW_GCC / DEGRADED",
            ["EmbeddedHeader"],
            replace(s, header=Raw(ptp_ns=NOW, ts_source=1, clk_quality=1, uncertainty_ns=9000, lts=5)),
        ),
        _valid(
            "header CPU / UNKNOWN with 0xFFFF",
            ["EmbeddedHeader"],
            replace(P2P, header=Raw(ptp_ns=NOW, ts_source=2, clk_quality=2, uncertainty_ns=0xFFFF, lts=6)),
        ),
        _valid(
            "header UNKNOWN with 1234 on the wire: reported as 65535, re-encoded with 0xFFFF and a new CRC",
            ["EmbeddedHeader", "HeaderNormalised"],
            replace(s, header=Raw(ptp_ns=NOW, ts_source=2, clk_quality=2, uncertainty_ns=1234, lts=6)),
        ),
        _valid("header tenant 15", ["EmbeddedHeader"], replace(s, header=replace(TYPICAL, tenant=15))),
        _valid(
            "header with every field at its largest valid value",
            ["EmbeddedHeader"],
            replace(s, header=Raw(15, 3, I63 - 1, 2, 1, 0xFFFF, I63 - 1, FULL)),
        ),
        _valid(
            "every field zero but the two versions (record 1, header 3)",
            ["RankSeqLimit", "ZeroIds", "EmbeddedHeader"],
            Rec(header=Raw(ptp_ns=0, uncertainty_ns=0, lts=0)),
        ),
        _valid("CRC whose first octet is 0x00", ["ByteOrder"], _crc_where(lambda c: c < 2**24, s, 809)),
        _valid("CRC whose last octet is 0x00", ["ByteOrder"], _crc_where(lambda c: c & 0xFF == 0, s, 29)),
        *[_valid(f"pseudo-random valid record #{i}", ["Record"], r) for i, r in enumerate(_random_recs(21, 8))],
        # -- 1. length -------------------------------------------------------------
        _invalid("empty", ["RecordLength"], b"", "RECORD_LENGTH"),
        _invalid("1 octet: the version alone", ["RecordLength"], b"\x01", "RECORD_LENGTH"),
        _invalid("53 octets: a bare tt-ext header", ["RecordLength"], TYPICAL.pack(), "RECORD_LENGTH"),
        _invalid("91 octets: no CRC", ["RecordLength"], body, "RECORD_LENGTH"),
        _invalid("94 octets: last CRC octet missing", ["RecordLength"], s.pack()[:94], "RECORD_LENGTH"),
        _invalid("96 octets: one trailing octet", ["RecordLength"], s.pack() + b"\x00", "RECORD_LENGTH"),
        _invalid("190 octets: two records back to back", ["RecordLength"], s.pack() + P2P.pack(), "RECORD_LENGTH"),
        _invalid("94 zero octets: not the absent record", ["RecordLength", "AbsentRecord"], bytes(94), "RECORD_LENGTH"),
        _invalid("96 zero octets: not the absent record", ["RecordLength", "AbsentRecord"], bytes(96), "RECORD_LENGTH"),
        _invalid(
            "94 octets with version 2: length is checked first",
            ["RecordLength", "RecordPrecedence"],
            replace(s, version=2).pack()[:94],
            "RECORD_LENGTH",
        ),
        # -- 2. absent -------------------------------------------------------------
        _invalid("95 zero octets: the absent record", ["AbsentRecord"], bytes(RECORD_LEN), "RECORD_ABSENT"),
        # -- 3. version ------------------------------------------------------------
        _invalid("version 0 (the rest valid, CRC right)", ["RecordVersion"], replace(s, version=0), "RECORD_VERSION"),
        _invalid("version 2", ["RecordVersion"], replace(s, version=2), "RECORD_VERSION"),
        _invalid(
            "version 3: tt-ext's version, not the record's", ["RecordVersion"], replace(s, version=3), "RECORD_VERSION"
        ),
        _invalid("version 255", ["RecordVersion"], replace(s, version=255), "RECORD_VERSION"),
        _invalid(
            "octets 0..90 zero followed by their CRC: not the absent record, version 0",
            ["RecordVersion", "AbsentRecord"],
            bytes(BODY_LEN) + crc32(bytes(BODY_LEN)).to_bytes(4, "big"),
            "RECORD_VERSION",
        ),
        _invalid(
            "94 zero octets then 0x01: not the absent record; version before CRC",
            ["RecordVersion", "AbsentRecord", "RecordPrecedence"],
            bytes(94) + b"\x01",
            "RECORD_VERSION",
        ),
        _invalid(
            "version 2 and a wrong CRC: version is checked first",
            ["RecordVersion", "RecordPrecedence"],
            _flip(replace(s, version=2), 94),
            "RECORD_VERSION",
        ),
        _invalid(
            "version 2, kind 5 and an invalid header: RECORD_VERSION",
            ["RecordVersion", "RecordPrecedence"],
            replace(bad_header, version=2, kind=5),
            "RECORD_VERSION",
        ),
        # -- 4. CRC ----------------------------------------------------------------
        _invalid("CRC field zero", ["Checksum"], _crc_as(s, 0), "RECORD_CHECKSUM"),
        _invalid(
            "kind 1 -> 0 after the CRC: a valid-looking exchange record", ["Checksum"], _flip(P2P, 1), "RECORD_CHECKSUM"
        ),
        _invalid("one bit of the rank changed", ["Checksum"], _flip(s, 5), "RECORD_CHECKSUM"),
        _invalid("one bit of the seq changed", ["Checksum"], _flip(s, 13, 0x80), "RECORD_CHECKSUM"),
        _invalid("one bit of the trace id changed", ["Checksum"], _flip(s, 14, 0x80), "RECORD_CHECKSUM"),
        _invalid("one bit of the span id changed", ["Checksum"], _flip(s, 37), "RECORD_CHECKSUM"),
        _invalid("one bit of the header's ptp_ns changed", ["Checksum"], _flip(s, HEADER_AT + 8), "RECORD_CHECKSUM"),
        _invalid(
            "one bit of the header's last sketch octet changed", ["Checksum"], _flip(s, 90, 0x80), "RECORD_CHECKSUM"
        ),
        _invalid("top bit of the CRC field flipped", ["Checksum"], _flip(s, 91, 0x80), "RECORD_CHECKSUM"),
        _invalid("bottom bit of the CRC field flipped", ["Checksum"], _flip(s, 94), "RECORD_CHECKSUM"),
        _invalid(
            "CRC stored little-endian",
            ["CrcVariant", "ByteOrder"],
            _crc_as(s, int.from_bytes(crc32(body).to_bytes(4, "little"), "big")),
            "RECORD_CHECKSUM",
        ),
        _invalid("CRC without the final XOR", ["CrcVariant"], _crc_as(s, crc32(body, xorout=0)), "RECORD_CHECKSUM"),
        _invalid("CRC with register preset 0", ["CrcVariant"], _crc_as(s, crc32(body, preset=0)), "RECORD_CHECKSUM"),
        _invalid(
            "CRC with preset 0 and no final XOR", ["CrcVariant"], _crc_as(s, crc32(body, 0, 0)), "RECORD_CHECKSUM"
        ),
        _invalid("CRC-32C (Castagnoli) instead of CRC-32", ["CrcVariant"], _crc_as(s, crc32c(body)), "RECORD_CHECKSUM"),
        _invalid(
            "CRC-32 most significant bit first (CRC-32/BZIP2)",
            ["CrcVariant"],
            _crc_as(s, crc32_msb_first(body)),
            "RECORD_CHECKSUM",
        ),
        _invalid(
            "CRC of octets 1..90 (version left out)", ["CrcVariant"], _crc_as(s, crc32(body[1:])), "RECORD_CHECKSUM"
        ),
        _invalid("CRC of octets 0..89", ["CrcVariant"], _crc_as(s, crc32(body[:-1])), "RECORD_CHECKSUM"),
        _invalid("CRC of the header alone", ["CrcVariant"], _crc_as(s, crc32(body[HEADER_AT:])), "RECORD_CHECKSUM"),
        _invalid(
            "kind 2 and a wrong CRC: CRC is checked first",
            ["Checksum", "RecordPrecedence"],
            _flip(replace(s, kind=2), 94),
            "RECORD_CHECKSUM",
        ),
        _invalid(
            "invalid header and a wrong CRC: CRC is checked first",
            ["Checksum", "RecordPrecedence"],
            _flip(bad_header, 94),
            "RECORD_CHECKSUM",
        ),
        # -- 5. kind ---------------------------------------------------------------
        _invalid("kind 2", ["BadKind"], replace(s, kind=2), "RECORD_KIND"),
        _invalid("kind 3", ["BadKind"], replace(s, kind=3), "RECORD_KIND"),
        _invalid("kind 0x80", ["BadKind"], replace(s, kind=0x80), "RECORD_KIND"),
        _invalid("kind 0xff", ["BadKind"], replace(s, kind=0xFF), "RECORD_KIND"),
        _invalid(
            "kind 2 and an invalid header: RECORD_KIND",
            ["BadKind", "RecordPrecedence"],
            replace(bad_header, kind=2),
            "RECORD_KIND",
        ),
        # -- 6. the embedded header ------------------------------------------------
        _invalid(
            "header version 2",
            ["HeaderError"],
            replace(s, header=replace(TYPICAL, version=2)),
            "RECORD_HEADER",
            "VERSION",
        ),
        _invalid(
            "header version 4",
            ["HeaderError"],
            replace(s, header=replace(TYPICAL, version=4)),
            "RECORD_HEADER",
            "VERSION",
        ),
        _invalid(
            "header octet 0 = 0x30: nibbles swapped",
            ["HeaderError"],
            replace(s, header=replace(TYPICAL, tenant=3, version=0)),
            "RECORD_HEADER",
            "VERSION",
        ),
        _invalid(
            "header all zero: a record around no header",
            ["HeaderError"],
            replace(s, header=Raw(version=0, ptp_ns=0, uncertainty_ns=0, lts=0)),
            "RECORD_HEADER",
            "VERSION",
        ),
        _invalid(
            "header ptp_ns -1",
            ["HeaderError"],
            replace(s, header=replace(TYPICAL, ptp_ns=-1)),
            "RECORD_HEADER",
            "PTP_NS_RANGE",
        ),
        _invalid("header ts_source 3", ["HeaderError"], bad_header, "RECORD_HEADER", "TS_SOURCE"),
        _invalid(
            "header clk_quality 3",
            ["HeaderError"],
            replace(s, header=replace(TYPICAL, clk_quality=3)),
            "RECORD_HEADER",
            "CLK_QUALITY",
        ),
        _invalid(
            "header lts 2^63",
            ["HeaderError"],
            replace(s, header=replace(TYPICAL, lts=I63)),
            "RECORD_HEADER",
            "LTS_RANGE",
        ),
        _invalid(
            "header lts 2^64-1",
            ["HeaderError"],
            replace(s, header=replace(TYPICAL, lts=U64)),
            "RECORD_HEADER",
            "LTS_RANGE",
        ),
        _invalid(
            "header version 2 and ts_source 3: VERSION",
            ["HeaderError", "RecordPrecedence"],
            replace(s, header=replace(TYPICAL, version=2, ts_source=3)),
            "RECORD_HEADER",
            "VERSION",
        ),
        _invalid(
            "header ts_source 3 and clk_quality 3: TS_SOURCE",
            ["HeaderError", "RecordPrecedence"],
            replace(s, header=replace(TYPICAL, ts_source=3, clk_quality=3)),
            "RECORD_HEADER",
            "TS_SOURCE",
        ),
        _invalid(
            "header clk_quality 3 and lts 2^63: CLK_QUALITY",
            ["HeaderError", "RecordPrecedence"],
            replace(s, header=replace(TYPICAL, clk_quality=3, lts=I63)),
            "RECORD_HEADER",
            "CLK_QUALITY",
        ),
        _invalid(
            "header 53 octets of 0xff: VERSION",
            ["HeaderError", "RecordPrecedence"],
            replace(s, header=Raw(15, 15, -1, 255, 255, 0xFFFF, U64, FULL)),
            "RECORD_HEADER",
            "VERSION",
        ),
    ]
    return out
