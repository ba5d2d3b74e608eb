"""A collective's claim decided as a whole equals the n x n pairwise decisions it stands for, at O(n) cost
(spec/analysis.md §2.7): checked against brute force on random collectives, and by counting the physics
calls and the memory of a 2,048-rank all-reduce."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from tempotrace_sdk.analysis import claims
from tempotrace_sdk.analysis.claims import ALL, ROOT_END, ROOT_START, decide_claim, required
from tempotrace_sdk.analysis.claims_absolute import absolute_physics
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


@pytest.mark.parametrize(("domains", "arrays"), [(False, True), (False, False), (True, False)],
                         ids=["arrays", "one-pass", "host-domains"])
def test_a_2048_rank_all_reduce_costs_o_n_decisions_and_no_pair_objects(monkeypatch: pytest.MonkeyPatch,
                                                                        domains: bool, arrays: bool) -> None:
    """The issue's bound: 2,048 ranks must not cost ~4 million pairwise decisions or edge objects: as arrays
    (no stamp in a host clock domain: no decision one at a time), on the one-pass path (below ARRAYS_FROM
    members) and on the grouped one (8 ranks a host, one domain each)."""
    from tempotrace_sdk.analysis import claims_absolute
    from tempotrace_sdk.analysis.clockdomain import Domain

    n = 2048

    def stamp(r: int, ns: int, lts: int) -> Stamp:
        return Stamp(T0 + ns, 220, "OK", lts, domain=Domain(f"h{r // 8}", 0, 10, 100) if domains else None)

    members = [SpanRecord(f"{1:032x}", f"{r + 1:016x}", "", "torch.all_reduce", 1, f"h{r // 8}",
                          stamp(r, r * 10, 5), stamp(r, 10 * n + 1000 + r, 9), 0, 0,
                          rank=r, torch=TorchOp("all_reduce", f"0-{n - 1}", r, 0)) for r in range(n)]
    calls = 0

    def counted(real: Any) -> Any:
        def count(*args: Any) -> int:
            nonlocal calls
            calls += 1
            return int(real(*args))
        return count

    if not arrays:
        monkeypatch.setattr(claims, "ARRAYS_FROM", n + 1)
    monkeypatch.setattr(claims, "physics_gap", counted(physics_gap))
    monkeypatch.setattr(claims_absolute, "interval_gap", counted(claims_absolute.interval_gap))
    starts, ends = required(members, list(range(n)), ALL, None)
    tracemalloc.start()
    claim = decide_claim(members, list(range(n)), starts, ends)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert claim is not None and claim.pairs == n * (n - 1)
    assert claim.decision.method is Method.PHYSICS and claim.decision.relation is Relation.BEFORE
    assert (calls == 0) if arrays else (n <= calls <= 3 * n)
    assert peak < 4 << 20  # a few small dicts and lists per member; 4 million pairs would be ~1 GB


def _plain_member(rng: random.Random, rank: int) -> SpanRecord:
    """A member whose stamps name no host clock domain, drawn from few values so ties are common: usable,
    UNKNOWN, saturated, degraded, or without a reading (an end only)."""
    def stamp(base: int) -> Stamp:
        kind = rng.choice(("ok", "ok", "ok", "ok", "unknown", "saturated", "degraded", "none"))
        ptp = T0 + base + rng.choice((0, 100, 200, 400))
        u = rng.choice((0, 50, 100, 300))
        if kind == "none":
            return Stamp(None)
        if kind == "saturated":
            return Stamp(ptp, 65535, "OK")
        return Stamp(ptp, u, "UNKNOWN" if kind == "unknown" else "OK", degraded=kind == "degraded")
    far = rng.choice((0, 0, 0, 200_000))  # beyond a saturated bound from the others
    start = stamp(far + rng.choice((0, 300, 600)))
    end = stamp(far + rng.choice((200, 500, 900)))
    span_id = f"{rank + 1:016x}"
    return SpanRecord(f"{1:032x}", span_id, "", "torch.all_reduce", 1, f"h{rank}", start, end, 0, 0, rank=rank,
                      torch=TorchOp("all_reduce", "0-7", rank, 0))


def _drawn_claims(rng: random.Random, draws: int, most: int) -> Iterator[tuple[list[SpanRecord], list[int], list[int]]]:
    """Claims of up to ``most`` plain members, (members, starts, ends) as decide_claim passes them to the physics:
    only members with a partner on the other side."""
    for _ in range(draws):
        n = rng.randrange(1, most + 1)
        members = [_plain_member(rng, r) for r in range(n)]
        starts = sorted(rng.sample(range(n), rng.randrange(1, n + 1)))
        ends = sorted(rng.sample(range(n), rng.randrange(1, n + 1)))
        starts, ends = ([i for i in starts if len(ends) > 1 or ends[0] != i],
                        [j for j in ends if len(starts) > 1 or starts[0] != j])
        if starts and ends:
            yield members, starts, ends


def test_the_one_pass_physics_without_domains_equals_the_grouped_one() -> None:
    """claims_absolute.absolute_physics is claims' grouped physics for stamps without a host clock domain:
    the same decision, its gap, and the same witnesses in the same order (the first worst one is tallied)."""
    rng = random.Random("absolute-physics")
    outcomes: set[Any] = set()
    for members, starts, ends in _drawn_claims(rng, 4000, 6):
        extra = rng.choice((0, 0, 150))
        end_stamps = [members[j].end or Stamp(None) for j in ends]
        want = claims._grouped_physics(members, starts, ends, extra)
        got = absolute_physics(starts, ends, [members[i].start for i in starts], end_stamps, extra)
        assert got == want, (members, starts, ends, extra)
        outcomes.add(None if want is None else (want[0].relation, len(want[1]) > 1))
    assert outcomes == {None, (Relation.BEFORE, False), (Relation.AFTER, False), (Relation.AFTER, True)}


def test_a_claim_with_a_domain_takes_the_grouped_physics(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-pass physics is only for stamps without domains: one stamp in a domain sends the claim to the
    grouped path (where readings of one domain are compared by their difference)."""
    from tempotrace_sdk.analysis.clockdomain import Domain

    rng = random.Random("domain-dispatch")
    members = [_plain_member(rng, r) for r in range(3)]
    in_domain = Stamp(T0 + 5, 50, "OK", domain=Domain("h1/CLOCK_TAI", 0, 10, 100))
    members[1] = msgspec.structs.replace(members[1], start=in_domain)
    calls: list[str] = []
    monkeypatch.setattr(claims, "absolute_physics", lambda *a: calls.append("absolute"))
    monkeypatch.setattr(claims, "_grouped_physics", lambda *a: calls.append("grouped"))
    claims._physics(members, [0, 1, 2], [0, 1, 2], 0)
    claims._physics([members[0], members[2]], [0, 1], [0, 1], 0)
    assert calls == ["grouped", "absolute"]


def _large_member(rng: random.Random, rank: int, ordered: bool, usable: bool, honest: bool) -> SpanRecord:
    """A member of a large collective: ``ordered``, its start before every end by more than the bounds unless
    it lies (1 in 40, never when ``honest``) or its stamp is unusable (never when ``usable``); else drawn from
    few values (ties). OpenTelemetry times drawn from few values too (the naive order falls back to them where
    a reading is missing)."""
    def stamp(at: int, u: int) -> Stamp:
        kinds = ("ok", "unknown", "saturated", "degraded", "none")
        kind = "ok" if usable else rng.choices(kinds, (60, 1, 1, 1, 1))[0]
        if kind == "none":
            return Stamp(None)
        return Stamp(T0 + at, 65535 if kind == "saturated" else u, "UNKNOWN" if kind == "unknown" else "OK",
                     degraded=kind == "degraded")
    if ordered:
        lie = not honest and rng.random() < 1 / 40
        start = stamp(rng.randrange(0, 300) + (rng.choice((400, 5000)) if lie else 0), rng.choice((20, 50)))
        end = stamp(2000 + rng.randrange(0, 300), rng.choice((20, 50)))
    else:
        far = rng.choice((0,) * 30 + (200_000,))  # beyond a saturated bound from the others
        start = stamp(far + rng.choice((0, 100, 200, 400)), rng.choice((0, 50, 100)))
        end = stamp(far + rng.choice((200, 300, 500)), rng.choice((0, 50, 100)))
    otel = rng.choice((0, 10, 20))
    return SpanRecord(f"{1:032x}", f"{rank + 1:016x}", "", "torch.all_reduce", 1, f"h{rank}", start, end, otel,
                      otel + rng.choice((0, 5, 30)), rank=rank, torch=TorchOp("all_reduce", "0-4095", rank, 0))


def test_large_claims_as_arrays_equal_the_list_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    """claims_arrays (from ARRAYS_FROM members) answers as the list forms do: physics' decision, gap and witnesses
    in order, the naive order, and the arrival order with its certainty, on drawn claims of every shape."""
    from tempotrace_sdk.analysis import claims_arrays

    rng = random.Random("claims-arrays")
    seen: set[Any] = set()
    for _ in range(400):
        n = rng.choice((claims_arrays.ARRAYS_FROM, 70, 130))
        ordered = rng.random() < 0.7
        usable, honest = ordered and rng.random() < 0.6, rng.random() < 0.5
        clean = usable and honest
        ranks = sorted(rng.sample(range(4096), n))
        members = [_large_member(rng, r, ordered, usable, honest) for r in ranks]
        shape = rng.choice((ALL, ALL, ROOT_START, ROOT_END))
        starts, ends = required(members, ranks, shape, rng.choice(ranks))
        starts, ends = ([i for i in starts if len(ends) > 1 or ends[0] != i],
                        [j for j in ends if len(starts) > 1 or starts[0] != j])
        if not starts or not ends:
            continue
        if clean and rng.random() < 0.3:  # one end touching the latest start interval of another member: silent
            his = {i: (members[i].start.ptp_ns or 0) + members[i].start.uncertainty_ns for i in starts}
            reach = max(starts, key=his.__getitem__)
            hi = his[reach]
            j = next(j for j in ends if j != reach)
            members[j] = msgspec.structs.replace(members[j], end=Stamp(hi + 20, 20, "OK"))
        extra = rng.choice((0, 0, 150))
        start_stamps = [members[i].start for i in starts]
        end_stamps = [members[j].end or Stamp(None) for j in ends]
        got = (claims_arrays.physics_arrays(starts, ends, start_stamps, end_stamps, extra),
               claims_arrays.naive_arrays(members, starts, ends), claims_arrays.arrival_arrays(members, ranks, extra))
        with monkeypatch.context() as m:
            m.setattr(claims, "ARRAYS_FROM", 1 << 30)
            want = (absolute_physics(starts, ends, start_stamps, end_stamps, extra),
                    claims._naive(members, starts, ends), claims.arrival(members, ranks, extra))
        assert got == want, (shape, ordered, extra)
        physics = want[0]
        seen.add((None if physics is None else physics[0].relation, want[1], want[2][1]))
    relations = {r for r, _, _ in seen}
    assert relations == {None, Relation.BEFORE, Relation.AFTER}, seen
    assert {naive for _, naive, _ in seen} == {-1, 0, 1} and {c for _, _, c in seen} == {True, False}


def test_large_claims_with_times_past_2_62_are_declined() -> None:
    """int64 sums could overflow past 2^62 ns: the arrays decline and the list forms answer."""
    from tempotrace_sdk.analysis import claims_arrays
    from tempotrace_sdk.analysis.claims_arrays import Declined

    late = 1 << 62
    members = [SpanRecord(f"{1:032x}", f"{r + 1:016x}", "", "torch.all_reduce", 1, "h", Stamp(late + r, 20, "OK"),
                          Stamp(late + 10_000 + r, 20, "OK"), late, late + 1, rank=r,
                          torch=TorchOp("all_reduce", "0-99", r, 0)) for r in range(100)]
    ranks = list(range(100))
    stamps = [m.start for m in members], [m.end or Stamp(None) for m in members]
    for call in (lambda: claims_arrays.physics_arrays(ranks, ranks, *stamps, 0),
                 lambda: claims_arrays.naive_arrays(members, ranks, ranks),
                 lambda: claims_arrays.arrival_arrays(members, ranks, 0)):
        with pytest.raises(Declined):
            call()
    claim = decide_claim(members, ranks, ranks, ranks)
    assert claim is not None and claim.decision.relation is Relation.BEFORE and claim.naive == -1
    assert claims.arrival(members, ranks) == (ranks, False)


def test_the_naive_order_of_a_large_claim_pairs_the_latest_starter_with_the_next_latest() -> None:
    """The latest start's own end is compared with the next latest start: here member 0 starts last (100), the
    next latest is member 63 (63), and member 0's end at 62 reads before it: an inversion (1)."""
    from tempotrace_sdk.analysis import claims_arrays

    n = 64

    def member(r: int) -> SpanRecord:
        start, end = Stamp(T0 + (100 if r == 0 else r), 0, "OK"), Stamp(T0 + (62 if r == 0 else 1000), 0, "OK")
        return SpanRecord(f"{1:032x}", f"{r + 1:016x}", "", "torch.all_reduce", 1, "h", start, end, 0, 0, rank=r,
                          torch=TorchOp("all_reduce", "0-63", r, 0))
    members = [member(r) for r in range(n)]
    ranks = list(range(n))
    assert claims_arrays.naive_arrays(members, ranks, ranks) == 1


def test_large_claims_whose_sums_could_overflow_int64_are_declined() -> None:
    """Readings 2^62 apart and a topology extra near 2^62 (a broken topology file): the sums would wrap in int64,
    so the arrays decline and the claim is decided by the list forms (physics silent here, not BEFORE)."""
    from tempotrace_sdk.analysis import claims_arrays
    from tempotrace_sdk.analysis.claims_arrays import Declined

    n = 64
    members = [SpanRecord(f"{1:032x}", f"{r + 1:016x}", "", "torch.all_reduce", 1, "h",
                          Stamp((1 << 62) - 1, 65534, "OK"), Stamp(0, 65534, "OK"), 0, 0, rank=r,
                          torch=TorchOp("all_reduce", "0-63", r, 0)) for r in range(n)]
    ranks, extra = list(range(n)), (1 << 62) - 1
    stamps = [m.start for m in members], [m.end or Stamp(None) for m in members]
    with pytest.raises(Declined):
        claims_arrays.physics_arrays(ranks, ranks, *stamps, extra)
    with pytest.raises(Declined):
        claims_arrays.arrival_arrays(members, ranks, extra)
    claim = decide_claim(members, ranks, ranks, ranks, extra)
    assert claim is not None and claim.decision.method is not Method.PHYSICS
    assert claims._physics(members, ranks, ranks, extra) == absolute_physics(ranks, ranks, *stamps, extra) is None
    # a negative reading (no input holds one; a Stamp may): declined too, not wrapped
    negative = [msgspec.structs.replace(m, start=Stamp(-(1 << 62) - 5, 20, "OK")) for m in members]
    with pytest.raises(Declined):
        claims_arrays.physics_arrays(ranks, ranks, [m.start for m in negative], stamps[1], 0)


def test_the_c_pass_equals_the_python_pass() -> None:
    """claim_physics (native/columns/tt_claimphysics.c) answers as absolute_physics's Python pass on drawn claims,
    witnesses in order, and near the int64 edges (exact sums); it declines, for Python to answer, what it does not
    take: more than 64 stamps a side, a float reading, an extra past int64 or not an int."""
    columns = pytest.importorskip("tempotrace_sdk._columns", reason="the native columns module is not built")
    rng = random.Random("claim-physics-c")
    answered = 0
    for members, starts, ends in _drawn_claims(rng, 4000, 8):
        extra = rng.choice((0, 0, 150, 2**62, 2**63 - 1))
        start_stamps = [members[i].start for i in starts]
        end_stamps = [members[j].end or Stamp(None) for j in ends]
        if rng.randrange(8) == 0:  # readings at the int64 edges: sums past 64 bits
            edge = rng.choice((2**63 - 1, -(2**63), 2**63 - 70_000))
            start_stamps = [msgspec.structs.replace(s, ptp_ns=edge) if s.ptp_ns is not None else s
                            for s in start_stamps]
        args = (starts, ends, start_stamps, end_stamps, extra)
        assert columns.claim_physics(*args, Stamp) is not None
        assert absolute_physics(*args) == absolute_physics(*args, native=False), args
        answered += 1
    assert answered > 3000
    one = [Stamp(T0, 10, "OK")]
    many = [Stamp(T0 + k, 10, "OK") for k in range(65)]
    for declined in ((list(range(65)), [0], many, one, 0), ([0], [1], [Stamp(1.5, 10, "OK")], one, 0),  # type: ignore[arg-type]
                     ([0], [1], one, one, 2**63), ([0], [1], one, one, -1), ([0], [1], one, one, 1.0)):
        assert columns.claim_physics(*declined, Stamp) is None
        assert absolute_physics(*declined) == absolute_physics(*declined, native=False)  # type: ignore[arg-type]


def test_the_c_pass_never_asks_a_flag_that_could_change_its_lists() -> None:
    """A degraded flag whose __bool__ empties the starts being read (a crash before the fix): declined, and the
    Python pass answers."""
    columns = pytest.importorskip("tempotrace_sdk._columns", reason="the native columns module is not built")
    starts = [0, 1, 2]

    class Emptying:
        def __bool__(self) -> bool:
            starts.clear()
            return False

    start_stamps = [Stamp(100, 5, "OK", None, Emptying()), Stamp(100, 5, "OK"), Stamp(100, 5, "OK")]  # type: ignore[arg-type]
    assert columns.claim_physics(starts, [0, 1, 2], start_stamps, [Stamp(200, 5, "OK")] * 3, 0, Stamp) is None
    assert starts == [0, 1, 2]
    assert columns.UNCERTAINTY_SATURATED == 65_535
