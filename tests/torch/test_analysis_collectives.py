"""`tempotrace analyze` on the spans of the real 4-rank gloo job (torch_job.py; spec/analysis.md §1.3, §2.7, §4).

Rank 3's clock is the liar (10 ms off, claiming 220 ns), rank 2's is NTP-class (honest, bound saturated),
ranks 0 and 1 are PTP-class. Every collective and every point-to-point message of the job must be
matched; the liar named; no wrong decision may fall between honest clocks.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from torch_job import LIAR, NTP, WORLD, Job  # tests/torch is on sys.path (a package here would be named torch)

from tempotrace_sdk.analysis import analyze, write_perfetto
from tempotrace_sdk.cli.main import main as cli

P2P_SENDS = ("send", "isend", "send_object_list")


def _cli_json(files: list[str], capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    assert cli(["analyze", *files, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def _expected(job: Job) -> tuple[dict[tuple[str, str, int], set[int]], set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """From the raw spans: each collective's ranks, and the keys of sends and of receives."""
    collectives: dict[tuple[str, str, int], set[int]] = defaultdict(set)
    sends, recvs = set(), set()
    for rank, spans in job.spans.items():
        for s in spans:
            if s.get("torch.seq") is not None:
                collectives[(s.trace_id, s["torch.group"], s["torch.seq"])].add(rank)
            elif s.get("torch.p2p_seq") is not None:
                key = (s.trace_id, s["torch.group"], s["torch.src"], s["torch.dst"], s["torch.tag"], s["torch.p2p_seq"])
                (sends if s["torch.op"] in P2P_SENDS else recvs).add(key)
    return collectives, sends, recvs


def test_analyze_matches_every_collective_and_every_p2p_pair(job: Job, capsys: pytest.CaptureFixture[str]) -> None:
    collectives, sends, recvs = _expected(job)
    assert len(collectives) >= 28 and sends == recvs and len(sends) >= 20
    d = _cli_json(job.span_files, capsys, "--keep", "100000")  # --json lists what --keep keeps
    counts = d["collective_counts"]
    assert (counts["total"], counts["complete"], counts["incomplete"]) == (len(collectives), len(collectives), 0)
    assert counts["mismatched"] == counts["conflicts"] == counts["foreign"] == 0
    got = {(c["trace_id"], c["group"], c["seq"]): {m["rank"] for m in c["members"]} for c in d["collectives"]}
    assert got == collectives  # the --keep budget holds them all: every member of every collective matched
    assert all(not c["missing_ranks"] for c in d["collectives"])
    p2p = d["p2p"]
    assert (p2p["total"], p2p["matched"], p2p["carried"], p2p["record_mismatch"]) == (len(sends),) * 3 + (0,)
    assert d["edges"]["by_kind"]["collective"] == len(collectives) and d["edges"]["by_kind"]["p2p"] == len(sends)


def test_the_lying_rank_is_flagged_and_no_honest_pair_has_a_wrong_decision(job: Job) -> None:
    """§4: the liar's violations span several peers; the NTP-class rank (only ever ordered by Lamport on a
    recorded merge, or not at all) and the PTP-class ranks get 0 wrong decisions among themselves."""
    d = analyze(job.span_files).to_dict()
    assert [(f["host"], f["rank"], f["verdict"]) for f in d["faults"]] == [(f"node{LIAR}", LIAR, "lying")]
    assert d["lying_hosts"] == [f"node{LIAR}"] and d["suspect_hosts"] == []
    assert d["wrong_by_pair"] and all(LIAR in pair["ranks"] for pair in d["wrong_by_pair"])
    assert d["unattributed"] == 0
    assert d["collective_counts"]["outcomes"]["contradiction"] > 0


def test_lamport_decides_only_the_collectives_whose_spans_recorded_a_merge(job: Job) -> None:
    """The subgroup 0-2 (no liar, rank 2 NTP-class, so physics is silent): its all_reduce of step 2 ran with
    carriage "step+p2p" (no merge on the op span): no recorded evidence, so only the order derived from the trace's
    own structure decides it (analysis.md §2.8); those of step 4 ran with carriage "op" (every end merged every
    record) and are ordered by the carried counters or sketches."""
    d = analyze(job.span_files, keep=100_000).to_dict()
    step = {job.step_span(0, n).trace_id: n for n in range(5)}
    sub = {(step[c["trace_id"]], c["op"]): c for c in d["collectives"] if c["group"].startswith("0-2#")}
    assert set(sub) == {(2, "all_reduce"), (4, "all_reduce"), (4, "barrier")}
    assert sub[(2, "all_reduce")]["outcome"] == "consistent"
    assert sub[(2, "all_reduce")]["decision"]["method"] == "derived"
    for key in ((4, "all_reduce"), (4, "barrier")):
        assert sub[key]["outcome"] == "consistent" and sub[key]["decision"]["method"] in ("lamport", "svc")
    assert all(c["outcome"] != "contradiction" for c in sub.values())
    assert all({m["rank"] for m in c["members"]} == {0, 1, NTP} for c in sub.values())


def _without(src: Path, dst: Path, drop: set[str]) -> None:
    """Copy an OTLP JSON-lines file leaving out the spans with these span ids."""
    out = []
    for line in src.read_text().splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                ss["spans"] = [s for s in ss["spans"] if s["spanId"] not in drop]
        out.append(json.dumps(doc))
    dst.write_text("\n".join(out) + "\n")


def test_a_rank_removed_from_a_collective_makes_it_incomplete(job: Job, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 1's span of the first all_reduce of step 0 removed from its file: the collective is reported
    incomplete, naming rank 1 from the group key, and everything else still matches."""
    (gone,) = [s for s in job.in_step(1, 0) if s.get("torch.op") == "all_reduce" and s["torch.completion"] == "return"]
    files = []
    for rank in range(WORLD):
        dst = tmp_path / f"spans-{rank}.jsonl"
        _without(job.out / f"spans-{rank}.jsonl", dst, {gone.span_id} if rank == 1 else set())
        files.append(str(dst))
    d = _cli_json(files, capsys)
    counts = d["collective_counts"]
    assert (counts["incomplete"], counts["missing_members"], counts["missing_ranks"]) == (1, 1, [{"rank": 1,
                                                                                                 "count": 1}])
    (first,) = counts["incomplete_first"]
    assert (first["trace_id"], first["op"], first["group"], first["seq"], first["missing_ranks"]) == (
        gone.trace_id, "all_reduce", "0-3", gone["torch.seq"], [1])
    assert d["summary"]["collectives_incomplete"] == 1
    assert cli(["analyze", *files]) == 0
    assert "1 collectives incomplete" in capsys.readouterr().out


def test_split_runs_and_perfetto_show_the_same_collectives(job: Job, tmp_path: Path) -> None:
    """§5.3: two local processes give one process's report; §6.2: each collective is one flow."""
    one = analyze(job.span_files, keep=100_000)
    two = analyze(job.span_files, keep=100_000, jobs=2)
    a, b = one.to_dict(), two.to_dict()
    a.pop("elapsed_s")
    b.pop("elapsed_s")
    assert a == b
    write_perfetto(one, str(tmp_path / "p.json"))
    events = json.loads((tmp_path / "p.json").read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("cat") == "collective" and e["ph"] == "s") == one.collectives.total
    assert sum(1 for e in events if e.get("cat") == "p2p" and e["ph"] == "s") == one.p2p.total
