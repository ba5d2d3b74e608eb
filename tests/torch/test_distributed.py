"""Four real gloo ranks, started as torchrun starts them (RANK, WORLD_SIZE, MASTER_* in the environment).

One job runs for the whole session (torch_job.py, the ``job`` fixture of
conftest.py; tests/torch/rank_worker.py says what each step does); each test
reads the spans and results it left. Rank 3's clock is the simulated liar
(10 ms off, claiming 220 ns), rank 2's is NTP-class; the others are PTP-class.
Spec: spec/torch.md, spec/semantic-conventions.md §9.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

pytest.importorskip("torch")

from spans_file import Span  # tests/torch is on sys.path (a package here would be named torch)
from torch_job import JOB, LIAR, NTP, WORLD, Job

from tempotrace_sdk.clocks.simulated import PROFILES
from tempotrace_sdk.wire.torchkeys import step_ids

#: How far an end may read before its own start: the NTP-class rank's simulated clock adds Gaussian
#: noise (σ 50 µs) to every reading independently, so two readings of a short op can swap (the
#: analysis allows for it: html_model.span_times); 5σ of the difference of two readings. The other
#: ranks' noise is 15 ns, far below any op here.
NOISE_SLACK_NS = {NTP: round(5 * PROFILES["ntp"].noise_ns * 2**0.5)}


def ends_after_start(rank: int, s: Span) -> bool:
    """The span has an end reading and it is not before its start reading beyond the rank's clock noise."""
    end = s.get("end.ptp_ns")
    return end is not None and end >= s["ptp_ns"] - NOISE_SLACK_NS.get(rank, 0)


COLLECTIVES = (
    "all_reduce all_gather all_gather_into_tensor all_gather_single reduce_scatter reduce_scatter_tensor "
    "reduce_scatter_single all_to_all all_to_all_single broadcast reduce gather scatter barrier all_gather_object "
    "gather_object broadcast_object_list scatter_object_list"
).split()


def test_every_collective_is_traced_once_per_rank_with_the_same_sequence_numbers(job: Job) -> None:
    """§9.2: one span per op per rank; the per-group seq names the same collective on every rank."""
    by_rank = {}
    for rank in range(WORLD):
        spans = [s for s in job.in_step(rank, 0) if s.get("torch.seq") is not None]
        kinds = Counter(s["torch.op"] for s in spans)
        assert set(kinds) == set(COLLECTIVES), set(COLLECTIVES) ^ set(kinds)
        assert kinds["all_reduce"] == 2 and all(kinds[k] == 1 for k in COLLECTIVES if k != "all_reduce")
        by_rank[rank] = sorted((s["torch.seq"], s["torch.op"]) for s in spans)
        assert all(s["torch.group"] == "0-3" and s["torch.group_size"] == WORLD for s in spans)
        assert all(s["torch.group_rank"] == rank and s["rank"] == rank for s in spans)
    assert by_rank[0] == by_rank[1] == by_rank[2] == by_rank[3]
    seqs = [seq for seq, _ in by_rank[0]]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def test_roots_bytes_and_async_ends_are_recorded(job: Job) -> None:
    for rank in range(WORLD):
        spans = {s["torch.op"]: s for s in job.in_step(rank, 0) if s.get("torch.seq") is not None}
        assert spans["broadcast"]["torch.root"] == 1 and spans["reduce"]["torch.root"] == 2
        assert spans["gather"]["torch.root"] == 0 and spans["scatter"]["torch.root"] == 3
        assert spans["all_gather"]["torch.bytes"] == 16
        assert spans["scatter"]["torch.bytes"] == (64 if rank == 3 else 0)
        reduces = [s for s in job.in_step(rank, 0) if s.get("torch.op") == "all_reduce"]
        assert sorted(s["torch.completion"] for s in reduces) == ["future", "return"]
        for s in job.in_step(rank, 0):
            assert ends_after_start(rank, s), s.name


def _p2p(job: Job, kind: str) -> dict[tuple[int, int, int, int], list[Span]]:
    found: dict[tuple[int, int, int, int], list[Span]] = defaultdict(list)
    for rank in range(WORLD):
        for s in job.spans[rank]:
            op = s.get("torch.op", "")
            if s.get("torch.p2p_seq") is not None and (("send" in op) == (kind == "send")):
                found[(s["torch.src"], s["torch.dst"], s["torch.tag"], s["torch.p2p_seq"])].append(s)
    return found


def test_every_send_meets_exactly_one_receive_by_sequence_number(job: Job) -> None:
    """§9.2: the k-th send of (group, src, dst, tag) is the k-th receive, with uneven traffic (3 vs 1)."""
    sends, recvs = _p2p(job, "send"), _p2p(job, "recv")
    assert set(sends) == set(recvs)
    assert all(len(v) == 1 for v in (*sends.values(), *recvs.values()))
    assert len([k for k in sends if k[:2] == (0, 1)]) > len([k for k in sends if k[:2] == (1, 0)])
    any_source = [s for s in recvs.values() if s[0]["torch.op"] == "recv" and s[0]["torch.dst"] == 3
                  and s[0]["torch.src"] == 2]
    assert any_source, "the any-source receive learned its sender"


def test_receives_carry_the_senders_record(job: Job) -> None:
    """spec/torch.md §3.3: the side message gives the receive the send event of the matching send span."""
    sends, recvs = _p2p(job, "send"), _p2p(job, "recv")
    carried = 0
    for key, (recv,) in recvs.items():
        (send,) = sends[key]
        assert recv["torch.recv.count"] == 1, (recv.name, key)
        assert recv["torch.remote.span_id"] == send.span_id
        assert recv["torch.remote.lts"] in send["send.lts"]
        assert recv["torch.remote.lts"] < recv["torch.recv.lts"] < recv["end.lts"]
        carried += 1
    assert carried >= 10


def test_ordinary_receives_are_not_marked_ambiguous(job: Job) -> None:
    """spec/torch.md §2: the job's receives (specific ones several at once, batched ones, an any-source one
    alone) never have an any-source and another receive outstanding together: none is marked or counted."""
    recvs = [s for v in _p2p(job, "recv").values() for s in v]
    assert len(recvs) >= 10 and any(s.get("torch.batched") for s in recvs)
    assert not [s for rank in range(WORLD) for s in job.spans[rank] if s.get("torch.p2p_ambiguous") is not None]
    assert all("p2p_ambiguous" not in job.results[rank]["counts"] for rank in range(WORLD))


def test_batched_p2p_ops_built_before_and_during_instrument_work(job: Job) -> None:
    """P2POp made before instrument() (batch in step 0) and during it (batch after uninstrument())."""
    for rank in range(WORLD):
        batched = [s for s in job.in_step(rank, 0) if s.get("torch.batched")]
        assert Counter(s["torch.op"] for s in batched) == {"isend": 2, "irecv": 2}
        assert all(s["torch.completion"] == "wait" for s in batched)


def test_uninstrument_restores_the_originals(job: Job) -> None:
    for rank in range(WORLD):
        r = job.results[rank]
        assert all(r["restored"].values()) and r["p2pop_restored"] and r["wait_restored"], r


def test_steps_share_one_trace_id_derived_from_the_job(job: Job) -> None:
    """spec/torch.md §4: trace id and virtual parent from (job, restart, step); the exchange merged 3 records."""
    for number in range(4):
        trace_id, parent = step_ids(JOB, 0, number)
        for rank in range(WORLD):
            s = job.step_span(rank, number)
            assert (s.trace_id, s.parent_id) == (f"{trace_id:032x}", f"{parent:016x}")
            if number < 3:  # carriage "step+p2p"
                assert s["torch.recv.count"] == WORLD - 1 and s["torch.recv.lts"] < s["end.lts"]


def test_ddp_bucket_spans_have_end_stamps_and_the_right_parent(job: Job) -> None:
    for rank in range(WORLD):
        step = job.step_span(rank, 1)
        (bucket,) = job.named(rank, "torch.ddp.bucket")
        assert bucket.parent_id == step.span_id and bucket.trace_id == step.trace_id
        assert ends_after_start(rank, bucket) and bucket["torch.completion"] == "future"
        (reduce,) = [s for s in job.in_step(rank, 1) if s.get("torch.op") == "all_reduce"]
        assert reduce.parent_id == bucket.span_id


def test_fsdp_gradient_spans_parent_their_reduce_scatter(job: Job) -> None:
    for rank in range(WORLD):
        step = job.step_span(rank, 1)
        (grad,) = job.named(rank, "torch.fsdp.grad")
        assert grad.parent_id == step.span_id and grad["torch.op"] == "fsdp_grad" and grad.get("end.ptp_ns")
        (scatter,) = [s for s in job.in_step(rank, 1) if s.get("torch.op") == "reduce_scatter_single"]
        assert scatter.parent_id == grad.span_id


def test_two_stage_pipeline_pairs_forward_and_backward(job: Job) -> None:
    for first, second in ((0, 1), (2, 3)):
        fwd_send = [s for s in job.in_step(first, 2) if s.name == "torch.send"]
        fwd_recv = [s for s in job.in_step(second, 2) if s.name == "torch.recv"]
        back_send = [s for s in job.in_step(second, 2) if s.name == "torch.send"]
        back_recv = [s for s in job.in_step(first, 2) if s.name == "torch.recv"]
        for (a,), (b,) in ((fwd_send, fwd_recv), (back_send, back_recv)):
            assert (a["torch.src"], a["torch.dst"], a["torch.p2p_seq"]) == (b["torch.src"], b["torch.dst"],
                                                                           b["torch.p2p_seq"])
            assert b["torch.remote.span_id"] == a.span_id


def test_check_clocks_names_the_liar_on_every_rank(job: Job) -> None:
    for rank in range(WORLD):
        assert job.results[rank]["suspects"] == [LIAR]
        # rank 2's NTP-class clock claims nothing physics can use (a saturated bound): never named
        assert job.results[rank]["verdicts"] == {"0": "ref", "1": "ok", str(NTP): "unbounded", "3": "irreconcilable"}
        (span,) = job.named(rank, "torch.check_clocks")
        assert span["torch.clock_check.suspects"] == [LIAR]
        assert span["torch.clock_check.verdict"] == ("irreconcilable" if rank == LIAR else "ref" if rank == 0
                                                     else "unbounded" if rank == NTP else "ok")
    (liar,) = job.named(LIAR, "torch.check_clocks")
    assert abs(liar["torch.clock_check.offset_ns"] - 10_000_000) < liar["torch.clock_check.bound_ns"] + 1_000


def test_a_corrupt_record_is_counted_not_raised(job: Job) -> None:
    """spec/torch.md §3.2: rank 2's corrupted op-mode record is refused (RECORD_CHECKSUM) by the others."""
    for rank in range(WORLD):
        counts = job.results[rank]["counts"]
        if rank == 2:
            assert "RECORD_CHECKSUM" not in counts and "missing" not in counts
            continue
        assert counts["RECORD_CHECKSUM"] == 1 and counts["missing"] == 1
        reduces = [s for s in job.in_step(rank, 3) if s.get("torch.op") == "all_reduce"]
        assert [s.get("torch.recv.missing") for s in reduces].count([2]) == 1
        assert job.step_span(rank, 3)["torch.carriage"] == "op"


def test_op_mode_orders_every_start_before_every_end_by_lamport(job: Job) -> None:
    """An op-mode exchange: each rank's record is made before its op; every end.lts exceeds all of them."""
    starts: dict[int, list[int]] = defaultdict(list)
    ends: dict[int, list[Any]] = defaultdict(list)
    for rank in range(WORLD):
        for s in job.in_step(rank, 3):
            if s.get("torch.op") == "all_reduce" and not s.get("torch.recv.missing"):
                starts[s["torch.seq"]].extend(s["send.lts"])
                ends[s["torch.seq"]].append(s["end.lts"])
    complete = [seq for seq in starts if len(ends[seq]) == WORLD]  # the corrupt one is missing on 3 ranks
    assert len(complete) == 2
    for seq in complete:
        assert max(starts[seq]) < min(ends[seq])


def test_spans_carry_the_launch_facts(job: Job) -> None:
    for rank in range(WORLD):
        for s in job.spans[rank]:
            assert (s["rank"], s["world_size"], s["local_rank"], s["job_id"]) == (rank, WORLD, rank, JOB), s.name


def test_every_completion_the_job_wrote_is_one_the_analysis_knows(job: Job) -> None:
    """semconv.TORCH_COMPLETIONS is the one list: the analysis refuses any other value (spec/torch.md §1.3)."""
    from tempotrace_sdk.semconv import TORCH_COMPLETIONS

    written = {s.get("torch.completion") for spans in job.spans.values() for s in spans} - {None}
    assert written and written <= set(TORCH_COMPLETIONS), written - set(TORCH_COMPLETIONS)
