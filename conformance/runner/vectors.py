"""Turn vector files (conformance/vectors/*.json) into protocol requests and expectations.

Every vector becomes one flat request (all values strings, lists of strings) as
conformance/PROTOCOL.md defines, plus the expected answer in the same
normalised form, so that comparing an adapter's response with a vector, or two
adapters' responses with each other, is a dictionary comparison.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Union  # noqa: UP035 (Python 3.8, see Value below)

# Enumerations as numbers on the protocol (vectors may use the spec's names).
TS_SOURCE = {"GTE": "0", "SW_GCC": "1", "CPU": "2"}
CLK_QUALITY = {"OK": "0", "DEGRADED": "1", "UNKNOWN": "2"}
RECORD_KIND = {"EXCHANGE": "0", "P2P": "1"}
ENUMS = {"tsSource": TS_SOURCE, "clkQuality": CLK_QUALITY, "kind": RECORD_KIND, "expectKind": RECORD_KIND}
HEADER_FIELDS = ("tenantId", "ptpNs", "tsSource", "clkQuality", "uncertaintyNs", "lts", "svcSketch")
RECORD_FIELDS = ("kind", "rank", "seq", "traceId", "spanId")
READING_FIELDS = ("ptpNs", "uncertaintyNs", "clkQuality", "lts")  # one reading of a stamps text
STAMPS_BASES = ("startTimeUnixNano", "endTimeUnixNano")
# The decode_stamps keys present only when the text has that part (PROTOCOL.md): the end's, the receive's,
# the receive's lts when merged, the sketch.
STAMPS_OPTIONAL_KEYS = (
    *("end" + k[0].upper() + k[1:] for k in READING_FIELDS),
    *("remote" + k[0].upper() + k[1:] for k in READING_FIELDS),
    "remoteTsSource",
    "remoteTenantId",
    "recvLts",
    "sketch",
)
FLOAT_KEYS = frozenset({"falsePositiveEstimate"})

# typing.Union, not "|": the runner runs on a stock Python 3.8 or later (conformance/README.md).
# None in an expectation: the answer must not have that key (an absent value is an absent key).
Value = Union[str, float, List[str], None]  # noqa: UP006, UP007
ABSENT = None


class VectorError(ValueError):
    """A vector file the runner cannot translate (unknown group type, missing key)."""


@dataclass(frozen=True)
class Case:
    """One vector operation: what to ask, what must come back."""

    file: str
    group: str
    tc_id: int
    comment: str
    request: dict[str, Any]
    expect: dict[str, Value] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.file} tcId {self.tc_id} [{self.group}] {self.comment}"


def norm(key: str, value: Any) -> Value:
    """The comparable form of one field, from a vector or from a response."""
    if key in FLOAT_KEYS:
        try:
            return float(value)
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return [str(norm(key, v)) for v in value]
    if key in ENUMS and isinstance(value, str) and value in ENUMS[key]:
        return ENUMS[key][value]
    return str(value)


def norm_response(resp: dict[str, Any]) -> dict[str, Value]:
    """A response without its id, every value normalised."""
    return {k: norm(k, v) for k, v in resp.items() if k != "id"}


def _need(test: dict[str, Any], key: str) -> Any:
    if key not in test:
        raise VectorError(f"tcId {test.get('tcId')}: missing key {key!r}")
    return test[key]


def _error_or(test: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Value]:
    if test.get("result") == "invalid" and "errorClass" in test:
        return {"errorClass": str(test["errorClass"])}
    return {k: norm(k, test[k]) for k in keys if k in test}


def _fields(test: dict[str, Any]) -> dict[str, Value]:
    fields = test.get("fields") or {}
    return {k: norm(k, fields[k]) for k in HEADER_FIELDS if k in fields}


def _binary_decode(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    req = {"op": "decode_bytes", "wire": _need(t, "wire")}
    if t.get("result") == "invalid":
        return req, _error_or(t, ())
    # "text" of a binary vector is the text form of the decoded header.
    return req, {**_fields(t), **_error_or(t, ("reencoded", "text"))}


def _text_decode(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    req = {"op": "decode_text", "text": _need(t, "text")}
    if t.get("result") == "invalid":
        return req, _error_or(t, ())
    # "text" is the input here; "wire" is the 53 bytes it carries.
    return req, {**_fields(t), **_error_or(t, ("reencoded", "wire"))}


def _encode(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    fields = _need(t, "fields")
    req: dict[str, Any] = {"op": "encode"}
    for k in HEADER_FIELDS:
        req[k] = norm(k, _need(fields, k))
    return req, _error_or(t, ("wire", "text"))


def _sketch_hash(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    req = {"op": "sketch_indices", "spanId": _need(t, "spanId")}
    return req, _error_or(t, ("h1", "h2", "indices", "sketch", "popcount"))


def _sketch_merge(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    req = {"op": "sketch_merge", "sketches": [str(s) for s in _need(t, "sketches")]}
    return req, _error_or(t, ("merged", "popcount"))


def _sketch_membership(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    req = {"op": "sketch_contains", "sketch": _need(t, "sketch"), "spanId": _need(t, "spanId")}
    return req, _error_or(t, ("member", "popcount", "falsePositiveEstimate"))


def _lamport(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    steps = []
    for op in _need(t, "ops"):
        if op.get("op") == "tick":
            steps.append("tick")
        elif op.get("op") == "merge":
            steps.append(f"merge:{_need(op, 'remote')}")
        else:
            raise VectorError(f"tcId {t.get('tcId')}: unknown Lamport op {op!r}")
    request = {"op": "lamport", "start": str(_need(t, "start")), "steps": steps}
    if "results" not in t:  # the start value is refused: the whole request is answered with errorClass
        return request, {"errorClass": str(_need(t, "errorClass"))}
    # Each step yields the new lts, or the errorClass of a refused merge.
    values = [str(r["errorClass"]) if "errorClass" in r else str(_need(r, "lts")) for r in _need(t, "results")]
    expect: dict[str, Value] = {"values": values}
    expect.update({k: norm(k, t[k]) for k in ("final", "saturated") if k in t})
    return request, expect


def _record_answer(t: dict[str, Any]) -> dict[str, Value]:
    """A decoded record: its fields and the embedded header's, flat, and its re-encoding; or the error class(es)."""
    if t.get("result") == "invalid":
        expect: dict[str, Value] = {"errorClass": str(_need(t, "errorClass"))}
        if "headerErrorClass" in t:  # RECORD_HEADER also names the embedded header's own class
            expect["headerErrorClass"] = str(t["headerErrorClass"])
        return expect
    fields = _need(t, "fields")
    header = _need(fields, "header")
    expect = {k: norm(k, _need(fields, k)) for k in RECORD_FIELDS}
    expect.update({k: norm(k, _need(header, k)) for k in HEADER_FIELDS})
    expect["reencoded"] = norm("reencoded", _need(t, "reencoded"))
    return expect


def _record_decode(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    return {"op": "decode_record", "record": _need(t, "record")}, _record_answer(t)


def _record_receive(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    req = {"op": "receive_record", "record": _need(t, "record")}
    req.update({k: norm(k, _need(t, k)) for k in ("expectKind", "expectRank", "expectSeq")})
    return req, _record_answer(t)


def _record_encode(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    fields = _need(t, "fields")
    req: dict[str, Any] = {"op": "encode_record"}
    for k in (*RECORD_FIELDS, "header"):
        req[k] = norm(k, _need(fields, k))
    return req, _error_or(t, ("record",))


def _prefixed(prefix: str, reading: dict[str, Any]) -> dict[str, Value]:
    """A reading's fields as flat protocol keys: start + ptpNs -> startPtpNs."""
    return {prefix + k[0].upper() + k[1:]: norm(k, _need(reading, k)) for k in READING_FIELDS}


def flat_stamps(st: dict[str, Any]) -> dict[str, Value]:
    """A vector's nested stamps as the protocol's flat keys (PROTOCOL.md, decode_stamps / encode_stamps)."""
    out: dict[str, Value] = {"tsSource": norm("tsSource", _need(st, "tsSource")), **_prefixed("start", st["start"])}
    end, rec = st.get("end"), st.get("receive")
    out["end"] = "true" if end is not None else "false"
    if end is not None:
        out.update(_prefixed("end", end))
    out["receive"] = "true" if rec is not None else "false"
    if rec is not None:
        out.update(_prefixed("remote", rec))
        out["remoteTsSource"] = norm("tsSource", _need(rec, "tsSource"))
        out["remoteTenantId"] = str(_need(rec, "tenantId"))
    if rec is not None and "recvLts" in rec:  # absent values are absent keys, in requests and answers alike
        out["recvLts"] = str(rec["recvLts"])
    if "sketch" in st:
        out["sketch"] = str(st["sketch"])
    sends = _need(st, "sends")
    for k in READING_FIELDS:
        out["send" + k[0].upper() + k[1:]] = [str(norm(k, _need(x, k))) for x in sends]
    return out


def stamps_text(t: dict[str, Any]) -> str:
    """A decode vector's text: ``text``, or ``textParts`` (pieces repeated) for one too long to write out."""
    if "text" in t:
        return str(t["text"])
    return "".join(str(_need(p, "text")) * int(_need(p, "repeat")) for p in _need(t, "textParts"))


def _stamps_decode(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    req: dict[str, Any] = {"op": "decode_stamps", "text": stamps_text(t)}
    req.update({k: str(_need(t, k)) for k in STAMPS_BASES})
    req.update({k: norm(k, t[k]) for k in ("uncertaintyNs", "clkQuality") if k in t})  # absent: not on the span
    if t.get("result") == "invalid":
        return req, {"errorClass": str(_need(t, "errorClass"))}
    answer: dict[str, Value] = {**flat_stamps(_need(t, "stamps")), "canonical": str(_need(t, "canonical"))}
    return req, {**dict.fromkeys(STAMPS_OPTIONAL_KEYS, ABSENT), **answer}  # what the text lacks must be absent


def _stamps_encode(t: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Value]]:
    req: dict[str, Any] = {"op": "encode_stamps", **flat_stamps(_need(t, "stamps"))}
    req.update({k: str(_need(t, k)) for k in STAMPS_BASES})
    return req, _error_or(t, ("text",))


GROUPS: dict[str, Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Value]]]] = {
    "TtExtBinaryDecode": _binary_decode,
    "TtExtTextDecode": _text_decode,
    "TtExtEncode": _encode,
    "SvcSketchHash": _sketch_hash,
    "SvcSketchMerge": _sketch_merge,
    "SvcSketchMembership": _sketch_membership,
    "LamportSequence": _lamport,
    "TorchRecordDecode": _record_decode,
    "TorchRecordReceive": _record_receive,
    "TorchRecordEncode": _record_encode,
    "StampsDecode": _stamps_decode,
    "StampsEncode": _stamps_encode,
}


def vector_files(paths: list[Path]) -> list[Path]:
    """Expand directories to their *.json files (sorted); schema files are skipped."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(q for q in p.glob("*.json") if not q.name.endswith("_schema.json")))
        else:
            files.append(p)
    return files


def load_cases(paths: list[Path]) -> Iterator[Case]:
    """Every vector of every file, in file order. Unknown group types are an error, not a skip."""
    for path in vector_files(paths):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for group in doc.get("testGroups", []):
            kind = group.get("type")
            translate = GROUPS.get(kind)
            if translate is None:
                raise VectorError(f"{path.name}: unknown test group type {kind!r}")
            for test in group.get("tests", []):
                request, expect = translate(test)
                yield Case(path.name, kind, int(test["tcId"]), str(test.get("comment", "")), request, expect)
