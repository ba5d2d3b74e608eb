"""The derived order (spec/analysis.md §2.8): a torch job traced with nothing carried between ranks still has
its messages and collectives ordered, from the trace's own structure (program order on each rank plus the
matched pairs), as method ``derived``: counted apart from Lamport, never a recorded counter compared across
ranks, after physics and recorded evidence, and WRONG only where the structure leads round a cycle. Ground
truth: a simulated pipeline (pipegen.py) whose every event's true time is known."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempotrace_sdk.analysis import analyze, derived_graph
from tempotrace_sdk.analysis.dask_engine import analyze_dask
from tempotrace_sdk.analysis.derived_graph import Graph
from tempotrace_sdk.analysis.engine import Options
from tempotrace_sdk.analysis.events import Stamp
from tempotrace_sdk.analysis.inputs import expand
from tempotrace_sdk.analysis.merge import merge_reports
from tempotrace_sdk.wire.layout import LTS_MAX

from .otlpgen import span
from .pipegen import US, Pipeline
from .torchgen import op_span, p2p_span, write

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "spec" / "analysis-report.schema.json").read_text())
NTP = 65535  #: a saturated bound: physics never speaks


def _analyze(tmp_path: Path, job: Pipeline, name: str = "spans.jsonl", **kw: Any) -> dict[str, Any]:
    d = analyze(job.write(str(tmp_path / name)), keep=100_000, **kw).to_dict()
    jsonschema.validate(d, SCHEMA)
    return d


def _check_against_truth(job: Pipeline, d: dict[str, Any]) -> int:
    """Every kept message and collective decided by derived agrees with the true times; how many there were."""
    n = 0
    for rec in d["collectives"]:
        if rec["decision"]["method"] == "derived":
            n += 1
            members = {m["rank"]: m["span_id"] for m in rec["members"]}
            starts = [members[0]] if rec["claim"] == "root_start" else list(members.values())
            for s in starts:
                for e in members.values():
                    if s != e:
                        assert job.true_order((s, "start"), (e, "end")) < 0
    return n


def test_an_honest_pipeline_with_overlapping_bounds_is_ordered_by_derived(tmp_path: Path) -> None:
    """Physics is silent on every message and collective (the bounds, 60 µs, are wider than the latency) and
    nothing is carried: today's rules leave them undecided; derived orders all of them, 0 wrong."""
    job = Pipeline(ranks=4, steps=3)
    d = _analyze(tmp_path, job)
    e = d["edges"]
    p2p, coll = e["by_kind"]["p2p"], e["by_kind"]["collective"]
    assert (p2p, coll) == (3 * 3, 3 * 2) and d["p2p"]["matched"] == 9
    assert e["decided"]["derived"] == p2p + coll and e["decided"]["undecided"] == 0
    assert e["wrong_total"] == 0 and not d["faults"] and d["wrong_by_pair"] == []
    # Within a rank, physics (far apart) or its own counter (Lamport) decided: step span -> op, op -> step span.
    assert e["decided"]["lamport"] + e["decided"]["physics"] == e["by_kind"]["parent_child"] + e["by_kind"]["child_end"]
    assert d["summary"]["derived"] == p2p + coll
    assert d["collective_counts"]["decided"]["derived"] == coll
    assert d["derived"] == {"runs": 3, "links": p2p + coll, "cycles": 0, "beyond_limit": 0, "repeated": 0}
    assert _check_against_truth(job, d) == coll
    p2p_records = [h for h in analyze(str(tmp_path / "spans.jsonl"), keep=100).hops_kept if h["kind"] == "p2p"]
    assert {h["decision"]["method"] for h in p2p_records} == {"derived"}
    for h in p2p_records:
        assert job.true_order((h["send_span"], "start"), (h["recv_span"], "end")) < 0


def test_the_text_report_counts_derived_apart(tmp_path: Path) -> None:
    """§6: a line of its own between svc and undecided (2 messages and 2 claims here)."""
    text = analyze(Pipeline(ranks=3, steps=1, u=NTP).write(str(tmp_path / "t.jsonl"))).to_text().splitlines()
    at = next(i for i, x in enumerate(text) if x.lstrip().startswith("derived "))
    assert text[at - 1].lstrip().startswith("svc ") and text[at + 1].lstrip().startswith("undecided ")
    assert text[at].split()[1] == "4" and "program order, matched messages and collectives" in text[at]


def test_recorded_evidence_keeps_winning(tmp_path: Path) -> None:
    """carriage "step+p2p": every receive merged its sender's record, so Lamport decides the messages (NTP-class
    clocks: physics silent); derived takes only what nothing recorded decides (the collectives)."""
    job = Pipeline(ranks=4, steps=2, u=NTP, carriage="step+p2p")
    d = _analyze(tmp_path, job)
    e = d["edges"]
    assert d["p2p"]["carried"] == d["p2p"]["matched"] == 6
    assert e["decided"]["derived"] == e["by_kind"]["collective"] == 4
    assert e["decided"]["lamport"] == e["by_kind"]["p2p"] + e["by_kind"]["parent_child"] + e["by_kind"]["child_end"]
    assert e["wrong_total"] == 0


def test_a_lying_clock_makes_physics_wrong_and_derived_stays_right(tmp_path: Path) -> None:
    """Rank 2 reads 400 µs late claiming 60 µs: physics is wrong on its sends and its collectives (clock-fault
    evidence, rank 2 flagged); derived decides what physics leaves open, and is never wrong."""
    job = Pipeline(ranks=4, steps=3, liar=2, liar_ns=400 * US)
    d = _analyze(tmp_path, job)
    e = d["edges"]
    assert e["wrong"]["physics"] > 0 and e["wrong"]["derived"] == 0 and e["decided"]["derived"] > 0
    assert [(f["rank"], f["verdict"]) for f in d["faults"]] == [(2, "lying")]
    assert d["wrong_by_pair"] and all(2 in pair["ranks"] and pair["method"] == "physics" for pair in d["wrong_by_pair"])
    # Derived: the messages between honest ranks (0 -> 1; into the liar physics says "before", rightly, out of it
    # "after", wrongly) and the broadcasts (the liar's late ends hide nothing); physics catches each all_reduce.
    assert e["decided"]["derived"] == 3 + 3 and _check_against_truth(job, d) == 3


def test_a_sender_whose_spans_were_lost_breaks_the_chain(tmp_path: Path) -> None:
    """Rank 1's spans never reached the input: its messages are matched on neither side (0 -> 1 lone sends,
    1 -> 2 lone receives), so nothing is derived across rank 1; the rest is, 0 wrong. A carried record is
    stronger: with "step+p2p" rank 2's receives still carry rank 1's merged record, and Lamport orders them."""
    lost = _analyze(tmp_path, Pipeline(ranks=4, steps=2, u=NTP, drop=frozenset({1})), "lost.jsonl")
    p = lost["p2p"]
    assert (p["matched"], p["unmatched_sends"], p["unmatched_recvs"]) == (2, 2, 2)
    assert lost["edges"]["by_kind"]["p2p"] == 2  # a lone receive without a record has no send event: no edge
    assert lost["edges"]["decided"]["derived"] == 2 + 4  # messages 2 -> 3, and the claims among ranks 0, 2, 3
    assert lost["edges"]["wrong_total"] == 0
    carried = _analyze(tmp_path, Pipeline(ranks=4, steps=2, u=NTP, drop=frozenset({1}), carriage="step+p2p"),
                       "carried.jsonl")
    e = carried["edges"]
    assert e["by_kind"]["p2p"] == 4 and carried["unattributed"] == 0  # rank 2's lone receives are edges again
    assert e["decided"]["lamport"] - e["by_kind"]["parent_child"] - e["by_kind"]["child_end"] == 4
    assert e["wrong_total"] == 0


def _exchange(tmp_path: Path, swap: bool) -> dict[str, Any]:
    """Rank 0 sends m0, rank 1 replies r0, rank 0 sends m1, rank 1 replies r1 (NTP-class clocks). ``swap``:
    rank 1's receives carry each other's numbers (a channel numbered wrongly), so m1's send pairs with the
    receive of m0, which rank 1 completed before its reply that rank 0 received before sending m1: a cycle
    through two of the three messages (m0's send, first on rank 0, pairs with the last receive: no cycle)."""
    kw: dict[str, Any] = {"group": "0-1", "u": NTP}
    spans = [
        p2p_span("send", 0, 1, 0, 10, seq=0, sid=0xA0, lts=1, end_lts=2, **kw),
        p2p_span("recv", 1, 0, 0, 20, seq=1 if swap else 0, sid=0xB0, lts=1, end_lts=2, **kw),
        p2p_span("send", 1, 0, 30, 40, seq=0, sid=0xB1, lts=3, end_lts=4, **kw),
        p2p_span("recv", 0, 1, 20, 50, seq=0, sid=0xA1, lts=3, end_lts=4, **kw),
        p2p_span("send", 0, 1, 60, 70, seq=1, sid=0xA2, lts=5, end_lts=6, **kw),
        p2p_span("recv", 1, 0, 50, 80, seq=0 if swap else 1, sid=0xB2, lts=5, end_lts=6, **kw),
    ]
    d = analyze(write(str(tmp_path / f"x{swap}.jsonl"), spans), keep=100).to_dict()
    jsonschema.validate(d, SCHEMA)
    return d


def test_a_numbering_that_names_another_message_is_a_cycle_and_wrong(tmp_path: Path) -> None:
    """The structure of an honest trace has no cycle; a wrongly numbered channel gives one, and the messages on
    it are WRONG by derived, tallied on their pair of clocks, blaming no clock (no fault, no ledger)."""
    honest = _exchange(tmp_path, swap=False)
    assert honest["edges"]["decided"]["derived"] == 3 and honest["derived"]["cycles"] == 0
    broken = _exchange(tmp_path, swap=True)
    assert broken["derived"]["cycles"] == 1 and broken["edges"]["wrong"]["derived"] == 2
    assert broken["edges"]["decided"]["derived"] == 1
    assert broken["wrong_by_pair"] == [{"hosts": ["node0", "node1"], "ranks": [0, 1], "method": "derived", "count": 2}]
    assert broken["faults"] == [] and broken["lying_hosts"] == []
    text = analyze(str(tmp_path / "xTrue.jsonl")).to_text()
    assert "leads round a cycle in 1 trace runs" in text


def test_a_counter_that_went_backwards_is_a_cycle(tmp_path: Path) -> None:
    """Rank 1's all_reduce ends at lts 5 after starting at 20: its own program order puts its end before its
    start, and the claim puts every start before that end: the claim is WRONG by derived, no clock blamed."""
    spans = [op_span(0, 0, 1000, group="0-1", sid=0xA1, lts=10, end_lts=60, u=NTP),
             op_span(1, 0, 1000, group="0-1", sid=0xB1, lts=20, end_lts=5, u=NTP)]
    d = analyze(write(str(tmp_path / "t.jsonl"), spans), keep=100).to_dict()
    assert d["collectives"][0]["outcome"] == "contradiction"
    assert d["collectives"][0]["decision"]["method"] == "derived" and d["edges"]["wrong"]["derived"] == 1
    assert d["faults"] == [] and d["collective_counts"]["outcomes"]["contradiction"] == 1


def test_two_processes_under_one_clock_key_are_left_undecided(tmp_path: Path) -> None:
    """A step trace holding two step spans of one rank (a job run twice under one job id): program order and
    pairing cannot be trusted, derived decides nothing there and says why."""
    first = Pipeline(ranks=3, steps=1, u=NTP)
    path = first.write(str(tmp_path / "twice.jsonl"))
    again = Pipeline(ranks=3, steps=1, u=NTP)
    again.sid = 0x20_0000  # other span ids, the same step trace
    with open(path, "a", encoding="utf-8") as fh, open(again.write(str(tmp_path / "b.jsonl")), encoding="utf-8") as b:
        fh.write(b.read())
    d = analyze(path).to_dict()
    assert d["edges"]["decided"]["derived"] == 0 and d["derived"]["repeated"] > 0
    assert d["edges"]["wrong_total"] == 0 and d["torch"]["steps"] >= 1


def test_a_run_past_the_cap_leaves_its_later_edges_undecided(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The structure of one run holds at most MAX_NODES nodes; what does not fit stays undecided, counted."""
    monkeypatch.setattr(derived_graph, "MAX_NODES", 12)
    job = Pipeline(ranks=4, steps=1, u=NTP)
    d = _analyze(tmp_path, job)
    e = d["edges"]
    assert d["derived"]["beyond_limit"] > 0 and e["decided"]["derived"] > 0
    assert e["decided"]["derived"] + d["derived"]["beyond_limit"] == e["by_kind"]["p2p"] + e["by_kind"]["collective"]
    assert e["decided"]["undecided"] == d["derived"]["beyond_limit"] and e["wrong_total"] == 0


def _assert_split_agrees(path: str, one: dict[str, Any], jobs: int, **kw: Any) -> None:
    """``--jobs`` gives ``one``, the single process's report (its elapsed time aside)."""
    split = analyze(path, jobs=jobs, **kw).to_dict()
    one.pop("elapsed_s")
    split.pop("elapsed_s")
    assert split == one


def _past_the_horizon(path: Path, first: list[dict[str, Any]], later: list[dict[str, Any]]) -> str:
    """``first``, 5,000 spans of other traces (beyond the hop horizon of a 1,000-span window: 4,096), ``later``."""
    filler = [span(0xF000 + i, 0xF0000 + i, name="other") for i in range(5000)]
    return write(str(path), first + filler + later, per_line=64)


def test_split_runs_give_one_processs_report(tmp_path: Path) -> None:
    """§5.3: derived runs are per trace and formed by positions only: --jobs gives the same report, with a window
    small enough that steps are analysed in parts."""
    path = Pipeline(ranks=4, steps=4, u=NTP, liar=3, liar_ns=400 * US).write(str(tmp_path / "s.jsonl"))
    one = analyze(path, window_spans=8).to_dict()
    assert one["trace_parts"] > one["traces"] and one["edges"]["decided"]["derived"] > 0
    _assert_split_agrees(path, one, 3, window_spans=8)


@pytest.mark.slow
def test_dask_gives_one_processs_report(tmp_path: Path) -> None:
    """§5.3 on a real distributed.LocalCluster: three partitions, small chunks, the same derived counts."""
    distributed = pytest.importorskip("distributed")
    path = Pipeline(ranks=4, steps=4, u=NTP, liar=3, liar_ns=400 * US).write(str(tmp_path / "s.jsonl"))
    one = analyze(path, window_spans=8).to_dict()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        outcomes = analyze_dask(expand([path]), None, Options(window=8), scheduler=c.scheduler_address,
                                partitions=3, chunk_bytes=20_000)
    split = merge_reports([o.partial for o in outcomes], Options().keep).to_dict()
    one.pop("elapsed_s")
    split.pop("elapsed_s")
    assert split == one and one["edges"]["decided"]["derived"] > 0


def test_a_trace_quiet_longer_than_the_hop_horizon_is_two_runs(tmp_path: Path) -> None:
    """Runs split where a trace's consecutive torch spans lie more than the hop horizon apart (§5.2): no message
    or collective spans such a gap, so each is derived in its run, and the split depends only on positions
    (--jobs reports the same)."""
    kw: dict[str, Any] = {"group": "0-1", "u": NTP, "trace": 0xABC}
    first = [p2p_span("send", 0, 1, 0, 10, seq=0, sid=0xA0, lts=1, end_lts=2, **kw),
             p2p_span("recv", 1, 0, 0, 20, seq=0, sid=0xB0, lts=1, end_lts=2, **kw)]
    later = [p2p_span("send", 0, 1, 60, 70, seq=1, sid=0xA1, lts=3, end_lts=4, **kw),
             p2p_span("recv", 1, 0, 50, 80, seq=1, sid=0xB1, lts=3, end_lts=4, **kw)]
    path = _past_the_horizon(tmp_path / "gap.jsonl", first, later)
    d = analyze(path, window_spans=1000).to_dict()
    assert d["limits"]["hop_horizon"] == 4096 and d["p2p"]["matched"] == 2
    assert d["derived"]["runs"] == 2 and d["edges"]["decided"]["derived"] == 2
    _assert_split_agrees(path, d, 2, window_spans=1000)


def test_a_collective_finished_after_its_trace_moved_on_is_derived_in_its_own_run(tmp_path: Path) -> None:
    """An incomplete collective finishes only when the input moves past its horizon, after its trace may have
    begun a later run (§5.2): its claim is linked into the run its members lie in, not the trace's latest, so
    each run is checked with its own edges (two runs with a deferred edge each)."""
    kw: dict[str, Any] = {"u": NTP, "trace": 0xABC}
    first = [op_span(0, 0, 1000, group="0-2", sid=0xA0, **kw), op_span(1, 0, 1000, group="0-2", sid=0xB0, **kw)]
    later = [p2p_span("send", 0, 1, 60, 70, seq=1, sid=0xA1, lts=3, end_lts=4, group="0-1", **kw),
             p2p_span("recv", 1, 0, 50, 80, seq=1, sid=0xB1, lts=3, end_lts=4, group="0-1", **kw)]
    path = _past_the_horizon(tmp_path / "late.jsonl", first, later)
    d = analyze(path, window_spans=1000).to_dict()
    assert d["collective_counts"]["incomplete"] == 1 and d["p2p"]["matched"] == 1
    assert d["derived"]["runs"] == 2 and d["edges"]["decided"]["derived"] == 2
    _assert_split_agrees(path, d, 2, window_spans=1000)


@pytest.mark.slow
def test_2048_ranks_stay_bounded(tmp_path: Path) -> None:
    """2,048 ranks, a ring of messages and 32 collectives in one step (70k spans): the structure is linear in its
    events (a claim is one node per member, never a pair per two), checked in one replay."""
    ranks, colls = 2048, 32
    group = f"0-{ranks - 1}"
    spans = []
    for r in range(ranks):
        lts = 0
        t = r * 10
        nxt, prv = (r + 1) % ranks, (r - 1) % ranks
        spans.append(p2p_span("send", r, nxt, t, t + 5, seq=0, group=group, u=NTP, lts=lts + 1, end_lts=lts + 2,
                              sid=0x100000 + r))
        spans.append(p2p_span("recv", r, prv, t, t + 50_000, seq=0, group=group, u=NTP, lts=lts + 3,
                              end_lts=lts + 4, sid=0x200000 + r))
        for k in range(colls):
            spans.append(op_span(r, 100_000 * (k + 1), 100_000 * (k + 1) + 90_000, group=group, seq=k,
                                 sid=0x300000 + r * colls + k, u=NTP, lts=5 + 2 * k, end_lts=6 + 2 * k))
    path = write(str(tmp_path / "big.jsonl"), spans, per_line=512)
    t0 = time.monotonic()
    d = analyze(path).to_dict()
    elapsed = time.monotonic() - t0
    assert d["edges"]["decided"]["derived"] == ranks + colls and d["edges"]["wrong_total"] == 0
    assert d["derived"]["links"] == ranks + colls and elapsed < 120


# -- the structure itself (derived_graph.py) ------------------------------------------------------------
def _lts(v: int | None) -> Stamp:
    return Stamp(None, lts=v)


def test_graph_replays_an_honest_structure_and_finds_a_cycle() -> None:
    g = Graph()
    s, r = g.event("a", _lts(1)), g.event("b", _lts(5))
    g.message(s, r)  # a@1 -> b@5
    back_s, back_r = g.event("b", _lts(6)), g.event("a", _lts(2))
    g.message(back_s, back_r)  # b@6 -> a@2: fine, a@2 after a@1
    assert g.cycles() is None
    loop_s, loop_r = g.event("b", _lts(7)), g.event("a", _lts(0))
    g.message(loop_s, loop_r)  # b@7 -> a@0, before a@1 -> b@5 -> b@7: a cycle
    comp = g.cycles()
    assert comp is not None and comp[s] == comp[r] == comp[loop_s] == comp[loop_r]


def test_graph_claims_cost_a_node_per_member_and_ties_drop_an_order() -> None:
    g = Graph()
    v = g.claim([("a", _lts(1)), ("b", _lts(1))], [("a", _lts(2)), ("b", _lts(2))])
    assert len(g) == 5 and v == 0 and g.cycles() is None
    # A repeated value on one clock is not one honest counter: its order is dropped, no false cycle.
    s, r = g.event("a", _lts(2)), g.event("b", _lts(0))
    g.message(s, r)
    assert g.cycles() is None
    # Events without a Lamport value have no place in program order: they close no cycle.
    g2 = Graph()
    x, y = g2.event("a", _lts(None)), g2.event("b", _lts(None))
    g2.message(x, y)
    g2.message(g2.event("b", None), g2.event("a", None))
    assert g2.cycles() is None


@st.composite
def _structures(draw: st.DrawFn) -> Graph:
    """Graphs built as derived.py builds them: events on a few clocks (Lamport values missing, saturated,
    repeated), messages between fresh events and between any two, claims of a few members."""
    g = Graph()
    clocks = ["a", "b", "c"]
    stamps = st.one_of(st.none(), st.builds(_lts, st.one_of(st.none(), st.integers(0, 12), st.just(LTS_MAX))))

    def stamp() -> Stamp | None:
        return draw(stamps)

    for _ in range(draw(st.integers(0, 14))):
        step = draw(st.sampled_from(["event", "message", "link", "claim"]))
        if step == "event":
            g.event(draw(st.sampled_from(clocks)), stamp())
        elif step == "message":
            g.message(g.event(draw(st.sampled_from(clocks)), stamp()), g.event(draw(st.sampled_from(clocks)), stamp()))
        elif step == "link" and len(g) >= 2:  # any two nodes: cycles, and links over links
            g.message(draw(st.integers(0, len(g) - 1)), draw(st.integers(0, len(g) - 1)))
        elif step == "claim":
            members = st.lists(st.tuples(st.sampled_from(clocks), stamps), max_size=3)
            g.claim(draw(members), draw(members))
    return g


def _replays_alike(g: Graph) -> bool:
    """native/columns/tt_replay.c answers as Graph.replay does (cycles() falls back to Python where C says no:
    only this compares them); whether it replays."""
    _columns = pytest.importorskip("tempotrace_sdk._columns", reason="the native columns module is not built")
    _, orders, at = g.replay()
    python = all(at[k] == len(order) for k, order in enumerate(orders))
    assert _columns.replays(g.pred, g.succ, list(g.orders.values()), g.claim_in) is python
    assert (g.cycles() is None) is python
    return python


@settings(max_examples=400, deadline=None)
@given(_structures())
def test_the_c_replay_answers_as_the_python_replay(g: Graph) -> None:
    """Every order replayed to its end exactly where Graph.replay's is, on drawn structures."""
    _replays_alike(g)


def test_the_c_replay_drops_a_repeated_order_and_starts_a_claim_without_starts() -> None:
    """A clock whose values repeat has no order (kept, its tie would close a false cycle here); a claim with no
    required start is done before anything, so its ends may follow."""
    g = Graph()
    g.claim([("a", _lts(1)), ("b", _lts(1))], [("a", _lts(2)), ("b", _lts(2))])
    s, r = g.event("a", _lts(2)), g.event("b", _lts(0))
    g.message(s, r)
    assert _replays_alike(g)
    g = Graph()
    g.claim([], [("a", _lts(1)), ("b", _lts(3))])
    g.message(g.event("a", _lts(2)), g.event("b", _lts(4)))
    assert _replays_alike(g)
    g.message(g.event("b", _lts(5)), g.event("a", _lts(0)))  # b@5 -> a@0 before a@1, after the claim: a cycle
    assert not _replays_alike(g)
