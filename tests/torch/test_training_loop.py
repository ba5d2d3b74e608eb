"""The README's training loop on two real gloo ranks (tests/torch/training_worker.py): one trace per step
whether the loop counts its steps or reuses numbers every epoch (spec/torch.md §4.1), and compute spans for
a DDP model (§4.3).

Issue 21: ``with tt.step(i)`` inside ``for i, batch in enumerate(loader)`` merged every epoch's step i into
one trace, silently; compute was invisible unless the user added spans.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from rank_job import Job, log, run_ranks  # tests/torch is on sys.path (a package here would be named torch)
from spans_file import Span
from training_worker import BATCHES, EPOCHS

WORLD = 2
WORKER = Path(__file__).with_name("training_worker.py")
#: Two torch processes on a loaded 2-core machine.
JOB_TIMEOUT_S = 240
COUNTED = EPOCHS * BATCHES  #: steps of the first loop (tt.step()), numbered 0..COUNTED-1


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Job:
    out = tmp_path_factory.mktemp("torch-training-loop")
    run_ranks(WORKER, WORLD, out, JOB_TIMEOUT_S, lambda rank: {"TEMPOTRACE_CLOCK": f"sim:ptp,seed={rank}"})
    return Job(out, WORLD)


def steps(job: Job, rank: int) -> list[Span]:
    return job.named(rank, "torch.step")


def test_a_loop_of_counted_steps_gives_one_trace_per_step_the_same_on_every_rank(job: Job) -> None:
    for rank in range(WORLD):
        assert job.results[rank]["counted"] == list(range(COUNTED))
    traces = [{s["torch.step"]: s.trace_id for s in steps(job, rank) if s.get("torch.step_occurrence") is None}
              for rank in range(WORLD)]
    assert sorted(traces[0]) == list(range(COUNTED))
    assert len(set(traces[0].values())) == COUNTED  # one trace per step, however many epochs
    assert traces[0] == traces[1]  # every rank derives the same ids


def test_step_numbers_reused_every_epoch_are_counted_warned_once_and_never_merge(job: Job) -> None:
    """The enumerate loop's numbers were all used by the counted loop before: every one of its steps is a
    reuse. Each still has a trace of its own, the same on both ranks; the warning comes once per process."""
    reused = EPOCHS * BATCHES
    for rank in range(WORLD):
        assert job.results[rank]["numbered"] == list(range(BATCHES)) * EPOCHS
        assert job.results[rank]["counts"]["step_reused"] == reused
        assert log(job.out, rank).count("tempotrace.torch: step number") == 1
    every = [sorted((s["torch.step"], s.get("torch.step_occurrence", 0), s.trace_id) for s in steps(job, rank))
             for rank in range(WORLD)]
    assert every[0] == every[1]
    assert len({trace for _, _, trace in every[0]}) == COUNTED + reused  # distinct trace ids = steps entered
    occurrences = sorted((n, k) for n, k, _ in every[0] if k)
    assert occurrences == sorted((i, epoch + 1) for epoch in range(EPOCHS) for i in range(BATCHES))


def test_every_span_of_a_step_is_in_that_steps_trace(job: Job) -> None:
    """The DDP buckets of a reused step go to its own trace, not to the first use's."""
    for rank in range(WORLD):
        by_trace = {s.trace_id: s for s in steps(job, rank)}
        buckets = job.named(rank, "torch.ddp.bucket")
        assert len(buckets) == 2 * COUNTED  # one bucket per step here
        per_trace: dict[str, int] = {}
        for b in buckets:
            assert b.trace_id in by_trace and b.parent_id == by_trace[b.trace_id].span_id
            per_trace[b.trace_id] = per_trace.get(b.trace_id, 0) + 1
        assert set(per_trace.values()) == {1}


COMPUTE = ("torch.forward", "torch.backward", "torch.optimizer.step")


def test_a_ddp_model_traced_for_compute_gets_forward_backward_and_step_spans_in_order(job: Job) -> None:
    """One of each per step, children of the step span, forward before backward before optimizer.step in the
    rank's Lamport order, the bucket's all-reduce inside backward; after remove(), none."""
    for rank in range(WORLD):
        by_span = {s.span_id: s for s in steps(job, rank)}
        compute = [s for s in job.spans[rank] if s.name in COMPUTE]
        assert len(compute) == 3 * COUNTED
        per_step: dict[str, list[Span]] = {}
        for s in compute:
            assert s.parent_id in by_span, s.name
            per_step.setdefault(s.parent_id, []).append(s)
        assert {by_span[p]["torch.step"] for p in per_step} == set(range(COUNTED))
        assert all(by_span[p].get("torch.step_occurrence") is None for p in per_step)  # none after remove()
        buckets = {b.parent_id: b for b in job.named(rank, "torch.ddp.bucket")}
        for parent, mine in per_step.items():
            forward, backward, opt_step = sorted(mine, key=lambda s: s["lts"])
            assert [s.name for s in (forward, backward, opt_step)] == list(COMPUTE)
            assert forward["end.lts"] < backward["lts"] < backward["end.lts"] < opt_step["lts"]
            assert forward["torch.compute"] == "forward" and forward["torch.module"] == "DistributedDataParallel"
            assert opt_step["torch.optimizer"] == "SGD"
            assert backward["lts"] < buckets[parent]["lts"]  # DDP reduces the bucket during backward
