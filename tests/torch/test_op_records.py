"""Op records (spec/torch.md §1.4): a blocking collective is recorded, and its span is made at the step's exit, at
any flush or every RELEASE_AT ops, stamped with the readings and Lamport values taken at the op; one that raises
gets its span at once; a record's span is the one an SDK span of the op would have been."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from tempotrace_sdk import torch as tt  # noqa: E402
from tempotrace_sdk.otel.processor import TempoTraceSpanProcessor  # noqa: E402
from tempotrace_sdk.stamptext import SpanStamps, decode  # noqa: E402
from tempotrace_sdk.torch import opspans  # noqa: E402
from tempotrace_sdk.torch import spans as torch_spans  # noqa: E402
from tempotrace_sdk.torch.recorder import RELEASE_AT, recorder  # noqa: E402

Stamped = tuple[TracerProvider, InMemorySpanExporter]

@pytest.fixture
def stamped(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """The torch spans go through our stamping processor (first, as configure() orders it) to memory."""
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(TempoTraceSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exp))
    monkeypatch.setattr(torch_spans, "tracer", lambda: provider.get_tracer("test"))
    tt.instrument(carriage="none", gpu=False)  # with a CUDA device too: these are host ops, recorded
    yield provider, exp
    tt.uninstrument()
    provider.shutdown()


def _stamps(sp: ReadableSpan) -> SpanStamps:
    attrs = sp.attributes or {}
    return decode(str(attrs["tempotrace.stamps"]), sp.start_time or 0, sp.end_time or 0,
                  int(attrs["tempotrace.uncertainty_ns"]), None)  # type: ignore[arg-type]


def _names(exp: InMemorySpanExporter) -> list[str]:
    return [s.name for s in exp.get_finished_spans()]


def test_a_recorded_ops_span_keeps_its_place_in_time_and_in_lamport_order(
        group: None, stamped: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """A span made at the step's exit is stamped with what was read at the op: a span the program made between
    two ops sits between them by Lamport and by time, though it was exported first."""
    provider, exp = stamped
    t = torch.ones(4)
    with tt.step(0):
        dist.all_reduce(t)
        with provider.get_tracer("app").start_as_current_span("between"):
            pass
        dist.all_reduce(t)
        assert _names(exp) == ["between"]  # the ops are recorded; their spans come at the exit
    spans = {s.name: s for s in exp.get_finished_spans()}
    ops = [s for s in exp.get_finished_spans() if s.name == "torch.all_reduce"]
    assert len(ops) == 2 and "torch.step" in spans
    first, second = sorted(ops, key=lambda s: int((s.attributes or {})["tempotrace.torch.seq"]))
    a, mid, b = _stamps(first), _stamps(spans["between"]), _stamps(second)
    assert a.end is not None and mid.end is not None and b.end is not None
    lamport = [a.start.lts, a.end.lts, mid.start.lts, mid.end.lts, b.start.lts, b.end.lts]
    assert lamport == sorted(lamport) and len(set(lamport)) == 6, lamport
    readings = [a.start.ptp_ns, a.end.ptp_ns, mid.start.ptp_ns, mid.end.ptp_ns, b.start.ptp_ns, b.end.ptp_ns]
    assert readings == sorted(readings), readings  # the configured clock's readings, whatever clock that is
    assert first.end_time is not None and second.start_time is not None and first.end_time <= second.start_time
    step = spans["torch.step"]
    assert all(op.parent is not None and op.parent.span_id == step.context.span_id for op in ops)


def test_a_flush_makes_the_recorded_ops_spans(group: None, stamped: Stamped) -> None:
    """force_flush inside a step (what SIGTERM and exit do, lifecycle.release_held) exports what has ended."""
    provider, exp = stamped
    with tt.step(1):
        dist.all_reduce(torch.ones(2))
        assert _names(exp) == []
        assert provider.force_flush()
        assert _names(exp) == ["torch.all_reduce"]
        assert "tempotrace.stamps" in (exp.get_finished_spans()[0].attributes or {})
    assert sorted(_names(exp)) == ["torch.all_reduce", "torch.step"]



def test_an_op_that_raises_in_a_step_gets_its_span_at_once(group: None, stamped: Stamped) -> None:
    _, exp = stamped
    t = torch.ones(2)
    with tt.step(2):
        with pytest.raises(ValueError):
            dist.broadcast(t, src=0, group_src=0)  # torch refuses both: the error is the program's
        (failed,) = exp.get_finished_spans()
        assert failed.name == "torch.broadcast" and failed.status.status_code is StatusCode.ERROR
        assert (failed.attributes or {})["tempotrace.torch.completion"] == "error"


def test_a_release_returns_once_the_ops_another_thread_took_are_made(
        group: None, stamped: Stamped, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding (kept from the held spans): the export worker's tick may be making an op's span when a flush
    releases; the flush must not go on (and a shutdown must not stop stamping) before that span is handed on."""
    _, exp = stamped
    slow = threading.Event()
    real_make = opspans.make_span

    def make(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "tick":
            slow.set()
            time.sleep(0.3)
        return real_make(*args, **kwargs)

    monkeypatch.setattr(opspans, "make_span", make)
    with tt.step(5):
        dist.all_reduce(torch.ones(2))
        tick = threading.Thread(target=opspans.release, kwargs={"force": True}, name="tick")
        tick.start()
        assert slow.wait(10)
        opspans.release(force=True)  # finds nothing left to take once the tick's are handed on
        assert _names(exp) == ["torch.all_reduce"]
        tick.join()


def test_recorded_ops_waiting_are_bounded(group: None, stamped: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """A long step leaves at most RELEASE_AT ended ops waiting: the thread that ends the RELEASE_AT-th makes them."""
    _, exp = stamped
    t = torch.ones(2)
    with tt.step(3):
        for _ in range(RELEASE_AT - 1):
            dist.all_reduce(t)
        assert _names(exp) == []
        dist.all_reduce(t)
        assert len(_names(exp)) == RELEASE_AT
    assert len(_names(exp)) == RELEASE_AT + 1  # and the step


def test_ops_outside_a_step_and_async_ops_are_recorded(
        group: None, stamped: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """An op outside any step is recorded; so is an async one, whose record ends when its work is seen complete
    (its future's callback or the wait()) and whose span comes at the step's exit like the others'."""
    provider, exp = stamped
    t = torch.ones(2)
    dist.all_reduce(t)
    assert _names(exp) == []  # recorded: its span comes with the next flush
    assert provider.force_flush()
    assert _names(exp) == ["torch.all_reduce"]
    with tt.step(4):
        work: Any = dist.all_reduce(t, async_op=True)
        work.wait()
        assert recorder.open_numbers() == []  # its record ended with its work
        with provider.get_tracer("app").start_as_current_span("after"):
            pass
        assert _names(exp) == ["torch.all_reduce", "after"]
    spans = exp.get_finished_spans()
    ops = [s for s in spans if s.name == "torch.all_reduce"]
    assert len(ops) == 2
    first, second = (op.attributes or {} for op in ops)
    assert second["tempotrace.torch.completion"] in ("future", "wait")
    assert second["tempotrace.torch.seq"] == first["tempotrace.torch.seq"] + 1
    end, after = _stamps(ops[1]).end, _stamps(next(s for s in spans if s.name == "after")).start
    assert end is not None and end.lts < after.lts  # its end was read when the work completed, not at the exit


def test_sdk_spans_makes_every_op_an_sdk_span_the_providers_processors_see(
        group: None, stamped: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    """instrument(sdk_spans=True): the path before records, for a user whose own processors must see every op
    (on_start too); the span is the same either way."""
    provider, exp = stamped
    started: list[str] = []

    class Watching(SimpleSpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            started.append(span.name)

    provider.add_span_processor(Watching(InMemorySpanExporter()))
    t = torch.ones(2)
    with tt.step(6):
        dist.all_reduce(t)
    recorded = [s for s in exp.get_finished_spans() if s.name == "torch.all_reduce"]
    assert started == ["torch.step"]  # a record's span is handed to processors at on_end only
    tt.instrument(carriage="none", gpu=False, sdk_spans=True)
    with tt.step(7):
        dist.all_reduce(t)
    assert started == ["torch.step", "torch.step", "torch.all_reduce"]
    sdk = [s for s in exp.get_finished_spans() if s.name == "torch.all_reduce"][-1]
    a, b = dict(recorded[0].attributes or {}), dict(sdk.attributes or {})
    for attrs in (a, b):
        attrs.pop("tempotrace.stamps")
        attrs.pop("tempotrace.torch.seq")
    assert a == b
    assert _stamps(recorded[0]).end is not None and _stamps(sdk).end is not None


SIGTERMED_IN_A_STEP = r"""
import socket, sys, time
import torch, torch.distributed as dist
from tempotrace_sdk.otel import configure
from tempotrace_sdk import torch as tt
configure(service_name="recorded")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
tt.instrument(carriage="step+p2p", gpu=False)
with tt.step(0):
    dist.all_reduce(torch.ones(2))
    print("ready", flush=True)
    time.sleep(60)
"""


def test_a_worker_stopped_by_sigterm_inside_a_step_loses_no_op_that_had_ended(tmp_path: Path) -> None:
    """How torchrun and Kubernetes stop a worker: the SIGTERM flush makes the recorded ops' spans first."""
    path = tmp_path / "spans.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TEMPOTRACE_", "TORCHELASTIC_"))}
    # The batch delay is long: only the SIGTERM flush can bring the span out in time.
    env.update(TEMPOTRACE_EXPORT_PATH=str(path), OTEL_BSP_SCHEDULE_DELAY="120000", TEMPOTRACE_JOB_ID="recorded")
    proc = subprocess.Popen([sys.executable, "-c", SIGTERMED_IN_A_STEP], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    names = [sp["name"] for line in path.read_text().splitlines() for rs in json.loads(line).get("resourceSpans", [])
             for ss in rs["scopeSpans"] for sp in ss["spans"]]
    assert names == ["torch.all_reduce"]  # the step never ended: its span is not there


@pytest.mark.parametrize("sdk_spans", [False, True])
def test_root_ops_are_sampled_as_the_sdk_path_samples_them(group: None, monkeypatch: pytest.MonkeyPatch,
                                                           sdk_spans: bool) -> None:
    """A root op (no span around it) is asked of the provider's sampler with its trace id, as start_span asks:
    a ratio sampler keeps the same share of root ops either way, and exactly the ops whose ids it accepts."""
    from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

    ratio = TraceIdRatioBased(0.5)
    exp = InMemorySpanExporter()
    provider = TracerProvider(sampler=ratio)
    provider.add_span_processor(TempoTraceSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exp))
    monkeypatch.setattr(torch_spans, "tracer", lambda: provider.get_tracer("test"))
    tt.instrument(carriage="none", gpu=False, sdk_spans=sdk_spans, hang_timeout=0)
    try:
        t = torch.ones(2)
        for _ in range(64):
            dist.all_reduce(t)
        assert provider.force_flush()
    finally:
        tt.uninstrument()
        provider.shutdown()
    ops = [s for s in exp.get_finished_spans() if s.name == "torch.all_reduce"]
    assert 8 < len(ops) < 56  # 64 ops at 1/2: not all, not none
    bound = ratio.get_bound_for_rate(0.5)
    assert all(s.context.trace_id & TraceIdRatioBased.TRACE_ID_LIMIT < bound for s in ops)


def test_a_root_ops_sampler_is_asked_with_what_the_op_had_at_its_start(group: None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """As start_span asked it: a blocking op's completion known up front, an async op's not yet."""
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler, SamplingResult

    asked: list[tuple[str, Any]] = []

    class Asking(Sampler):
        def should_sample(self, parent_context: Any, trace_id: int, name: str, kind: Any = None,
                          attributes: Any = None, links: Any = None, trace_state: Any = None) -> SamplingResult:
            asked.append((name, (attributes or {}).get("tempotrace.torch.completion")))
            return ALWAYS_ON.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

        def get_description(self) -> str:
            return "asking"

    provider = TracerProvider(sampler=Asking())
    provider.add_span_processor(TempoTraceSpanProcessor())
    monkeypatch.setattr(torch_spans, "tracer", lambda: provider.get_tracer("test"))
    tt.instrument(carriage="none", gpu=False, hang_timeout=0)
    try:
        t = torch.ones(2)
        dist.all_reduce(t)
        dist.all_reduce(t, async_op=True).wait()
        assert provider.force_flush()
    finally:
        tt.uninstrument()
        provider.shutdown()
    assert asked == [("torch.all_reduce", "return"), ("torch.all_reduce", None)], asked
