"""instrument()/uninstrument() in one process (a gloo group of one): what is replaced, what comes back,
re-entrancy, P2POp identity (spec/torch.md §1). The 4-rank behaviour is in test_distributed.py."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
import torch.distributed.distributed_c10d as c10d  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from tempotrace_sdk import torch as tt  # noqa: E402
from tempotrace_sdk.errors import TempoTraceError  # noqa: E402
from tempotrace_sdk.torch import spans as torch_spans  # noqa: E402
from tempotrace_sdk.torchops import SPECS  # noqa: E402

NAMES = [s.name for s in SPECS] + ["batch_isend_irecv"]


def _snapshot() -> dict[str, Any]:
    snap: dict[str, Any] = {name: getattr(dist, name) for name in NAMES}
    snap["P2POp.__new__"] = c10d.P2POp.__dict__["__new__"]
    snap["P2POp.__init__"] = c10d.P2POp.__dict__["__init__"]
    snap["Work.wait"] = c10d.Work.__dict__["wait"]
    return snap


def test_uninstrument_restores_exactly_what_was_there(group: None, exporter: InMemorySpanExporter) -> None:
    before = _snapshot()
    tt.instrument(carriage="none")
    during = _snapshot()
    assert all(during[k] is not before[k] for k in before), [k for k in before if during[k] is before[k]]
    tt.instrument(carriage="step")  # again: the mode changes, nothing is wrapped twice
    assert _snapshot() == during and tt.carriage_mode() == "step"
    tt.uninstrument()
    after = _snapshot()
    assert all(after[k] is before[k] for k in before)
    tt.uninstrument()  # idempotent


def test_an_unknown_carriage_mode_is_refused(group: None) -> None:
    with pytest.raises(TempoTraceError, match="carriage"):
        tt.instrument(carriage="sometimes")
    assert not tt.is_instrumented()


def test_p2pop_keeps_torchs_own_function_whenever_it_was_built(group: None, exporter: InMemorySpanExporter) -> None:
    """torch checks P2POp.op by identity: an op built with our dist.isend stores c10d.isend."""
    before = dist.P2POp(dist.isend, torch.ones(2), 0)
    tt.instrument(carriage="none")
    during = dist.P2POp(dist.isend, torch.ones(2), 0)
    by_keyword = dist.P2POp(op=dist.irecv, tensor=torch.ones(2), peer=0)
    tt.uninstrument()
    assert before.op is during.op is c10d.isend and by_keyword.op is c10d.irecv


def test_no_op_is_traced_twice(group: None, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    """A traced op whose implementation reaches another wrapped function records one span, not two."""
    tt.instrument(carriage="none")
    monkeypatch.setattr(c10d, "all_gather", dist.all_gather)  # all_gather_object now calls our wrapper
    out: list[Any] = [None]
    dist.all_gather_object(out, {"x": 1})
    assert out == [{"x": 1}]
    assert [s.name for s in exporter.get_finished_spans()] == ["torch.all_gather_object"]


def test_ops_run_untraced_when_not_instrumented_and_errors_propagate(group: None,
                                                                      exporter: InMemorySpanExporter) -> None:
    t = torch.ones(3)
    dist.all_reduce(t)
    assert exporter.get_finished_spans() == ()
    tt.instrument(carriage="op")
    with pytest.raises(ValueError):
        dist.broadcast(t, src=0, group_src=0)  # torch refuses both: the error is the program's
    dist.all_reduce(t)  # a group of one: the op-mode exchange has no one else to merge
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["torch.broadcast", "torch.all_reduce"]
    assert not spans[0].status.is_ok
    a = spans[1].attributes or {}
    assert a["tempotrace.torch.recv.count"] == 0 and a["tempotrace.torch.completion"] == "return"


def test_check_clocks_is_a_gate_on_quality(group: None, exporter: InMemorySpanExporter,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """spec/torch.md §5.3: require=Q exits 1 (every rank) when a clock reports worse than Q; else a result."""
    from tempotrace_sdk.clocks.simulated import from_spec
    from tempotrace_sdk.otel.context import get_state

    state = get_state()
    saved = state.clock
    try:
        state.clock = from_spec("ntp,quality=UNKNOWN")
        with pytest.raises(SystemExit) as info:
            tt.check_clocks(rounds=2, require="OK")
        assert info.value.code == 1
        err = capsys.readouterr().err
        assert 'require="OK" is not met' in err and "rank 0 below OK: clock sim:ntp, quality UNKNOWN" in err
        state.clock = from_spec("ptp")
        result = tt.check_clocks(rounds=2, require="OK")
        assert result.ok and [r.verdict for r in result.ranks] == ["ref"]
    finally:
        state.clock = saved
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["torch.check_clocks", "torch.check_clocks"]


def test_a_tracing_failure_after_the_op_never_reaches_the_program(group: None, exporter: InMemorySpanExporter,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tempotrace_sdk.torch import pending

    def broken(op: Any) -> None:
        raise RuntimeError("bookkeeping failed")

    tt.instrument(carriage="none")
    before = tt.carriage_counts().get("trace_failed", 0)
    monkeypatch.setattr(pending.registry, "watch", broken)
    t = torch.ones(2)
    work = dist.all_reduce(t, async_op=True)
    assert work is not None
    work.wait()
    assert float(t[0]) == 1.0 and tt.carriage_counts()["trace_failed"] == before + 1


class _FakeWork:
    """A device work (NCCL-like): its future is done once queued; is_completed() says when it really is."""

    def __init__(self) -> None:
        self.completed = False
        self.waited_with: list[Any] = []
        self._future = torch.futures.Future()
        self._future.set_result(None)

    def get_future(self) -> Any:
        return self._future

    def is_completed(self) -> bool:
        return self.completed

    def wait(self, timeout: Any = None) -> bool:
        self.waited_with.append(timeout)
        return True


def test_a_device_work_ends_when_it_completes_not_when_its_future_says_so(exporter: InMemorySpanExporter) -> None:
    """Finding 10, spec §1.3: a device backend's future completes at queue time, so it is not used there."""
    from tempotrace_sdk.torch.pending import PendingOp, registry

    host, device = _FakeWork(), _FakeWork()
    registry.watch(PendingOp(torch_spans.start_span("torch.host", {}), [host]))
    registry.watch(PendingOp(torch_spans.start_span("torch.device", {}), [device], device=True))
    ended = {s.name: (s.attributes or {})["tempotrace.torch.completion"] for s in exporter.get_finished_spans()}
    assert ended == {"torch.host": "future"}
    registry.sweep()
    assert len(exporter.get_finished_spans()) == 1  # queued is not done
    device.completed = True
    registry.sweep()
    ended = {s.name: (s.attributes or {})["tempotrace.torch.completion"] for s in exporter.get_finished_spans()}
    assert ended == {"torch.host": "future", "torch.device": "sweep"}


class _CudaGrad:
    """Stands for a gradient on a GPU (FSDP hands its hook a tensor; only device and size are read)."""

    class device:  # mimics torch.device
        type = "cuda"

    nbytes = 64


def test_blocking_ops_on_a_device_say_their_end_is_a_queue_time(group: None, exporter: InMemorySpanExporter) -> None:
    """Finding 10, spec §1.3: on a device stream a blocking call returns once the op is queued: completion
    "queued" (the analysis takes no end from it), except barrier, which c10d synchronises with the host."""
    from tempotrace_sdk.torch.groups import group_info
    from tempotrace_sdk.torch.wrappers import blocking_completion, on_device
    from tempotrace_sdk.torchops import Reader

    spec = {s.name: s for s in SPECS}
    info = group_info(None)
    cuda = (_CudaGrad(),)
    assert on_device(spec["all_reduce"], Reader(c10d.all_reduce), info, cuda, {})
    assert not on_device(spec["all_reduce"], Reader(c10d.all_reduce), info, (torch.ones(1),), {})
    assert blocking_completion(spec["all_reduce"], True) == "queued"
    assert blocking_completion(spec["barrier"], True) == "return"
    assert blocking_completion(spec["all_reduce"], False) == "return"
    tt.comm_hook(inner=lambda state, grad: None)(None, _CudaGrad())  # an FSDP hook reducing a GPU gradient
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["tempotrace.torch.completion"] == "queued"


def _side(deadline_s: float) -> Any:
    """A gloo side receive from rank 1 whose message has not come, on a group of one's info."""
    from tempotrace_sdk.torch.carriage.side import SideRecv, side_buffer
    from tempotrace_sdk.torch.groups import GroupInfo

    info = GroupInfo(key="0-1", ranks=(0, 1), group_rank=0, rank=0, backend="gloo", device=torch.device("cpu"),
                     tags=True, attributes={}, pg_ref=lambda: None)
    buffer, _ = side_buffer(info)
    return SideRecv(info, buffer, 1, 5, 0, _FakeWork(), ordered=deadline_s == 0)


def test_a_side_message_that_never_comes_is_given_up_once(exporter: InMemorySpanExporter) -> None:
    """Finding 1, spec §3.3: the receive courier decides without blocking; an overdue receive ends missing,
    counted once, and no later flush waits for it again."""
    import time

    from tempotrace_sdk.torch.carriage.couriers import RecvCourier
    from tempotrace_sdk.torch.pending import PendingOp

    finished: list[Any] = []
    courier = RecvCourier(finished.append)
    ordered, late = _side(0), _side(0.3)
    before = tt.carriage_counts()
    span = torch_spans.start_span("torch.irecv", {})
    courier.submit(PendingOp(span, [], carried=ordered), time.monotonic())
    courier.submit(PendingOp(span, [], carried=late), time.monotonic() + 0.3)
    assert courier.flush(timeout_s=60) is True
    after = tt.carriage_counts()
    assert after.get("side_absent", 0) - before.get("side_absent", 0) == 1
    assert after.get("side_timeout", 0) - before.get("side_timeout", 0) == 1
    assert len(finished) == 2 and ordered.finish()["tempotrace.torch.recv.missing"] == (1,)
    assert courier.flush(timeout_s=0) is True  # nothing left to wait for


def test_a_side_message_is_taken_as_soon_as_it_is_in(exporter: InMemorySpanExporter) -> None:
    """A gloo side message shows in its buffer; the wait that completes its work has no deadline gloo could hit."""
    import time

    from tempotrace_sdk.torch.carriage.couriers import RecvCourier
    from tempotrace_sdk.torch.carriage.side import FOREVER
    from tempotrace_sdk.torch.pending import PendingOp
    from tempotrace_sdk.wire.torchrecord import absent_record

    finished: list[Any] = []
    side = _side(10)
    side.buffer.copy_(torch.frombuffer(bytearray(absent_record()), dtype=torch.uint8))
    courier = RecvCourier(finished.append)
    courier.submit(PendingOp(torch_spans.start_span("torch.irecv", {}), [], carried=side), time.monotonic() + 60)
    assert courier.flush(timeout_s=60) is True and len(finished) == 1
    assert side.work.waited_with == [FOREVER] and side.taken
