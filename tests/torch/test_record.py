"""The carried record codec (spec/torch.md §3.1, §3.2): table-driven cases, round trips, never a stray exception.

Conformance vectors for it come with the reworked conformance kit; until then the
cases live here, each named for the rule it shows.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tempotrace_sdk import ClockQuality, Sketch, TsSource, TTExt
from tempotrace_sdk.torch.record import (
    RECORD_LEN,
    RecordError,
    RecordKind,
    TorchRecord,
    absent_record,
    decode_record,
    encode_record,
    pack_record,
)

HEADER = TTExt(ptp_ns=1_764_000_037_000_000_000, ts_source=TsSource.GTE, clk_quality=ClockQuality.OK,
               uncertainty_ns=220, lts=41, svc_sketch=Sketch.of(0x00F067AA0BA902B7), tenant_id=2)
RECORD = TorchRecord(RecordKind.P2P, rank=3, seq=17, trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
                     span_id=0x00F067AA0BA902B7, header=HEADER)
GOOD = encode_record(RECORD)


def _recrc(raw: bytes) -> bytes:
    body = raw[:91]
    return body + struct.pack(">I", zlib.crc32(body))


def _with(offset: int, value: int) -> bytes:
    raw = bytearray(GOOD)
    raw[offset] = value
    return _recrc(bytes(raw))


def test_layout_matches_the_spec() -> None:
    """§3.1: version, kind, rank, seq, trace id, span id, header, CRC-32 at their offsets."""
    assert len(GOOD) == RECORD_LEN == 95
    assert GOOD[0] == 1 and GOOD[1] == 1
    assert GOOD[2:6] == (3).to_bytes(4, "big") and GOOD[6:14] == (17).to_bytes(8, "big")
    assert GOOD[14:30] == RECORD.trace_id.to_bytes(16, "big") and GOOD[30:38] == RECORD.span_id.to_bytes(8, "big")
    assert GOOD[38:91] == HEADER.encode()
    assert GOOD[91:] == struct.pack(">I", zlib.crc32(GOOD[:91]))
    assert decode_record(GOOD) == RECORD
    assert pack_record(RecordKind.P2P, 3, 17, RECORD.trace_id, RECORD.span_id, HEADER.encode()) == GOOD


CASES = [
    ("valid", GOOD, None),
    ("too_short", GOOD[:-1], "RECORD_LENGTH"),
    ("too_long", GOOD + b"\0", "RECORD_LENGTH"),
    ("empty", b"", "RECORD_LENGTH"),
    ("absent_all_zero", absent_record(), "RECORD_ABSENT"),
    ("version_0_not_all_zero", _with(0, 0), "RECORD_VERSION"),
    ("version_2", _with(0, 2), "RECORD_VERSION"),
    ("crc_mismatch_in_ptp_ns", GOOD[:45] + bytes([GOOD[45] ^ 1]) + GOOD[46:], "RECORD_CHECKSUM"),
    ("crc_field_flipped", GOOD[:94] + bytes([GOOD[94] ^ 0x80]), "RECORD_CHECKSUM"),
    ("kind_2", _with(1, 2), "RECORD_KIND"),
    ("header_version_2", _with(38, 0x22), "RECORD_HEADER"),
    ("header_ts_source_3", _with(38 + 9, 3), "RECORD_HEADER"),
    ("header_quality_3", _with(38 + 10, 3), "RECORD_HEADER"),
]


@pytest.mark.parametrize(("name", "raw", "error_class"), CASES, ids=[c[0] for c in CASES])
def test_decode_table(name: str, raw: bytes, error_class: str | None) -> None:
    """§3.2: checks in order (length, absent, version, CRC, kind, header); each failure names its class."""
    if error_class is None:
        assert decode_record(raw) == RECORD
        return
    with pytest.raises(RecordError) as info:
        decode_record(raw)
    assert info.value.error_class == error_class and info.value.remote
    assert isinstance(info.value, ValueError)


def test_checks_run_in_the_spec_order() -> None:
    """A record with a bad version AND a bad CRC is a version error (version is checked first)."""
    raw = bytearray(GOOD)
    raw[0] = 9
    with pytest.raises(RecordError) as info:
        decode_record(bytes(raw))
    assert info.value.error_class == "RECORD_VERSION"


@pytest.mark.parametrize(("field", "kwargs"), [
    ("rank", {"rank": -1}), ("rank", {"rank": 2**32}), ("seq", {"seq": 2**64}), ("trace_id", {"trace_id": -1}),
    ("span_id", {"span_id": 2**64}), ("kind", {"kind": 1}),
])
def test_a_record_cannot_be_built_with_a_bad_field(field: str, kwargs: dict[str, int]) -> None:
    values = {"kind": RecordKind.EXCHANGE, "rank": 0, "seq": 0, "trace_id": 1, "span_id": 1, "header": HEADER}
    values.update(kwargs)
    with pytest.raises(RecordError) as info:
        TorchRecord(**values)  # type: ignore[arg-type]
    assert info.value.field == field and info.value.error_class == "RECORD_FIELD" and not info.value.remote


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**128 - 1), st.integers(0, 2**64 - 1),
       st.sampled_from(list(RecordKind)))
def test_round_trip(rank: int, seq: int, trace_id: int, span_id: int, kind: RecordKind) -> None:
    record = TorchRecord(kind, rank, seq, trace_id, span_id, HEADER)
    assert decode_record(encode_record(record)) == record


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_record_error(raw: bytes) -> None:
    """The receive path: whatever a peer sends, only RecordError comes out (then counted by its class)."""
    try:
        decode_record(raw)
    except RecordError:
        pass


@given(st.integers(0, RECORD_LEN - 1), st.integers(1, 255))
def test_any_single_octet_change_is_refused(offset: int, xor: int) -> None:
    raw = bytearray(GOOD)
    raw[offset] ^= xor
    with pytest.raises(RecordError):
        decode_record(bytes(raw))
