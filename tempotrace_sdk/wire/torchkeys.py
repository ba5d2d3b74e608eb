"""Names every rank computes alike without talking: group keys, step numbers, step trace ids (spec/torch.md §2, §4.1).

Imports neither torch nor OpenTelemetry. In ``wire`` rather than ``torch/``
because the analysis derives the same ids from exported spans and never
imports the torch integration; re-exported as ``tempotrace_sdk.torch.group_key``
/ ``step_ids``.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections.abc import Sequence

__all__ = ["StepNumbers", "group_key", "parse_group_key", "step_ids"]


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


class StepNumbers:
    """The step numbers one process used, and how often (thread-safe; spec/torch.md §4.1).

    ``for i, batch in enumerate(loader): with step(i)`` gives step 0 to the first
    batch of every epoch. The trace id derives from the number, so every epoch's
    step 0 landed in one trace: 66 steps became 22 traces, silently. So:

    - ``step()`` without a number takes the next one: one more than the highest
      number this process used so far, explicit or counted (0 at first), so a
      counted number never collides with one used before;
    - a number used before in this process gets its *occurrence* (how many times
      it was used before); ``step_ids`` mixes a non-zero occurrence into the
      trace id, so each use keeps a trace of its own. Every rank passes the same
      numbers in the same order (leaving a step is a collective), so every rank
      counts the same occurrences and derives the same ids.

    What is remembered is one count per number, kept as runs of consecutive
    numbers with the same count: a job that counts its steps, or numbers them
    ``0..n-1`` every epoch, holds one or two runs however long it trains, not one
    entry per step.
    """

    __slots__ = ("_counts", "_ends", "_lock", "_starts")

    def __init__(self) -> None:
        # Disjoint runs in ascending order: numbers starts[k] .. ends[k] - 1 were each used counts[k] times.
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._counts: list[int] = []
        self._lock = threading.Lock()

    def take(self, number: int | None) -> tuple[int, int]:
        """Record one use of ``number`` (None: the next counted number); (the number, its occurrence: how many
        times it was used before, 0 the first time)."""
        with self._lock:
            if number is None:
                number = self._ends[-1] if self._ends else 0
            return number, self._use(number)

    def uses(self, number: int) -> int:
        """How many times ``number`` was taken."""
        with self._lock:
            k = bisect.bisect_right(self._starts, number) - 1
            return self._counts[k] if k >= 0 and number < self._ends[k] else 0

    def runs(self) -> int:
        """How many runs are kept (the memory this takes)."""
        return len(self._starts)

    def _use(self, n: int) -> int:
        k = bisect.bisect_right(self._starts, n) - 1
        if k >= 0 and n < self._ends[k]:  # used before: split its run around n, n's count one higher
            before = self._counts[k]
            start, end = self._starts[k], self._ends[k]
            pieces = [(s, e, c) for s, e, c in ((start, n, before), (n, n + 1, before + 1), (n + 1, end, before))
                      if s < e]
            self._replace(k, k + 1, pieces)
            return before
        self._replace(k + 1, k + 1, [(n, n + 1, 1)])
        return 0

    def _replace(self, lo: int, hi: int, pieces: list[tuple[int, int, int]]) -> None:
        """Put ``pieces`` where runs lo..hi-1 were, merged with their neighbours where they touch with one count."""
        if lo > 0 and self._ends[lo - 1] == pieces[0][0] and self._counts[lo - 1] == pieces[0][2]:
            lo -= 1
            pieces[0] = (self._starts[lo], pieces[0][1], pieces[0][2])
        if hi < len(self._starts) and self._starts[hi] == pieces[-1][1] and self._counts[hi] == pieces[-1][2]:
            pieces[-1] = (pieces[-1][0], self._ends[hi], pieces[-1][2])
            hi += 1
        merged: list[tuple[int, int, int]] = []
        for s, e, c in pieces:
            if merged and merged[-1][1] == s and merged[-1][2] == c:
                merged[-1] = (merged[-1][0], e, c)
            else:
                merged.append((s, e, c))
        self._starts[lo:hi] = [s for s, _, _ in merged]
        self._ends[lo:hi] = [e for _, e, _ in merged]
        self._counts[lo:hi] = [c for _, _, c in merged]
