"""Group keys (spec/torch.md §2), read without expanding them: a key of a 2,048-rank group is one run,
``0-2047``, and a hostile one (``0-2147483647``) must not become a list of two billion ranks.

A key is runs joined by ``,`` (``a``, ``a-b``, ``a-b:s``: the member global ranks in group-rank order),
optionally followed by ``#`` and torch's group name. ``GroupKey`` keeps the runs and answers what the
analysis asks (how many members, is a rank one of them, which rank has group rank i) in time linear in
the number of runs; ``ranks()`` expands it, for records whose size the caller has budgeted.
``member_rank`` is the global rank a member span stands for (spec/analysis.md §1.3).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from .events import SpanRecord

__all__ = ["GROUP_KEY_PATTERN", "MAX_GROUP", "MAX_RANK", "GroupKey", "member_rank", "parse_key"]

#: The largest global rank (``tempotrace.rank`` is 0..2^31-1, semantic-conventions §9.1).
MAX_RANK = 2**31 - 1
#: The largest group the analysis accepts (a million ranks: far beyond today's largest jobs); a key or a
#: ``group_size`` naming more is refused, so no record can make the analysis hold more per collective.
MAX_GROUP = 1 << 20
#: The shape of a key (the value rule of ``tempotrace.torch.group``: values.SPAN_RULES).
GROUP_KEY_PATTERN = r"\d{1,10}(?:-\d{1,10}(?::\d{1,10})?)?(?:,\d{1,10}(?:-\d{1,10}(?::\d{1,10})?)?)*(?:#.*)?"
_RUN = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")

Run = tuple[int, int, int]  # first, last, step: first, first + step, ..., last


class GroupKey(msgspec.Struct, frozen=True, gc=False):
    """A parsed key: its text, its runs in group-rank order, and how many ranks they name."""

    text: str
    runs: tuple[Run, ...]
    size: int

    def contains(self, rank: int) -> bool:
        for first, last, step in self.runs:
            if first <= rank <= last and (rank - first) % step == 0:
                return True
        return False

    def rank_at(self, group_rank: int) -> int | None:
        """The global rank whose group rank is ``group_rank``; None outside the group."""
        if group_rank < 0:
            return None
        for first, last, step in self.runs:
            n = (last - first) // step + 1
            if group_rank < n:
                return first + group_rank * step
            group_rank -= n
        return None

    def ranks(self) -> Iterator[int]:
        """Every member, in group-rank order (``size`` of them: the caller budgets for it)."""
        for first, last, step in self.runs:
            yield from range(first, last + 1, step)


@functools.lru_cache(maxsize=4096)
def parse_key(text: str) -> GroupKey:
    """The key ``text`` names; ValueError saying what is wrong (the value rule checked its shape only; a key
    that names a rank twice is refused like a malformed one: values.torch_op counts its span as a bad value)."""
    members = text.partition("#")[0]
    runs: list[Run] = []
    size = 0
    for part in members.split(","):
        m = _RUN.fullmatch(part)
        if m is None:
            raise ValueError(f"run {part!r} is not a, a-b or a-b:s")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        step = int(m.group(3)) if m.group(3) is not None else 1
        if last > MAX_RANK or step < 1 or last < first or (last - first) % step:
            raise ValueError(f"run {part!r}: ranks 0..{MAX_RANK}, a <= b, b - a a multiple of s >= 1")
        size += (last - first) // step + 1
        if size > MAX_GROUP:
            raise ValueError(f"more than {MAX_GROUP:,} ranks")
        runs.append((first, last, step))
    if len(runs) > 1 and _overlap(runs):
        raise ValueError("runs that name a rank twice")
    return GroupKey(text, tuple(runs), size)


def _overlap(runs: list[Run]) -> bool:
    """Whether two runs name one rank (``0-3,2-5``): a key lists each member once. Runs whose spans of ranks
    are disjoint (the SDK's greedy runs, spec/torch.md §2) are told apart by sorting; interleaved strided
    runs (``0-4:2,1-5:2``) by listing their members, at most MAX_GROUP of them (the size was checked)."""
    spans = sorted((first, last) for first, last, _ in runs)
    if all(a[1] < b[0] for a, b in itertools.pairwise(spans)):
        return False
    members: set[int] = set()
    for first, last, step in runs:
        had = len(members)
        members.update(range(first, last + 1, step))
        if len(members) - had != (last - first) // step + 1:
            return True
    return False


def member_rank(s: SpanRecord, key: GroupKey) -> int | None:
    """A member span's global rank: ``tempotrace.rank``, else the key's member at its group rank; None when
    neither names one or the key does not hold it (a *foreign* span, spec/analysis.md §1.3)."""
    t = s.torch
    rank = s.rank if s.rank is not None else key.rank_at(t.group_rank) if t is not None and \
        t.group_rank is not None else None
    return rank if rank is not None and key.contains(rank) else None
