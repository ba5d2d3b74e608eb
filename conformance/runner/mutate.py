"""Differential inputs: seeded mutations of the vectors' wire, text, record and stamps-text inputs.

The vectors pin down expected answers for chosen inputs; between them, two
implementations can still differ. `conformance/run --differential N` sends N
mutated inputs (bit flips, truncations, extensions, hostile characters,
duplication; for records also chosen field octets with the CRC made right
again, so the checks behind the CRC are reached) to every implementation and
fails on any disagreement. There is no expected answer here: only "all
implementations say the same".
"""

from __future__ import annotations

import binascii
import random
from collections.abc import Iterator
from typing import Any

from .vectors import Case

# Characters that each exercise a text rule: OWS, separators, other base64 alphabets,
# controls, and non-ASCII look-alikes (incl. a lone surrogate and an astral character).
HOSTILE = "AQgw-_=,+/. \t\r\n\x00\x0b\u00a0\u00e9\u212a\uff21\u0663\ud800\U0001f600"


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        if b and r < 0.5:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif b and r < 0.65:
            del b[rng.randrange(len(b)) :]
        elif r < 0.8:
            b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif b:
            b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def _mutate_text(rng: random.Random, text: str) -> str:
    t = list(text)
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        if t and r < 0.35:
            t[rng.randrange(len(t))] = rng.choice(HOSTILE)
        elif r < 0.65:
            t.insert(rng.randrange(len(t) + 1), rng.choice(HOSTILE))
        elif t and r < 0.85:
            del t[rng.randrange(len(t))]
        else:
            t.extend(rng.choice(" \t") for _ in range(rng.randint(1, 200)))
    if rng.random() < 0.05:
        t = t * rng.randint(2, 4)
    return "".join(t)


RECORD_LEN = 95  # spec/torch.md 3.1: octets 0..90, then their CRC-32 (big-endian)
# First and last octets of the record's fields and of the embedded header's (from octet 38).
RECORD_SPOTS = (0, 1, 2, 5, 6, 13, 14, 29, 30, 37, 38, 39, 46, 47, 48, 49, 50, 51, 58, 90)
RECORD_VALUES = (0x00, 0x01, 0x02, 0x03, 0x04, 0x13, 0x30, 0x7F, 0x80, 0xFF)


def _mutate_record(rng: random.Random, data: bytes) -> bytes:
    if len(data) != RECORD_LEN or rng.random() < 0.35:
        return _mutate_bytes(rng, data)  # mostly RECORD_LENGTH / RECORD_CHECKSUM
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        b[rng.choice(RECORD_SPOTS)] = rng.choice(RECORD_VALUES) if rng.random() < 0.7 else rng.randrange(256)
    if rng.random() < 0.9:  # a right CRC, so the version, kind and header checks decide
        b[91:] = binascii.crc32(bytes(b[:91])).to_bytes(4, "big")
    return bytes(b)


def _expectations(rng: random.Random, request: dict[str, Any]) -> dict[str, str]:
    """A receive_record request's expectations, sometimes changed (kind, rank, seq off by one or by 2^32)."""
    kind, rank, seq = request["expectKind"], int(request["expectRank"]), int(request["expectSeq"])
    r = rng.random()
    if r < 0.15:
        kind = "1" if kind == "0" else "0"
    elif r < 0.3:
        rank = (rank + rng.choice((1, -1, 1 << 24))) % (1 << 32)
    elif r < 0.45:
        seq = (seq + rng.choice((1, -1, 1 << 32))) % (1 << 64)
    return {"expectKind": kind, "expectRank": str(rank), "expectSeq": str(seq)}


def _record_request(rng: random.Random, bases: list[dict[str, Any]]) -> dict[str, Any]:
    base = rng.choice(bases)
    record = _mutate_record(rng, bytes.fromhex(base["record"])).hex()
    if base["op"] == "receive_record":
        return {"op": "receive_record", "record": record, **_expectations(rng, base)}
    return {"op": "decode_record", "record": record}


# Pieces of the stamps grammar (spec/semantic-conventions.md 1.4): separators, signs, tags, enum and range edges.
STAMPS_PIECES = (
    *(" ", ",", "-", "-0", "0", "00", "2", "3", "9", " x", " e", " r", " k", "s", "x1,1", "_", "8", "B", "=", "\t"),
    *("99999999999999999999", "9223372036854775807", "65536", "16", "\u00e9"),
)
STAMPS_SEED_MAX = 4096  # characters; the textParts vectors (2 MB) are no base for mutations


def _mutate_stamps(rng: random.Random, text: str) -> str:
    """Token-level changes (drop, repeat, swap, change a digit) or a grammar piece inserted, else the generic ones."""
    tokens = text.split(" ")
    r = rng.random()
    if r < 0.15 and len(tokens) > 1:
        del tokens[rng.randrange(1, len(tokens))]
    elif r < 0.3:
        i = rng.randrange(len(tokens))
        tokens.insert(i, tokens[i])
    elif r < 0.4 and len(tokens) > 2:
        i, j = rng.sample(range(len(tokens)), 2)
        tokens[i], tokens[j] = tokens[j], tokens[i]
    elif r < 0.7:
        text = " ".join(tokens)
        at = rng.randrange(len(text) + 1)
        return text[:at] + rng.choice(STAMPS_PIECES) + text[at + rng.choice((0, 0, 1)) :]
    else:
        return _mutate_text(rng, text)
    return " ".join(tokens)


# The span's plain attributes (semantic-conventions 1.4: each absent on its own, a present one range-checked):
# edges of both ranges, the type's and beyond any integer type.
PLAIN_VALUES = {
    "uncertaintyNs": ("0", "65535", "65536", "70000", "-1", "4294967296", "99999999999999999999"),
    "clkQuality": ("0", "1", "2", "3", "-1", "255", "18446744073709551616"),
}


def _mutate_plain(rng: random.Random, request: dict[str, Any]) -> dict[str, Any]:
    """A decode_stamps request with one plain attribute dropped or set to an edge value."""
    out = dict(request)
    key = rng.choice(sorted(PLAIN_VALUES))
    if rng.random() < 0.25:
        out.pop(key, None)
    else:
        out[key] = rng.choice(PLAIN_VALUES[key])
    return out


def _stamps_base(case: Case) -> dict[str, Any]:
    """A decode_stamps request to mutate: a decode vector's, or an encode vector's text read back with its values."""
    req = case.request
    if req["op"] == "decode_stamps":
        return dict(req)
    keys = {"uncertaintyNs": "startUncertaintyNs", "clkQuality": "startClkQuality"}
    base = {k: req[k] for k in ("startTimeUnixNano", "endTimeUnixNano")}
    return {"op": "decode_stamps", "text": case.expect["text"], **base, **{k: req[v] for k, v in keys.items()}}


def differential_requests(cases: list[Case], count: int, seed: int) -> Iterator[dict[str, Any]]:
    """count requests derived from the vectors' decode inputs, reproducible from seed.

    They take turns among the input families the vectors have: binary headers,
    text headers, records (decoded, or received with expectations), stamps
    texts (decoded with their vector's OpenTelemetry times and attributes, the
    attributes themselves mutated in three of ten).
    """
    rng = random.Random(seed)
    wires = [bytes.fromhex(c.request["wire"]) for c in cases if c.request["op"] == "decode_bytes"]
    texts = [c.request["text"] for c in cases if c.request["op"] == "decode_text"]
    records = [c.request for c in cases if c.request["op"] in ("decode_record", "receive_record")]
    # An encoded record is a valid record to start from: received as the encoder's own rank and seq.
    records += [{"op": "decode_record", "record": c.expect["record"]} for c in cases if "record" in c.expect]
    stamps = [_stamps_base(c) for c in cases if c.request["op"] in ("decode_stamps", "encode_stamps")]
    stamps = [base for base in stamps if len(base["text"]) <= STAMPS_SEED_MAX]
    inputs = (("bytes", wires), ("text", texts), ("record", records), ("stamps", stamps))
    families = [f for f, given in inputs if given]
    for i in range(count if families else 0):
        family = families[i % len(families)]
        if family == "bytes":
            yield {"op": "decode_bytes", "wire": _mutate_bytes(rng, rng.choice(wires)).hex()}
        elif family == "text":
            yield {"op": "decode_text", "text": _mutate_text(rng, rng.choice(texts))}
        elif family == "stamps":
            base = rng.choice(stamps)
            r = rng.random()
            if r < 0.2:  # the text as it was, the attributes changed
                yield _mutate_plain(rng, base)
            elif r < 0.3:
                yield _mutate_plain(rng, {**base, "text": _mutate_stamps(rng, str(base["text"]))})
            else:
                yield {**base, "text": _mutate_stamps(rng, str(base["text"]))}
        else:
            yield _record_request(rng, records)
