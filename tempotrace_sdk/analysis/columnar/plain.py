"""The plain lane's rows: spans with nothing but ids, times and a stamps text, kept as arrays (spec/analysis.md
§5.6).

A row is plain when the reference would make a record of it with no torch op, no step, no dump record and no
host clock domain, from a ``tempotrace.stamps`` text the C decoder read: the parent -> child edges, hops,
duplicates and counts of such spans are all the analysis does with them, and analysis/plainlane.py does
that a batch of trace parts at a time from these arrays. A line whose rows are all plain reaches the
analyzer as a ``PlainRun`` (its rows and positions), not as records; a row the lane hands back (its part
needs the per-span stages after all) is made into the record ``Records.stretch`` would have made.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import semconv as S
from ..events import SpanRecord
from ..plainlane import PlainRun
from .decode import ATTRIBUTE_PREFIX, RESOURCE_PREFIX
from .rows import Records
from .stamps import StampsBlock

__all__ = ["PlainRows", "plain_candidates", "plain_run"]

_SPAN_ONLY = (S.TORCH_OP, S.TORCH_STEP, S.TORCH_DUMP_REASON, S.CLOCK_STEPPED)
_DOMAIN = (S.CLOCK_DOMAIN, S.CLOCK_EPOCH_NS, S.CLOCK_EPOCH_BOUND_NS, S.CLOCK_READ_NS)
#: times the lane's int64 sums keep exact (stamparrays.SAFE)
_SAFE = 1 << 62
_SERVER, _CONSUMER = 2, 5


def plain_candidates(table: pa.Table, read: np.ndarray) -> np.ndarray:
    """The rows that may be plain (module doc) among ``read``, the clean rows whose stamps the lane can read as
    slots: none of the values the per-span stages read."""
    out: np.ndarray = read.copy()
    columns = [ATTRIBUTE_PREFIX + k for k in (*_SPAN_ONLY, *_DOMAIN)] + [RESOURCE_PREFIX + k for k in _DOMAIN]
    for name in columns:
        if name in table.column_names:
            out &= ~pc.is_valid(table.column(name)).to_numpy(zero_copy_only=False)
    return out


class PlainRows:
    """A decode table's plain rows as arrays (every row of the table indexed; only plain rows are read): ids as
    integers, kinds, times, the stamps slots, and the strings the rules name clocks and hosts by; ``records``
    makes the record of any of them."""

    def __init__(self, records: Records, block: StampsBlock, plain: np.ndarray) -> None:
        (trace_id, span_id, parent, _, kind, host, _, start_ns, end_ns, _, _, _, _, degraded, clock, _, _, _,
         job, _) = records.columns
        self.records = records
        self.trace_id: list[str] = trace_id
        self.span_hex: list[str] = span_id
        self.parent_hex: list[str] = parent
        n = len(span_id)
        # (the values of the plain rows only: another row's may be anything its rules refuse)
        rows = np.flatnonzero(plain).tolist()
        self.span = _ids([span_id[i] for i in rows], rows, n)
        self.has_parent = np.zeros(n, dtype=bool)
        self.has_parent[rows] = [bool(parent[i]) for i in rows]
        self.parent = _ids([parent[i] or "0" * 16 for i in rows], rows, n)
        #: SERVER or CONSUMER (edges.end_edge): a kind written as its enum name is neither, as the reference reads it
        self.receiving = np.zeros(n, dtype=bool)
        self.receiving[rows] = [kind[i] == _SERVER or kind[i] == _CONSUMER for i in rows]
        self.degraded = np.array(degraded, dtype=bool)
        self.start_ns = _times([start_ns[i] for i in rows], rows, n)
        self.end_ns = _times([end_ns[i] for i in rows], rows, n)
        self.clock = np.array(clock, dtype=object)
        self.host = np.array(host, dtype=object)
        # (job, rank) and host as integer codes, for the counts per job and per rank (plainlane.py)
        ranks = records.ident["rank"]
        self.has_rank = pc.is_valid(ranks).to_numpy(zero_copy_only=False)
        self.rank = pc.fill_null(ranks, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        index: dict[Any, int] = {}
        self.job_code = np.fromiter((index.setdefault(j, len(index)) for j in job), dtype=np.int64, count=n)
        self.jobs: list[Any] = list(index)
        self.host_code, self.hosts = _sorted_codes(records.ident["host"])
        self.slots: np.ndarray = block.slots
        self.sketch: np.ndarray = block.sketch
        self.sends: np.ndarray = block.sends
        self.send_offsets: np.ndarray = block.send_offsets

    def usable(self) -> bool:
        """Whether the arrays hold every plain row exactly (ids of 16 hex digits, times within int64 sums)."""
        return self.span is not None and self.parent is not None and self.start_ns is not None and \
            self.end_ns is not None

    def sender(self, row: int, pos: int) -> tuple[int, str, str, tuple[tuple[int, int, int], ...], bool]:
        """memory.Sender of a row: position, clock key, host, the headers it injected, policy degrade."""
        lo, hi = int(self.send_offsets[row]), int(self.send_offsets[row + 1])
        sends = tuple((v[0], v[1], v[2]) for v in self.sends[lo:hi].tolist())
        return pos, self.clock[row], self.host[row], sends, bool(self.degraded[row])

    def record(self, rows: list[int], positions: list[int]) -> list[SpanRecord]:
        return self.records.records_at(rows, positions)


def plain_run(block: PlainRows, first: int, n: int, pos: int, shard: tuple[int, int] | None) -> PlainRun:
    """A line's plain rows, those of the traces partition ``shard`` owns (Records.stretch's)."""
    rows = list(range(first, first + n))
    if shard is not None:
        tid, (k, parts) = block.trace_id, shard
        rows = [i for i in rows if int(tid[i][-8:], 16) % parts == k]
    return PlainRun(block, first, n, pos, rows)


def _sorted_codes(values: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """A string column as codes numbered in the order of the strings (the least code names the least string),
    and the strings."""
    coded = pc.dictionary_encode(values)
    if isinstance(coded, pa.ChunkedArray):
        coded = coded.combine_chunks()
    names = coded.dictionary.to_pylist()
    order = sorted(range(len(names)), key=names.__getitem__)
    renumber = np.empty(len(names), dtype=np.int64)
    renumber[order] = np.arange(len(names))
    codes = coded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return renumber[codes] if len(names) else codes, [names[i] for i in order]


def _ids(hex_ids: list[str], rows: list[int], n: int) -> np.ndarray | None:
    """The 64-bit ids of ``rows`` as unsigned integers, in an array of ``n`` (0 elsewhere); None unless every one
    is 16 hex digits."""
    if not all(type(x) is str for x in hex_ids):
        return None
    joined = "".join(hex_ids)
    if len(joined) != 16 * len(hex_ids):
        return None
    try:
        octets = bytes.fromhex(joined)
    except ValueError:
        return None
    if len(octets) != 8 * len(hex_ids):  # (fromhex skips whitespace)
        return None
    out = np.zeros(n, dtype=np.uint64)
    out[rows] = np.frombuffer(octets, dtype=">u8")
    return out


def _times(values: list[Any], rows: list[int], n: int) -> np.ndarray | None:
    """The OpenTelemetry times of ``rows`` as int64, in an array of ``n``; None when one is missing or at or
    beyond 2^62 ns."""
    try:
        got = np.array(values, dtype=np.uint64)
    except (OverflowError, TypeError, ValueError):
        return None
    if len(got) and int(got.max()) >= _SAFE:
        return None
    out = np.zeros(n, dtype=np.int64)
    out[rows] = got
    return out
