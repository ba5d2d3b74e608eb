"""Hops counted a few thousand at a time (spec/analysis.md §5.6 item 9): the counts ``EdgeJudge.hop`` makes
for a hop whose rendering record is not kept, equal, by the array rules of edgebatch.py.

A hop's send event is its receive span's remote record: degraded when the client span's policy said so, its
naive time that reading taken to UTC where the receive has no reading to compare (a header carries no span
time), found in no sketch (a send is no span start: only the receive's id can be in the sketch its sender
carried). A hop whose client span is not in the input blames no clock (``unattributed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .edgebatch import BATCH, CLOCK, HOST, START_NS, PairSides, SvcTest, count_pairs, in_sketches
from .edges import hop_send, unmerged
from .events import SpanRecord
from .stamparrays import SAFE, StampArrays, times

if TYPE_CHECKING:
    from .edges import EdgeJudge
    from .memory import Sender

__all__ = ["HopBatch"]


class HopBatch:
    """``EdgeJudge.hop`` for hops whose rendering record is not kept: queue them with ``add``, ``flush`` counts
    them (pair by pair by the judge where a time is out of the arrays' range)."""

    def __init__(self, judge: EdgeJudge, size: int = BATCH) -> None:
        self.judge = judge
        self.size = size
        self.servers: list[SpanRecord] = []
        self.clients: list[Sender | None] = []

    def add(self, s: SpanRecord, client: Sender | None) -> None:
        """Count, at the flush, what ``judge.hop(s, client, keep=False)`` counts."""
        self.servers.append(s)
        self.clients.append(client)
        if len(self.servers) >= self.size:
            self.flush()

    def flush(self) -> None:
        servers, clients = self.servers, self.clients
        if not servers:
            return
        self.servers, self.clients = [], []
        judge = self.judge
        sent, clock_a, host_a, matched = zip(*map(hop_send, servers, clients), strict=True)
        sa, sb = StampArrays(list(sent)), StampArrays([s.start for s in servers])
        rb = times(list(map(START_NS, servers)))
        raw_a, raw_a_ok = _tai_as_utc(sa, sb)
        if rb is not None and raw_a is not None:
            attributed = np.array([c is not None for c in clients], dtype=bool)
            sides = PairSides(list(clock_a), list(map(CLOCK, servers)), list(host_a), list(map(HOST, servers)),
                              raw_a, rb, np.array(list(map(unmerged, servers)), dtype=bool), self._svc(servers),
                              attributed, raw_a_ok)
            if count_pairs(judge, "hop", sa, sb, sides):
                rep = judge.report
                rep.hops += len(servers)
                rep.hops_matched += sum(matched)
                return
        for s, client in zip(servers, clients, strict=True):
            judge.hop(s, client, False)

    @staticmethod
    def _svc(servers: list[SpanRecord]) -> SvcTest:
        def test(open_: list[int], may_before: np.ndarray, may_after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            after = np.zeros(len(servers), bool)
            ma = may_after.tolist()
            rows = [k for k in open_ if ma[k]]  # the receive's span id in the sketch its sender carried (a send
            if rows:  # is no span start)
                after[rows] = in_sketches([servers[k].remote_sketch for k in rows], [servers[k].span_id for k in rows])
            return np.zeros(len(servers), bool), after
        return test


def _tai_as_utc(sa: StampArrays, sb: StampArrays) -> tuple[np.ndarray | None, np.ndarray]:
    """A send's naive time where the receive has no reading to compare its reading with: that reading taken to
    UTC (order.naive_order); ok where the send has a reading. None (values) when a reading lies outside
    [0, 2^62) ns."""
    from ..clocks.leapseconds import tai_to_utc_ns

    raw = np.zeros(len(sa.stamps), dtype=np.int64)
    if not sa.safe():
        return None, sa.have
    for k in np.flatnonzero(sa.have & ~sb.have).tolist():
        utc = tai_to_utc_ns(int(sa.ptp[k]))
        if not 0 <= utc < SAFE:
            return None, sa.have
        raw[k] = utc
    return raw, sa.have
