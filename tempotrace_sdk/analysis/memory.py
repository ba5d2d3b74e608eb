"""What the streaming analysis remembers of traces it has already analysed, in bounded memory
(spec/analysis.md §5.2).

Every bound is a distance in input positions (each span object read takes one
position), never a count of entries, so that whether something is remembered
depends only on where the spans sit in the input, not on when a partition got
round to it: the report of a run split by trace id (``--jobs``, ``--engine
dask``) is the same as one process's.

- ``TraceMemory``: the span ids of each analysed trace (8 bytes a span, plus
  about 150 bytes a trace), kept while the trace's last span lies within the
  dedup horizon: a later part of the trace drops spans it already holds
  (at-least-once delivery) and does not count as a new trace.
- ``Senders``: what a hop needs of each analysed client span (clock, host,
  sends, policy), within the hop horizon. A sender further than the horizon
  from a receive span is none, whether or not it is still held (what is held
  past it depends on the order senders were added). A plain row's sender
  (plainlane.py) is held as its row, which keeps its decode block (up to
  8 MiB of lines) until the sender is forgotten: the lane's memory is the
  hop horizon's spans plus a block.
- ``Waiting``: receive spans whose client span has not been analysed yet.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

from .events import Sends, SpanRecord

__all__ = ["Sender", "Senders", "TraceMemory", "Waiting"]

_POS = 8  # bytes of the last position at the head of a trace's blob


class TraceMemory:
    """Analysed traces within ``horizon`` positions: their span ids, for duplicates and distinct counts."""

    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        # trace id -> last position (8 bytes) + span ids (8 bytes each). An OrderedDict: a plain dict's
        # first item costs a scan over the slots its deletions left, and this queue deletes at the front.
        self._traces: OrderedDict[str, bytes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._traces)

    def earlier(self, trace_id: str, first_pos: int) -> set[str] | None:
        """The span ids of the trace's analysed parts, when the last of them lies within the horizon of a
        new part starting at ``first_pos``; None when the trace is new (or forgotten)."""
        blob = self._traces.get(trace_id)
        if blob is None or int.from_bytes(blob[:_POS], "big", signed=True) < first_pos - self.horizon:
            return None
        return {blob[i:i + 8].hex() for i in range(_POS, len(blob), 8)}

    def remember(self, trace_id: str, span_ids: Iterable[str], last_pos: int, earlier: bool) -> None:
        """Add a part's span ids (``earlier``: the trace was remembered, ``earlier()`` said so)."""
        ids = bytes.fromhex("".join(span_ids))
        head = last_pos.to_bytes(_POS, "big", signed=True)
        old = self._traces.pop(trace_id, None)
        self._traces[trace_id] = head + (old[_POS:] + ids if earlier and old is not None else ids)

    def remember_ids(self, trace_id: str, ids: bytes, last_pos: int) -> None:
        """``remember`` of a new trace's first part, its span ids as 8 octets each (plainlane.py)."""
        self._traces.pop(trace_id, None)
        self._traces[trace_id] = last_pos.to_bytes(_POS, "big", signed=True) + ids

    def forget_before(self, limit: int) -> None:
        """Drop traces whose last span lies before ``limit`` (oldest first; the order is close to that)."""
        traces = self._traces
        while traces:
            trace_id = next(iter(traces))
            if int.from_bytes(traces[trace_id][:_POS], "big", signed=True) >= limit:
                return
            del traces[trace_id]


#: What a hop needs of its client span: position, clock key, host, the headers it injected, policy degrade.
Sender = tuple[int, str, str, Sends, bool]


class Senders:
    """Analysed client spans (trace id + span id -> Sender), in the order they were analysed."""

    def __init__(self) -> None:
        self._by_key: OrderedDict[str, Sender] = OrderedDict()  # a queue: see TraceMemory

    def __len__(self) -> int:
        return len(self._by_key)

    def add(self, s: SpanRecord) -> Sender:
        sender = (s.pos, s.clock, s.host, s.sends, s.degraded)
        self._by_key[s.trace_id + s.span_id] = sender
        return sender

    def put_rows(self, keys: list[str], rows: list[tuple[int, Any, int]]) -> None:
        """``add`` of spans the plain lane holds as arrays (plainlane.py): each kept as (position, its block, its
        row) until a hop asks for it (most are never asked: their receivers were in their own part)."""
        self._by_key.update(zip(keys, rows, strict=True))  # type: ignore[arg-type]

    def get(self, trace_id: str, span_id: str) -> Sender | None:
        return self.get_key(trace_id + span_id)

    def get_key(self, key: str) -> Sender | None:
        sender = self._by_key.get(key)
        if sender is not None and len(sender) == 3:  # a plain row's: made now
            pos, block, row = sender
            sender = self._by_key[key] = block.sender(row, pos)
        return sender

    def forget_before(self, limit: int) -> None:
        by_key = self._by_key
        while by_key:
            key = next(iter(by_key))
            if by_key[key][0] >= limit:
                return
            del by_key[key]


class Waiting:
    """Receive spans waiting for their client span (trace id + client span id -> receive spans)."""

    def __init__(self) -> None:
        self._by_key: OrderedDict[str, list[SpanRecord]] = OrderedDict()  # a queue: see TraceMemory

    def __len__(self) -> int:
        return len(self._by_key)

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def add(self, s: SpanRecord) -> None:
        self._by_key.setdefault(s.trace_id + s.parent_id, []).append(s)

    def take(self, trace_id: str, span_id: str) -> list[SpanRecord] | None:
        return self.take_key(trace_id + span_id)

    def take_key(self, key: str) -> list[SpanRecord] | None:
        return self._by_key.pop(key, None)

    def take_before(self, limit: int | None) -> Iterator[SpanRecord]:
        """Receivers that waited since before ``limit`` (all of them with None): no client can match them."""
        by_key = self._by_key
        while by_key:
            key = next(iter(by_key))
            receivers = by_key.pop(key)
            if limit is None:
                yield from receivers
                continue
            old = [r for r in receivers if r.pos < limit]
            if len(old) < len(receivers):
                by_key[key] = [r for r in receivers if r.pos >= limit]  # still matchable: back of the queue
            yield from old
            if not old:
                return  # the front receiver is recent: so are (nearly) all behind it
