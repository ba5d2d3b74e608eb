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

from tempotrace_sdk.analysis import analyze, hang, hangfacts
from tempotrace_sdk.analysis.dask_engine import analyze_dask
from tempotrace_sdk.analysis.engine import Options, run
from tempotrace_sdk.analysis.groupkey import GroupKey
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


def _group(report: dict[str, Any], group: str = GROUP, restart: int | None = None) -> dict[str, Any]:
    (row,) = [g for g in report["hang"]["groups"] if g["group"] == group and restart in (None, g["restart"])]
    return row


def _ops(seqs: range, *, skip: dict[int, int] | None = None, completion: str = "return",
         ops: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """Ranks 0-3's op spans of ``seqs``, one trace a seq; ``skip``: rank -> the seq its spans stop before;
    ``ops``: seq -> its op (else all_reduce; a broadcast roots at rank 0)."""
    skip, ops = skip or {}, ops or {}
    return [op_span(r, _at(seq) + r * 10 * US, _at(seq) + 500 * US, group=GROUP, seq=seq, trace=0xA000 + seq,
                    completion=completion, op=ops.get(seq, "all_reduce"),
                    root=0 if ops.get(seq) == "broadcast" else None)
            for r in range(4) for seq in seqs if seq < skip.get(r, seq + 1)]


def _split(path: str, n: int) -> dict[str, Any] | None:
    """The hang object of ``n`` partitions (by trace, as ``--jobs n`` splits) analysed here and merged."""
    outcomes = [run(expand([path]), None, Options(), (k, n)) for k in range(n)]
    return merge_reports([o.partial for o in outcomes], Options().keep).to_dict()["hang"]


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


def test_a_lying_clock_is_named_and_orders_nothing(tmp_path: Path) -> None:
    """§4, §1.4: rank 3's clock reads 10 ms late while claiming ±220 ns: its collectives' claims are broken and
    the ledger names it lying. "Since" is the latest entry a trusted clock read (rank 1's, not rank 3's lie),
    and rank 3's entry, named LYING beside its time, is ordered against nothing: "cannot tell" (``lying_clock``)
    though its reading lies 10 ms past the others' bounds."""
    report = analyze(hang_dumps(tmp_path / "dumps.jsonl", late={3: 10 * MS}))
    d = report.to_dict()
    jsonschema.validate(d, SCHEMA)
    assert [(f["rank"], f["verdict"]) for f in d["faults"]] == [(3, "lying")]
    w = _group(d)["wavefront"]
    assert (w["since"]["rank"], w["since"]["clock_verdict"]) == (1, None)
    last = w["order"][-1]
    assert (last["rank"], last["clock_verdict"]) == (3, "lying")
    assert last["after_previous"] == {"relation": "undecided", "method": "undecided", "confidence": 0.0,
                                      "why": "lying_clock"}
    lines = report.to_text().splitlines()
    assert lines[0].endswith(f"since {_utc(_at(57) + 10 * US)} ±220 ns")
    assert (f"    then rank 3 (node3) entered all_reduce #57 at {_utc(_at(57) + 30 * US + 10 * MS)} ±220 ns [rank 3's "
            "clock (node3) is LYING (clock faults, below): this time cannot be trusted]: cannot tell (a side's clock "
            "is LYING (clock faults, below))") in lines


def test_since_and_the_last_events_read_every_pending_rank(tmp_path: Path) -> None:
    """§1.4: 1,100 ranks, rank 5 never entered #2, the others pending in it: "since" is the latest entry of all
    1,099 (rank 1099's, though only 1,024 are listed), the order ends on the latest entries, and order_total
    counts every rank's last event."""
    n = 1100
    group = f"0-{n - 1}"
    spans = []
    for r in range(n):
        spans.append(op_span(r, MS + r * 100, 2 * MS, group=group, seq=1, trace=0xA001))
        if r != 5:
            spans.append(_pending(op_span(r, 3 * MS + r * 100, 4 * MS, group=group, seq=2, trace=0xA002)))
    d = analyze(write(str(tmp_path / "wide.jsonl"), spans)).to_dict()
    assert d["faults"] == []
    w = _group(d, group)["wavefront"]
    assert (w["pending"]["count"], len(w["pending"]["members"])) == (n - 1, 1024)
    assert (w["since"]["rank"], w["since"]["tai_ns"]) == (n - 1, T0 + 3 * MS + (n - 1) * 100)
    assert [e["rank"] for e in w["order"]][-3:] == [n - 3, n - 2, n - 1]
    assert w["order_total"] == n  # rank 5's last completion and 1,099 entries


def test_facts_of_another_restart_are_not_a_suspects(tmp_path: Path) -> None:
    """§1.4, §5.5: rank 2 dumped in restart 0 (its ring overwrote 40 ops) and left no span in restart 1, where
    it never entered #4: restart 1's suspect has no spans in the input and overwrote nothing, whatever restart 0
    says of the same rank number."""
    path = str(tmp_path / "restarts.jsonl")
    Path(path).write_text("")
    for restart in (0, 1):
        for r in range(4):
            if restart == 1 and r == 2:
                continue
            base = restart * 1000 * MS
            spans = [op_span(r, base + seq * MS + r * 10 * US, base + seq * MS + 500 * US, group=GROUP, seq=seq,
                             trace=0xA000 + seq + restart * 100, sid=0x10000 * (restart + 1) + r * 0x100 + seq)
                     for seq in range(1, 4)]
            if restart == 1:
                spans.append(_pending(op_span(r, base + 5 * MS, base + 6 * MS, group=GROUP, seq=4, trace=0xA200,
                                              sid=0x90000 + r)))
            if restart == 0 and r == 2:
                spans.append(_dump(2, "request", ops=3, pending=0, overwritten=40))
            write(path, spans, 64, {"tempotrace.rank": r, "tempotrace.job_id": "job", "tempotrace.restart": restart},
                  mode="a")
    d = analyze(path).to_dict()
    jsonschema.validate(d, SCHEMA)
    g = _group(d, restart=1)
    (suspect,) = g["wavefront"]["never_entered"]["ranks"]
    assert (suspect["rank"], suspect["spans"], suspect["host"], suspect["overwritten"]) == (2, "none", None, 0)
    assert g["no_spans_in_input"] == [2]
    assert d["hang"]["dumps"]["overwritten"] == [{"job_id": "job", "restart": 0, "rank": 2, "ops": 40}]


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
    assert dumps["overwritten"] == [{"job_id": "job-h", "restart": 0, "rank": 1, "ops": 40}]
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
    assert first.startswith("SPANS MISSING: rank 2 (node2) never entered all_reduce #54 of group 0-3, yet ranks 0, "
                            "1, 3 completed it")
    assert "HANG" not in report.to_text()


def test_a_later_all_op_completed_proves_every_rank_got_past(tmp_path: Path) -> None:
    """§1.4: rank 2's spans stop at #53; the others completed broadcast #54 (rooted: it completes without rank 2)
    and then all_reduces #55-#57. An all_reduce completes only once every rank joined it, so rank 2 got past
    #54 too: its spans are lost (spans_missing, the completion named as proof), whether or not the input holds
    a span of #54 at all."""
    spans = _ops(range(50, 58), skip={2: 54}, ops={54: "broadcast"})
    no_54 = [x for x in spans if not any(a["key"] == "tempotrace.torch.seq" and a["value"]["intValue"] in (54, "54")
                                         for a in x["attributes"])]
    for name, input_, op in (("broadcast", spans, "broadcast"), ("none-of-54", no_54, None)):
        report = analyze(write(str(tmp_path / f"{name}.jsonl"), input_))
        d = report.to_dict()
        jsonschema.validate(d, SCHEMA)
        w = _group(d)["wavefront"]
        assert (w["seq"], w["op"], w["verdict"]) == (54, op, "spans_missing"), name
        assert w["proof"]["op"] == "all_reduce" and w["proof"]["seq"] >= 55
        text = report.to_text()
        assert text.splitlines()[0].startswith(f"SPANS MISSING: rank 2 (node2) never entered {op or 'collective'} #54 "
                                               "of group 0-3, yet rank ")
        assert "HANG" not in text


def test_nobody_waiting_in_what_the_others_completed_is_no_hang(tmp_path: Path) -> None:
    """§1.4: rank 2's spans stop at #53; the others completed broadcast #54 (rooted at rank 0: it completes
    without rank 2) and nothing after. Nobody is pending or failed in it and no completion proves rank 2 got
    past it: ``spans_stop``, said as such, not a HANG."""
    report = analyze(write(str(tmp_path / "stop.jsonl"), _ops(range(50, 55), skip={2: 54}, ops={54: "broadcast"})))
    w = _group(report.to_dict())["wavefront"]
    assert (w["seq"], w["verdict"], w["completed"]["ranks"], w["proof"]) == (54, "spans_stop", [0, 1, 3], None)
    first = report.to_text().splitlines()[0]
    assert first == ("SPANS STOP: rank 2 (node2) never entered broadcast #54 of group 0-3; ranks 0, 1, 3 completed it: "
                     "no rank waits in it, so its later spans are missing from the input, or it stopped outside the "
                     "group's collectives (no hang in it)")
    assert "HANG" not in report.to_text()


def test_spans_missing_with_every_rank_entered_says_the_pending_spans_are_stale(tmp_path: Path) -> None:
    """§1.4: every rank entered all_reduce #57 and rank 0 completed it, the others' spans pending: the line names
    the pending ranks (no empty "never entered" list) and says their spans are stale."""
    spans = _ops(range(50, 57)) + [
        x if r == 0 else _pending(x)
        for r in range(4) for x in [op_span(r, _at(57) + r * 10 * US, _at(57) + 500 * US, group=GROUP, seq=57,
                                            trace=0xA000 + 57)]]
    report = analyze(write(str(tmp_path / "slow.jsonl"), spans))
    w = _group(report.to_dict())["wavefront"]
    assert (w["verdict"], w["never_entered"]["count"], w["pending"]["count"]) == ("spans_missing", 0, 3)
    first = report.to_text().splitlines()[0]
    assert first.startswith("SPANS MISSING: ranks 1-3 pending in all_reduce #57 of group 0-3 since ")
    assert "yet rank 0 completed it: it completes only once every rank joined, so the pending or failed spans are " \
           "stale" in first
    assert "ranks  never" not in first


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


def test_an_ambiguous_pending_receive_is_listed_marked_ambiguous(tmp_path: Path) -> None:
    """§1.4: every receive whose completion is pending is listed, one marked ``p2p_ambiguous`` included (§1.3:
    its message counts ambiguous, and it is marked so)."""
    spans = [p2p_span("send", 0, 1, MS, MS + 200 * US, seq=4, group="0-1"),
             _pending(p2p_span("recv", 1, 0, MS + 10 * US, 2 * MS, seq=4, group="0-1", torch_p2p_ambiguous=True))]
    report = analyze(write(str(tmp_path / "p2p.jsonl"), spans))
    d = report.to_dict()
    jsonschema.validate(d, SCHEMA)
    assert d["p2p"]["ambiguous"] == 1
    (m,) = d["hang"]["p2p"]["listed"]
    assert (m["kind"], m["ambiguous"], d["hang"]["p2p"]["pending_recvs"]) == ("pending_recv", True, 1)
    assert report.to_text().splitlines()[0].endswith("(ambiguous: torch may have given it another message)")


# -- limits ----------------------------------------------------------------------------------------------------
def test_caps_keep_the_smallest_keys_whatever_the_partitions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """§1.4: six two-rank groups, each in its own trace, with caps of 3 groups, 4 rank rows and 5 ranks seen (and
    overwriting rings): what each cap keeps is the smallest keys (by text: 0-1, 10-11, 2-3), not the first to arrive,
    and what it leaves out is counted in spans (dump records for the rings), so one process and any split of
    the traces give the same hang object (the largest keys come first in the input)."""
    monkeypatch.setattr(hangfacts, "MAX_GROUPS", 3)
    monkeypatch.setattr(hangfacts, "MAX_RANK_ROWS", 4)
    monkeypatch.setattr(hangfacts, "MAX_SEEN_RANKS", 5)
    spans = []
    for i in reversed(range(6)):  # the largest keys first in the input
        group = f"{2 * i}-{2 * i + 1}"
        spans += [op_span(r, MS, 2 * MS, group=group, seq=1, trace=0xB000 + i, completion="error")
                  for r in (2 * i, 2 * i + 1)]
        spans.append(_dump(2 * i, "hang", ops=1, pending=0, overwritten=10 + i))
    path = write(str(tmp_path / "caps.jsonl"), spans, per_line=3)
    one = analyze(path).to_dict()["hang"]
    assert [g["group"] for g in one["groups"]] == ["0-1", "10-11"]  # keys in text order; 2-3's rows beyond the cap
    assert one["dropped"] == {"groups": 6, "overwritten": 1, "ranks": 2, "seen": 10}  # spans; dump records
    assert [(o["rank"], o["ops"]) for o in one["dumps"]["overwritten"]] == [(0, 10), (2, 11), (4, 12), (6, 13), (8, 14)]
    for n in (2, 3, 4):
        assert _split(path, n) == one, n


def test_a_wide_groups_hang_line_says_the_other_ranks_wait(tmp_path: Path) -> None:
    """§6: 1,100 ranks, one never entered #1, the other 1,099 pending in it (more than the 1,024 the report
    names): the first line says "the other 1,099 ranks", not the first named ones and a count."""
    size, bad = 1100, 617
    spans = []
    for r in range(size):
        spans.append(op_span(r, 0, MS, group=f"0-{size - 1}", seq=0, sid=(r + 1) * 0x100 + 1))
        if r != bad:
            spans.append(_pending(op_span(r, 2 * MS + r, 3 * MS, group=f"0-{size - 1}", seq=1,
                                          sid=(r + 1) * 0x100 + 2)))
    report = analyze(write(str(tmp_path / "wide-hang.jsonl"), spans))
    head = report.to_text().splitlines()[0]
    assert head.startswith(f"HANG: rank {bad} (node{bad}) never entered all_reduce #1 of group 0-{size - 1}; "
                           f"the other {size - 1:,} ranks pending in it since "), head
    w = _group(report.to_dict(), f"0-{size - 1}")["wavefront"]
    assert (w["pending"]["count"], len(w["pending"]["members"])) == (size - 1, 1024)
    # where a row follows (ranks that failed in it), the capped pending row is not "the other" ranks
    for r in range(1050, size):  # (rank r's #1 is span 2r: rank ``bad`` left none out, before it)
        spans[2 * r] = op_span(r, 2 * MS + r, 3 * MS, group=f"0-{size - 1}", seq=1,
                                           sid=(r + 1) * 0x100 + 2, completion="error")
    head = analyze(write(str(tmp_path / "wide-hang-2.jsonl"), spans)).to_text().splitlines()[0]
    assert "the other" not in head and "(1,049 in all) pending in it" in head and "ranks 1050-1099 failed" in head, \
        head


def test_a_wide_group_key_is_not_walked_and_hang_is_decided_once(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """§1.4: groups whose keys name 2^20 ranks, one span each: the decision walks the ranks with spans and lists
    the first absent ones as it reads the key, never expanding it; and the outputs share one decision."""
    spans = [op_span(0, MS, 2 * MS, group=f"0-1048575#g{i}", seq=1, trace=0xB000 + i, completion="error")
             for i in range(3)]
    report = analyze(write(str(tmp_path / "wide.jsonl"), spans))

    def expand(self: GroupKey) -> Any:
        raise AssertionError(f"expanded {self.text}")

    monkeypatch.setattr(GroupKey, "ranks", expand)
    calls = []
    decide = hang._decide
    monkeypatch.setattr(hang, "_decide", lambda *a: calls.append(1) or decide(*a))
    d = report.to_dict()
    report.to_text()
    render_html(report)
    perfetto_trace(report)
    assert len(calls) == 1
    w = _group(d, "0-1048575#g0")["wavefront"]
    assert (w["never_entered"]["count"], len(w["never_entered"]["ranks"])) == (1048575, 1024)
    assert [r["rank"] for r in w["never_entered"]["ranks"][:3]] == [1, 2, 3]


def test_a_rank_whose_open_spans_passed_the_cap_is_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """§1.4: rank 1 had #2-#5 pending (one beyond an open cap of 3, dropped), then completed #2-#4: where it is
    at #5 is unknown (its dropped span may be there), not "never entered"."""
    monkeypatch.setattr(hangfacts, "MAX_OPEN", 3)
    spans = [op_span(r, _at(seq), _at(seq) + 500 * US, group=GROUP, seq=seq, trace=0xA000 + seq, sid=0x100 * r + seq)
             for r in (0, 2, 3) for seq in range(1, 7)]
    spans += [_pending(op_span(1, _at(seq), _at(seq) + 500 * US, group=GROUP, seq=seq, trace=0xA000,
                               sid=0x1100 + seq)) for seq in range(1, 6)]
    spans += [op_span(1, _at(seq), _at(seq) + 500 * US, group=GROUP, seq=seq, trace=0xA100, sid=0x1200 + seq)
              for seq in range(1, 5)]
    d = analyze(write(str(tmp_path / "open.jsonl"), spans, per_line=1)).to_dict()
    jsonschema.validate(d, SCHEMA)
    w = _group(d)["wavefront"]
    assert (w["seq"], w["never_entered"]["count"], w["unknown"]["ranks"]) == (5, 0, [1])
    assert d["hang"]["dropped"] == {"open": 2}


def test_a_row_the_cap_refused_makes_no_empty_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """§1.4: with a cap of two rank rows, group 0-1's ranks take both; group 0-3#b's spans are left out (counted)
    and the report does not show it as a group whose ranks left no spans."""
    monkeypatch.setattr(hangfacts, "MAX_RANK_ROWS", 2)
    spans = [op_span(r, MS, 2 * MS, group="0-1", seq=1, trace=0xB001, completion="error") for r in (0, 1)]
    spans += [op_span(r, 3 * MS, 4 * MS, group="0-3#b", seq=1, trace=0xB002) for r in range(4)]
    text_report = analyze(write(str(tmp_path / "rows.jsonl"), spans))
    hang_ = text_report.to_dict()["hang"]
    assert [g["group"] for g in hang_["groups"]] == ["0-1"] and hang_["dropped"] == {"ranks": 4}
    assert "0-3#b" not in text_report.to_text().split("TempoTrace analysis of")[0]


def test_a_key_naming_a_rank_twice_is_a_bad_value(tmp_path: Path) -> None:
    """§1.3: ``0-3,2-5`` names ranks 2 and 3 twice: refused like a malformed key (a bad span), so it claims no
    group of six ranks."""
    x = op_span(0, MS, 2 * MS, group="0-5", seq=1, trace=0xB001)
    for a in x["attributes"]:
        if a["key"] == "tempotrace.torch.group":
            a["value"] = {"stringValue": "0-3,2-5"}
        if a["key"] == "tempotrace.torch.group_size":
            a["value"] = {"intValue": "8"}  # its runs' lengths: the key itself is what is wrong
    ok = op_span(1, MS, 2 * MS, group="0-1", seq=1, trace=0xB002)
    d = analyze(write(str(tmp_path / "twice.jsonl"), [x, ok])).to_dict()
    assert d["summary"]["bad_spans"] == 1
    assert [g["group"] for g in d["hang"]["groups"]] == ["0-1"]  # rank 0 left no span: the refused one


def test_suspects_beyond_the_detail_lines_are_counted(tmp_path: Path) -> None:
    """§6: ten ranks never entered #2: the text details eight and says how many there are in all."""
    group = "0-10"
    spans = [op_span(r, MS + r * US, 2 * MS, group=group, seq=1, trace=0xA001) for r in range(11)]
    spans.append(_pending(op_span(0, 3 * MS, 4 * MS, group=group, seq=2, trace=0xA002)))
    lines = analyze(write(str(tmp_path / "many.jsonl"), spans)).to_text().splitlines()
    details = [x for x in lines if x.startswith("  rank ")]
    assert len(details) == 8
    assert ("  ... (10 ranks never entered it; --json: hang.groups[].wavefront.never_entered lists the first 1,024)"
            in lines)


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


def test_queued_ops_waiting_on_a_rank_that_never_entered_is_a_hang(tmp_path: Path) -> None:
    """§1.4: with NCCL every blocking call ends ``queued``: ranks 0, 1, 3 queued all_reduce #57, rank 2 never
    entered it. Queued is no completion, so nothing says every rank joined it: a HANG, the others "queued it"
    (not "completed it"), and no spans_missing."""
    spans = _ops(range(50, 58), skip={2: 57}, completion="queued")
    report = analyze(write(str(tmp_path / "nccl.jsonl"), spans))
    w = _group(report.to_dict())["wavefront"]
    assert (w["seq"], w["verdict"], w["completed"]["count"], w["queued"]["ranks"]) == (57, "hang", 0, [0, 1, 3])
    assert report.to_text().splitlines()[0] == ("HANG: rank 2 (node2) never entered all_reduce #57 of group 0-3; "
                                                "ranks 0, 1, 3 queued it (the call returned; no completion seen)")


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


def test_pending_spans_a_rank_got_past_are_flagged(tmp_path: Path) -> None:
    """§1.4: seqs restart at 0 after uninstrument()/instrument(): every rank completed #0-#9, then #0-#3 again,
    and ranks 0, 1, 3 dumped #4 pending while rank 2 never entered it. The facts keyed by (job, group) see
    pending spans at or below what each rank got past: they are listed as stale, said so, and the text does
    not say "no hang found"."""
    spans = []
    for r in range(4):
        spans += [op_span(r, seq * MS + r * US, seq * MS + 500 * US, group=GROUP, seq=seq, trace=0xA000 + seq,
                          sid=0x10000 + r * 0x100 + seq) for seq in range(10)]
        for seq in range(5 if r != 2 else 4):
            x = op_span(r, (100 + seq) * MS + r * US, (100 + seq) * MS + 500 * US, group=GROUP, seq=seq,
                        trace=0xB000 + seq, sid=0x20000 + r * 0x100 + seq)
            spans.append(_pending(x) if seq == 4 else x)
        spans.append(_dump(r, "hang" if r == 0 else "peer", ops=5, pending=0 if r == 2 else 1,
                           requested_by=None if r == 0 else 0))
    report = analyze(write(str(tmp_path / "reinstrumented.jsonl"), spans, 64, JOB))
    d = report.to_dict()
    jsonschema.validate(d, SCHEMA)
    g = _group(d)
    assert g["wavefront"] is None
    assert [(m["rank"], m["seq"], m["got_past"]) for m in g["stale_pending"]["members"]] == [(0, 4, 9), (1, 4, 9),
                                                                                             (3, 4, 9)]
    text = report.to_text()
    assert text.splitlines()[0].startswith("STALE PENDING: ranks 0, 1, 3 pending in all_reduce #4 of group 0-3, yet "
                                           "each got past a collective at or above it (#9)")
    assert "no hang found" not in text


def test_a_dump_without_a_rank_and_pending_ops_the_input_lacks(tmp_path: Path) -> None:
    """§1.4: a dump record that names no rank is shown by its host ("rank ?"), and when it says it wrote a
    pending op the input does not hold, the text does not say "no hang found"."""
    d = _dump(0, "hang", ops=5, pending=1)
    d["attributes"] = [a for a in d["attributes"] if a["key"] != "tempotrace.rank"]
    report = analyze(write(str(tmp_path / "norank.jsonl"), [d]))
    assert report.to_dict()["hang"]["dumps"]["pending"] == 1
    lines = report.to_text().splitlines()
    assert lines[0] == ("PENDING SPANS MISSING: the dumps say they wrote 1 pending op, yet the input holds no "
                        "collective a rank did not get past: its span is missing from the input")
    assert lines[1] == "  dumps seen: 1: rank ? (node0) hang (5 ops, 1 pending)"


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


def test_an_op_dumped_pending_that_then_ends_is_completed(tmp_path: Path) -> None:
    """§5.2, spec/torch.md §8.2: an op slower than hang_timeout is dumped pending and its span is exported again
    when it ends, under the same span id; the ended span takes the pending one's place, so the slow collective
    is complete, not a hang, and nothing else double-counts it."""
    path = hang_dumps(tmp_path / "dumps.jsonl")
    later = [op_span(r, _at(57) + r * 10 * US, _at(57) + 9 * MS, group=GROUP, seq=57, trace=0xA000 + 57)
             for r in range(4)]  # rank 2 entered at last; every rank's #57 ended
    for r, sp in enumerate(later):
        write(path, [sp], 1, {"tempotrace.rank": r, **JOB}, mode="a")
    report = analyze(path)
    d = report.to_dict()
    assert d["duplicate_spans"] == 3  # the pending copies, replaced
    c = d["collective_counts"]
    assert (c["total"], c["incomplete"], c["ends_not_completed"]) == (8, 0, 0)
    assert all(g["wavefront"] is None for g in d["hang"]["groups"]), d["hang"]["groups"]
    assert not report.to_text().startswith("HANG")
    # delivered the other way round, the pending copy is the duplicate and the op still complete
    reverse = tmp_path / "reverse.jsonl"
    for r, sp in enumerate(later):
        write(str(reverse), [sp], 1, {"tempotrace.rank": r, **JOB}, mode="a")
    with open(path, encoding="utf-8") as fh, open(reverse, "a", encoding="utf-8") as out:
        out.write(fh.read())
    d2 = analyze(str(reverse)).to_dict()
    assert d2["collective_counts"]["incomplete"] == 0 and d2["duplicate_spans"] == 7


def test_the_html_banner_shows_a_hostile_host_name_escaped(tmp_path: Path) -> None:
    """A host name holding an escape sequence and a bidirectional override is shown in the banner's table as
    the text report shows it, not raw (spec/reliability.md §7)."""
    hostile = "node\u202e2\x1b[2J"
    path = tmp_path / "dumps.jsonl"
    text = Path(hang_dumps(path)).read_text(encoding="utf-8")
    path.write_text(text.replace('"node2"', json.dumps(hostile)), encoding="utf-8")
    section = render_html(analyze(str(path)))
    section = section[section.index('<section id="hang"'):section.index("</section>")]
    assert "\u202e" not in section and "\x1b" not in section
    assert "<td>node\\u202e2\\x1b[2J</td>" in section
