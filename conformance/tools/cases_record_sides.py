"""Carried-record vectors, the two sides (spec/torch.md §3.2): the receiver's checks 7-9 and building a record.

Shares the records and helpers of cases_record.py; like it, each case states
its outcome and reference_record.py checks the statement.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cases_header import NOW, SKETCH_AB, TYPICAL
from cases_record import ONES8, ONES16, P2P, STEP, U32, U64, _checked, _flip, _random_recs, with_normalised
from reference import HEADER_LEN, Raw, normalised
from reference_record import KIND_VALUES, KINDS, RECORD_LEN, Rec, decoded, encode_error, receive_error


def _expecting(rec: Rec | bytes, kind: str, rank: int, seq: int) -> dict[str, Any]:
    raw = _checked(rec) if isinstance(rec, Rec) else rec
    return {"record": raw.hex(), "expectKind": kind, "expectRank": rank, "expectSeq": str(seq)}


def _receive(comment: str, flags: list[str], rec: Rec | bytes, expect: tuple[str, int, int], error: str | None = None,
             header_error: str | None = None) -> dict[str, Any]:  # fmt: skip
    kind, rank, seq = expect
    case = {"comment": comment, "flags": flags, **_expecting(rec, kind, rank, seq)}
    got = receive_error(bytes.fromhex(case["record"]), KIND_VALUES[kind], rank, seq)
    assert got == (error, header_error), (comment, got, error, header_error)
    if error is None:
        assert isinstance(rec, Rec)
        return {**case, "result": "valid", **decoded(rec)}
    case.update(result="invalid", errorClass=error)
    return {**case, "headerErrorClass": header_error} if header_error else case


def receive() -> list[dict[str, Any]]:
    s, p = STEP, P2P
    ex = ("EXCHANGE", 3, 7)
    bad_header = replace(s, header=replace(TYPICAL, ts_source=3))
    return [
        _receive("exchange record from the rank and step expected", ["Expectation"], s, ex),
        _receive("p2p side message from the source and p2p_seq expected", ["Expectation"], p, ("P2P", 1, 17)),
        _receive(
            "rank 2^32-1 and seq 2^64-1 as expected",
            ["Expectation", "RankSeqLimit"],
            replace(p, rank=U32, seq=U64),
            ("P2P", U32, U64),
        ),
        _receive(
            "seq 2^63 as expected", ["Expectation", "RankSeqLimit"], replace(s, seq=2**63), ("EXCHANGE", 3, 2**63)
        ),
        _receive(
            "exchange record where a p2p side message is expected",
            ["Expectation"],
            s,
            ("P2P", 3, 7),
            "RECORD_UNEXPECTED_KIND",
        ),
        _receive("p2p side message in an exchange", ["Expectation"], p, ("EXCHANGE", 1, 17), "RECORD_UNEXPECTED_KIND"),
        _receive("rank 4 where 3 is expected", ["Expectation"], replace(s, rank=4), ex, "RECORD_RANK"),
        _receive(
            "rank 0x03000000: byte order", ["Expectation", "ByteOrder"], replace(s, rank=0x03000000), ex, "RECORD_RANK"
        ),
        _receive("seq 8 where 7 is expected", ["Expectation"], replace(s, seq=8), ex, "RECORD_SEQ"),
        _receive(
            "seq 2^32+7 where 7 is expected: all 8 octets count",
            ["Expectation", "RankSeqLimit"],
            replace(s, seq=2**32 + 7),
            ex,
            "RECORD_SEQ",
        ),
        _receive(
            "seq 2^63+7 where 7 is expected",
            ["Expectation", "RankSeqLimit"],
            replace(s, seq=2**63 + 7),
            ex,
            "RECORD_SEQ",
        ),
        _receive(
            "seq 7 where 2^64-1 is expected", ["Expectation", "RankSeqLimit"], s, ("EXCHANGE", 3, U64), "RECORD_SEQ"
        ),
        _receive(
            "wrong kind and wrong rank: RECORD_UNEXPECTED_KIND",
            ["Expectation", "RecordPrecedence"],
            replace(s, rank=9),
            ("P2P", 3, 7),
            "RECORD_UNEXPECTED_KIND",
        ),
        _receive(
            "wrong rank and wrong seq: RECORD_RANK",
            ["Expectation", "RecordPrecedence"],
            replace(s, rank=9, seq=9),
            ex,
            "RECORD_RANK",
        ),
        _receive(
            "wrong kind and an invalid header: the codec's checks come first, RECORD_HEADER",
            ["Expectation", "RecordPrecedence", "HeaderError"],
            bad_header,
            ("P2P", 3, 7),
            "RECORD_HEADER",
            "TS_SOURCE",
        ),
        _receive(
            "wrong rank and a wrong CRC: RECORD_CHECKSUM",
            ["Expectation", "RecordPrecedence", "Checksum"],
            _flip(replace(s, rank=9), 94),
            ex,
            "RECORD_CHECKSUM",
        ),
        _receive(
            "the absent record, whatever is expected",
            ["Expectation", "AbsentRecord"],
            bytes(RECORD_LEN),
            ex,
            "RECORD_ABSENT",
        ),
        _receive("94 octets", ["Expectation", "RecordLength"], s.pack()[:94], ex, "RECORD_LENGTH"),
        _receive(
            "kind 2: refused by the codec's check 5", ["Expectation", "BadKind"], replace(s, kind=2), ex, "RECORD_KIND"
        ),
    ]


def _enc(comment: str, flags: list[str], rec: Rec, *, kind: int | None = None, rank: int | None = None,
         seq: int | None = None, header: bytes | None = None, trace_id: bytes | None = None,
         span_id: bytes | None = None, error: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Encode rec's fields, or values that override them (out of range, a bad header, ids of a wrong length)."""
    k = rec.kind if kind is None else kind
    h = rec.header.pack() if header is None else header
    r = rec.rank if rank is None else rank
    q = rec.seq if seq is None else seq
    tid = rec.trace_id if trace_id is None else trace_id
    sid = rec.span_id if span_id is None else span_id
    fields = {
        "kind": KINDS.get(k, k),
        "rank": r,
        "seq": str(q),
        "traceId": tid.hex(),
        "spanId": sid.hex(),
        "header": h.hex(),
    }
    case: dict[str, Any] = {
        "comment": comment,
        "flags": ["RecordEncode", *with_normalised(flags, rec)],
        "fields": fields,
    }
    got = encode_error(k, r, q, h, tid, sid)
    assert got == error, (comment, got, error)
    if error:
        return {**case, "result": "invalid", "errorClass": error}
    assert header is None and trace_id is None and span_id is None
    return {**case, "result": "valid", "record": _checked(replace(rec, header=normalised(rec.header))).hex()}


def encode() -> list[dict[str, Any]]:
    s, p = STEP, P2P
    bad = replace(TYPICAL, ts_source=3).pack()
    return [
        _enc("typical exchange record", ["Record"], s),
        _enc("typical p2p side message", ["Record"], p),
        _enc(
            "rank 2^32-1, seq 2^64-1, ids all ones",
            ["RankSeqLimit"],
            replace(s, rank=U32, seq=U64, trace_id=ONES16, span_id=ONES8),
        ),
        _enc(
            "every field zero but the header's version",
            ["RankSeqLimit", "ZeroIds"],
            Rec(header=Raw(ptp_ns=0, uncertainty_ns=0, lts=0)),
        ),
        _enc(
            "header UNKNOWN given with uncertainty 1234: written with 0xFFFF, as a tt-ext encoder writes it",
            ["HeaderNormalised"],
            replace(
                p, header=Raw(ptp_ns=NOW, ts_source=2, clk_quality=2, uncertainty_ns=1234, lts=6, sketch=SKETCH_AB)
            ),
        ),
        *[_enc(f"pseudo-random valid fields #{i}", ["Record"], r) for i, r in enumerate(_random_recs(22, 4))],
        _enc("kind 2", ["RecordField"], s, kind=2, error="RECORD_FIELD"),
        _enc("kind -1", ["RecordField"], s, kind=-1, error="RECORD_FIELD"),
        _enc("rank -1", ["RecordField"], s, rank=-1, error="RECORD_FIELD"),
        _enc("rank 2^32: not wrapped to 0", ["RecordField", "RankSeqLimit"], s, rank=2**32, error="RECORD_FIELD"),
        _enc("seq -1", ["RecordField"], s, seq=-1, error="RECORD_FIELD"),
        _enc("seq 2^64: not wrapped to 0", ["RecordField", "RankSeqLimit"], s, seq=2**64, error="RECORD_FIELD"),
        _enc("header of 52 octets", ["RecordField"], s, header=TYPICAL.pack()[:52], error="RECORD_FIELD"),
        _enc("header of 54 octets", ["RecordField"], s, header=TYPICAL.pack() + b"\x00", error="RECORD_FIELD"),
        _enc("header with ts_source 3", ["RecordField", "HeaderError"], s, header=bad, error="RECORD_FIELD"),
        _enc(
            "header with version 2",
            ["RecordField", "HeaderError"],
            s,
            header=replace(TYPICAL, version=2).pack(),
            error="RECORD_FIELD",
        ),
        _enc(
            "header of 53 zero octets",
            ["RecordField", "HeaderError"],
            s,
            header=bytes(HEADER_LEN),
            error="RECORD_FIELD",
        ),
        _enc("kind 2 and rank 2^32", ["RecordField"], s, kind=2, rank=2**32, error="RECORD_FIELD"),
        # An id is its 16 / 8 octets: a shorter or longer one is the caller's bad field, not a malformed request.
        _enc("trace id of 15 octets", ["RecordField", "IdLength"], s, trace_id=s.trace_id[1:], error="RECORD_FIELD"),
        _enc(
            "trace id of 17 octets", ["RecordField", "IdLength"], s, trace_id=b"\0" + s.trace_id, error="RECORD_FIELD"
        ),
        _enc("trace id of 0 octets", ["RecordField", "IdLength"], s, trace_id=b"", error="RECORD_FIELD"),
        _enc("span id of 7 octets", ["RecordField", "IdLength"], s, span_id=s.span_id[1:], error="RECORD_FIELD"),
        _enc("span id of 9 octets", ["RecordField", "IdLength"], s, span_id=s.span_id + b"\0", error="RECORD_FIELD"),
        _enc("span id of 0 octets", ["RecordField", "IdLength"], s, span_id=b"", error="RECORD_FIELD"),
        _enc(
            "a 16-octet span id and an 8-octet trace id (swapped)",
            ["RecordField", "IdLength"],
            s,
            trace_id=s.span_id,
            span_id=s.trace_id,
            error="RECORD_FIELD",
        ),
    ]
