"""Step numbers (spec/torch.md §4.1): ``step()`` counts steps itself, and a number used twice keeps a trace
of its own, counted and warned about once.

Issue 21: ``for i, batch in enumerate(loader): with tt.step(i)`` gave step i the same trace id every epoch:
66 steps became 22 traces, silently. The 2-rank epoch loops are in test_training_loop.py.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tempotrace_sdk.wire.torchkeys import StepNumbers, step_ids


def model(calls: list[int | None]) -> list[tuple[int, int]]:
    """What take() must answer, from a plain Counter: counted = highest so far + 1."""
    seen: Counter[int] = Counter()
    out = []
    for call in calls:
        number = call if call is not None else (max(seen) + 1 if seen else 0)
        out.append((number, seen[number]))
        seen[number] += 1
    return out


@given(st.lists(st.one_of(st.none(), st.integers(0, 40)), max_size=200))
def test_take_counts_and_tells_occurrences_like_a_counter(calls: list[int | None]) -> None:
    numbers = StepNumbers()
    assert [numbers.take(c) for c in calls] == model(calls)
    expected = Counter(n for n, _ in model(calls))
    assert all(numbers.uses(n) == expected[n] for n in range(45))


@pytest.mark.parametrize(("name", "calls", "answers"), [
    ("counted from 0", [None, None, None], [(0, 0), (1, 0), (2, 0)]),
    ("epochs of enumerate", [0, 1, 0, 1], [(0, 0), (1, 0), (0, 1), (1, 1)]),
    ("counting goes on after the highest explicit number", [5, None, 2, None], [(5, 0), (6, 0), (2, 0), (7, 0)]),
    ("an explicit number a count took is a reuse", [None, None, 1], [(0, 0), (1, 0), (1, 1)]),
])
def test_numbering_rules(name: str, calls: list[int | None], answers: list[tuple[int, int]]) -> None:
    numbers = StepNumbers()
    assert [numbers.take(c) for c in calls] == answers, name


def test_a_long_job_keeps_a_few_runs_not_one_entry_per_step() -> None:
    """100 epochs of 1,000 enumerated steps, then 100,000 counted ones: at most two runs at any time."""
    numbers = StepNumbers()
    most = 0
    for _ in range(100):
        for i in range(1_000):
            numbers.take(i)
            most = max(most, numbers.runs())
    for _ in range(100_000):
        numbers.take(None)
    assert most <= 2 and numbers.runs() <= 2
    assert numbers.uses(999) == 100 and numbers.uses(1_000) == 1 and numbers.uses(100_999) == 1


def test_a_first_use_keeps_its_ids_and_each_reuse_gets_its_own() -> None:
    """§4.1: occurrence 0 is the digest of job, restart and step as before; occurrence k appends k."""
    assert step_ids("job-a", 0, 7, 0) == step_ids("job-a", 0, 7)
    digest = hashlib.blake2b(b"tempotrace-step\0job-a\x000\x007\x002", digest_size=24).digest()
    assert step_ids("job-a", 0, 7, 2) == (int.from_bytes(digest[:16], "big"), int.from_bytes(digest[16:], "big"))
    ids = {step_ids("job-a", 0, step, k) for step in range(20) for k in range(5)}
    assert len({trace for trace, _ in ids}) == 100
    with pytest.raises(ValueError):
        step_ids("job-a", 0, 7, -1)


# --- step() itself, in a one-rank group ------------------------------------------------------------------------

torch = pytest.importorskip("torch")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from tempotrace_sdk import torch as tt  # noqa: E402
from tempotrace_sdk.torch import steps  # noqa: E402


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process that has entered no step yet, and has not warned yet."""
    monkeypatch.setattr(steps, "numbers", StepNumbers())
    monkeypatch.setattr(steps, "_reuse_warned", [False])
    monkeypatch.setattr(steps, "_job", None)
    monkeypatch.setenv("TEMPOTRACE_JOB_ID", "job-steps")
    yield


def step_spans(exporter: InMemorySpanExporter) -> list[tuple[int, int | None, int]]:
    """(step, occurrence, trace id) of every step span, in the order they ended."""
    return [(s.attributes["tempotrace.torch.step"], s.attributes.get("tempotrace.torch.step_occurrence"),
             s.context.trace_id) for s in exporter.get_finished_spans() if s.name == "torch.step"]


def test_step_without_a_number_counts_and_every_step_is_its_own_trace(
        group: None, exporter: InMemorySpanExporter, fresh: None) -> None:
    tt.instrument(carriage="step")
    before = tt.carriage_counts().get("step_reused", 0)  # the counters are process-wide
    seen = []
    for _epoch in range(3):
        for _batch in range(2):
            with tt.step() as sp:
                seen.append(tt.current_step())
                assert seen[-1] is not None and seen[-1][1] is sp
    spans = step_spans(exporter)
    assert [(n, k) for n, k, _ in spans] == [(i, None) for i in range(6)]
    assert len({trace for _, _, trace in spans}) == 6
    assert [s[0] for s in seen if s is not None] == list(range(6))
    assert tt.carriage_counts().get("step_reused", 0) == before


def test_a_number_used_again_is_counted_warned_once_and_kept_apart(
        group: None, exporter: InMemorySpanExporter, fresh: None, caplog: pytest.LogCaptureFixture) -> None:
    before = tt.carriage_counts().get("step_reused", 0)
    with caplog.at_level(logging.WARNING, logger="tempotrace_sdk.torch.steps"):
        for _epoch in range(3):
            for i in range(2):
                with tt.step(i):
                    pass
    spans = step_spans(exporter)
    assert [(n, k) for n, k, _ in spans] == [(0, None), (1, None), (0, 1), (1, 1), (0, 2), (1, 2)]
    assert len({trace for _, _, trace in spans}) == 6  # the epochs' traces do not merge
    assert spans[2][2] == step_ids("job-steps", 0, 0, 1)[0]
    assert tt.carriage_counts()["step_reused"] - before == 4
    (warned,) = [r.getMessage() for r in caplog.records if "step number" in r.getMessage()]
    assert "step number 0 entered again" in warned and "tt.step() without a number" in warned


def test_counting_after_explicit_numbers_never_collides(group: None, exporter: InMemorySpanExporter,
                                                        fresh: None) -> None:
    for number in (10, None, 3, None):
        with tt.step(number):
            pass
    assert [(n, k) for n, k, _ in step_spans(exporter)] == [(10, None), (11, None), (3, None), (12, None)]


def test_a_step_number_must_be_a_non_negative_integer() -> None:
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="step number"):
            tt.step(bad)  # type: ignore[arg-type]
