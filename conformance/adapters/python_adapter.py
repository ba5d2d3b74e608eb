"""Conformance adapter for the pure-Python codecs (tempotrace_sdk.wire, .wire.torchrecord, .stamptext).

Speaks conformance/PROTOCOL.md on stdin/stdout: one flat JSON request per
line in, one JSON response per line out, until EOF. It only translates between
the protocol's strings and the SDK's API; every decision is the SDK's, but for
the receiver's three comparisons of a record (spec/torch.md §3.2 checks 7-9),
which the SDK makes in tempotrace_sdk.torch.carriage.records, a module that needs
torch: tests/torch/test_record.py runs the same vectors through that one.

Run directly (``python conformance/adapters/python_adapter.py``) with
tempotrace_sdk importable; without it, it says so on stderr and exits 3.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

try:
    import mmh3

    from tempotrace_sdk import stamptext
    from tempotrace_sdk.errors import HeaderError, StampsError
    from tempotrace_sdk.wire import LamportClock, Sketch, TTExt, decode_text, sketch_indices
    from tempotrace_sdk.wire.torchrecord import RecordError, RecordKind, TorchRecord, decode_record, encode_record
except ImportError as err:  # the runner reports this and stops, instead of restarting us for every vector
    sys.stderr.write(
        f"python_adapter: cannot load the reference implementation with {sys.executable}: {err}\n"
        "It needs tempotrace_sdk and its dependencies (mmh3, msgspec): run `make venv` in the repository "
        "(conformance/run then uses .venv/bin/python), or set PYTHON (or pass --python) to an interpreter "
        "that has them.\n"
    )
    sys.exit(3)

Response = dict[str, Any]


class ProtocolProblem(Exception):
    """The request itself is malformed (not a codec answer)."""


def _str(req: dict[str, Any], key: str) -> str:
    value = req.get(key)
    if not isinstance(value, str):
        raise ProtocolProblem(f"missing or non-string field {key!r}")
    return value


def _list(req: dict[str, Any], key: str) -> list[str]:
    value = req.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolProblem(f"missing or non-array field {key!r}")
    return value


def _hex(text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError as err:
        raise ProtocolProblem(f"bad hex: {err}") from err


def _int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError as err:
        raise ProtocolProblem(f"bad decimal integer {text!r}") from err


def _header(h: TTExt) -> Response:
    return {
        "tenantId": str(h.tenant_id),
        "ptpNs": str(h.ptp_ns),
        "tsSource": str(int(h.ts_source)),
        "clkQuality": str(int(h.clk_quality)),
        "uncertaintyNs": str(h.uncertainty_ns),
        "lts": str(h.lts),
        "svcSketch": h.svc_sketch.to_bytes().hex(),
        "reencoded": h.encode().hex(),
        "text": h.to_header(),
    }


def decode_bytes(req: dict[str, Any]) -> Response:
    return _header(TTExt.decode(_hex(_str(req, "wire"))))


def decode_text_op(req: dict[str, Any]) -> Response:
    text = _str(req, "text")
    out = _header(TTExt.from_header(text))
    out["wire"] = decode_text(text).hex()
    return out


def encode(req: dict[str, Any]) -> Response:
    sketch = _hex(_str(req, "svcSketch"))
    if len(sketch) != 32:
        raise ProtocolProblem("svcSketch must be 32 bytes")
    header = TTExt(
        tenant_id=_int(_str(req, "tenantId")),
        ptp_ns=_int(_str(req, "ptpNs")),
        ts_source=_int(_str(req, "tsSource")),  # a bare int: TTExt range-checks it
        clk_quality=_int(_str(req, "clkQuality")),
        uncertainty_ns=_int(_str(req, "uncertaintyNs")),
        lts=_int(_str(req, "lts")),
        svc_sketch=Sketch.from_bytes(sketch),
    )
    return {"wire": header.encode().hex(), "text": header.to_header()}


def sketch_indices_op(req: dict[str, Any]) -> Response:
    span = _hex(_str(req, "spanId"))
    indices = sketch_indices(span)  # raises SPAN_ID for a wrong length, before hashing below
    sketch = Sketch.of(span)
    # h1/h2 are the hash words the spec defines; the SDK hashes with mmh3 too.
    h1, h2 = mmh3.hash64(span, seed=0, x64arch=True, signed=False)
    return {
        "h1": str(h1),
        "h2": str(h2),
        "indices": [str(i) for i in indices],
        "sketch": sketch.to_bytes().hex(),
        "popcount": str(sketch.popcount),
    }


def _sketch(text: str) -> Sketch:
    raw = _hex(text)
    if len(raw) != 32:
        raise ProtocolProblem("a sketch must be 32 bytes")
    return Sketch.from_bytes(raw)


def sketch_merge(req: dict[str, Any]) -> Response:
    merged = Sketch()
    for item in _list(req, "sketches"):
        merged = merged.union(_sketch(item))
    return {"merged": merged.to_bytes().hex(), "popcount": str(merged.popcount)}


def sketch_contains(req: dict[str, Any]) -> Response:
    sketch = _sketch(_str(req, "sketch"))
    member = sketch.contains(_hex(_str(req, "spanId")))
    return {
        "member": "true" if member else "false",
        "popcount": str(sketch.popcount),
        "falsePositiveEstimate": repr(sketch.false_positive_rate()),
    }


def lamport(req: dict[str, Any]) -> Response:
    clock = LamportClock(_int(_str(req, "start")))
    values: list[str] = []
    for step in _list(req, "steps"):
        if step == "tick":
            values.append(str(clock.tick()))
        elif step.startswith("merge:"):
            try:
                values.append(str(clock.merge(_int(step[len("merge:") :]))))
            except HeaderError as err:
                values.append(err.error_class)
        else:
            raise ProtocolProblem(f"unknown Lamport step {step!r}")
    return {"values": values, "final": str(clock.value), "saturated": "true" if clock.saturated else "false"}


def _record(record: TorchRecord) -> Response:
    header = _header(record.header)
    del header["reencoded"], header["text"]  # the record's own re-encoding is what a record answer carries
    return {
        "kind": str(int(record.kind)),
        "rank": str(record.rank),
        "seq": str(record.seq),
        "traceId": f"{record.trace_id:032x}",
        "spanId": f"{record.span_id:016x}",
        **header,
        "reencoded": encode_record(record).hex(),
    }


def decode_record_op(req: dict[str, Any]) -> Response:
    return _record(decode_record(_hex(_str(req, "record"))))


def receive_record(req: dict[str, Any]) -> Response:
    """The codec's checks, then the receiver's (spec/torch.md §3.2 checks 7-9), as carriage._check makes them."""
    record = decode_record(_hex(_str(req, "record")))
    if int(record.kind) != _int(_str(req, "expectKind")):
        raise RecordError("kind", "not the kind expected", error_class="RECORD_UNEXPECTED_KIND", remote=True)
    if record.rank != _int(_str(req, "expectRank")):
        raise RecordError("rank", "not the rank expected", error_class="RECORD_RANK", remote=True)
    if record.seq != _int(_str(req, "expectSeq")):
        raise RecordError("seq", "not the sequence number expected", error_class="RECORD_SEQ", remote=True)
    return _record(record)


def encode_record_op(req: dict[str, Any]) -> Response:
    kind = _int(_str(req, "kind"))
    ids = _hex(_str(req, "traceId")), _hex(_str(req, "spanId"))
    if (len(ids[0]), len(ids[1])) != (16, 8):  # the SDK takes ids as integers: their octets' count is checked here
        raise RecordError("trace_id/span_id", "must be 16 and 8 octets", error_class="RECORD_FIELD")
    try:  # a TorchRecord holds a TTExt: bytes that are not a valid header are a bad field of the caller's
        header = TTExt.decode(_hex(_str(req, "header")))
    except HeaderError as err:
        raise RecordError("header", f"not a valid tt-ext header: {err}", error_class="RECORD_FIELD") from err
    record = TorchRecord(
        kind=RecordKind(kind) if kind in (0, 1) else kind,  # type: ignore[arg-type]  # TorchRecord refuses it
        rank=_int(_str(req, "rank")),
        seq=_int(_str(req, "seq")),
        trace_id=int.from_bytes(ids[0], "big"),
        span_id=int.from_bytes(ids[1], "big"),
        header=header,
    )
    return {"record": encode_record(record).hex()}


_READING = ("PtpNs", "UncertaintyNs", "ClkQuality", "Lts")


def _reading(prefix: str, r: stamptext.Reading) -> Response:
    values = (r.ptp_ns, r.uncertainty_ns, r.clk_quality, r.lts)
    return {prefix + k: str(v) for k, v in zip(_READING, values, strict=True)}


def _reading_of(req: dict[str, Any], prefix: str) -> tuple[int, int, int, int]:
    """(lts, ptp_ns, uncertainty_ns, clk_quality), the order stamptext.encode takes a reading in."""
    ptp, unc, qual, lts = (_int(_str(req, prefix + k)) for k in _READING)
    return lts, ptp, unc, qual


def _flag(req: dict[str, Any], key: str) -> bool:
    value = _str(req, key)
    if value not in ("true", "false"):
        raise ProtocolProblem(f"{key} must be true or false")
    return value == "true"


def decode_stamps(req: dict[str, Any]) -> Response:
    start_ns, end_ns = _int(_str(req, "startTimeUnixNano")), _int(_str(req, "endTimeUnixNano"))
    unc = _int(_str(req, "uncertaintyNs")) if "uncertaintyNs" in req else None  # absent: not on the span
    qual = _int(_str(req, "clkQuality")) if "clkQuality" in req else None
    st = stamptext.decode(_str(req, "text"), start_ns, end_ns, unc, qual)
    out = {"tsSource": str(st.ts_source), **_reading("start", st.start), "end": "false", "receive": "false"}
    if st.end is not None:
        out.update(end="true", **_reading("end", st.end))
    r = st.remote
    if r is not None:
        out.update(_reading("remote", stamptext.Reading(r.ptp_ns, r.uncertainty_ns, r.clk_quality, r.lts)))
        out.update(receive="true", remoteTsSource=str(r.ts_source), remoteTenantId=str(r.tenant_id))
    if r is not None and r.recv_lts is not None:  # absent values are absent keys (PROTOCOL.md)
        out["recvLts"] = str(r.recv_lts)
    if st.sketch is not None:
        out["sketch"] = st.sketch.hex()
    for key in _READING:
        out["send" + key] = [_reading("", x)[key] for x in st.sends]
    s = st.start
    remote = None if r is None else (r.ptp_ns, r.uncertainty_ns, r.clk_quality, r.ts_source, r.tenant_id, r.lts)
    end = None if st.end is None else (st.end.lts, st.end.ptp_ns, st.end.uncertainty_ns, st.end.clk_quality)
    sends = [(x.lts, x.ptp_ns, x.uncertainty_ns, x.clk_quality) for x in st.sends]
    out["canonical"] = stamptext.encode(s.lts, s.ptp_ns, s.uncertainty_ns, s.clk_quality, st.ts_source, start_ns,
                                        end, end_ns, remote, None if r is None else r.recv_lts, st.sketch, sends)
    return out


def encode_stamps(req: dict[str, Any]) -> Response:
    lts, ptp, unc, qual = _reading_of(req, "start")
    end = _reading_of(req, "end") if _flag(req, "end") else None
    remote = recv_lts = None
    if _flag(req, "receive"):
        r_lts, r_ptp, r_unc, r_qual = _reading_of(req, "remote")
        remote = (r_ptp, r_unc, r_qual, _int(_str(req, "remoteTsSource")), _int(_str(req, "remoteTenantId")), r_lts)
        recv_lts = _int(_str(req, "recvLts")) if "recvLts" in req else None  # absent: not merged
    sketch = _sketch(_str(req, "sketch")).to_bytes() if "sketch" in req else None  # absent: no sketch
    columns = [[_int(v) for v in _list(req, "send" + k)] for k in _READING]
    if len({len(c) for c in columns}) != 1:
        raise ProtocolProblem("the send arrays must have one entry per send")
    sends = [(x_lts, x_ptp, x_unc, x_qual) for x_ptp, x_unc, x_qual, x_lts in zip(*columns, strict=True)]
    text = stamptext.encode(lts, ptp, unc, qual, _int(_str(req, "tsSource")), _int(_str(req, "startTimeUnixNano")),
                            end, _int(_str(req, "endTimeUnixNano")), remote, recv_lts, sketch, sends)
    return {"text": text}


OPS: dict[str, Callable[[dict[str, Any]], Response]] = {
    "decode_bytes": decode_bytes,
    "decode_text": decode_text_op,
    "encode": encode,
    "sketch_indices": sketch_indices_op,
    "sketch_merge": sketch_merge,
    "sketch_contains": sketch_contains,
    "lamport": lamport,
    "decode_record": decode_record_op,
    "receive_record": receive_record,
    "encode_record": encode_record_op,
    "decode_stamps": decode_stamps,
    "encode_stamps": encode_stamps,
}


def handle(line: str) -> Response:
    try:
        req = json.loads(line)
    except ValueError as err:
        return {"adapterError": f"bad JSON: {err}"}
    if not isinstance(req, dict):
        return {"adapterError": "request is not an object"}
    out: Response = {"id": req["id"]} if isinstance(req.get("id"), str) else {}
    op = req.get("op")
    if not isinstance(op, str):
        out["adapterError"] = "missing op"
        return out
    fn = OPS.get(op)
    if fn is None:
        out["unsupported"] = op
        return out
    try:
        out.update(fn(req))
    except HeaderError as err:
        out["errorClass"] = err.error_class
        if err.error_class == "RECORD_HEADER" and isinstance(err.__cause__, HeaderError):
            out["headerErrorClass"] = err.__cause__.error_class  # the embedded header's own rule
    except StampsError as err:
        out["errorClass"] = err.error_class
    except ProtocolProblem as err:
        out["adapterError"] = str(err)
    except Exception as err:  # any other exception is a codec bug the runner must see, not a crash
        out["adapterError"] = f"unexpected {type(err).__name__}: {err}"
    return out


def main() -> int:
    # Default text mode would translate newlines and fail on lone surrogates.
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="surrogatepass", newline="\n", closefd=False)
    for line in stdin:
        if not line.strip():
            continue
        sys.stdout.write(json.dumps(handle(line), separators=(",", ":")) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
