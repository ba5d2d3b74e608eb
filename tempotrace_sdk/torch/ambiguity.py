"""Receives whose pairing the sequence numbers cannot vouch for (spec/torch.md §2).

A specific receive is numbered when it is posted, an any-source one when it
is seen complete. Which message each took is torch's choice (gloo: a
channel's messages go to its receives in posting order), so the numbers can
name another message than the one a receive got, and the side messages
follow the numbers, so no record says so (no ``RECORD_SEQ``). That happens
only when, on one (group, tag) of this rank:

- an any-source and a specific receive are outstanding together (either was
  posted while the other was outstanding); or
- an any-source receive is seen complete while an any-source receive posted
  before it is still outstanding (a later one numbered first).

Every receive involved is marked ``tempotrace.torch.p2p_ambiguous`` and
counted ``p2p_ambiguous``; the analysis pairs none of them.

*Outstanding* is what this rank can know: from just before torch is asked to
post the receive until its completion is seen (§1.3: the blocking call's
return, the future, the user's wait, a sweep) or its call raised. Both ends
err towards more overlap, never less. The count of receives per (group, src,
dst, tag) stays exact, so receives after an overlap pair as usual.

One small lock guards the per-(group, tag) sets; it is never held across a
torch call, only while a receive is added, removed or marked. A receive is
removed before its span ends, so a receive found ambiguous has its span still
open, except one whose torch call raised (its span ended with the error just
before its removal): the callers (p2p.py) count those
``p2p_ambiguous_unmarked``. The sets live on each group's ``GroupInfo.open_recvs``.
"""

from __future__ import annotations

import itertools
import threading

from opentelemetry.trace import Span

from ..semconv import TORCH_P2P_AMBIGUOUS

__all__ = ["OpenReceives", "Posted", "posted", "released"]

_lock = threading.Lock()
_order = itertools.count()  #: posting order (drawn under the lock)


class OpenReceives:
    """The receives outstanding on one (group, tag) of this rank, by kind."""

    __slots__ = ("any_source", "specific")

    def __init__(self) -> None:
        self.any_source: set[Posted] = set()
        self.specific: set[Posted] = set()


class Posted:
    """One receive while it is outstanding (identity-hashed)."""

    __slots__ = ("ambiguous", "any_source", "open", "order", "recording", "span", "tag")

    def __init__(self, span: Span, tag: int, any_source: bool) -> None:
        self.span = span
        self.tag = tag
        self.any_source = any_source
        self.recording = span.is_recording()  #: a span that can carry the mark (an untraced one cannot)
        self.ambiguous = False
        self.order = -1
        self.open: dict[int, OpenReceives] | None = None  #: the group's table while outstanding


Found = tuple[int, int]  #: receives found ambiguous now, and how many of them could not be marked


def posted(table: dict[int, OpenReceives], span: Span, tag: int, any_source: bool) -> tuple[Posted, Found]:
    """Record a receive about to be posted on (the group of ``table``, ``tag``); mark the overlap it makes."""
    receive = Posted(span, tag, any_source)
    with _lock:
        receive.order = next(_order)
        receive.open = table
        entry = table.get(tag)
        if entry is None:
            entry = table[tag] = OpenReceives()
        mine, other = (entry.any_source, entry.specific) if any_source else (entry.specific, entry.any_source)
        mine.add(receive)
        found = _mark_all(other, receive) if other else (0, 0)
    return receive, found


def released(receive: Posted | None, *, completed: bool = False) -> Found:
    """The receive no longer overlaps anything: seen ``completed`` (an any-source one completing before one
    posted earlier marks both), or its call raised. Idempotent."""
    if receive is None:
        return 0, 0
    with _lock:
        table, receive.open = receive.open, None
        entry = None if table is None else table.get(receive.tag)
        if table is None or entry is None:
            return 0, 0
        found = (0, 0)
        if receive.any_source:
            entry.any_source.discard(receive)
            if completed and entry.any_source:
                earlier = [r for r in entry.any_source if r.order < receive.order]
                if earlier:
                    found = _mark_all(earlier, receive)
        else:
            entry.specific.discard(receive)
        if not entry.any_source and not entry.specific:
            del table[receive.tag]
    return found


def _mark_all(others: set[Posted] | list[Posted], receive: Posted) -> Found:
    """Under the lock: ``receive`` and ``others`` are ambiguous."""
    fresh = [r for r in others if not r.ambiguous]
    if not receive.ambiguous:
        fresh.append(receive)
    return len(fresh), sum(not _mark(r) for r in fresh)


def _mark(receive: Posted) -> bool:
    """Under the lock: the receive is outstanding (or completing), so its span is open unless its call just
    raised. False: a span that could carry the mark but no longer can."""
    receive.ambiguous = True
    if not receive.recording:
        return True  # untraced or not sampled: there is no span to mark, nothing is lost
    try:
        if receive.span.is_recording():
            receive.span.set_attribute(TORCH_P2P_AMBIGUOUS, True)
            return True
    except Exception:  # an SDK span that refused: the same as an ended one
        pass
    return False
