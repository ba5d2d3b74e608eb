"""Names every rank computes alike without talking: group keys and step trace ids (spec/torch.md §2, §4).

Pure functions; imports neither torch nor OpenTelemetry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["group_key", "parse_group_key", "step_ids"]


def group_key(ranks: Sequence[int]) -> str:
    """The group's member global ranks, in group-rank order, as runs ``a-b`` (step 1) or ``a-b:s``.

    ``[0, 1, 2, 3]`` -> ``"0-3"``; ``[0, 2, 4, 6]`` -> ``"0-6:2"``; ``[1, 4, 5]`` -> ``"1,4-5"``;
    ``[3]`` -> ``"3"``. Runs are found greedily from the left, so every rank
    that holds the same list writes the same key, and a 2,048-rank group or
    a strided tensor-parallel group stays a few characters long.
    """
    if not ranks:
        raise ValueError("a group has at least one rank")
    parts: list[str] = []
    i, n = 0, len(ranks)
    while i < n:
        start = ranks[i]
        if i + 2 < n and ranks[i + 1] - start == ranks[i + 2] - ranks[i + 1] and ranks[i + 1] > start:
            step = ranks[i + 1] - start
            j = i + 2
            while j + 1 < n and ranks[j + 1] - ranks[j] == step:
                j += 1
            parts.append(f"{start}-{ranks[j]}" if step == 1 else f"{start}-{ranks[j]}:{step}")
            i = j + 1
        elif i + 1 < n and ranks[i + 1] == start + 1:
            parts.append(f"{start}-{start + 1}")
            i += 2
        else:
            parts.append(str(start))
            i += 1
    return ",".join(parts)


def parse_group_key(key: str) -> list[int]:
    """The ranks a key names, in order (the inverse of ``group_key``); ValueError on a malformed key."""
    ranks: list[int] = []
    for part in key.split(","):
        first, _, rest = part.partition("-")
        if not rest:
            ranks.append(int(first))
            continue
        last, _, step = rest.partition(":")
        a, b, s = int(first), int(last), int(step) if step else 1
        if s < 1 or b < a:
            raise ValueError(f"group key {key!r}: bad run {part!r}")
        ranks.extend(range(a, b + 1, s))
    return ranks


def step_ids(job_id: str, restart: int, step: int, occurrence: int = 0) -> tuple[int, int]:
    """(trace id, step span id) of a training step: BLAKE2b of the job, restart, step and occurrence.

    ``blake2b(b"tempotrace-step\\0" + job + b"\\0" + restart + b"\\0" + step, digest_size=24)``
    with the numbers in decimal ASCII; a step number used again in the process
    (``occurrence`` k > 0: its (k+1)-th use) appends ``b"\\0" + k``, so each use
    has a trace of its own while a first use keeps the ids it always had. The
    trace id is octets 0..15, the span id octets 16..23 (big-endian). An
    all-zero result (invalid in W3C) is replaced by 1; it has probability
    2^-128 and 2^-64.
    """
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"step must be a non-negative integer, got {step!r}")
    if not isinstance(occurrence, int) or isinstance(occurrence, bool) or occurrence < 0:
        raise ValueError(f"occurrence must be a non-negative integer, got {occurrence!r}")
    fields = [b"tempotrace-step", job_id.encode(), str(restart).encode(), str(step).encode()]
    if occurrence:
        fields.append(str(occurrence).encode())
    digest = hashlib.blake2b(b"\0".join(fields), digest_size=24).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:], "big") or 1
