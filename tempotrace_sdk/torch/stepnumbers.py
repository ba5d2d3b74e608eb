"""Step numbers: counted for ``step()`` without one, and a number used twice told apart (spec/torch.md §4.1).

``for i, batch in enumerate(loader): with step(i)`` gives step 0 to the first
batch of every epoch. The trace id derives from the number, so every epoch's
step 0 landed in one trace: 66 steps became 22 traces, silently. So:

- ``step()`` without a number takes the next one: one more than the highest
  number this process used so far, explicit or counted (0 at first), so a
  counted number never collides with one used before;
- a number used before in this process gets its *occurrence* (how many times
  it was used before); ``keys.step_ids`` mixes a non-zero occurrence into the
  trace id, so each use keeps a trace of its own. Every rank passes the same
  numbers in the same order (leaving a step is a collective), so every rank
  counts the same occurrences and derives the same ids.

What is remembered is one count per number, kept as runs of consecutive
numbers with the same count: a job that counts its steps, or numbers them
``0..n-1`` every epoch, holds one or two runs however long it trains, not one
entry per step.
"""

from __future__ import annotations

import bisect
import threading

__all__ = ["StepNumbers"]


class StepNumbers:
    """The step numbers one process used, and how often (thread-safe)."""

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
