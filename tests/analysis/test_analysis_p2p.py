"""torch point-to-point messages (spec/analysis.md §1.3): the k-th send of (group, src, dst, tag) meets the
k-th receive; the edge is the send event -> the receive's completion; Lamport only where the receive
recorded a merge; a sender that is not in the input is never guessed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tempotrace_sdk.analysis import AnalysisReport, analyze

from .torchgen import p2p_span, write

MS = 1_000_000
SEND_SID = 0x51
RECV_SID = 0x52


def _run(tmp_path: Path, spans: list[dict[str, Any]]) -> AnalysisReport:
    return analyze(write(str(tmp_path / "t.jsonl"), spans), keep=100)


def _message(*, record_ptp: int | None = 1000, record_span: int = SEND_SID, recv_end: int = 50_000,
             merged: bool = True, send: bool = True, recv: bool = True, **recv_kw: Any) -> list[dict[str, Any]]:
    """Rank 0 sends message 0 to rank 1 (send span 0..2,000 ns); rank 1's receive runs 500..recv_end."""
    out = []
    if send:
        out.append(p2p_span("send", 0, 1, 0, 2000, group="0-1", sid=SEND_SID, lts=10, end_lts=12, send_lts=11))
    if recv:
        record = None if record_ptp is None else {"ptp": record_ptp, "lts": 11, "span": record_span}
        kw: dict[str, Any] = {"recv_lts": 30} if merged and record is not None else {}
        out.append(p2p_span("recv", 1, 0, 500, recv_end, group="0-1", sid=RECV_SID, record=record, lts=29,
                            end_lts=31, **kw, **recv_kw))
    return out


def test_a_matched_message_is_ordered_send_event_to_receive_completion(tmp_path: Path) -> None:
    rep = _run(tmp_path, _message())
    (hop,) = rep.hops_kept
    assert rep.p2p.matched == rep.p2p.total == rep.p2p.carried == 1
    assert (hop["kind"], hop["send_span"], hop["recv_span"], hop["send_rank"], hop["recv_rank"]) == (
        "p2p", f"{SEND_SID:016x}", f"{RECV_SID:016x}", 0, 1)
    assert hop["recv_ptp_ns"] - hop["send_ptp_ns"] == 49_000  # the record's reading -> the receive's end
    assert hop["decision"]["method"] == "physics" and hop["outcome"] == "consistent" and hop["matched"]
    assert rep.edges.by_kind["p2p"] == 1


def test_a_lying_sender_is_blamed_with_its_receiver(tmp_path: Path) -> None:
    """The record reads 10 ms after the receive completed: rank 0's clock or rank 1's broke its bound."""
    rep = _run(tmp_path, _message(record_ptp=10 * MS))
    assert rep.hops_kept[0]["outcome"] == "contradiction"
    assert rep.to_dict()["wrong_by_pair"] == [{"hosts": ["node0", "node1"], "ranks": [0, 1], "method": "physics",
                                               "count": 1}]


def test_a_lone_receive_is_decided_from_its_record_but_blames_nobody(tmp_path: Path) -> None:
    rep = _run(tmp_path, _message(record_ptp=10 * MS, send=False))
    assert (rep.p2p.unmatched_recvs, rep.p2p.matched) == (1, 0)
    assert rep.edges.unattributed == 1 and not rep.faults and rep.hops_kept[0]["send_rank"] is None


def test_a_record_from_another_span_blames_nobody(tmp_path: Path) -> None:
    rep = _run(tmp_path, _message(record_ptp=10 * MS, record_span=0x99))
    assert rep.p2p.record_mismatch == 1 and rep.edges.unattributed == 1 and not rep.faults
    assert "carry a record from another send" in rep.to_text()


def test_lone_sends_and_receives_that_never_completed_are_counted_not_ordered(tmp_path: Path) -> None:
    lone = _run(tmp_path, _message(recv=False))
    assert (lone.p2p.total, lone.p2p.unmatched_sends, lone.edges.by_kind.get("p2p")) == (1, 1, None)
    never = _run(tmp_path, _message(completion="unfinished"))
    assert (never.p2p.matched, never.p2p.not_completed, never.edges.by_kind.get("p2p")) == (1, 1, None)


def test_without_a_recorded_merge_the_counters_say_nothing(tmp_path: Path) -> None:
    """An NTP-class receive (physics silent) whose counters would say "receive before send" (end lts 31 is
    above the send's 10, so flip it: 5) gives no Lamport evidence without recv.lts: the pair is ordered by the
    trace's structure (derived, §2.8), never by the two counters."""
    spans = _message(record_ptp=None, u=65535)
    spans[1]["attributes"] = [kv for kv in spans[1]["attributes"] if kv["key"] != "tempotrace.end.lts"]
    spans[1]["attributes"].append({"key": "tempotrace.end.lts", "value": {"intValue": "5"}})
    rep = _run(tmp_path, spans)
    assert rep.hops_kept[0]["decision"] == {"relation": "before", "method": "derived", "confidence": 1.0}
    assert sum(rep.edges.wrong.values()) == 0 and rep.edges.decided["lamport"] == 0


def test_a_recorded_merge_lets_lamport_decide(tmp_path: Path) -> None:
    rep = _run(tmp_path, _message(u=65535))
    assert rep.hops_kept[0]["decision"] == {"relation": "not_after", "method": "lamport", "confidence": 1.0}


def test_messages_match_by_sequence_number_whatever_the_order(tmp_path: Path) -> None:
    """Three messages 0 -> 1 on tag 5, the receives listed first and in reverse: each pairs with its own send."""
    sends = [p2p_span("send", 0, 1, k * 10_000, k * 10_000 + 100, seq=k, tag=5) for k in range(3)]
    recvs = [p2p_span("recv", 1, 0, k * 10_000 + 50, k * 10_000 + 900, seq=k, tag=5) for k in range(3)]
    rep = _run(tmp_path, recvs[::-1] + sends)
    assert rep.p2p.matched == 3 and all(h["outcome"] == "consistent" for h in rep.hops_kept)
    assert sorted((h["p2p_seq"], h["tag"]) for h in rep.hops_kept) == [(0, 5), (1, 5), (2, 5)]


def _swapped(ambiguous: bool) -> list[dict[str, Any]]:
    """spec/torch.md §2, the overlap torch may pair otherwise: rank 1 posted an any-source and a specific
    receive on one tag; rank 0 sent messages 0 (at 0 ns) and 1 (at 40 ms). torch gave message 1 to the
    receive numbered 0, which completed at 45 ms and carries message 0's record (their side messages follow
    the numbers), and message 0 to the one numbered 1 (ended at 1 ms, carrying message 1's record, read at
    40 ms: "received before it was sent"). Then message 2 (tag 0 again, no overlap) pairs as usual."""
    flag = {"torch_p2p_ambiguous": True} if ambiguous else {}
    send = [p2p_span("send", 0, 1, k * 40 * MS, k * 40 * MS + 2000, seq=k, sid=0x60 + k, send_lts=11 + k)
            for k in range(3)]
    recv = [p2p_span("recv", 1, 0, 500, 45 * MS, seq=0, sid=0x70, record={"ptp": 1000, "lts": 11, "span": 0x60},
                     **flag),
            p2p_span("recv", 1, 0, 400, 1 * MS, seq=1, sid=0x71, completion="future",
                     record={"ptp": 40 * MS + 1000, "lts": 12, "span": 0x61}, **flag),
            p2p_span("recv", 1, 0, 50 * MS, 80 * MS + 5000, seq=2, sid=0x72,
                     record={"ptp": 80 * MS + 1000, "lts": 13, "span": 0x62})]
    return send + recv


def test_receives_marked_ambiguous_are_not_paired_by_their_numbers(tmp_path: Path) -> None:
    """§1.3, spec/torch.md §2: both receives of the overlap are counted ambiguous and order nothing (no p2p
    edge, no record check: the record of the receive numbered 1 would otherwise contradict the clocks and
    blame two honest ones); their sends are not reported lost; the message after the overlap pairs."""
    rep = _run(tmp_path, _swapped(ambiguous=True))
    p = rep.p2p
    assert (p.total, p.ambiguous, p.matched, p.unmatched_sends, p.unmatched_recvs) == (3, 2, 1, 0, 0)
    assert (p.carried, p.record_mismatch) == (1, 0)
    (hop,) = rep.hops_kept
    assert (hop["p2p_seq"], hop["recv_span"], hop["outcome"]) == (2, f"{0x72:016x}", "consistent")
    assert rep.edges.by_kind["p2p"] == 1 and sum(rep.edges.wrong.values()) == 0 and not rep.faults
    assert rep.to_dict()["p2p"]["ambiguous"] == 2
    text = rep.to_text()
    assert "2 point-to-point receives are marked ambiguous" in text and "2 ambiguous, not ordered" in text


def test_the_same_receives_unmarked_are_paired_and_blame_the_clocks(tmp_path: Path) -> None:
    """The control: without the mark the numbers pair the receive numbered 1 with message 1, whose record
    reads after that receive completed, so the analysis calls the clocks liars (what an unmarked overlap
    did before the mark existed)."""
    rep = _run(tmp_path, _swapped(ambiguous=False))
    assert (rep.p2p.ambiguous, rep.p2p.matched) == (0, 3)
    assert sum(rep.edges.wrong.values()) == 1 and "ambiguous" not in rep.to_text()
