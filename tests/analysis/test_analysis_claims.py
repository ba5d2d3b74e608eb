"""A collective's claim decided as a whole equals the n x n pairwise decisions it stands for, at O(n) cost
(spec/analysis.md §2.7): checked against brute force on random collectives, and by counting the physics
calls and the memory of a 2,048-rank all-reduce."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

import pytest

from tempotrace_sdk.analysis import claims
from tempotrace_sdk.analysis.claims import ALL, ROOT_END, ROOT_START, decide_claim, required
from tempotrace_sdk.analysis.events import SpanRecord, Stamp, TorchOp
from tempotrace_sdk.analysis.order import Method, Relation, physics_gap, span_mask

T0 = 1_800_000_000_000_000_000


def _member(rng: random.Random, rank: int) -> SpanRecord:
    """A member with a random interval on a clock that may be usable or not, counters, a merge or not."""
    start = rng.randrange(0, 20_000)
    end = start + rng.randrange(0, 20_000)
    u = rng.choice((50, 220, 5_000, 65535))
    quality = rng.choice(("OK", "OK", "OK", "UNKNOWN"))
    lts = rng.randrange(1, 40)
    end_lts = lts + rng.randrange(-10, 30)
    span_id = f"{rank + 1:016x}"
    merged = rng.random() < 0.7
    missing = tuple(r for r in range(8) if r != rank and rng.random() < 0.1) if merged else ()
    sketch = None
    if merged and rng.random() < 0.5:
        sketch = 0
        for other in range(8):
            if other not in missing and rng.random() < 0.9:
                sketch |= span_mask(f"{other + 1:016x}")
    torch = TorchOp("all_reduce", "0-7", rank, 0, completion="return", recv_lts=end_lts - 1 if merged else None,
                    recv_missing=missing, recv_sketch=sketch)
    return SpanRecord(f"{1:032x}", span_id, "", "torch.all_reduce", 1, f"h{rank}",
                      Stamp(T0 + start, u, quality, lts), Stamp(T0 + end, u, quality, end_lts), 0, 0,
                      span_mask(span_id), rank, sends=((lts + 1, None, None),) if rng.random() < 0.9 else (),
                      torch=torch)


def _brute(members: list[SpanRecord], starts: list[int], ends: list[int]) -> dict[str, Any]:
    """The claim by deciding every pair: physics first, then Lamport on merged pairs, then SVC."""
    pairs = [(i, j) for i in starts for j in ends if i != j]
    gaps = {p: physics_gap(members[p[0]].start, members[p[1]].end or Stamp(None)) for p in pairs}  # type: ignore[arg-type]
    out: dict[str, Any] = {"pairs": len(pairs)}
    if not pairs:
        return out
    reversed_ = [p for p, g in gaps.items() if g < 0]
    if reversed_:
        return out | {"method": Method.PHYSICS, "relation": Relation.AFTER, "violated": set(reversed_),
                      "gap": max(-gaps[p] for p in reversed_)}
    if all(g > 0 for g in gaps.values()):
        return out | {"method": Method.PHYSICS, "relation": Relation.BEFORE, "gap": min(gaps.values())}

    def covered(i: int, j: int) -> bool:
        t = members[j].torch
        assert t is not None
        return bool(t.recv_lts is not None and members[i].sends and members[i].rank not in t.recv_missing)

    lamport = {p: (members[p[0]].start.lts, members[p[1]].end.lts) for p in pairs if covered(*p)}  # type: ignore[union-attr]
    violated = {p for p, (a, b) in lamport.items() if a >= b}  # type: ignore[operator]
    if violated:
        return out | {"method": Method.LAMPORT, "violated": violated}
    sketch_ok = all(members[j].torch.recv_sketch is not None for _, j in pairs)  # type: ignore[union-attr]
    if sketch_ok:
        for i, j in pairs:
            m = span_mask(members[i].span_id)
            have = members[j].torch.recv_sketch | (members[j].sketch or 0)  # type: ignore[union-attr,operator]
            sketch_ok = sketch_ok and have & m == m
    if sketch_ok:
        return out | {"method": Method.SVC}
    if len(lamport) == len(pairs):
        return out | {"method": Method.LAMPORT, "relation": Relation.NOT_AFTER}
    return out | {"method": Method.UNDECIDED}


@pytest.mark.parametrize("shape", [ALL, ROOT_START, ROOT_END])
def test_the_claim_equals_every_pair_decided_one_by_one(shape: str) -> None:
    rng = random.Random(f"claims-{shape}")
    seen: set[Any] = set()
    for _ in range(1500):
        n = rng.randrange(1, 8)
        members = [_member(rng, r) for r in range(n)]
        ranks = list(range(n))
        starts, ends = required(members, ranks, shape, rng.randrange(0, n))
        claim = decide_claim(members, ranks, starts, ends)
        want = _brute(members, starts, ends)
        if not want["pairs"]:
            assert claim is None
            continue
        assert claim is not None and claim.pairs == want["pairs"]
        d = claim.decision
        seen.add((d.method, d.relation))
        if want["method"] is Method.SVC and d.method is Method.LAMPORT:  # the union bound left SVC no confidence
            assert d.relation is Relation.NOT_AFTER
            continue
        assert d.method is want["method"], (want, d)
        if "relation" in want:
            assert d.relation is want["relation"]
        if "gap" in want:
            assert d.gap_ns == want["gap"]
        if "violated" in want:
            violated = want["violated"]
            witnessed = {(i, j) for i, j, _ in claim.witnesses}
            assert witnessed <= violated  # every witness is a real violation ...
            assert {i for i, _ in violated} == {i for i, _ in witnessed}  # ... and names every violating start
            assert {j for _, j in violated} == {j for _, j in witnessed}  # ... and every violating end
    assert len(seen) >= 5, seen  # physics both ways, Lamport both ways, SVC, undecided


def test_a_2048_rank_all_reduce_costs_o_n_decisions_and_no_pair_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's bound: 2,048 ranks must not cost ~4 million pairwise decisions or edge objects."""
    n = 2048
    members = [SpanRecord(f"{1:032x}", f"{r + 1:016x}", "", "torch.all_reduce", 1, f"h{r}",
                          Stamp(T0 + r * 10, 220, "OK", 5), Stamp(T0 + 10 * n + 1000 + r, 220, "OK", 9), 0, 0,
                          rank=r, torch=TorchOp("all_reduce", f"0-{n - 1}", r, 0)) for r in range(n)]
    calls = 0

    def counted(*args: Any) -> int:
        nonlocal calls
        calls += 1
        return physics_gap(*args)

    monkeypatch.setattr(claims, "physics_gap", counted)
    starts, ends = required(members, list(range(n)), ALL, None)
    tracemalloc.start()
    claim = decide_claim(members, list(range(n)), starts, ends)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert claim is not None and claim.pairs == n * (n - 1)
    assert claim.decision.method is Method.PHYSICS and claim.decision.relation is Relation.BEFORE
    assert calls <= 3 * n
    assert peak < 4 << 20  # a few small dicts and lists per member; 4 million pairs would be ~1 GB
