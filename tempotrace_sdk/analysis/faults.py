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

State is per host and per host pair: bounded by the number of hosts, not by
the number of spans.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FaultLedger", "HostFault", "add_bulk_physics"]


@dataclass
class _HostStats:
    edges: int = 0
    max_claimed_ns: int = 0


@dataclass(frozen=True)
class HostFault:
    """The evidence against one host."""

    host: str
    verdict: str  #: "lying" (explains violations with several peers) or "suspect" (cannot be told from its peer)
    kind: str  #: "physics" (bound broken) or "lamport" (counter went backwards)
    violations: int  #: violated known edges this host is blamed for
    edges: int  #: known edges that involve this host
    peers: tuple[str, ...]  #: hosts on the other side of the violations
    max_excess_ns: int  #: how far beyond the claimed bounds, at worst
    mean_excess_ns: float
    claimed_bound_ns: int  #: the largest bound this host claimed on a violated edge

    @property
    def rate(self) -> float:
        return self.violations / self.edges if self.edges else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "verdict": self.verdict,
            "kind": self.kind,
            "violations": self.violations,
            "edges": self.edges,
            "rate": self.rate,
            "peers": len(self.peers),
            "peer_sample": list(self.peers[:10]),
            "max_excess_ns": self.max_excess_ns,
            "mean_excess_ns": self.mean_excess_ns,
            "claimed_bound_ns": self.claimed_bound_ns,
        }


@dataclass
class FaultLedger:
    """Accumulates violations on known edges and attributes them to hosts."""

    hosts: dict[str, _HostStats] = field(default_factory=dict)
    physics_pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    lamport_pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    pair_excess: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def _stats(self, host: str) -> _HostStats:
        st = self.hosts.get(host)
        if st is None:
            st = self.hosts[host] = _HostStats()
        return st

    def edge(self, host_a: str, host_b: str) -> None:
        """Count a known edge between two hosts (whatever its outcome)."""
        self._stats(host_a).edges += 1
        if host_b != host_a:
            self._stats(host_b).edges += 1

    def physics_violation(self, host_a: str, host_b: str, excess_ns: int, u_a: int, u_b: int) -> None:
        """A known edge a -> b whose intervals are reversed by ``excess_ns`` beyond both bounds."""
        key = (host_a, host_b) if host_a <= host_b else (host_b, host_a)
        self.physics_pairs[key] += 1
        mx, total = self.pair_excess.get(key, (0, 0))
        self.pair_excess[key] = (max(mx, excess_ns), total + excess_ns)
        for host, u in ((host_a, u_a), (host_b, u_b)):
            st = self._stats(host)
            st.max_claimed_ns = max(st.max_claimed_ns, u)

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
            tied = [h for h in peers if h != best and score(h) == score(best) and set(peers[h]) == {best}]
            verdict = "suspect" if tied and peers[best] == set(tied) else "lying"
            blamed = [best, *tied] if verdict == "suspect" else [best]
            for host in blamed:
                out.append(self._fault(host, kind, verdict, mine, peers[host]))
            for k in mine:
                del remaining[k]
        return out

    def _fault(self, host: str, kind: str, verdict: str, keys: list[tuple[str, str]], peers: set[str]) -> HostFault:
        st = self._stats(host)
        table = self.physics_pairs if kind == "physics" else self.lamport_pairs
        n = sum(table[k] for k in keys)
        if kind == "physics":
            mx = max(self.pair_excess[k][0] for k in keys)
            mean = sum(self.pair_excess[k][1] for k in keys) / n
        else:
            mx, mean = 0, 0.0
        return HostFault(host, verdict, kind, n, st.edges, tuple(sorted(peers)), mx, mean, st.max_claimed_ns)


def add_bulk_physics(ledger: FaultLedger, host_a: str, host_b: str, count: int, max_excess_ns: int,
                     sum_excess_ns: int, u_a: int, u_b: int) -> None:
    """Record ``count`` physics violations between two hosts at once (the simulator's vectorised path)."""
    key = (host_a, host_b) if host_a <= host_b else (host_b, host_a)
    ledger.physics_pairs[key] += count
    mx, total = ledger.pair_excess.get(key, (0, 0))
    ledger.pair_excess[key] = (max(mx, max_excess_ns), total + sum_excess_ns)
    for host, u in ((host_a, u_a), (host_b, u_b)):
        st = ledger._stats(host)
        st.max_claimed_ns = max(st.max_claimed_ns, u)
