"""Clock-fault evidence: which host broke its promise, by how much, how often
(spec/analysis.md §4).

A known causal edge a -> b whose stamps put b's whole interval before a's
(physics says AFTER) can only happen if at least one of the two clocks was
further off than it claimed. The edge alone cannot say which; the pattern
can. A liar shows up in violations with many different peers, each honest peer
only with the liar. Attribution is a greedy cover of the violated host pairs:
repeatedly take the host that explains violations with the most distinct
peers (then the most violations); a pair explained by neither side better
(one violated pair, nothing else) leaves both hosts "suspect".

The unit is a clock: a host, and a rank where spans carry ``tempotrace.rank``
(eight ranks on one node may read eight different clocks). Ledger keys are
``events.clock_id`` strings; a HostFault gives the host and the rank apart.
State is per clock and per clock pair: bounded by the number of clocks, not by
the number of spans.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .events import split_clock

__all__ = ["FaultLedger", "HostFault", "add_bulk_physics"]


@dataclass(frozen=True)
class HostFault:
    """The evidence against one clock (a host, or one rank's clock on it)."""

    host: str
    verdict: str  #: "lying" (explains violations with several peers) or "suspect" (cannot be told from its peer)
    kind: str  #: "physics" (bound broken) or "lamport" (counter went backwards)
    violations: int  #: violated known edges this host is blamed for
    edges: int  #: known edges that involve this host
    peers: tuple[str, ...]  #: the clocks on the other side of the violations (events.clock_id keys)
    max_excess_ns: int  #: how far beyond the claimed bounds, at worst
    mean_excess_ns: float
    claimed_bound_ns: int  #: the largest bound this host claimed on a violated edge
    rank: int | None = None  #: the rank whose clock this is, when spans carry one

    @property
    def rate(self) -> float:
        return self.violations / self.edges if self.edges else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "rank": self.rank,
            "verdict": self.verdict,
            "kind": self.kind,
            "violations": self.violations,
            "edges": self.edges,
            "rate": self.rate,
            "peers": len(self.peers),
            "peer_sample": [{"host": h, "rank": r} for h, r in map(split_clock, self.peers[:10])],
            "max_excess_ns": self.max_excess_ns,
            "mean_excess_ns": self.mean_excess_ns,
            "claimed_bound_ns": self.claimed_bound_ns,
        }


@dataclass
class FaultLedger:
    """Accumulates violations on known edges and attributes them to hosts."""

    #: known edges per clock (whatever their outcome), and the largest bound each claimed on a violated edge
    edges: dict[str, int] = field(default_factory=dict)
    claimed: dict[str, int] = field(default_factory=dict)
    physics_pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    lamport_pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    pair_excess: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def edge(self, clock_a: str, clock_b: str) -> None:
        """Count a known edge between two clocks (whatever its outcome)."""
        edges = self.edges
        edges[clock_a] = edges.get(clock_a, 0) + 1
        if clock_b != clock_a:
            edges[clock_b] = edges.get(clock_b, 0) + 1

    def claim(self, clock: str, bound_ns: int) -> None:
        if bound_ns > self.claimed.get(clock, -1):
            self.claimed[clock] = bound_ns

    def physics_violation(self, host_a: str, host_b: str, excess_ns: int, u_a: int, u_b: int) -> None:
        """A known edge a -> b whose intervals are reversed by ``excess_ns`` beyond both bounds."""
        key = (host_a, host_b) if host_a <= host_b else (host_b, host_a)
        self.physics_pairs[key] += 1
        mx, total = self.pair_excess.get(key, (0, 0))
        self.pair_excess[key] = (max(mx, excess_ns), total + excess_ns)
        self.claim(host_a, u_a)
        self.claim(host_b, u_b)

    def lamport_violation(self, host_a: str, host_b: str) -> None:
        """A known edge a -> b whose Lamport values do not increase."""
        key = (host_a, host_b) if host_a <= host_b else (host_b, host_a)
        self.lamport_pairs[key] += 1

    @property
    def total_physics(self) -> int:
        return sum(self.physics_pairs.values())

    @property
    def total_lamport(self) -> int:
        return sum(self.lamport_pairs.values())

    def attribute(self) -> list[HostFault]:
        """Blame hosts for the violations seen so far (greedy cover, module doc)."""
        out = self._cover(self.physics_pairs, "physics")
        out += self._cover(self.lamport_pairs, "lamport")
        return out

    def _cover(self, pairs: Counter[tuple[str, str]], kind: str) -> list[HostFault]:
        remaining = dict(pairs)
        out: list[HostFault] = []
        while remaining:
            peers: dict[str, set[str]] = {}
            counts: Counter[str] = Counter()
            for (h1, h2), n in remaining.items():
                peers.setdefault(h1, set()).add(h2)
                peers.setdefault(h2, set()).add(h1)
                counts[h1] += n
                if h2 != h1:
                    counts[h2] += n

            def score(h: str, peers: dict[str, set[str]] = peers, counts: Counter[str] = counts) -> tuple[int, int]:
                # A clock that went backwards against itself is its own evidence.
                return (len(peers[h]) + (10**9 if (h, h) in remaining else 0), counts[h])

            best = max(sorted(peers), key=score)
            mine = [k for k in remaining if best in k]
            tied = sorted(h for h in peers if h != best and score(h) == score(best) and set(peers[h]) == {best})
            verdict = "suspect" if tied and peers[best] == set(tied) else "lying"
            blamed = [best, *tied] if verdict == "suspect" else [best]
            for host in blamed:
                out.append(self._fault(host, kind, verdict, mine, peers[host]))
            for k in mine:
                del remaining[k]
        return out

    def _fault(self, host: str, kind: str, verdict: str, keys: list[tuple[str, str]], peers: set[str]) -> HostFault:
        table = self.physics_pairs if kind == "physics" else self.lamport_pairs
        n = sum(table[k] for k in keys)
        if kind == "physics":
            mx = max(self.pair_excess[k][0] for k in keys)
            mean = sum(self.pair_excess[k][1] for k in keys) / n
        else:
            mx, mean = 0, 0.0
        name, rank = split_clock(host)
        return HostFault(name, verdict, kind, n, self.edges.get(host, 0), tuple(sorted(peers)), mx, mean,
                         self.claimed.get(host, 0), rank)


def add_bulk_physics(ledger: FaultLedger, host_a: str, host_b: str, count: int, max_excess_ns: int,
                     sum_excess_ns: int, u_a: int, u_b: int) -> None:
    """Record ``count`` physics violations between two hosts at once (the simulator's vectorised path)."""
    key = (host_a, host_b) if host_a <= host_b else (host_b, host_a)
    ledger.physics_pairs[key] += count
    mx, total = ledger.pair_excess.get(key, (0, 0))
    ledger.pair_excess[key] = (max(mx, max_excess_ns), total + sum_excess_ns)
    ledger.claim(host_a, u_a)
    ledger.claim(host_b, u_b)
