"""Tracing failures that must never reach the program nor stall it, in one process (a gloo group of one):
a span that cannot start (step, DDP hook, clock check), a receive whose record cannot be read (the receive
courier), a GPU harvest on a sticky CUDA error (sweep, uninstrument). Spec: spec/torch.md §1.1, §3.3, §6."""

from __future__ import annotations

import time
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from tempotrace_sdk import torch as tt  # noqa: E402
from tempotrace_sdk.torch import spans as torch_spans  # noqa: E402
from tempotrace_sdk.torch import wrappers  # noqa: E402
from tempotrace_sdk.torch.carriage import records  # noqa: E402

#: Far beyond anything these tests wait for when they work; a regression waits the 15 s safety net instead.
QUICK_S = 5.0


def _delta(before: dict[str, int], name: str) -> int:
    return tt.carriage_counts().get(name, 0) - before.get(name, 0)


def _no_spans(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("injected: span processor failed")


def test_a_step_whose_span_cannot_start_runs_and_still_exchanges(group: None, exporter: InMemorySpanExporter,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Review R5, §1.1 and §4.2: the body runs (on one rank a raise would leave the others hanging) and the
    step's all_gather is still issued, with the absent record."""
    gathers: list[int] = []
    original = records._all_gather

    def counting(*args: Any, **kwargs: Any) -> Any:
        gathers.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(records, "_all_gather", counting)
    tt.instrument(carriage="step+p2p", gpu=False)
    before = tt.carriage_counts()
    ran = []
    monkeypatch.setattr(torch_spans, "start_span", _no_spans)
    with tt.step(1) as sp:
        ran.append(sp)
    assert ran == [trace.INVALID_SPAN] and gathers == [1]
    assert _delta(before, "untraced") == 1


def test_a_ddp_hook_and_a_clock_check_whose_span_cannot_start_still_do_their_work(
        group: None, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review R5, §1.1, §5: the hook still reduces (its inner hook runs), the clock check still measures."""
    before = tt.carriage_counts()
    monkeypatch.setattr(torch_spans, "start_span", _no_spans)
    reduced = []
    tt.comm_hook(inner=lambda state, grad: reduced.append(grad))(None, torch.ones(2))  # an FSDP-style hook
    result = tt.check_clocks(rounds=2)
    assert len(reduced) == 1 and [r.verdict for r in result.ranks] == ["ref"]
    assert _delta(before, "untraced") == 2 and exporter.get_finished_spans() == ()


def _arrived_side() -> Any:
    """A gloo side receive from rank 1 whose message (the absent record) is in."""
    from tempotrace_sdk.torch.carriage.side import SideRecv, side_buffer
    from tempotrace_sdk.torch.groups import GroupInfo
    from tempotrace_sdk.wire.torchrecord import absent_record

    class Done:
        def is_completed(self) -> bool:
            return True

        def wait(self, timeout: Any = None) -> bool:
            return True

    info = GroupInfo(key="0-1", ranks=(0, 1), group_rank=0, rank=0, backend="gloo", device=torch.device("cpu"),
                     tags=True, attributes={}, pg_ref=lambda: None)
    buffer, _ = side_buffer(info)
    buffer.copy_(torch.frombuffer(bytearray(absent_record()), dtype=torch.uint8))
    return SideRecv(info, buffer, 1, 5, 0, Done(), ordered=False)


def test_a_receive_whose_record_cannot_be_read_ends_and_the_courier_goes_on(exporter: InMemorySpanExporter,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Review R2, §3.3: reading one receive's record fails (a CUDA error in its read-back). Its span still
    ends, counted trace_failed; the receive courier lives on, so no later sweep waits its 15 s safety net."""
    from tempotrace_sdk.torch.pending import PendingOp, Registry

    original = records.merge_side
    left = [1]

    def broken(*args: Any, **kwargs: Any) -> Any:
        if left[0]:
            left[0] -= 1
            raise RuntimeError("injected: record read-back failed")
        return original(*args, **kwargs)

    monkeypatch.setattr(records, "merge_side", broken)
    registry = Registry()
    before = tt.carriage_counts()
    for name in ("torch.recv.first", "torch.recv.second"):
        op = PendingOp(torch_spans.start_span(name, {}), [], carried=_arrived_side())
        registry.watch(op)
        started = time.monotonic()
        assert registry.receiver.flush(timeout_s=QUICK_S) is True, name
        assert time.monotonic() - started < QUICK_S
    ended = {s.name: dict(s.attributes or {}) for s in exporter.get_finished_spans()}
    assert set(ended) == {"torch.recv.first", "torch.recv.second"}
    assert ended["torch.recv.second"]["tempotrace.torch.recv.missing"] == (1,)  # read: the absent record
    assert _delta(before, "trace_failed") == 1 and _delta(before, "flush_timeout") == 0


class _StickyCudaError:
    """A GPU event source after a sticky CUDA error: recording works no more."""

    def record(self) -> object:
        return object()

    def record_quiet(self) -> object:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def release(self, event: Any) -> None:
        pass

    def capturing(self) -> bool:
        return False


def test_sweep_and_uninstrument_survive_a_broken_gpu_and_put_everything_back(group: None,
                                                                             exporter: InMemorySpanExporter) -> None:
    """Review R3, §1.1, §6: the harvest raises; neither sweep() nor uninstrument() raises, uninstrument()
    restores torch.distributed, and the span waiting for its GPU timing ends 'unfinished'."""
    from tempotrace_sdk.torch.gpu import GpuTimer

    original = dist.all_reduce
    tt.instrument(carriage="step+p2p", gpu=False)
    timer = GpuTimer(_StickyCudaError())
    wrappers.settings.gpu = timer
    timer.end((object(), 0), torch_spans.start_span("torch.all_reduce", {}))
    before = tt.carriage_counts()
    tt.sweep()
    tt.uninstrument()
    assert not tt.is_instrumented() and dist.all_reduce is original and wrappers.settings.gpu is None
    assert _delta(before, "sweep_failed") == 2
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["tempotrace.torch.completion"] == "unfinished"


def _steps(exporter: InMemorySpanExporter) -> list[Any]:
    """The step spans (an exception leaving a step also writes a flight-recorder dump record: spec/torch.md §8.2)."""
    return [s for s in exporter.get_finished_spans() if s.name == "torch.step"]


def test_an_exchange_owed_by_a_handled_exception_is_paid_at_uninstrument(group: None,
                                                                       exporter: InMemorySpanExporter) -> None:
    """§4.2: the last step raised, the program handled it and stops tracing: the other ranks wait for this
    exchange in their step-exit all_gather, so uninstrument() pays it (dropping it held them until the
    group's timeout); the step span ends with its error and what the exchange carried."""
    tt.instrument(carriage="step+p2p", gpu=False)
    before = tt.carriage_counts()
    with pytest.raises(KeyError), tt.step(7):
        raise KeyError("the program's own error")
    assert _steps(exporter) == []  # open until paid
    tt.uninstrument()
    (span,) = _steps(exporter)
    # the exchange ran: what it carried is on the span (one rank: no other record to count)
    assert not span.status.is_ok and (span.attributes or {}).get("tempotrace.torch.recv.count") == 0
    assert _delta(before, "owed_dropped") == 0


def test_an_exchange_still_owed_when_uninstrument_runs_unwinding_is_dropped(group: None,
                                                                            exporter: InMemorySpanExporter) -> None:
    """§4.2: uninstrument() in a `finally` while the step's exception unwinds: this rank is going down, it
    issues nothing (counted owed_dropped); the step span ends with its error, without the exchange."""
    tt.instrument(carriage="step+p2p", gpu=False)
    before = tt.carriage_counts()
    with pytest.raises(KeyError):
        try:
            with tt.step(8):
                raise KeyError("fatal here")
        finally:
            tt.uninstrument()
    (span,) = _steps(exporter)
    assert not span.status.is_ok and "tempotrace.torch.recv.count" not in (span.attributes or {})
    assert _delta(before, "owed_dropped") == 1


def test_an_op_on_another_thread_waits_while_an_owed_exchange_is_paid(group: None, exporter: InMemorySpanExporter,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """§4.2: a thread whose op must pay (a DDP hook on autograd's thread) does not go ahead of an exchange
    another thread is paying: it would be issued before the exchange the other ranks issued first."""
    import threading

    from tempotrace_sdk.torch.carriage import owed

    tt.instrument(carriage="step+p2p", gpu=False)
    with pytest.raises(KeyError), tt.step(9):
        raise KeyError("handled")
    in_exchange, release, order = threading.Event(), threading.Event(), []
    paying = owed._pay

    def slow_pay(item: Any) -> None:
        in_exchange.set()
        release.wait(10)
        paying(item)
        order.append("exchange")

    monkeypatch.setattr(owed, "_pay", slow_pay)
    payer = threading.Thread(target=owed.pay)
    payer.start()
    assert in_exchange.wait(10)

    def other_op() -> None:
        owed.pay()
        order.append("other op")

    other = threading.Thread(target=other_op)
    other.start()
    other.join(0.5)
    assert other.is_alive()  # waiting for the exchange (it returned at once before the fix)
    release.set()
    payer.join(10)
    other.join(10)
    assert order == ["exchange", "other op"]


def test_a_side_send_thread_that_cannot_start_leaves_its_channel_to_the_next_send(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """§3.3: no thread to be had (counted side_failed): the channel is not marked served, so the next side
    send on it starts a thread that sees both out (marked first, the channel was never seen out again)."""
    import threading

    from tempotrace_sdk.torch.carriage.couriers import SendCourier

    class Done:
        def is_completed(self) -> bool:
            return True

    courier = SendCourier()
    before = tt.carriage_counts()
    original = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: (_ for _ in ()).throw(RuntimeError("no thread")))
    courier.submit("channel", torch.ones(1), Done(), False)
    monkeypatch.setattr(threading.Thread, "start", original)
    assert courier.in_flight() == 1 and _delta(before, "side_failed") == 1
    courier.submit("channel", torch.ones(1), Done(), False)
    deadline = time.monotonic() + QUICK_S
    while courier.in_flight() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert courier.in_flight() == 0
