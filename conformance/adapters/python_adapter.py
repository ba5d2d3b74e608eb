"""Conformance adapter for the pure-Python codec (tempotrace_sdk.wire).

Speaks conformance/PROTOCOL.md on stdin/stdout: one flat JSON request per
line in, one JSON response per line out, until EOF. It only translates between
the protocol's strings and the SDK's API; every decision is the SDK's.

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

    from tempotrace_sdk.errors import HeaderError
    from tempotrace_sdk.wire import LamportClock, Sketch, TTExt, decode_text, sketch_indices
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


OPS: dict[str, Callable[[dict[str, Any]], Response]] = {
    "decode_bytes": decode_bytes,
    "decode_text": decode_text_op,
    "encode": encode,
    "sketch_indices": sketch_indices_op,
    "sketch_merge": sketch_merge,
    "sketch_contains": sketch_contains,
    "lamport": lamport,
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
