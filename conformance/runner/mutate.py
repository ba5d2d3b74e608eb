"""Differential inputs: seeded mutations of the vectors' wire and text inputs.

The vectors pin down expected answers for chosen inputs; between them, two
implementations can still differ. `conformance/run --differential N` sends N
mutated inputs (bit flips, truncations, extensions, hostile characters,
duplication) to every implementation and fails on any disagreement. There is
no expected answer here: only "all implementations say the same".
"""

from __future__ import annotations

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


def differential_requests(cases: list[Case], count: int, seed: int) -> Iterator[dict[str, Any]]:
    """count requests derived from the vectors' decode inputs, reproducible from seed."""
    rng = random.Random(seed)
    wires = [bytes.fromhex(c.request["wire"]) for c in cases if c.request["op"] == "decode_bytes"]
    texts = [c.request["text"] for c in cases if c.request["op"] == "decode_text"]
    for i in range(count):
        if wires and (i % 2 == 0 or not texts):
            yield {"op": "decode_bytes", "wire": _mutate_bytes(rng, rng.choice(wires)).hex()}
        elif texts:
            yield {"op": "decode_text", "text": _mutate_text(rng, rng.choice(texts))}
