"""First-principles reference for the tt-ext v3 vectors (spec/tt-ext-v3.md).

Written out from the spec, deliberately WITHOUT importing tempotrace_sdk: the
vectors are meant to catch bugs in the codec, so their expected values must
not come from it. Byte packing uses int.to_bytes field by field, base64url is
done bit by bit, and MurmurHash3_x64_128 is written out from Austin
Appleby's public-domain reference (cross-checked against the mmh3 package by
the generator).
"""

from __future__ import annotations

from dataclasses import dataclass

M64 = (1 << 64) - 1
LTS_LIMIT = 1 << 63  # first invalid lts (spec §3.6)
PTP_LIMIT = 1 << 63  # first unrepresentable ptp_ns
HEADER_LEN = 53
TEXT_LEN = 71
TEXT_INPUT_CAP = 256  # octets of the value as received (spec §5.2 step 1)
LTS_MAX = LTS_LIMIT - 1
LAMPORT_MAX_AHEAD = 1 << 44  # spec §10.1

TS_SOURCES = {0: "GTE", 1: "SW_GCC", 2: "CPU"}
QUALITIES = {0: "OK", 1: "DEGRADED", 2: "UNKNOWN"}
TS_SOURCE_VALUES = {v: k for k, v in TS_SOURCES.items()}
QUALITY_VALUES = {v: k for k, v in QUALITIES.items()}

B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


# -- MurmurHash3_x64_128 (spec §8.2) -----------------------------------------
C1 = 0x87C37B91114253D5
C2 = 0x4CF5AD432745937F


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M64
    k ^= k >> 33
    return k


def murmur3_x64_128(key: bytes, seed: int = 0) -> tuple[int, int]:
    """(out[0], out[1]) of MurmurHash3_x64_128 as the reference writes them."""
    n = len(key)
    h1 = h2 = seed & M64
    nblocks = n // 16
    for i in range(nblocks):
        k1 = int.from_bytes(key[16 * i : 16 * i + 8], "little")
        k2 = int.from_bytes(key[16 * i + 8 : 16 * i + 16], "little")
        k1 = (_rotl64((k1 * C1) & M64, 31) * C2) & M64
        h1 ^= k1
        h1 = (((_rotl64(h1, 27) + h2) & M64) * 5 + 0x52DCE729) & M64
        k2 = (_rotl64((k2 * C2) & M64, 33) * C1) & M64
        h2 ^= k2
        h2 = (((_rotl64(h2, 31) + h1) & M64) * 5 + 0x38495AB5) & M64
    tail = key[16 * nblocks :]
    k1 = int.from_bytes(tail[:8], "little")
    k2 = int.from_bytes(tail[8:], "little")
    if len(tail) > 8:
        h2 ^= (_rotl64((k2 * C2) & M64, 33) * C1) & M64
    if len(tail) > 0:
        h1 ^= (_rotl64((k1 * C1) & M64, 31) * C2) & M64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    return h1, h2


def sketch_indices(span_id: bytes) -> list[int]:
    """The 4 bit indices of an 8-byte span id (spec §8.1)."""
    h1, h2 = murmur3_x64_128(span_id, 0)
    return [((h1 + i * h2) & M64) % 256 for i in range(4)]


def sketch_set(sketch: bytearray, index: int) -> None:
    sketch[index // 8] |= 0x80 >> (index % 8)


def sketch_of(*span_ids: bytes) -> bytes:
    out = bytearray(32)
    for span_id in span_ids:
        for j in sketch_indices(span_id):
            sketch_set(out, j)
    return bytes(out)


def popcount(raw: bytes) -> int:
    return sum(bin(b).count("1") for b in raw)


# -- base64url, bit by bit (spec §5) -------------------------------------------
def b64url(raw: bytes) -> str:
    """RFC 4648 §5 without padding, written out bit by bit."""
    bits = "".join(f"{b:08b}" for b in raw)
    bits += "0" * (-len(bits) % 6)
    return "".join(B64URL[int(bits[i : i + 6], 2)] for i in range(0, len(bits), 6))


# -- the 53-byte layout (spec §2) ---------------------------------------------
@dataclass(frozen=True)
class Raw:
    """Field values exactly as they go on the wire (no validation)."""

    tenant: int = 0
    version: int = 3
    ptp_ns: int = 1_700_000_037_000_000_000
    ts_source: int = 0
    clk_quality: int = 0
    uncertainty_ns: int = 250
    lts: int = 1
    sketch: bytes = bytes(32)

    def pack(self) -> bytes:
        """Big-endian, field by field; ptp_ns as two's complement int64."""
        return (
            bytes([(self.tenant << 4) | self.version])
            + (self.ptp_ns & M64).to_bytes(8, "big")
            + bytes([self.ts_source, self.clk_quality])
            + self.uncertainty_ns.to_bytes(2, "big")
            + self.lts.to_bytes(8, "big")
            + self.sketch
        )


def expected_fields(raw: Raw) -> dict[str, object]:
    """The decoded fields a conforming decoder reports for a VALID header.

    UNKNOWN quality reports uncertaintyNs 65535 whatever the wire says
    (spec §3.5).
    """
    uncertainty = 0xFFFF if raw.clk_quality == 2 else raw.uncertainty_ns
    return {
        "tenantId": raw.tenant,
        "version": raw.version,
        "ptpNs": str(raw.ptp_ns),
        "tsSource": TS_SOURCES[raw.ts_source],
        "clkQuality": QUALITIES[raw.clk_quality],
        "uncertaintyNs": uncertainty,
        "lts": str(raw.lts),
        "svcSketch": raw.sketch.hex(),
    }


def binary_error(wire: bytes) -> str | None:
    """The error class of received bytes, in the spec §9.1 precedence."""
    if len(wire) != HEADER_LEN:
        return "LENGTH"
    if wire[0] & 0x0F != 3:
        return "VERSION"
    if wire[1] & 0x80:
        return "PTP_NS_RANGE"
    if wire[9] not in TS_SOURCES:
        return "TS_SOURCE"
    if wire[10] not in QUALITIES:
        return "CLK_QUALITY"
    if wire[13] & 0x80:
        return "LTS_RANGE"
    return None


def normalised(raw: Raw) -> Raw:
    """What re-encoding a decoded header writes (UNKNOWN -> 0xFFFF)."""
    if raw.clk_quality == 2:
        return Raw(raw.tenant, raw.version, raw.ptp_ns, raw.ts_source, 2, 0xFFFF, raw.lts, raw.sketch)
    return raw


def b64url_decode_bits(text: str) -> bytes:
    """The bytes a canonical 71-character text stands for (first 424 bits)."""
    bits = "".join(f"{B64URL.index(c):06b}" for c in text)
    usable = len(bits) - len(bits) % 8
    return bytes(int(bits[i : i + 8], 2) for i in range(0, usable, 8))


def utf8_octets(value: str) -> bytes:
    """The UTF-8 octets of a received value, a lone surrogate as its 3-octet form (spec §5.2)."""
    out = bytearray()
    for c in value:
        cp = ord(c)
        if cp < 0x80:
            out.append(cp)
        elif cp < 0x800:
            out += bytes([0xC0 | cp >> 6, 0x80 | cp & 0x3F])
        elif cp < 0x10000:  # including a lone surrogate U+D800..U+DFFF
            out += bytes([0xE0 | cp >> 12, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F])
        else:
            out += bytes([0xF0 | cp >> 18, 0x80 | cp >> 12 & 0x3F, 0x80 | cp >> 6 & 0x3F, 0x80 | cp & 0x3F])
    return bytes(out)


def text_decode(value: str) -> tuple[bytes | None, str | None]:
    """(53 bytes, None) or (None, errorClass) for a received text value (spec §5.2, §9.1)."""
    if len(utf8_octets(value)) > TEXT_INPUT_CAP:
        return None, "TEXT_LENGTH"
    text = value.strip(" \t")
    if "," in text:
        return None, "TEXT_MULTIPLE"
    if "=" in text:
        return None, "TEXT_PADDING"
    if any(c not in B64URL for c in text):
        return None, "TEXT_ALPHABET"
    if len(text) != TEXT_LEN:
        return None, "TEXT_LENGTH"
    if B64URL.index(text[-1]) & 0b11:
        return None, "TEXT_NON_CANONICAL"
    wire = b64url_decode_bits(text)
    error = binary_error(wire)
    return (None, error) if error else (wire, None)


def encode_error(tenant: int, ptp_ns: int, ts_source: int, clk_quality: int, uncertainty: int, lts: int) -> str | None:
    """The caller error an encoder reports, in spec §9.2 precedence."""
    if not 0 <= tenant <= 15:
        return "TENANT_ID"
    if not 0 <= ptp_ns < PTP_LIMIT:
        return "PTP_NS_RANGE"
    if ts_source not in TS_SOURCES:
        return "TS_SOURCE"
    if clk_quality not in QUALITIES:
        return "CLK_QUALITY"
    if not 0 <= uncertainty <= 0xFFFF:
        return "UNCERTAINTY_RANGE"
    if not 0 <= lts < LTS_LIMIT:
        return "LTS_RANGE"
    return None


# -- Lamport counter (spec §10) -------------------------------------------------
def lamport_sequence(start: int, ops: list[dict[str, str]]) -> tuple[list[dict[str, str]], int, bool] | None:
    """(results, final, saturated) of a counter started at ``start`` running ``ops``.

    None when ``start`` itself is out of range (the whole sequence is
    refused, LTS_RANGE). A refused merge gives ``{"errorClass": "LTS_RANGE"}``
    and leaves the counter unchanged; a remote more than LAMPORT_MAX_AHEAD
    ahead is not merged, so the receive is a plain tick (spec §10.1).
    """
    if not 0 <= start <= LTS_MAX:
        return None
    value, saturated, results = start, False, []
    for op in ops:
        base = value
        if op["op"] == "merge":
            remote = int(op["remote"])
            if not 0 <= remote <= LTS_MAX:
                results.append({"errorClass": "LTS_RANGE"})
                continue
            if value < remote <= value + LAMPORT_MAX_AHEAD:
                base = remote
        if base >= LTS_MAX:
            value, saturated = LTS_MAX, True
        else:
            value = base + 1
        results.append({"lts": str(value)})
    return results, value, saturated
