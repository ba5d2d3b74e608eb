"""The hang report: which rank hung, in which collective (spec/analysis.md §1.4, §6.1 ``hang``, §6.2, §6.3).

Flight-recorder dumps are built as the SDK writes them (spec/torch.md §7.3): each rank's ring of op spans in
their steps' traces, the ops still open as ``pending`` spans whose ``tempotrace.stamps`` holds only the start
(their OpenTelemetry end is the dump's time), and one ``torch.dump`` record per rank. The wavefront, its
suspects and pending ranks, the order of the last events, a lying clock, a rank with no spans, point-to-point
sends no receive matched, and the engines' agreement are each checked on the report's three outputs."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tempotrace_sdk.analysis import analyze
from tempotrace_sdk.analysis.dask_engine import analyze_dask
from tempotrace_sdk.analysis.engine import Options
from tempotrace_sdk.analysis.html import render_html
from tempotrace_sdk.analysis.inputs import expand
from tempotrace_sdk.analysis.merge import merge_reports
from tempotrace_sdk.analysis.perfetto import perfetto_trace

from .otlpgen import TAI_UTC_NS, span
from .torchgen import MS, T0, TorchJob, op_span, p2p_span, write

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "spec" / "analysis-report.schema.json").read_text())
US = 1000
GROUP = "0-3"
JOB = {"tempotrace.job_id": "job-h", "tempotrace.restart": 0}


def _pending(span_: dict[str, Any], lts: int = 7) -> dict[str, Any]:
    """``span_`` as a dump writes an op still open: completion pending, stamps text with the start only (no end
    token), its OpenTelemetry end the dump's time."""
    attrs = span_["attributes"]
    keep = [a for a in attrs if not a["key"].startswith(("tempotrace.end.", "tempotrace.ptp_ns",
                                                          "tempotrace.torch.completion"))]
    keep += [{"key": "tempotrace.torch.completion", "value": {"stringValue": "pending"}},
             {"key": "tempotrace.stamps", "value": {"stringValue": f"s{lts},0"}}]
    span_["attributes"] = keep
    span_["endTimeUnixNano"] = str(T0 + 90 * MS - TAI_UTC_NS)  # the dump's time
    return span_


def _op(span_: dict[str, Any], op: str) -> dict[str, Any]:
    """``span_`` as a span of torch op ``op``."""
    for a in span_["attributes"]:
        if a["key"] == "tempotrace.torch.op":
            a["value"] = {"stringValue": op}
    span_["name"] = f"torch.{op}"
    return span_


def _dump(rank: int, reason: str, *, ops: int, pending: int, overwritten: int = 0,
          requested_by: int | None = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"tempotrace.rank": rank, "tempotrace.torch.dump.reason": reason,
                             "tempotrace.torch.dump.ops": ops, "tempotrace.torch.dump.pending": pending,
                             "tempotrace.torch.dump.overwritten": overwritten,
                             "tempotrace.ptp_ns": T0 + 90 * MS, "tempotrace.uncertainty_ns": 220,
                             "tempotrace.clk_quality": "OK"}
    if requested_by is not None:
        attrs["tempotrace.torch.dump.requested_by"] = requested_by
    return span(0xD0D0_0000 + rank, 0xD000 + rank, name="torch.dump", host=f"node{rank}",
                start=T0 + 90 * MS - TAI_UTC_NS, end=T0 + 90 * MS - TAI_UTC_NS, attrs=attrs)


def _at(seq: int) -> int:
    """When collective ``seq`` starts (ns after T0): one a millisecond, each its own step's trace."""
    return (seq - 50) * MS


def hang_dumps(path: Path, *, hung: int | None = 2, absent: bool = False, last_end: int = 500 * US,
               late: dict[int, int] | None = None, overwritten: int = 0, failed: bool = False,
               dumps: bool = True) -> str:
    """Four ranks' dumps: all_reduces #50-#56 completed by everyone (rank r enters 10 µs after rank r-1 and
    all end 500 µs after the start), #57 pending on every rank but ``hung``, which never entered it and
    completed #56 at ``last_end`` after #56's start; ``absent``: ``hung`` left no span at all (killed before
    it could dump); ``late``: rank -> ns its clock reads late; ``failed``: #57 ended with an error on the
    others (a timeout in a normal export: no dump)."""
    late = late or {}
    lines = []
    for r in range(4):
        if absent and r == hung:
            continue
        o = late.get(r, 0)
        spans = []
        for seq in range(50, 57):
            end = _at(seq) + (last_end if r == hung and seq == 56 else 500 * US)
            spans.append(op_span(r, _at(seq) + r * 10 * US + o, end + o, group=GROUP, seq=seq, trace=0xA000 + seq,
                                 lts=2 * seq, end_lts=2 * seq + 1))
        if r != hung:
            entered = op_span(r, _at(57) + r * 10 * US + o, _at(57) + 3 * MS + o, group=GROUP, seq=57,
                              trace=0xA000 + 57, completion="error" if failed else "return")
            spans.append(entered if failed else _pending(entered))
        if dumps:
            reason, asked = ("hang", None) if r == 0 else ("peer", 0)
            spans.append(_dump(r, reason, ops=len(spans), pending=0 if r == hung else 1,
                               overwritten=overwritten if r == 1 else 0, requested_by=asked))
        lines.append((spans, {"tempotrace.rank": r, **JOB}))
    with open(path, "w", encoding="utf-8") as fh:
        for spans, resource in lines:
            write(str(path), spans, 3, resource, mode="a")
    del fh
    return str(path)


def _utc(ns_after_t0: int) -> str:
    s, frac = divmod(T0 + ns_after_t0 - TAI_UTC_NS, 1_000_000_000)
    return (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=s)).strftime("%H:%M:%S") + \
        f".{frac // 1000:06d} UTC"


def _group(report: dict[str, Any], group: str = GROUP) -> dict[str, Any]:
    (row,) = [g for g in report["hang"]["groups"] if g["group"] == group]
    return row


# -- the wavefront ------------------------------------------------------------------------------------------
def test_hang_line_names_the_rank_that_never_entered_and_the_pending_ranks(tmp_path: Path) -> None:
    """§1.4, §6: the text's first line says which rank never entered which collective of which group, and
    which ranks wait in it since when (the latest start among them, with its bound)."""
    report = analyze(hang_dumps(tmp_path / "dumps.jsonl"))
    lines = report.to_text().splitlines()
    assert lines[0] == (f"HANG: rank 2 (node2) never entered all_reduce #57 of group 0-3; ranks 0, 1, "
                        f"3 pending in it since {_utc(_at(57) + 30 * US)} ±220 ns")
    assert lines[1] == f"  rank 2 (node2): last completed all_reduce #56 at {_utc(_at(56) + 500 * US)} ±220 ns"
    d = report.to_dict()
    jsonschema.validate(d, SCHEMA)
    w = _group(d)["wavefront"]
    assert (w["seq"], w["op"], w["verdict"], w["claim"]) == (57, "all_reduce", "hang", "all")
    assert [m["rank"] for m in w["pending"]["members"]] == [0, 1, 3]
    assert all(m["completion"] == "pending" for m in w["pending"]["members"])
    (suspect,) = w["never_entered"]["ranks"]
    assert (suspect["rank"], suspect["spans"], suspect["last_completed"]["seq"]) == (2, "in_group", 56)
    assert (w["since"]["rank"], w["since"]["tai_ns"], w["since"]["uncertainty_ns"]) == (3, T0 + _at(57) + 30 * US, 220)
    assert w["completed"] == {"count": 0, "ranks": []}


def test_a_pending_member_contributes_no_end(tmp_path: Path) -> None:
    """§1.3: a pending span's end (the dump's time) is no completion: the incomplete #57 has no claim pair, no
    edge, and counts its members' ends as not completed."""
    d = analyze(hang_dumps(tmp_path / "dumps.jsonl")).to_dict()
    c = d["collective_counts"]
    assert (c["total"], c["incomplete"], c["ends_not_completed"]) == (8, 1, 3)
    assert c["outcomes"]["contradiction"] == 0 and d["edges"]["wrong_total"] == 0


def test_a_rank_with_no_spans_at_all_is_said_so(tmp_path: Path) -> None:
    """A rank killed before it could dump left nothing: it is the suspect, and the report says it has no spans."""
    report = analyze(hang_dumps(tmp_path / "dumps.jsonl", absent=True))
    lines = report.to_text().splitlines()
    assert lines[0].startswith("HANG: rank 2 never entered all_reduce #57 of group 0-3 (no spans from "
                               "rank 2 in the input); ranks 0, 1, 3 pending in it since ")
    assert lines[1] == "  rank 2: no spans from rank 2 in the input"
    g = _group(report.to_dict())
    assert g["no_spans_in_input"] == [2] and g["no_spans_in_group"] == {"count": 1, "ranks": [2]}
    (suspect,) = g["wavefront"]["never_entered"]["ranks"]
    assert (suspect["spans"], suspect["last_completed"], suspect["host"]) == ("none", None, None)


@pytest.mark.parametrize(("last_end", "method", "words"), [
    (_at(57) - 100 * US, "physics", "later by physics"),  # rank 2 ended #56 100 µs before rank 0 entered #57
    (_at(57) - 100, "undecided", "cannot tell (the bounds overlap)"),  # 100 ns apart, ±220 ns each
], ids=["disjoint-bounds-physics", "overlapping-bounds-cannot-tell"])
def test_last_events_are_ordered_by_physics_only_when_the_bounds_are_disjoint(
        tmp_path: Path, last_end: int, method: str, words: str) -> None:
    """§1.4: the suspect's last completion and the pending ranks' entries in reading order, each pair decided
    like an edge: physics when the intervals are disjoint, else "cannot tell" (no guess)."""
    report = analyze(hang_dumps(tmp_path / "dumps.jsonl", last_end=last_end - _at(56)))
    w = _group(report.to_dict())["wavefront"]
    order = [(e["rank"], e["event"], e["seq"]) for e in w["order"]]
    assert order == [(2, "completed", 56), (0, "entered", 57), (1, "entered", 57), (3, "entered", 57)]
    first_pair = w["order"][1]["after_previous"]
    assert first_pair["method"] == method
    if method == "physics":
        assert first_pair["relation"] == "before" and first_pair["gap_ns"] == 100 * US - 440
    else:
        assert (first_pair["relation"], first_pair["why"]) == ("undecided", "overlap")
    text = report.to_text().splitlines()
    line = next(x for x in text if x.startswith("    then rank 0 (node0) entered all_reduce #57"))
    assert words in line


def test_a_lying_clock_is_named_beside_the_times_it_read(tmp_path: Path) -> None:
    """§4, §1.4: rank 3's clock reads 10 ms late while claiming ±220 ns: its collectives' claims are broken, the
    ledger names it lying, and the "since" it read (the latest entry, by its lie) says so."""
    report = analyze(hang_dumps(tmp_path / "dumps.jsonl", late={3: 10 * MS}))
    d = report.to_dict()
    assert [(f["rank"], f["verdict"]) for f in d["faults"]] == [(3, "lying")]
    w = _group(d)["wavefront"]
    assert (w["since"]["rank"], w["since"]["clock_verdict"]) == (3, "lying")
    first = report.to_text().splitlines()[0]
    assert first.endswith(f"since {_utc(_at(57) + 30 * US + 10 * MS)} ±220 ns [rank 3's clock (node3) is LYING "
                          "(clock faults, below): this time cannot be trusted]")


def test_jobs_two_give_the_same_hang_object(tmp_path: Path) -> None:
    """§5.3: the last completed op and the hung collective lie in different steps' traces, which two partitions
    analyse apart; the merged hang object is the one process's."""
    path = hang_dumps(tmp_path / "dumps.jsonl", overwritten=40)
    one = analyze(path).to_dict()["hang"]
    assert one is not None and _group({"hang": one})["wavefront"]["verdict"] == "hang"
    assert analyze(path, jobs=2).to_dict()["hang"] == one
    assert analyze(path, jobs=3, window_spans=4).to_dict()["hang"] == one


@pytest.mark.slow
def test_dask_gives_the_same_hang_object(tmp_path: Path) -> None:
    """§5.3: ``--engine dask`` (small chunks, three partitions on a local cluster) merges to the same hang object."""
    pytest.importorskip("distributed")
    path = hang_dumps(tmp_path / "dumps.jsonl", overwritten=40)
    one = analyze(path).to_dict()["hang"]
    outcomes = analyze_dask(expand([path]), None, Options(), partitions=3, chunk_bytes=4_000)
    assert len(outcomes) == 3
    assert merge_reports([o.partial for o in outcomes], Options().keep).to_dict()["hang"] == one


def test_dumps_are_listed_and_an_overwriting_ring_is_said_so(tmp_path: Path) -> None:
    """§1.4: every dump record with its reason, ops and overwrites; a ring that overwrote ops unexported has an
    incomplete history, and the text says so."""
    report = analyze(hang_dumps(tmp_path / "dumps.jsonl", overwritten=40))
    dumps = report.to_dict()["hang"]["dumps"]
    assert dumps["total"] == 4 and dumps["by_reason"] == {"hang": 1, "peer": 3}
    assert [(x["rank"], x["reason"], x["requested_by"], x["ops"], x["pending"], x["overwritten"])
            for x in dumps["listed"]] == [(0, "hang", None, 8, 1, 0), (1, "peer", 0, 8, 1, 40), (2, "peer", 0, 7, 0, 0),
                                          (3, "peer", 0, 8, 1, 0)]
    assert dumps["overwritten"] == [{"rank": 1, "ops": 40}]
    text = report.to_text()
    assert "  dumps seen: 4: rank 0 hang (8 ops, 1 pending), rank 1 peer asked by rank 0 (8 ops, 1 pending), " \
           "rank 2 peer asked by rank 0 (7 ops, 0 pending), rank 3 peer asked by rank 0 (8 ops, 1 pending)" in text
    assert "  rank 1's ring overwrote 40 ops unexported: its history before them is incomplete (a last completed op " \
           "may be unknown)" in text


def test_an_incomplete_collective_in_a_normal_export_is_a_wavefront(tmp_path: Path) -> None:
    """Not only dumps: in a normal export (no dump record) the others' #57 failed (a timeout) while rank 2 never
    entered it."""
    report = analyze(hang_dumps(tmp_path / "export.jsonl", failed=True, dumps=False))
    first = report.to_text().splitlines()[0]
    assert first == ("HANG: rank 2 (node2) never entered all_reduce #57 of group 0-3; ranks 0, 1, 3 "
                     "failed in it (status ERROR)")
    w = _group(report.to_dict())["wavefront"]
    assert (w["pending"]["count"], w["failed"]["count"], w["since"]) == (0, 3, None)


def test_spans_lost_after_others_completed_is_no_hang(tmp_path: Path) -> None:
    """A rank whose spans stop while the others completed later all_reduces: an all_reduce completes only once
    every rank joined, so its spans are lost, not hung: no HANG line."""
    spans = [op_span(r, _at(seq) + r * 10 * US, _at(seq) + 500 * US, group=GROUP, seq=seq, trace=0xA000 + seq)
             for r in range(4) for seq in range(50, 58) if not (r == 2 and seq > 53)]
    report = analyze(write(str(tmp_path / "lost.jsonl"), spans))
    w = _group(report.to_dict())["wavefront"]
    assert (w["seq"], w["verdict"], w["completed"]["ranks"]) == (54, "spans_missing", [0, 1, 3])
    first = report.to_text().splitlines()[0]
    assert first.startswith("SPANS MISSING: rank 2 never entered all_reduce #54 of group 0-3, yet ranks 0, 1, 3 "
                            "completed it")
    assert "HANG" not in report.to_text()


# -- point-to-point -------------------------------------------------------------------------------------------
def test_a_send_without_its_receive_and_a_pending_receive_are_listed(tmp_path: Path) -> None:
    """§1.4: rank 0's isend #3 to rank 1 has no receive in the input; rank 1's recv #4 from rank 0 is pending."""
    spans = [_op(p2p_span("send", 0, 1, 0, 200 * US, seq=3, group="0-1"), "isend"),
             p2p_span("send", 0, 1, MS, MS + 200 * US, seq=4, group="0-1"),
             _pending(p2p_span("recv", 1, 0, MS + 10 * US, 2 * MS, seq=4, group="0-1"))]
    report = analyze(write(str(tmp_path / "p2p.jsonl"), spans))
    p2p = report.to_dict()["hang"]["p2p"]
    assert (p2p["unmatched_sends"], p2p["pending_recvs"]) == (1, 1)
    assert [(m["kind"], m["op"], m["src"], m["dst"], m["p2p_seq"]) for m in p2p["listed"]] == [
        ("unmatched_send", "isend", 0, 1, 3), ("pending_recv", "recv", 0, 1, 4)]
    lines = report.to_text().splitlines()
    assert lines[0].startswith("P2P: rank 0 (node0) isend to rank 1 [group 0-1] tag 0 #3, started ")
    assert lines[0].endswith(": no matching receive in the input (send completion: return)")
    assert lines[1] == ("P2P: rank 1 (node1) recv from rank 0 [group 0-1] tag 0 #4 pending since "
                        f"{_utc(MS + 10 * US)} ±220 ns")


# -- nothing to say -------------------------------------------------------------------------------------------
def test_a_complete_normal_export_has_no_hang(tmp_path: Path) -> None:
    """A normal export whose every collective completed: ``hang`` is null and no HANG line."""
    report = analyze(TorchJob(ranks=3, steps=3).write(str(tmp_path / "clean.jsonl")))
    d = report.to_dict()
    jsonschema.validate(d, SCHEMA)
    assert d["hang"] is None
    text = report.to_text()
    assert text.splitlines()[0].startswith("TempoTrace analysis of ") and "HANG" not in text


def test_queued_ops_count_as_got_past(tmp_path: Path) -> None:
    """§1.4: NCCL's blocking calls end ``queued`` (returned, no completion seen): the rank went on, so a normal
    export of such ops has no wavefront, though none of their ends is a completion."""
    spans = [op_span(r, _at(seq) + r * 10 * US, _at(seq) + 500 * US, group=GROUP, seq=seq, trace=0xA000 + seq,
                     completion="queued") for r in range(4) for seq in range(50, 55)]
    report = analyze(write(str(tmp_path / "nccl.jsonl"), spans))
    assert report.to_dict()["hang"] is None and "HANG" not in report.to_text()


def test_a_dump_of_a_healthy_job_lists_its_dumps_and_no_wavefront(tmp_path: Path) -> None:
    """A dump on request while nothing was stuck: the dumps are listed, no wavefront, no HANG line."""
    spans = [op_span(r, _at(seq) + r * 10 * US, _at(seq) + 500 * US, group=GROUP, seq=seq, trace=0xA000 + seq)
             for r in range(4) for seq in range(50, 53)] + [_dump(r, "request", ops=3, pending=0) for r in range(4)]
    report = analyze(write(str(tmp_path / "healthy.jsonl"), spans))
    hang = report.to_dict()["hang"]
    assert hang["groups"] == [] and hang["dumps"]["by_reason"] == {"request": 4}
    lines = report.to_text().splitlines()
    assert lines[0] == "no hang found: every rank with spans completed every collective the input holds"
    assert "HANG" not in report.to_text()


# -- the other outputs ----------------------------------------------------------------------------------------
def test_html_and_perfetto_mark_the_wavefront(tmp_path: Path) -> None:
    """§6.3: the page opens on a banner naming the collective and the ranks; §6.2: the Perfetto trace has an
    instant event per pending rank and per suspect, and a global one with the HANG line."""
    report = analyze(hang_dumps(tmp_path / "dumps.jsonl"), keep=1000)
    page = render_html(report)
    assert '<section id="hang"' in page and 'data-verdict="hang"' in page and 'data-seq="57"' in page
    assert "HANG: rank 2 (node2) never entered all_reduce #57 of group 0-3" in page
    assert page.index('<section id="hang"') < page.index('<table id="summary">')
    events = [e for e in perfetto_trace(report)["traceEvents"] if e.get("cat") == "hang"]
    pending = sorted(e["args"]["rank"] for e in events if e["name"] == "pending in all_reduce #57")
    assert pending == [0, 1, 3]
    (suspect,) = [e for e in events if e["name"].startswith("never entered all_reduce #57")]
    assert suspect["args"]["rank"] == 2 and suspect["ph"] == "i"
    (banner,) = [e for e in events if e.get("s") == "g"]
    assert banner["name"].startswith("HANG: rank 2 (node2) never entered all_reduce #57")
