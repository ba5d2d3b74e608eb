"""torch point-to-point messages: pair each send with its receive, decide send -> receive completion
(spec/analysis.md §1.3).

A message is one (trace, group key, src, dst, tag, p2p_seq): the k-th send from
src to dst with a tag meets the k-th receive at dst from src with that tag
(spec/torch.md §2), whatever was carried. Its two spans arrive as their trace's
parts are analysed; a message is decided when both sides are in, or when its
first side falls out of the hop horizon (then it is *unmatched*: a lone
receive with its sender's record is still decided, blaming no clock; a lone
send has no receive event to order). A side further than the horizon from
the first one starts a new message, so pairing depends only on positions.
A receive marked ``p2p_ambiguous`` (torch may have given it another message
than its number names, spec/torch.md §2) still takes its place, so its send
is not reported lost, but its message is counted *ambiguous* and ordered
by nothing: neither its number nor its carried record is trusted. A send no
receive matched, and a receive still ``pending`` (open when a dump was taken),
an ambiguous one included, go to the hang report (hangfacts.py).
"""

from __future__ import annotations

from collections import OrderedDict

from .claims import NOT_COMPLETED
from .edges import EdgeJudge
from .events import SpanRecord
from .hangfacts import PENDING, PENDING_RECV, UNMATCHED_SEND
from .report import AnalysisReport

__all__ = ["RECV_OPS", "SEND_OPS", "Messages"]

SEND_OPS = frozenset(("send", "isend", "send_object_list"))
RECV_OPS = frozenset(("recv", "irecv", "recv_object_list"))

Key = tuple[str, str, int, int, int, int]  # trace id, group key, src, dst, tag, p2p_seq


class _Open:
    __slots__ = ("first", "recv", "send")

    def __init__(self, first: int) -> None:
        self.first = first
        self.send: SpanRecord | None = None
        self.recv: SpanRecord | None = None


class Messages:
    """Messages being paired; ``add`` each analysed op span, ``expire`` as the input moves."""

    def __init__(self, judge: EdgeJudge, report: AnalysisReport, horizon: int, keep: int) -> None:
        self.judge = judge
        self.report = report
        self.counts = report.p2p
        self.horizon = horizon
        self.keep = keep
        self._open: OrderedDict[Key, _Open] = OrderedDict()  # a queue: see memory.TraceMemory

    def __len__(self) -> int:
        return len(self._open)

    def add(self, s: SpanRecord) -> bool:
        """Take ``s`` if it is a send or a receive span."""
        t = s.torch
        if t is None or t.group is None:
            return False
        is_send = t.op in SEND_OPS
        if not is_send and t.op not in RECV_OPS:
            return False
        if t.src is None or t.dst is None or t.p2p_seq is None:  # an any-source receive that never completed
            self.counts.total += 1
            self.counts.unmatched_recvs += 1
            if t.completion == PENDING:
                self.report.hang_facts.message(PENDING_RECV, s)
            return True
        k = (s.trace_id, t.group, t.src, t.dst, t.tag, t.p2p_seq)
        open_ = self._open.get(k)
        if open_ is not None:
            taken = open_.send if is_send else open_.recv
            if taken is not None and taken.span_id != s.span_id:
                self.counts.conflicts += 1
            if taken is not None:
                return True
            if s.pos - open_.first > self.horizon:  # too far from the other side: a message of its own
                del self._open[k]
                self._finish(open_)
                open_ = None
        if open_ is None:
            open_ = self._open[k] = _Open(s.pos)
        if is_send:
            open_.send = s
        else:
            open_.recv = s
        if open_.send is not None and open_.recv is not None:
            del self._open[k]
            self._finish(open_)
        return True

    def expire(self, limit: int | None) -> None:
        """Decide messages whose first side lies before ``limit`` (all of them with None)."""
        queue = self._open
        while queue:
            k = next(iter(queue))
            if limit is not None and queue[k].first >= limit:
                return
            self._finish(queue.pop(k))

    def _finish(self, open_: _Open) -> None:
        c = self.counts
        c.total += 1
        send, recv = open_.send, open_.recv
        if recv is not None and recv.torch is not None and recv.torch.ambiguous:
            c.ambiguous += 1
            if recv.torch.completion == PENDING:  # still listed (marked ambiguous): a receive that waits
                self.report.hang_facts.message(PENDING_RECV, recv)
            return
        if send is not None and recv is not None:
            c.matched += 1
        elif recv is None:
            c.unmatched_sends += 1
            assert send is not None
            self.report.hang_facts.message(UNMATCHED_SEND, send)
            return
        else:
            c.unmatched_recvs += 1
        t = recv.torch
        assert t is not None
        if t.completion in NOT_COMPLETED:
            c.not_completed += 1
            if t.completion == PENDING:
                self.report.hang_facts.message(PENDING_RECV, recv)
            return
        kept = self.report.hops_kept
        record = self.judge.p2p(send, recv, len(kept) < self.keep)
        if record is not None:
            kept.append(record)
