"""trace_compute() in one process (spec/torch.md §4.3): forward, backward and optimizer.step spans, children
of the step, in that order; failures end them; remove() takes them off. The 2-rank DDP job:
test_training_loop.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from tempotrace_sdk import torch as tt  # noqa: E402
from tempotrace_sdk.otel.processor import TempoTraceSpanProcessor  # noqa: E402
from tempotrace_sdk.stamptext import expand  # noqa: E402
from tempotrace_sdk.torch import spans as torch_spans  # noqa: E402

COMPUTE = ("torch.forward", "torch.backward", "torch.optimizer.step")


def model_and_optimizer() -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train(model: Any, opt: Any) -> None:
    loss = model(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def stamps(s: ReadableSpan) -> dict[str, Any]:
    assert s.start_time is not None and s.end_time is not None
    return expand(dict(s.attributes or {}), s.start_time, s.end_time)


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The torch spans go through our stamping processor (first, as configure() orders it) to memory."""
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(TempoTraceSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exp))
    monkeypatch.setattr(torch_spans, "tracer", lambda: provider.get_tracer("test"))
    yield exp
    provider.shutdown()


def compute_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name in COMPUTE]


def test_each_iteration_gets_forward_backward_and_step_spans_children_of_the_step_in_order(
        exporter: InMemorySpanExporter) -> None:
    model, opt = model_and_optimizer()
    handle = tt.trace_compute(model, opt)
    try:
        for _ in range(2):
            with tt.step():
                train(model, opt)
    finally:
        handle.remove()
    steps = [s for s in exporter.get_finished_spans() if s.name == "torch.step"]
    spans = compute_spans(exporter)
    assert [s.name for s in spans] == list(COMPUTE) * 2
    for i, step in enumerate(steps):
        mine = spans[3 * i:3 * i + 3]
        assert all(s.parent is not None and s.parent.span_id == step.context.span_id for s in mine)
        forward, backward, opt_step = (stamps(s) for s in mine)
        # each ends before the next starts, in this process's Lamport order (semantic-conventions §1.4)
        assert forward["tempotrace.end.lts"] < backward["tempotrace.lts"]
        assert backward["tempotrace.end.lts"] < opt_step["tempotrace.lts"]
        assert all("tempotrace.stamps" in (s.attributes or {}) for s in mine)  # stamped like op spans
    attrs = [dict(s.attributes or {}) for s in spans[:3]]
    assert [a["tempotrace.torch.compute"] for a in attrs] == ["forward", "backward", "optimizer.step"]
    assert attrs[0]["tempotrace.torch.module"] == attrs[1]["tempotrace.torch.module"] == "Sequential"
    assert attrs[2]["tempotrace.torch.optimizer"] == "SGD"


def test_remove_takes_every_hook_off(exporter: InMemorySpanExporter) -> None:
    model, opt = model_and_optimizer()
    tt.trace_compute(model, opt).remove()
    with tt.step():
        train(model, opt)
    assert compute_spans(exporter) == []
    assert not model._forward_hooks and not model._forward_pre_hooks and not opt._optimizer_step_pre_hooks


def test_a_forward_that_raises_ends_its_span_with_the_error_and_the_programs_exception(
        exporter: InMemorySpanExporter) -> None:
    model, opt = model_and_optimizer()
    handle = tt.trace_compute(model, opt)
    try:
        with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
            model(torch.randn(4, 3))
        train(model, opt)  # and the next iteration is traced as usual
    finally:
        handle.remove()
    failed, *after = compute_spans(exporter)
    assert failed.name == "torch.forward" and not failed.status.is_ok
    assert [s.name for s in after] == list(COMPUTE)


def test_no_backward_span_without_gradients_and_none_left_open(exporter: InMemorySpanExporter) -> None:
    model, _ = model_and_optimizer()
    handle = tt.trace_compute(model)
    with torch.no_grad():
        model(torch.randn(2, 8))
    handle.remove()
    assert [s.name for s in compute_spans(exporter)] == ["torch.forward"]


def test_only_modules_and_optimizers_are_accepted() -> None:
    with pytest.raises(TypeError, match=r"nn\.Module"):
        tt.trace_compute(object())  # type: ignore[arg-type]
    model, _ = model_and_optimizer()
    with pytest.raises(TypeError, match="Optimizer"):
        tt.trace_compute(model, object())  # type: ignore[arg-type]
