"""The torch carried record: one rank's tt-ext send event plus the ids the analysis needs (spec/torch.md §3.1, §3.2).

Sans-IO: bytes in, values out. Imports neither torch nor OpenTelemetry, so
other implementations (and the conformance kit) can read it from this module
and the spec alone; it sits with the other byte formats in ``wire`` and is
re-exported as ``tempotrace_sdk.torch.TorchRecord`` and so on. Layout, network
byte order (big-endian)::

    off  size  field
      0     1  version      RECORD_VERSION (1); a record of 95 zero octets is "absent"
      1     1  kind         0 = exchange (collective / step), 1 = point-to-point side message
      2     4  rank         uint32: the sender's global rank
      6     8  seq          uint64: exchange: the step number ("step") or group collective seq ("op");
                            p2p: the p2p sequence number per (group, src, dst, tag)
     14    16  trace_id     the sending span's trace id
     30     8  span_id      the sending span's id (0: sent outside any span)
     38    53  header       tt-ext v3, binary form (spec/tt-ext-v3.md §2): the send event
     91     4  crc32        IEEE CRC-32 (zlib.crc32) of octets 0..90, big-endian

Conformance vectors: conformance/vectors/tt_torch_record_test.json.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass

from ..errors import HeaderError
from .header import TTExt
from .layout import HEADER_LEN

__all__ = [
    "RECORD_LEN",
    "RECORD_VERSION",
    "RecordError",
    "RecordKind",
    "TorchRecord",
    "absent_record",
    "decode_record",
    "encode_record",
    "pack_record",
]

RECORD_VERSION = 1
#: version, kind, rank, seq, trace id, span id (the part before the tt-ext header).
_HEAD = struct.Struct(">BBIQ16s8s")
_CRC = struct.Struct(">I")
_BODY_LEN = _HEAD.size + HEADER_LEN
#: 95 octets: 38 of ids, 53 of tt-ext header, 4 of CRC.
RECORD_LEN = _BODY_LEN + _CRC.size
assert RECORD_LEN == 95

_ABSENT = bytes(RECORD_LEN)
_RANK_MAX = 2**32 - 1
_SEQ_MAX = 2**64 - 1


class RecordKind(enum.IntEnum):
    EXCHANGE = 0  #: collective / step exchange (all_gather of every rank's record)
    P2P = 1  #: side message of a send, paired with its receive by order


class RecordError(HeaderError):
    """A carried record breaks a rule of spec/torch.md §3.

    ``error_class`` is one of RECORD_LENGTH, RECORD_ABSENT, RECORD_VERSION,
    RECORD_CHECKSUM, RECORD_KIND, RECORD_HEADER (the embedded tt-ext header is
    invalid; the message names its own class, and ``__cause__`` is the
    header's own HeaderError), RECORD_FIELD (a value out of range when
    encoding); the receiver adds RECORD_UNEXPECTED_KIND, RECORD_RANK and RECORD_SEQ.
    """

    error_class = "RECORD"


@dataclass(frozen=True, slots=True)
class TorchRecord:
    """One decoded (or to-be-encoded) record; the constructor checks every field."""

    kind: RecordKind
    rank: int
    seq: int
    trace_id: int
    span_id: int
    header: TTExt

    def __post_init__(self) -> None:
        if not isinstance(self.kind, RecordKind):
            raise RecordError("kind", f"must be a RecordKind, got {self.kind!r}", error_class="RECORD_FIELD")
        for name, value, high in (
            ("rank", self.rank, _RANK_MAX),
            ("seq", self.seq, _SEQ_MAX),
            ("trace_id", self.trace_id, 2**128 - 1),
            ("span_id", self.span_id, 2**64 - 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
                raise RecordError(name, f"must be an integer 0..{high}, got {value!r}", error_class="RECORD_FIELD")
        if not isinstance(self.header, TTExt):
            raise RecordError("header", "must be a TTExt", error_class="RECORD_FIELD")


def encode_record(record: TorchRecord) -> bytes:
    """The 95-octet form of ``record``."""
    return pack_record(record.kind, record.rank, record.seq, record.trace_id, record.span_id, record.header.encode())


def pack_record(kind: int, rank: int, seq: int, trace_id: int, span_id: int, header: bytes) -> bytes:
    """The 95-octet form from parts the caller already holds valid (``header``: 53 octets from a send event).

    The path the instrumentation takes per exchange: no ``TTExt`` is built
    and decoded again, so the header is checked for its length only. A kind
    other than 0 or 1, or a number out of range, is ``RecordError``
    (RECORD_FIELD), as for ``TorchRecord`` (spec/torch.md §3.2).
    """
    if len(header) != HEADER_LEN:
        raise RecordError("header", f"must be {HEADER_LEN} octets, got {len(header)}", error_class="RECORD_FIELD")
    if kind not in (0, 1):  # RecordKind values (an IntEnum compares equal to them)
        raise RecordError("kind", f"must be 0 or 1, got {kind!r}", error_class="RECORD_FIELD")
    try:
        body = _HEAD.pack(RECORD_VERSION, kind, rank, seq, trace_id.to_bytes(16, "big"), span_id.to_bytes(8, "big"))
    except (struct.error, OverflowError) as err:
        raise RecordError("record", f"rank, seq or an id out of range: {err}", error_class="RECORD_FIELD") from err
    body += header
    return body + _CRC.pack(zlib.crc32(body))


def absent_record() -> bytes:
    """What a rank contributes when it has no record to send (e.g. its clock failed)."""
    return _ABSENT


def decode_record(data: bytes | bytearray | memoryview) -> TorchRecord:
    """Parse and check a received record; ``RecordError`` (remote=True) names the broken rule.

    Checks, in this order (spec/torch.md §3.2): length, absent, version, CRC, kind,
    then the embedded tt-ext header.
    """
    raw = bytes(data)
    if len(raw) != RECORD_LEN:
        raise RecordError("length", f"must be {RECORD_LEN} octets, got {len(raw)}", error_class="RECORD_LENGTH",
                          remote=True)
    if raw == _ABSENT:
        raise RecordError("record", "absent (the sender had no record)", error_class="RECORD_ABSENT", remote=True)
    version, kind, rank, seq, trace_id, span_id = _HEAD.unpack_from(raw)
    if version != RECORD_VERSION:
        raise RecordError("version", f"must be {RECORD_VERSION}, got {version}", error_class="RECORD_VERSION",
                          remote=True)
    (crc,) = _CRC.unpack_from(raw, _BODY_LEN)
    if crc != zlib.crc32(raw[:_BODY_LEN]):
        raise RecordError("crc32", "does not match octets 0..90", error_class="RECORD_CHECKSUM", remote=True)
    if kind not in (RecordKind.EXCHANGE, RecordKind.P2P):
        raise RecordError("kind", f"must be 0 or 1, got {kind}", error_class="RECORD_KIND", remote=True)
    try:
        header = TTExt.decode(raw[_HEAD.size:_BODY_LEN])
    except HeaderError as err:
        raise RecordError("header", f"{err.field}: {err.rule} [{err.error_class}]", error_class="RECORD_HEADER",
                          remote=True) from err
    return TorchRecord(RecordKind(kind), rank, seq, int.from_bytes(trace_id, "big"), int.from_bytes(span_id, "big"),
                       header)
