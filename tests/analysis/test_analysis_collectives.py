"""Collectives on synthetic torch spans (spec/analysis.md §1.3, §2.7): the claim each op guarantees, decided
as a whole; Lamport only where a merge was recorded; stragglers; ranks that never joined; the liar named.
tests/torch/test_analysis_collectives.py runs the same analysis on a real 4-rank gloo job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tempotrace_sdk.analysis import AnalysisReport, analyze
from tempotrace_sdk.analysis.html import render_html
from tempotrace_sdk.analysis.writers import write_html, write_perfetto
from tempotrace_sdk.cli.main import main as cli

from .otlpgen import span
from .torchgen import T0, op_span, sketch_of, write

MS = 1_000_000


def _run(tmp_path: Path, spans: list[dict[str, Any]], **options: Any) -> AnalysisReport:
    return analyze(write(str(tmp_path / "t.jsonl"), spans), keep=options.pop("keep", 10_000), **options)


def _one(report: AnalysisReport) -> dict[str, Any]:
    (record,) = report.to_dict()["collectives"]
    return record


def _collective(op: str, starts: list[int], ends: list[int], **kw: Any) -> list[dict[str, Any]]:
    group = kw.pop("group", f"0-{len(starts) - 1}")
    return [op_span(r, s, e, op=op, group=group, **kw) for r, (s, e) in enumerate(zip(starts, ends, strict=True))]


def test_an_honest_all_reduce_is_ordered_by_physics_with_its_last_arriver(tmp_path: Path) -> None:
    """Every start precedes every end; ranks arrive 1 µs apart (±220 ns): the last arriver is certain."""
    rep = _run(tmp_path, _collective("all_reduce", [0, 1000, 2000, 3000], [50_000, 50_100, 50_200, 50_300]))
    c = _one(rep)
    assert (c["op"], c["group"], c["seq"], c["root"], c["ranks"], c["missing_ranks"]) == (
        "all_reduce", "0-3", 0, None, [0, 1, 2, 3], [])
    assert [m["rank"] for m in c["members"]] == [0, 1, 2, 3]  # arrival order
    assert c["last_arriver"] == {"rank": 3, "host": "node3", "certain": True, "lead_ns": 1000}
    assert c["spread_ns"] == 3000 and c["outcome"] == "consistent"
    assert c["decision"]["method"] == "physics" and c["decision"]["gap_ns"] == 50_000 - 3000 - 440
    d = rep.to_dict()
    assert d["edges"]["by_kind"]["collective"] == 1 and d["edges"]["decided"]["physics"] >= 1
    assert d["collective_counts"]["complete"] == 1 and d["stragglers"][0]["rank"] == 3


#: (op, root, outcome): rank 2 starts after rank 0 ended (0-based µs below); only some claims forbid that.
ROOTED = [
    ("all_reduce", None, "contradiction"),  # every start precedes every end
    ("broadcast", 1, "consistent"),  # only the root's start precedes every end
    ("broadcast_object_list", 1, "consistent"),
    ("scatter", 2, "contradiction"),  # the root is the late one
    ("reduce", 1, "contradiction"),  # every start precedes the root's end (rank 1 ends at 60 µs)
    ("reduce", 2, "consistent"),  # rank 2 ends last
    ("gather", 2, "consistent"),
    ("gather_object", 0, "contradiction"),
]


@pytest.mark.parametrize(("op", "root", "outcome"), ROOTED)
def test_each_op_is_held_to_the_claim_it_guarantees(tmp_path: Path, op: str, root: int | None, outcome: str) -> None:
    """§1.3: all_* and barrier: every start -> every end; broadcast/scatter: the root's start -> every end;
    reduce/gather: every start -> the root's end."""
    starts = [0, 1000, 100_000, 2000]
    ends = [50_000, 60_000, 150_000, 70_000]
    c = _one(_run(tmp_path, _collective(op, starts, ends, root=root)))
    assert c["outcome"] == outcome and c["root"] == root


@pytest.mark.parametrize("offset", [+10 * MS, -10 * MS])
def test_a_lying_rank_is_named_and_no_honest_pair_is_blamed(tmp_path: Path, offset: int) -> None:
    """§4: a rank 10 ms off (late: its start after everyone's end; early: its end before everyone's start)
    claiming 220 ns; eight ranks, five all_reduces of 2 ms each."""
    spans = []
    for seq in range(5):
        t = seq * 5 * MS
        spans += [op_span(r, t + r * 100 + (offset if r == 5 else 0), t + 2 * MS + (offset if r == 5 else 0),
                          group="0-7", seq=seq) for r in range(8)]
    d = _run(tmp_path, spans).to_dict()
    assert d["collective_counts"]["outcomes"]["contradiction"] == 5
    assert [(f["host"], f["rank"], f["verdict"]) for f in d["faults"]] == [("node5", 5, "lying")]
    assert all(5 in pair["ranks"] for pair in d["wrong_by_pair"]) and d["edges"]["wrong"]["physics"] == 5
    assert d["faults"][0]["peers"] == 7 and d["faults"][0]["rate"] <= 1.0


NTP = {"u": 65535}  # an NTP-class clock: its bound saturates, physics cannot use it


def _lamport_case(tmp_path: Path, *, merged: bool, end_lts_1: int = 50, missing_on_1: list[int] | None = None,
                  sketches: bool = False, start_lts_1: int = 20) -> dict[str, Any]:
    """Two NTP-class ranks; rank 0 starts with lts 10, rank 1 with 20; each end merged the other's record
    (op mode) when ``merged``."""
    sid = {0: 0xA1, 1: 0xB1}
    spans = []
    for r, (lts, end_lts) in enumerate(((10, 60), (start_lts_1, end_lts_1))):
        kw: dict[str, Any] = {}
        if merged:
            kw = {"send_lts": lts + 1, "recv_lts": end_lts - 1, "missing": missing_on_1 if r == 1 else None}
            if sketches:
                kw["recv_sketch"] = sketch_of(sid[1 - r])
                kw["sketch"] = sketch_of(sid[r])
        spans.append(op_span(r, 0, 1000, group="0-1", sid=sid[r], lts=lts, end_lts=end_lts, **NTP, **kw))
    return _run(tmp_path, spans).to_dict()


def test_lamport_orders_a_collective_only_where_a_merge_was_recorded(tmp_path: Path) -> None:
    """§2.7: without recv.lts an end's counter says nothing about the other rank (rank 1 ends at lts 5, below
    rank 0's start at 10: two independent counters) -> not Lamport (the claim is the structure's own: derived,
    §2.8), no wrong decision, no fault; with merges recorded, consistent counters rule the inversion out, and a
    counter that went backwards is WRONG."""
    unmerged = _lamport_case(tmp_path, merged=False, start_lts_1=2, end_lts_1=5)
    assert unmerged["collectives"][0]["decision"] == {"relation": "before", "method": "derived", "confidence": 1.0}
    assert unmerged["edges"]["wrong_total"] == 0 and unmerged["edges"]["decided"]["lamport"] == 0
    assert not unmerged["faults"]
    ok = _lamport_case(tmp_path, merged=True)
    assert ok["collectives"][0]["decision"] == {"relation": "not_after", "method": "lamport", "confidence": 1.0}
    broken = _lamport_case(tmp_path, merged=True, end_lts_1=5)
    assert broken["collectives"][0]["outcome"] == "contradiction"
    assert broken["edges"]["wrong"]["lamport"] == 1 and broken["faults"][0]["kind"] == "lamport"
    assert broken["wrong_by_pair"] == [{"hosts": ["node0", "node1"], "ranks": [0, 1], "method": "lamport",
                                        "count": 1}]


def test_a_record_the_end_did_not_merge_gives_no_lamport_evidence(tmp_path: Path) -> None:
    """Rank 0 in rank 1's recv.missing: rank 1's end says nothing about rank 0's start (its counter, 5, below
    rank 0's 10): no Lamport decision, no wrong one; the claim is the structure's own (derived, §2.8)."""
    d = _lamport_case(tmp_path, merged=True, start_lts_1=2, end_lts_1=5, missing_on_1=[0])
    assert d["collectives"][0]["decision"]["method"] == "derived" and d["edges"]["wrong_total"] == 0


def test_recorded_sketches_order_by_svc(tmp_path: Path) -> None:
    d = _lamport_case(tmp_path, merged=True, sketches=True)
    decision = d["collectives"][0]["decision"]
    assert decision["method"] == "svc" and decision["relation"] == "before" and 0 < decision["fp"] < 0.01


@pytest.mark.parametrize("completion", ["unfinished", "queued", "error"])
def test_an_end_that_never_completed_is_no_end_event(tmp_path: Path, completion: str) -> None:
    """spec/torch.md §1.3: "unfinished" is when uninstrument() ended the span, not the op; "queued" is when
    a blocking call on a device stream (NCCL) returned, the op only queued: rank 3's end before rank 0's
    start would otherwise be a contradiction blaming honest clocks. (The analysis once refused "queued"
    spans outright, as a value the SDK does not write.)"""
    spans = _collective("all_reduce", [100_000, 1000, 2000, 3000], [150_000, 160_000, 170_000, 50_000])
    spans[3] = op_span(3, 3000, 50_000, completion=completion)
    rep = _run(tmp_path, spans)
    assert rep.bad_spans == 0 and rep.faults == []
    assert _one(rep)["outcome"] == "consistent" and rep.collectives.ends_not_completed == 1


def test_a_rank_that_never_joined_makes_the_collective_incomplete(tmp_path: Path, capsys: pytest.CaptureFixture[
        str]) -> None:
    """Expected members come from the group key: rank 2 of 0-3 has no span."""
    spans = [op_span(r, r * 1000, 50_000, seq=7) for r in (0, 1, 3)]
    path = write(str(tmp_path / "t.jsonl"), spans)
    d = analyze(path, keep=100).to_dict()
    c = _one_from(d)
    assert c["missing_ranks"] == [2] and [m["rank"] for m in c["members"]] == [0, 1, 3]
    counts = d["collective_counts"]
    assert (counts["incomplete"], counts["missing_members"], counts["missing_ranks"]) == (1, 1, [{"rank": 2,
                                                                                                 "count": 1}])
    assert counts["incomplete_first"] == [{"trace_id": f"{0xC0FFEE:032x}", "op": "all_reduce", "group": "0-3",
                                           "seq": 7, "missing": 1, "missing_ranks": [2]}]
    assert d["summary"]["collectives_incomplete"] == 1
    assert cli(["analyze", path]) == 0
    assert "1 collectives incomplete: 1 member spans missing (rank 2 (1))" in capsys.readouterr().out


def _one_from(d: dict[str, Any]) -> dict[str, Any]:
    (record,) = d["collectives"]
    return record


def test_ranks_disagreeing_on_the_op_are_a_mismatch_with_no_claim(tmp_path: Path) -> None:
    spans = _collective("all_reduce", [0, 1000], [50_000, 50_000])
    spans[1] = op_span(1, 1000, 50_000, op="broadcast", group="0-1", root=0)
    rep = _run(tmp_path, spans)
    assert rep.collectives.mismatched == 1 and rep.collectives.no_claim == 1
    assert "called different ops or roots" in rep.to_text()


def test_a_collective_split_across_windows_is_still_one_collective(tmp_path: Path) -> None:
    """§5.2: with a window of 4 positions each member lands in its own part (other traces' spans between
    them); the members are gathered within the hop horizon. Delivered twice, it counts once."""
    spans: list[dict[str, Any]] = []
    for r in range(4):
        spans.append(op_span(r, r * 1000, 50_000, seq=3))
        spans += [op_span(0, 0, 10, trace=0x100 + 10 * r + k, seq=0, group="0") for k in range(5)]
    once = _run(tmp_path, spans, window_spans=4)
    assert once.trace_parts > once.traces and once.collectives.complete == once.collectives.total == 21
    twice = _run(tmp_path, spans + spans, window_spans=4)
    assert twice.duplicate_spans == len(spans)
    assert twice.to_dict()["collective_counts"] == once.to_dict()["collective_counts"]


def test_members_further_apart_than_the_hop_horizon_are_not_gathered(tmp_path: Path) -> None:
    """§5.2: positions, not time, decide; two members 5,000 positions apart (horizon 4,096) are two
    incomplete instances, never matched by guess."""
    filler = [op_span(0, 0, 10, trace=0x9000 + k, seq=0, group="0") for k in range(5000)]
    spans = [op_span(0, 0, 50_000), *filler, op_span(1, 1000, 50_000)]
    d = _run(tmp_path, spans, window_spans=100).to_dict()
    counts = d["collective_counts"]
    assert counts["incomplete"] == 2 and counts["missing_ranks"] == [{"rank": 2, "count": 2},
                                                                     {"rank": 3, "count": 2},
                                                                     {"rank": 0, "count": 1},
                                                                     {"rank": 1, "count": 1}]
    # ... and the report says the horizon cut one collective, how far its members lie apart, what gathers it
    assert (counts["split"], counts["split_distance"]) == (1, 5001)
    report = _run(tmp_path, spans, window_spans=100)
    (said,) = [line for line in report.to_text().splitlines() if "later pieces of collectives" in line]
    assert "1 of them are later pieces" in said and "5,001 spans apart" in said and "--window 10,000" in said
    assert "1 of the incomplete collectives are later pieces of ones the hop horizon cut" in render_html(report)
    gathered = _run(tmp_path, spans, window_spans=10_000).to_dict()["collective_counts"]
    assert (gathered["incomplete"], gathered["split"]) == (1, 0)  # one instance: ranks 2 and 3 never joined


def test_split_collectives_are_counted_alike_however_the_run_is_partitioned(tmp_path: Path) -> None:
    """§1.3, §5.3: trace B's part closes (and is analysed) before trace A's later piece, though B's spans lie
    further on: what a partition remembers of A's first piece must not depend on B being in it."""
    window = 4096  # the hop horizon; a piece is remembered 8 horizons (32,768 positions)
    filler = iter(range(1, 10**6))

    def plain(n: int) -> list[dict[str, Any]]:
        return [span(0x5000_0000 + next(filler), 1, host="f") for _ in range(n)]

    spans = [op_span(0, 0, 50_000, group="0-1", trace=0xA)]                       # A's first piece, position 0
    spans += plain(29_000 - len(spans))
    spans.append(op_span(0, 0, 10, group="0-1", seq=0, trace=0xB))               # B's part opens at 29,000
    spans += plain(32_000 - len(spans))
    spans.append(op_span(1, 1000, 50_000, group="0-1", trace=0xA))              # A's later piece at 32,000
    spans += plain(33_000 - len(spans))
    spans.append(op_span(0, 0, 10, group="0-1", seq=1, trace=0xB))               # B's new instance at 33,000
    spans += plain(40_000 - len(spans))
    one = _run(tmp_path, spans, window_spans=window).to_dict()["collective_counts"]
    two = _run(tmp_path, spans, window_spans=window, jobs=2).to_dict()["collective_counts"]
    assert (one["split"], one["split_distance"]) == (two["split"], two["split_distance"]) == (1, 32_000)


def test_collectives_and_p2p_in_perfetto_html_and_the_schema(tmp_path: Path) -> None:
    """§6: the collective's members linked by one flow in arrival order; the report validates."""
    jsonschema = pytest.importorskip("jsonschema")
    spans = _collective("barrier", [0, 1000, 2000, 3000], [50_000, 50_100, 50_200, 50_300])
    spans[2] = op_span(2, 2000, 50_200, op="barrier", seq=0)
    rep = _run(tmp_path, spans[:3])
    schema = json.loads((Path(__file__).resolve().parents[2] / "spec" / "analysis-report.schema.json").read_text())
    jsonschema.validate(rep.to_dict(), schema)
    write_perfetto(rep, str(tmp_path / "p.json"))
    events = json.loads((tmp_path / "p.json").read_text())["traceEvents"]
    flow = [e for e in events if e.get("cat") == "collective"]
    assert [e["ph"] for e in flow] == ["s", "t", "f"] and flow[0]["args"]["missing_ranks"] == [3]
    assert {e["args"]["torch_op"] for e in events if e["ph"] == "X"} == {"barrier"}
    write_html(rep, str(tmp_path / "t.html"))
    assert 'data-key="collectives_incomplete" data-value="1"' in (tmp_path / "t.html").read_text()


def test_spans_kept_name_their_op_and_group(tmp_path: Path) -> None:
    rep = _run(tmp_path, _collective("all_gather", [0, 10], [500, 510]))
    assert {(s["op"], s["group"]) for s in rep.spans_kept} == {("all_gather", "0-1")}
    assert T0 in {s["start_ptp_ns"] for s in rep.spans_kept}
