"""Faults tracing must survive, on two real gloo ranks (issue 10's promises: async ops end their span when
the work completes, never by blocking; tracing never raises into or desynchronises a training job).

One job runs every scenario of tests/torch/fault_worker.py in turn; each test reads what one scenario left.
A broken promise shows as a wrong value of a collective (the job fell out of step), an exception the
program saw, a counter (``flush_timeout``: a step's end waited for a side message), or a span that says
something else than what happened. Spec: spec/torch.md §1.1, §1.3, §3.3, §4.2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from rank_job import Job, run_ranks  # tests/torch is on sys.path (a package here would be named torch)
from spans_file import Span

from tempotrace_sdk.analysis import analyze

WORLD = 2
WORKER = Path(__file__).with_name("fault_worker.py")
#: Two torch processes on a loaded 2-core machine, one scenario pausing past a 3 s group timeout.
JOB_TIMEOUT_S = 240
ERROR = "2"  #: the OTLP JSON status code of an error (STATUS_CODE_ERROR)
#: fault_worker.py's group timeout is 20 s: a failure that waits for it takes at least that long.
PROMPT_S = 10


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Job:
    out = tmp_path_factory.mktemp("torch-faults")
    run_ranks(WORKER, WORLD, out, JOB_TIMEOUT_S, lambda rank: {"TEMPOTRACE_CLOCK": f"sim:ptp,seed={rank}"})
    return Job(out, WORLD)


@pytest.fixture(scope="module")
def crash(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    out = tmp_path_factory.mktemp("torch-crash")
    run_ranks(WORKER, WORLD, out, JOB_TIMEOUT_S,
              lambda rank: {"TEMPOTRACE_CLOCK": f"sim:ptp,seed={rank}", "TT_CRASH": "1"})
    return {rank: json.loads((out / f"crash-{rank}.json").read_text()) for rank in range(WORLD)}


def result(job: Job, rank: int, scenario: str) -> dict[str, Any]:
    found: dict[str, Any] = job.results[rank][scenario]
    assert "error" not in found, found["error"]
    return found


def op_spans(job: Job, rank: int, step: int, op: str) -> list[Span]:
    return [s for s in job.in_step(rank, step) if s.get("torch.op") == op]


def test_a_receive_whose_sender_sent_no_side_message_ends_at_once_and_no_step_waits(job: Job) -> None:
    """Finding 1, §3.3: rank 0 sent untraced (§1.1). The receive ends with its record missing, counted
    side_absent, and no step's end waits for the message (no flush_timeout); the side receive left
    posted takes the sender's next side message (a record for another number: RECORD_SEQ), so the
    channel neither waits nor drifts."""
    for rank in range(WORLD):
        r = result(job, rank, "untraced_sender")
        assert r["t"] == [8.0] * 4
        assert "flush_timeout" not in r["counts"] and "side_timeout" not in r["counts"], r["counts"]
    counts = result(job, 1, "untraced_sender")["counts"]
    assert counts["side_absent"] == 1 and counts["RECORD_SEQ"] == 1, counts
    (recv,) = op_spans(job, 1, 100, "irecv")
    assert recv["torch.recv.missing"] == [0] and recv["torch.recv.count"] == 0
    assert recv["torch.completion"] == "wait"
    (later,) = op_spans(job, 1, 104, "recv")
    assert later["torch.recv.missing"] == [0]


def test_a_side_message_nobody_takes_never_times_out_the_group(job: Job) -> None:
    """§3.3: rank 1 received untraced, so rank 0's side message is never taken. Seeing it out must not wait
    with gloo's timeout (a gloo wait that times out closes every connection of the group)."""
    for rank in range(WORLD):
        assert result(job, rank, "untraced_receiver")["short_group_ok"] is True


def test_an_exception_inside_a_step_on_one_rank_keeps_every_rank_in_step(job: Job) -> None:
    """Finding 2, §4.2: the raising rank still runs the step exchange, so the next collectives pair up."""
    for rank in range(WORLD):
        assert result(job, rank, "step_exception")["values"] == [3.0, 3.0]
        step = job.step_span(rank, 300)
        assert step["torch.recv.count"] == 1 and step["torch.recv.lts"] < step["end.lts"]
        assert (step.status == ERROR) is (rank == 0)


def test_a_rank_that_dies_of_an_exception_inside_a_step_issues_nothing(crash: dict[int, dict[str, Any]]) -> None:
    """Review R1, §4.2: rank 0 raises (a CUDA OOM in forward) inside a step, unhandled, before an all_reduce
    rank 1 issues. Its step owes the exchange instead of issuing it, so it dies at once and rank 1's
    all_reduce fails at once, as untraced; an exchange at the exit held both for the group's timeout."""
    assert crash[0]["outcome"] == "MemoryError" and crash[1]["outcome"] != "finished", crash
    assert all(crash[rank]["seconds"] < PROMPT_S for rank in range(WORLD)), crash


def test_a_handled_exception_pays_the_owed_exchange_before_the_next_op(job: Job) -> None:
    """§4.2: rank 0's step 305 owes its exchange; its next collective (outside any step) pays it first, so
    it pairs with rank 1's step-exit all_gather and the all_reduce after it gets the right value. The
    records carried go on step 305's span, which ends stamped at the step's exit."""
    for rank in range(WORLD):
        assert result(job, rank, "step_exception_then_bare_op")["value"] == 3.0
        step = job.step_span(rank, 305)
        assert step["torch.recv.count"] == 1 and step["torch.recv.lts"] < step["end.lts"]
        assert (step.status == ERROR) is (rank == 0)


def test_every_rank_raising_and_handling_pays_alike(job: Job) -> None:
    """§4.2: both ranks owe step 320's exchange and pay it entering step 321: in step, records carried."""
    for rank in range(WORLD):
        assert result(job, rank, "both_raise")["value"] == 3.0
        step = job.step_span(rank, 320)
        assert step.status == ERROR and step["torch.recv.count"] == 1
        assert job.step_span(rank, 321)["torch.recv.count"] == 1


def test_a_distributed_failure_leaves_the_step_without_its_exchange(job: Job) -> None:
    """§4.2: a torch.distributed error (DistError, or raised through a traced op) skips the exchange."""
    for rank in range(WORLD):
        assert result(job, rank, "step_dist_error")["value"] == 3.0
        for number in (310, 311):
            step = job.step_span(rank, number)
            assert step.status == ERROR and step.get("torch.recv.count") is None
        assert job.step_span(rank, 312)["torch.recv.count"] == 1


def test_an_op_mode_exchange_joins_even_when_its_record_cannot_be_made(job: Job) -> None:
    """Finding 11, §3.4: rank 1 cannot make its record's tensor; it sends the absent record in the same
    all_gather, so the next collective pairs and rank 0 counts the record absent."""
    for rank in range(WORLD):
        assert result(job, rank, "op_exchange_failure")["value"] == 3.0
    assert result(job, 1, "op_exchange_failure")["counts"]["absent_sent"] == 1
    assert result(job, 0, "op_exchange_failure")["counts"]["RECORD_ABSENT"] == 1
    first = min(op_spans(job, 0, 400, "all_reduce"), key=lambda s: s["torch.seq"])
    assert first["torch.recv.missing"] == [1]


def test_a_step_exchange_joins_even_when_its_record_cannot_be_made(job: Job) -> None:
    """Finding 11, §4.2: the same at a step's end."""
    for rank in range(WORLD):
        assert result(job, rank, "step_exchange_failure")["value"] == 3.0
    assert result(job, 1, "step_exchange_failure")["counts"]["absent_sent"] == 1
    assert job.step_span(0, 410)["torch.recv.missing"] == [1]


def test_a_side_message_goes_even_when_its_record_cannot_be_made(job: Job) -> None:
    """Finding 11, §3.3: the sender sends the absent record; the receiver reads it (not 'no side message')."""
    assert result(job, 0, "side_send_failure")["counts"]["absent_sent"] == 1
    counts = result(job, 1, "side_send_failure")["counts"]
    assert counts["RECORD_ABSENT"] == 1 and "side_absent" not in counts, counts
    (recv,) = op_spans(job, 1, 420, "recv")
    assert recv["torch.recv.missing"] == [0]


def test_a_span_that_cannot_start_leaves_the_op_untraced_and_the_carriage_whole(job: Job) -> None:
    """Finding 13, §1.1: start_span fails on rank 0 before a collective (op mode) and before a send: the
    program sees nothing, the ops run untraced (counted), and their exchange and side message still go."""
    for rank in range(WORLD):
        r = result(job, rank, "span_failure")
        assert r["raised"] == [] and r["value"] == 3.0 and r["t"] == 2.0
    assert result(job, 0, "span_failure")["counts"]["untraced"] == 2
    assert result(job, 1, "span_failure")["counts"]["RECORD_ABSENT"] == 2
    assert [s["torch.op"] for s in job.in_step(0, 500)] == ["all_reduce"]  # the second one; the first untraced


def test_a_gpu_timer_that_fails_before_the_op_leaves_a_cpu_timed_span(job: Job) -> None:
    """Finding 13, §6: the event record fails (as inside CUDA graph capture): counted, the op runs."""
    for rank in range(WORLD):
        assert result(job, rank, "gpu_begin_failure") | {"counts": None, "seconds": None} == {
            "raised": [], "t": 2.0, "counts": None, "seconds": None}
    assert result(job, 0, "gpu_begin_failure")["counts"]["gpu_failed"] == 1
    (span,) = op_spans(job, 0, 510, "all_reduce")
    assert span["torch.completion"] in ("future", "wait") and span.get("end.ptp_ns") is not None


AMBIGUOUS_STEPS = (600, 601, 602)  #: fault_worker.any_source_overlap: receives torch may pair otherwise
PLAIN_STEP = 603  #: the same traffic one receive (or one kind) at a time: nothing ambiguous


def test_receives_the_numbers_cannot_pair_are_marked_ambiguous_and_plain_ones_are_not(job: Job) -> None:
    """Review R4, spec/torch.md §2: an any-source and a specific receive outstanding together on one tag
    (either posted first, one from batch_isend_irecv), or two any-source receives waited in reverse: every
    receive involved is marked and counted; receives one at a time, two specific ones together and two
    any-source ones waited in order are not (nor is anything in the other scenarios)."""
    got = result(job, 1, "any_source_overlap")["got"]
    for number in AMBIGUOUS_STEPS:
        assert sorted(got[str(number)][:2]) == [1.0, 2.0], got
    assert got[str(PLAIN_STEP)] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], got
    for rank in range(WORLD):
        for name, r in job.results[rank].items():
            expected = 2 * len(AMBIGUOUS_STEPS) if (rank, name) == (1, "any_source_overlap") else 0
            assert r["counts"].get("p2p_ambiguous", 0) == expected, (rank, name, r["counts"])
            assert "p2p_ambiguous_unmarked" not in r["counts"], (rank, name, r["counts"])
    for number in AMBIGUOUS_STEPS:
        recvs = op_spans(job, 1, number, "irecv")
        assert len(recvs) == 2 and all(s.get("torch.p2p_ambiguous") is True for s in recvs), number
        assert all(s.get("torch.completion") == "wait" for s in recvs)
    plain = [s for s in job.in_step(1, PLAIN_STEP) if s.get("torch.op") in ("recv", "irecv")]
    assert len(plain) == 6 and not any(s.get("torch.p2p_ambiguous") for s in plain)
    assert not any(s.get("torch.p2p_ambiguous") for rank in range(WORLD) for s in job.spans[rank]
                   if s.trace_id not in {job.step_span(1, n).trace_id for n in AMBIGUOUS_STEPS})


def test_the_analysis_orders_no_ambiguous_receive_and_pairs_the_plain_ones(job: Job) -> None:
    """spec/analysis.md §1.3: the six ambiguous messages are counted ``ambiguous``, give no p2p edge and no
    decision (so no wrong one); their sends are not reported lost; the plain step's six messages pair."""
    rep = analyze([str(job.out / f"spans-{r}.jsonl") for r in range(WORLD)], keep=100_000)
    assert rep.p2p.ambiguous == 2 * len(AMBIGUOUS_STEPS)
    ambiguous = {s.span_id for n in AMBIGUOUS_STEPS for s in op_spans(job, 1, n, "irecv")}
    traces = {job.step_span(1, n).trace_id for n in AMBIGUOUS_STEPS}
    assert not [h for h in rep.hops_kept if h["recv_span"] in ambiguous or h["trace_id"] in traces]
    plain_trace = job.step_span(1, PLAIN_STEP).trace_id
    plain = [h for h in rep.hops_kept if h["trace_id"] == plain_trace and h["kind"] == "p2p"]
    assert sorted(h["p2p_seq"] for h in plain) == [0, 1, 2, 3, 4, 5]
    assert all(h["matched"] and h["outcome"] != "contradiction" for h in plain), plain
    assert "marked ambiguous" in rep.to_text()
