"""The carried record codec (spec/torch.md §3.1, §3.2): the conformance vectors, round trips, never a stray exception.

Every vector of conformance/vectors/tt_torch_record_test.json runs here
against the Python codec: decode vectors through ``decode_record``, receive
vectors through the receiver's own check in ``carriage`` (needs torch), encode
vectors through ``encode_record`` and the instrumentation's ``pack_record``.
The C codec and any other implementation answer the same vectors through
conformance/run.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tempotrace_sdk import ClockQuality, HeaderError, Sketch, TsSource, TTExt
from tempotrace_sdk.wire.torchrecord import (
    RECORD_LEN,
    RecordError,
    RecordKind,
    TorchRecord,
    absent_record,
    decode_record,
    encode_record,
    pack_record,
)

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "conformance" / "vectors" / "tt_torch_record_test.json"

HEADER = TTExt(
    ptp_ns=1_764_000_037_000_000_000,
    ts_source=TsSource.GTE,
    clk_quality=ClockQuality.OK,
    uncertainty_ns=220,
    lts=41,
    svc_sketch=Sketch.of(0x00F067AA0BA902B7),
    tenant_id=2,
)
RECORD = TorchRecord(
    RecordKind.P2P,
    rank=3,
    seq=17,
    trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
    span_id=0x00F067AA0BA902B7,
    header=HEADER,
)
GOOD = encode_record(RECORD)


def _vectors(group_type: str) -> Iterator[Any]:
    for group in json.loads(VECTORS.read_text(encoding="utf-8"))["testGroups"]:
        if group["type"] == group_type:
            for test in group["tests"]:
                yield pytest.param(test, id=f"{test['tcId']}-{test['comment'][:40]}")


def _fields(record: TorchRecord) -> dict[str, Any]:
    h = record.header
    return {
        "kind": record.kind.name,
        "rank": record.rank,
        "seq": str(record.seq),
        "traceId": f"{record.trace_id:032x}",
        "spanId": f"{record.span_id:016x}",
        "header": {
            "tenantId": h.tenant_id,
            "version": 3,
            "ptpNs": str(h.ptp_ns),
            "tsSource": h.ts_source.name,
            "clkQuality": h.clk_quality.name,
            "uncertaintyNs": h.uncertainty_ns,
            "lts": str(h.lts),
            "svcSketch": h.svc_sketch.to_bytes().hex(),
        },
    }


def _check_answer(test: dict[str, Any], read: Any) -> None:
    """A valid vector's fields and re-encoding, or the refusal's class (and the embedded header's own)."""
    if test["result"] == "valid":
        record = read()
        assert _fields(record) == test["fields"]
        assert encode_record(record).hex() == test["reencoded"]
        return
    with pytest.raises(RecordError) as info:
        read()
    assert info.value.error_class == test["errorClass"] and info.value.remote
    cause = info.value.__cause__
    header_class = cause.error_class if isinstance(cause, HeaderError) else None
    assert header_class == test.get("headerErrorClass")


@pytest.mark.parametrize("test", list(_vectors("TorchRecordDecode")))
def test_decode_vector(test: dict[str, Any]) -> None:
    """§3.2 checks 1-6, in order: length, absent, version, CRC, kind, the embedded header."""
    _check_answer(test, lambda: decode_record(bytes.fromhex(test["record"])))


@pytest.mark.parametrize("test", list(_vectors("TorchRecordReceive")))
def test_receive_vector(test: dict[str, Any]) -> None:
    """§3.2 checks 1-9: the receiver's kind, rank and seq checks come after all of the codec's."""
    pytest.importorskip("torch")
    from tempotrace_sdk.torch.carriage.records import _check

    kind = RecordKind[test["expectKind"]]
    _check_answer(test, lambda: _check(bytes.fromhex(test["record"]), kind, test["expectRank"], int(test["expectSeq"])))


def _kind(value: str | int) -> Any:
    return RecordKind[value] if isinstance(value, str) else value


def _skip_id_length(test: dict[str, Any]) -> None:
    if "IdLength" in test["flags"]:  # conformance/adapters/python_adapter.py checks the count where hex becomes an int
        pytest.skip("the SDK takes ids as integers (OpenTelemetry's): an id of 15 octets is a smaller int there")


@pytest.mark.parametrize("test", list(_vectors("TorchRecordEncode")))
def test_encode_vector(test: dict[str, Any]) -> None:
    """Building a record: a kind, rank, seq or header outside its rule is the caller's RECORD_FIELD."""
    f = test["fields"]
    _skip_id_length(test)

    def build() -> bytes:
        try:
            header = TTExt.decode(bytes.fromhex(f["header"]))
        except HeaderError as err:  # a TorchRecord holds a TTExt: bad octets are a bad field
            raise RecordError("header", str(err), error_class="RECORD_FIELD") from err
        return encode_record(TorchRecord(_kind(f["kind"]), f["rank"], int(f["seq"]), int(f["traceId"], 16),
                                         int(f["spanId"], 16), header))  # fmt: skip

    if test["result"] == "valid":
        assert build().hex() == test["record"]
    else:
        with pytest.raises(RecordError) as info:
            build()
        assert info.value.error_class == test["errorClass"] and not info.value.remote


@pytest.mark.parametrize("test", list(_vectors("TorchRecordEncode")))
def test_pack_record_agrees_with_the_encode_vectors(test: dict[str, Any]) -> None:
    """The instrumentation's path: the same octets, and RECORD_FIELD (never struct.error) for a bad number.

    pack_record takes a header the caller already encoded (a send event's), so it is checked for
    its length only: vectors with a malformed or non-canonical 53-octet header are not its to pass.
    """
    f = test["fields"]
    _skip_id_length(test)
    if {"HeaderError", "HeaderNormalised"} & set(test["flags"]):
        pytest.skip("pack_record does not check or rewrite the header's 53 octets (documented)")
    header = bytes.fromhex(f["header"])
    args = (_kind(f["kind"]), f["rank"], int(f["seq"]), int(f["traceId"], 16), int(f["spanId"], 16), header)
    if test["result"] == "valid":
        assert pack_record(*args).hex() == test["record"]
    else:
        with pytest.raises(RecordError) as info:
            pack_record(*args)
        assert info.value.error_class == "RECORD_FIELD"


def test_spec_worked_example_is_the_first_vector_and_what_the_codec_writes() -> None:
    """spec/torch.md §3.1's worked example: the octets printed there are tcId 1001 and encode_record's output."""
    section = (ROOT / "spec" / "torch.md").read_text(encoding="utf-8")
    section = section[section.index("### 3.1") : section.index("### 3.2")]
    lines = re.findall(r"^    ([0-9a-f][0-9a-f ]*?)(?: {2,}.*)?$", section, re.MULTILINE)
    example = "".join(lines).replace(" ", "")
    first = json.loads(VECTORS.read_text(encoding="utf-8"))["testGroups"][0]["tests"][0]
    assert first["tcId"] == 1001 and example == first["record"]
    header = TTExt.from_header("AxeXnQbTiTJ7AAAA3AAAAAAAAAAqAAAAAAAAAAAEAAIAAQAAgAAAAAAAAQAIAEACAAAAAAA")
    record = TorchRecord(RecordKind.EXCHANGE, 3, 7, 0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, header)
    assert encode_record(record).hex() == example
    assert "0xCBF43926" in section and zlib.crc32(b"123456789") == 0xCBF43926


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
    assert absent_record() == bytes(95)


@pytest.mark.parametrize(("field", "kwargs"), [
    ("rank", {"rank": -1}), ("rank", {"rank": 2**32}), ("seq", {"seq": 2**64}), ("trace_id", {"trace_id": -1}),
    ("span_id", {"span_id": 2**64}), ("kind", {"kind": 1}),
])  # fmt: skip
def test_a_record_cannot_be_built_with_a_bad_field(field: str, kwargs: dict[str, int]) -> None:
    values = {"kind": RecordKind.EXCHANGE, "rank": 0, "seq": 0, "trace_id": 1, "span_id": 1, "header": HEADER}
    values.update(kwargs)
    with pytest.raises(RecordError) as info:
        TorchRecord(**values)  # type: ignore[arg-type]
    assert info.value.field == field and info.value.error_class == "RECORD_FIELD" and not info.value.remote


@pytest.mark.parametrize(("kind", "rank", "seq", "trace_id", "span_id"), [
    (2, 0, 0, 0, 0), (255, 0, 0, 0, 0), (0, 2**32, 0, 0, 0), (0, -1, 0, 0, 0), (1, 0, 2**64, 0, 0),
    (1, 0, 0, 2**128, 0), (1, 0, 0, 0, -1),
])  # fmt: skip
def test_pack_record_refuses_what_the_spec_calls_a_bad_field(kind: int, rank: int, seq: int, trace_id: int,
                                                             span_id: int) -> None:  # fmt: skip
    """§3.2: RECORD_FIELD, raised. It used to write kind 2 silently and raise struct.error for the numbers."""
    with pytest.raises(RecordError) as info:
        pack_record(kind, rank, seq, trace_id, span_id, HEADER.encode())
    assert info.value.error_class == "RECORD_FIELD" and not info.value.remote


@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**128 - 1),
    st.integers(0, 2**64 - 1),
    st.sampled_from(list(RecordKind)),
)
def test_round_trip(rank: int, seq: int, trace_id: int, span_id: int, kind: RecordKind) -> None:
    record = TorchRecord(kind, rank, seq, trace_id, span_id, HEADER)
    assert decode_record(encode_record(record)) == record


@given(st.binary(max_size=200) | st.binary(min_size=95, max_size=95))
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
