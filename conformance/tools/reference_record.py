"""First-principles reference for the carried-record vectors (spec/torch.md §3.1, §3.2).

Like reference.py, and for the same reason, it imports nothing of
tempotrace_sdk: the record is packed field by field with int.to_bytes, the
CRC-32 is computed bit by bit from its catalogue parameters (the generator
cross-checks it against zlib), and the checks are written out from the
spec's numbered list, in its order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from reference import HEADER_LEN, Raw, binary_error, expected_fields, normalised

RECORD_LEN = 95
RECORD_VERSION = 1
BODY_LEN = 91  # octets 0..90: everything the CRC covers
HEADER_AT = 38
KINDS = {0: "EXCHANGE", 1: "P2P"}
KIND_VALUES = {v: k for k, v in KINDS.items()}
RANK_LIMIT = 1 << 32
SEQ_LIMIT = 1 << 64

# CRC-32/ISO-HDLC (spec §3.1): reflected polynomial, preset and final XOR all ones.
CRC_POLY_REFLECTED = 0xEDB88320
CRC_PRESET = 0xFFFFFFFF
CRC_XOROUT = 0xFFFFFFFF


def crc32(data: bytes, preset: int = CRC_PRESET, xorout: int = CRC_XOROUT, poly: int = CRC_POLY_REFLECTED) -> int:
    """CRC-32 bit by bit, least significant bit first; other parameters make the usual mistakes."""
    reg = preset
    for octet in data:
        reg ^= octet
        for _ in range(8):
            reg = (reg >> 1) ^ poly if reg & 1 else reg >> 1
    return reg ^ xorout


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli): the other common CRC-32, which a record must not use."""
    return crc32(data, poly=0x82F63B78)


def crc32_msb_first(data: bytes) -> int:
    """The same polynomial processed most significant bit first (CRC-32/BZIP2): not the record's CRC."""
    reg = CRC_PRESET
    for octet in data:
        reg ^= octet << 24
        for _ in range(8):
            reg = ((reg << 1) ^ 0x04C11DB7) & 0xFFFFFFFF if reg & 0x80000000 else (reg << 1) & 0xFFFFFFFF
    return reg ^ CRC_XOROUT


@dataclass(frozen=True)
class Rec:
    """Record fields exactly as they go on the wire (no validation); ``crc`` None: the correct CRC."""

    version: int = RECORD_VERSION
    kind: int = 0
    rank: int = 0
    seq: int = 0
    trace_id: bytes = bytes(16)
    span_id: bytes = bytes(8)
    header: Raw = field(default_factory=Raw)
    crc: int | None = None

    def body(self) -> bytes:
        """Octets 0..90, big-endian field by field."""
        out = (
            bytes([self.version, self.kind])
            + self.rank.to_bytes(4, "big")
            + self.seq.to_bytes(8, "big")
            + self.trace_id
            + self.span_id
            + self.header.pack()
        )
        assert len(out) == BODY_LEN
        return out

    def pack(self) -> bytes:
        body = self.body()
        crc = crc32(body) if self.crc is None else self.crc
        return body + crc.to_bytes(4, "big")

    def with_crc_of(self, data: bytes) -> Rec:
        return replace(self, crc=crc32(data))


def decode_error(record: bytes) -> tuple[str | None, str | None]:
    """(class, the header's own class) of received octets; (None, None) when valid (spec §3.2 checks 1-6)."""
    if len(record) != RECORD_LEN:
        return "RECORD_LENGTH", None
    if record == bytes(RECORD_LEN):
        return "RECORD_ABSENT", None
    if record[0] != RECORD_VERSION:
        return "RECORD_VERSION", None
    if int.from_bytes(record[BODY_LEN:], "big") != crc32(record[:BODY_LEN]):
        return "RECORD_CHECKSUM", None
    if record[1] not in KINDS:
        return "RECORD_KIND", None
    header_error = binary_error(record[HEADER_AT:BODY_LEN])
    if header_error is not None:
        return "RECORD_HEADER", header_error
    return None, None


def receive_error(record: bytes, kind: int, rank: int, seq: int) -> tuple[str | None, str | None]:
    """Checks 1-9 of spec §3.2: the codec's, then the receiver's against what it expects."""
    error = decode_error(record)
    if error[0] is not None:
        return error
    if record[1] != kind:
        return "RECORD_UNEXPECTED_KIND", None
    if int.from_bytes(record[2:6], "big") != rank:
        return "RECORD_RANK", None
    if int.from_bytes(record[6:14], "big") != seq:
        return "RECORD_SEQ", None
    return None, None


def decoded(rec: Rec) -> dict[str, object]:
    """What a reader reports for a VALID record: its fields and its re-encoding (header normalised)."""
    again = replace(rec, header=normalised(rec.header), crc=None).pack()
    return {
        "fields": {
            "kind": KINDS[rec.kind],
            "rank": rec.rank,
            "seq": str(rec.seq),
            "traceId": rec.trace_id.hex(),
            "spanId": rec.span_id.hex(),
            "header": expected_fields(rec.header),
        },
        "reencoded": again.hex(),
    }


TRACE_ID_LEN, SPAN_ID_LEN = 16, 8  # octets, as OpenTelemetry's ids (spec §3.1)


def encode_error(
    kind: int,
    rank: int,
    seq: int,
    header: bytes,
    trace_id: bytes = bytes(TRACE_ID_LEN),
    span_id: bytes = bytes(SPAN_ID_LEN),
) -> str | None:
    """The caller error a record encoder reports (spec §3.2, building a record)."""
    if kind not in KINDS or not 0 <= rank < RANK_LIMIT or not 0 <= seq < SEQ_LIMIT:
        return "RECORD_FIELD"
    if len(trace_id) != TRACE_ID_LEN or len(span_id) != SPAN_ID_LEN:  # an id is its octets: no shorter, no longer
        return "RECORD_FIELD"
    if len(header) != HEADER_LEN or binary_error(header) is not None:
        return "RECORD_FIELD"
    return None
