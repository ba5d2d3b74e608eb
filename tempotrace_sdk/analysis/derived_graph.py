"""The happens-before structure of one run of a trace, and the cycles in it (spec/analysis.md §2.8).

Nodes are the events the trace's matched messages and collectives name: a send span's start, a receive's
completion, a collective member's required start or end, and one virtual node per collective claim (every
required start -> the claim -> every required end: a claim of n members costs 2n + 1 nodes, never n^2
links). Each event is named by at most one link (it belongs to one span, a span to one message or one
collective), so a node has at most one cross link in and one out, held in two arrays.

Program order is not stored as links: each process (its clock key, host and rank) keeps the Lamport values
of its nodes, and sorting them gives the process's order, one counter strictly increasing per process. A
node without a Lamport value (none recorded, or the saturated 2^63-1 that orders nothing) has no place in
its process's order; a process whose values repeat (two processes under one key, or a broken counter) is
given no order at all: either way the structure only loses links, and cannot gain a false cycle.

``cycles`` replays the run: each process advances through its order while the cross link into its next
node (a message's send, a claim's last required start) is done. An honest trace replays to the end (it is
the order the job ran in; the native columns module replays it in C where built). What cannot be replayed lies
on or after a cycle; only then are its strongly connected components computed (iteratively, O(nodes +
links)).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise

from ..wire.layout import LTS_MAX
from .events import Stamp

try:
    from .. import _columns
except ImportError:  # not built: the replay in Python alone
    _columns = None

__all__ = ["MAX_NODES", "Graph", "on_cycle", "strongly_connected"]

#: Nodes one run may hold (about 40 bytes each: 4M nodes, some 160 MB, a step of 2M op spans, e.g. 2,048
#: ranks x 1,000 collectives). A run past it links nothing more (derived.py leaves those edges undecided).
MAX_NODES = 1 << 22

_NONE = -1


class Graph:
    """Nodes, their cross links and each process's Lamport values, for one run."""

    __slots__ = ("claim_in", "claim_out", "orders", "pred", "succ")

    def __init__(self) -> None:
        self.pred = array("q")  # node -> the node its cross link comes from, or -1
        self.succ = array("q")  # node -> the node its cross link goes to, or -1
        self.orders: dict[str, tuple[array[int], array[int]]] = {}  # clock key -> (Lamport values, nodes)
        self.claim_in: dict[int, int] = {}  # claim node -> its required starts
        self.claim_out: dict[int, array[int]] = {}  # claim node -> its required ends

    def __len__(self) -> int:
        return len(self.pred)

    def room(self, nodes: int) -> bool:
        return len(self.pred) + nodes <= MAX_NODES

    def event(self, clock: str, stamp: Stamp | None) -> int:
        """A node for one event of process ``clock``, placed in its program order by the stamp's Lamport
        value when it has a usable one."""
        n = len(self.pred)
        self.pred.append(_NONE)
        self.succ.append(_NONE)
        lts = stamp.lts if stamp is not None else None
        if lts is not None and lts != LTS_MAX:
            order = self.orders.get(clock)
            if order is None:
                order = self.orders[clock] = (array("q"), array("q"))
            order[0].append(lts)
            order[1].append(n)
        return n

    def message(self, send: int, recv: int) -> None:
        """send -> recv: a matched message's send start before its receive's completion."""
        self.succ[send] = recv
        self.pred[recv] = send

    def claim(self, starts: Sequence[tuple[str, Stamp | None]], ends: Sequence[tuple[str, Stamp | None]]) -> int:
        """A claim node with its required starts and ends, (clock, stamp) each; returns the claim node. Its
        starts are the nodes that follow it, in order, then its ends."""
        v = len(self.pred)
        self.pred.append(_NONE)
        self.succ.append(_NONE)
        self.claim_in[v] = len(starts)
        for clock, stamp in starts:
            self.succ[self.event(clock, stamp)] = v
        out = self.claim_out[v] = array("q")
        for clock, stamp in ends:
            e = self.event(clock, stamp)
            self.pred[e] = v
            out.append(e)
        return v

    # -- the cycle check ---------------------------------------------------------------------------------
    def _program_orders(self) -> list[Sequence[int]]:
        """Each process's nodes in its Lamport order; every other node (no value, a claim node aside) as an
        order of its own."""
        placed = bytearray(len(self.pred))
        orders: list[Sequence[int]] = []
        for lts, nodes in self.orders.values():
            if len(set(lts)) != len(lts):  # a value twice: not one honest counter, no order
                continue
            order = [nodes[i] for i in sorted(range(len(lts)), key=lts.__getitem__)]
            orders.append(order)
            for n in order:
                placed[n] = 1
        for v in self.claim_in:
            placed[v] = 1
        orders.extend((n,) for n, p in enumerate(placed) if not p)
        return orders

    def cycles(self) -> dict[int, int] | None:
        """None when the structure has no cycle; else each node that lies on or after one -> its strongly
        connected component (a node is on a cycle when its component has another node)."""
        pred, succ = self.pred, self.succ
        if _columns is not None and _columns.replays(pred, succ, list(self.orders.values()), self.claim_in):
            return None  # (the common case, an honest run, replayed in C: native/columns/tt_replay.c)
        done, orders, at = self.replay()
        if all(at[k] == len(order) for k, order in enumerate(orders)):
            return None
        # What the replay could not reach: the rest of each stopped order, and the claims not done.
        adj: dict[int, list[int]] = {}
        for k, order in enumerate(orders):
            rest = order[at[k]:]
            for a, b in pairwise(rest):
                adj.setdefault(a, []).append(b)
            for n in rest:
                s = succ[n]
                if s != _NONE and not done[s]:
                    adj.setdefault(n, []).append(s)
        for v, out in self.claim_out.items():
            if not done[v]:
                adj[v] = [e for e in out if not done[e]]
        stuck = [n for n, d in enumerate(done) if not d]
        return strongly_connected(stuck, adj)

    def replay(self) -> tuple[bytearray, list[Sequence[int]], list[int]]:
        """Each process advanced while the cross link into its next node is done (module doc): the nodes done,
        the orders and how far each got."""
        pred, succ = self.pred, self.succ
        left = dict(self.claim_in)  # claim node -> required starts not yet done
        done = bytearray(len(pred))
        for v, starts in left.items():
            if not starts:
                done[v] = 1
        orders = self._program_orders()
        at = [0] * len(orders)
        waiting: dict[int, list[int]] = {}  # node -> the orders stopped until it is done
        work = list(range(len(orders)))
        while work:
            k = work.pop()
            order = orders[k]
            i, m = at[k], len(order)
            while i < m:
                n = order[i]
                p = pred[n]
                if p != _NONE and not done[p]:
                    waiting.setdefault(p, []).append(k)
                    break
                done[n] = 1
                i += 1
                woken = waiting.pop(n, None)
                if woken:
                    work.extend(woken)
                s = succ[n]
                if s != _NONE and s in left:
                    left[s] -= 1
                    if not left[s]:
                        done[s] = 1
                        woken = waiting.pop(s, None)
                        if woken:
                            work.extend(woken)
            at[k] = i
        return done, orders, at


def strongly_connected(nodes: Iterable[int], adj: dict[int, list[int]]) -> dict[int, int]:
    """Tarjan's strongly connected components, iteratively: node -> component number."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    comp: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    count = 0
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, 0)]
        while work:
            v, i = work[-1]
            nbrs = adj.get(v, ())
            if i < len(nbrs):
                work[-1] = (v, i + 1)
                w = nbrs[i]
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp[w] = count
                    if w == v:
                        break
                count += 1
    return comp


def on_cycle(comp: dict[int, int], sizes: Counter[int], node: int) -> bool:
    """Does ``node`` lie on a cycle (its component, from ``cycles``, has another node)?"""
    c = comp.get(node)
    return c is not None and sizes[c] > 1
