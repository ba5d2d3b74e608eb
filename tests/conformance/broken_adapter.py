"""A deliberately broken adapter: the Python codec's adapter with one injected bug.

    python broken_adapter.py BUG

Used by test_conformance_runner.py to show that the runner notices each kind
of wrong or missing answer. BUG is one of the keys of BUGS.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "conformance" / "adapters"))
import python_adapter

Response = dict[str, Any]


def wrong_text_class(req: Response, resp: Response) -> Response:
    # A decoder that checks length before canonical bits would report this.
    if resp.get("errorClass") == "TEXT_NON_CANONICAL":
        resp["errorClass"] = "TEXT_LENGTH"
    return resp


def index_off_by_one(req: Response, resp: Response) -> Response:
    if "indices" in resp:
        resp["indices"][3] = str((int(resp["indices"][3]) + 1) % 256)
    return resp


def extra_popcount(req: Response, resp: Response) -> Response:
    # A key the test's mini vectors do not state (the real ones do, since issue 15):
    # passes alone, disagrees with python.
    if "popcount" in resp and req.get("op") == "sketch_indices":
        resp["popcount"] = "5"
    return resp


def crash_on_lamport(req: Response, resp: Response) -> Response:
    if req.get("op") == "lamport":
        os._exit(3)
    return resp


def hang_on_encode(req: Response, resp: Response) -> Response:
    if req.get("op") == "encode":
        time.sleep(60)
    return resp


def wrong_id(req: Response, resp: Response) -> Response:
    resp["id"] = "x" + str(resp.get("id"))
    return resp


def unsupported_merge(req: Response, resp: Response) -> Response:
    if req.get("op") == "lamport":
        return {"id": req.get("id"), "unsupported": "lamport"}
    return resp


def newline_as_length(req: Response, resp: Response) -> Response:
    # Only inputs with a line feed differ; the mini vectors have none, mutations do.
    if req.get("op") == "decode_text" and "\n" in req.get("text", "") and "errorClass" in resp:
        resp["errorClass"] = "TEXT_LENGTH"
    return resp


def _cap_counted_by(count: Callable[[str], int]) -> Callable[[Response, Response], Response]:
    """A decoder whose 256 cap counts with ``count`` instead of UTF-8 octets (spec 5.2.1)."""

    def bug(req: Response, resp: Response) -> Response:
        text = req.get("text")
        if req.get("op") != "decode_text" or not isinstance(text, str):
            return resp
        right, wrong = len(text.encode("utf-8", "surrogatepass")) > 256, count(text) > 256
        if wrong and not right:
            return {"id": resp.get("id"), "errorClass": "TEXT_LENGTH"}
        if right and not wrong:  # the class the next rules give (these inputs hold non-ASCII)
            rest = text.strip(" \t")
            cls = "TEXT_MULTIPLE" if "," in rest else "TEXT_PADDING" if "=" in rest else "TEXT_ALPHABET"
            return {"id": resp.get("id"), "errorClass": cls}
        return resp

    return bug


def _lone_surrogates(text: str) -> int:
    return sum(1 for c in text if 0xD800 <= ord(c) <= 0xDFFF)


def unbounded_lamport(req: Response, resp: Response) -> Response:
    # The merge rule before spec 10.1: any remote value in range is merged.
    if req.get("op") != "lamport" or "values" not in resp:
        return resp
    value, saturated, values = int(req["start"]), False, []
    for step in req["steps"]:
        base = value
        if step.startswith("merge:"):
            remote = int(step[len("merge:") :])
            if not 0 <= remote < 2**63:
                values.append("LTS_RANGE")
                continue
            base = max(value, remote)
        value, saturated = (2**63 - 1, True) if base >= 2**63 - 1 else (base + 1, saturated)
        values.append(str(value))
    return {**resp, "values": values, "final": str(value), "saturated": "true" if saturated else "false"}


def _record(req: Response) -> bytes | None:
    if req.get("op") in ("decode_record", "receive_record"):
        return bytes.fromhex(req["record"])
    return None


def record_kind_before_crc(req: Response, resp: Response) -> Response:
    # A reader that looks at the kind before the CRC (spec/torch.md 3.2 has CRC, check 4, first).
    raw = _record(req)
    if raw is not None and len(raw) == 95 and raw[0] == 1 and raw[1] > 1:
        return {"id": resp.get("id"), "errorClass": "RECORD_KIND"}
    return resp


def record_receiver_first(req: Response, resp: Response) -> Response:
    # A receiver that compares the kind before the codec has checked the header.
    raw = _record(req)
    if req.get("op") == "receive_record" and raw is not None and resp.get("errorClass") == "RECORD_HEADER":
        if str(raw[1]) != req["expectKind"]:
            return {"id": resp.get("id"), "errorClass": "RECORD_UNEXPECTED_KIND"}
    return resp


def record_kind_one_name(req: Response, resp: Response) -> Response:
    # The receiver's check 7 under check 5's name (conformance generator 1.1.0 and earlier).
    if resp.get("errorClass") == "RECORD_UNEXPECTED_KIND":
        return {"id": resp.get("id"), "errorClass": "RECORD_KIND"}
    return resp


def record_id_length_unchecked(req: Response, resp: Response) -> Response:
    # An adapter that calls an id of the wrong length a malformed request (both of ours did, issue 20).
    if req.get("op") == "encode_record" and (len(req["traceId"]), len(req["spanId"])) != (32, 16):
        return {"id": resp.get("id"), "adapterError": "hex value has the wrong length"}
    return resp


def record_no_header_class(req: Response, resp: Response) -> Response:
    resp.pop("headerErrorClass", None)
    return resp


def record_seq_32_bits(req: Response, resp: Response) -> Response:
    # A receiver that keeps the sequence number in 32 bits.
    raw = _record(req)
    if req.get("op") == "receive_record" and raw is not None and resp.get("errorClass") == "RECORD_SEQ":
        if int.from_bytes(raw[10:14], "big") == int(req["expectSeq"]) % 2**32:
            return python_adapter.handle(json.dumps({**req, "expectSeq": str(int.from_bytes(raw[6:14], "big"))}))
    return resp


def stamps_count_last(req: Response, resp: Response) -> Response:
    # A reader that decodes first and counts the sends only of a text it could read (semantic-conventions 1.4).
    if req.get("op") == "decode_stamps" and resp.get("errorClass") == "STAMPS_TOO_MANY_SENDS":
        text = req["text"].replace(" x", " z", 1)  # the answer it would give without the count
        return {**python_adapter.handle(json.dumps({**req, "text": text})), "id": resp.get("id")}
    return resp


def stamps_padding_unchecked(req: Response, resp: Response) -> Response:
    # A reader whose base64url decoder ignores the last character's two padding bits.
    if req.get("op") == "decode_stamps" and resp.get("errorClass") == "STAMPS_SKETCH":
        tokens = req["text"].split(" ")
        for i, token in enumerate(tokens):
            if token[:1] == "k" and len(token) == 44 and token[-1] in "BCDFGH_":
                tokens[i] = token[:-1] + "A"
                again = python_adapter.handle(json.dumps({**req, "text": " ".join(tokens)}))
                return {**again, "id": resp.get("id")}
    return resp


def stamps_empty_for_absent(req: Response, resp: Response) -> Response:
    # A decoder that writes "" for every value the text lacks (passed every vector before issue 20).
    if req.get("op") != "decode_stamps" or "errorClass" in resp:
        return resp
    out = dict(resp)
    for part, keys in (("end", ("endPtpNs", "endLts")), ("receive", ("remotePtpNs", "remoteLts"))):
        if out.get(part) == "false":
            out.update(dict.fromkeys(keys, ""))
    out.setdefault("recvLts", "")
    out.setdefault("sketch", "")
    return out


def stamps_plain_unchecked(req: Response, resp: Response) -> Response:
    # A reader that takes a plain attribute outside its range for absent (the Python codec did, issue 20).
    if req.get("op") == "decode_stamps" and resp.get("errorClass") == "STAMPS_RANGE":
        cleaned = dict(req)
        for key, top in (("uncertaintyNs", 65535), ("clkQuality", 2)):
            if key in cleaned and not 0 <= int(cleaned[key]) <= top:
                del cleaned[key]
        if cleaned != req:
            return {**python_adapter.handle(json.dumps(cleaned)), "id": resp.get("id")}
    return resp


def stamps_dt_always(req: Response, resp: Response) -> Response:
    # An encoder that writes the start's dt even when it is 0.
    text = resp.get("text")
    if req.get("op") == "encode_stamps" and isinstance(text, str):
        start, sep, rest = text.partition(" ")
        if start.count(",") == 1:  # dt left out
            return {**resp, "text": start + ",0" + sep + rest}
    return resp


BUGS: dict[str, Callable[[Response, Response], Response]] = {
    "wrong-text-class": wrong_text_class,
    "index-off-by-one": index_off_by_one,
    "extra-popcount": extra_popcount,
    "crash-on-lamport": crash_on_lamport,
    "hang-on-encode": hang_on_encode,
    "wrong-id": wrong_id,
    "unsupported-lamport": unsupported_merge,
    "newline-as-length": newline_as_length,
    "cap-in-characters": _cap_counted_by(len),  # the rule before issue 15
    "cap-in-utf16-units": _cap_counted_by(lambda t: len(t.encode("utf-16-le", "surrogatepass")) // 2),
    # Java's String.getBytes(UTF_8) writes '?' (1 octet) for a lone surrogate.
    "lone-surrogate-as-one-octet": _cap_counted_by(
        lambda t: len(t.encode("utf-8", "surrogatepass")) - 2 * _lone_surrogates(t)
    ),
    "unbounded-lamport": unbounded_lamport,
    "record-kind-before-crc": record_kind_before_crc,
    "record-receiver-first": record_receiver_first,
    "record-no-header-class": record_no_header_class,
    "record-seq-32-bits": record_seq_32_bits,
    "record-kind-one-name": record_kind_one_name,
    "record-id-length-unchecked": record_id_length_unchecked,
    "stamps-count-last": stamps_count_last,
    "stamps-padding-unchecked": stamps_padding_unchecked,
    "stamps-dt-always": stamps_dt_always,
    "stamps-empty-for-absent": stamps_empty_for_absent,
    "stamps-plain-unchecked": stamps_plain_unchecked,
}


def main() -> int:
    bug = BUGS[sys.argv[1]]
    for line in sys.stdin:
        req = json.loads(line)
        resp = bug(req, python_adapter.handle(line))
        sys.stdout.write(json.dumps(resp) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
