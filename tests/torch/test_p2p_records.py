"""A blocking point-to-point op that carries nothing is recorded like a blocking collective (spec/torch.md §1.4):
its span, made from the record at the step's exit, has the peer, tag and p2p seq the SDK path writes; a
receive that overlaps an any-source one is marked ambiguous on its record (§2).

A group of one cannot send to itself, so the entry points here wrap stand-ins with torch's signatures
(``make_wrapper`` as instrument() builds them); the job test (test_flight_recorder's differential) runs the
real sends and receives of three ranks both ways.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from p2p_standins import OpenRecv, Peer  # noqa: E402  # tests/torch is on sys.path (no package: it would be torch)

from tempotrace_sdk import torch as tt  # noqa: E402
from tempotrace_sdk.otel.processor import TempoTraceSpanProcessor  # noqa: E402
from tempotrace_sdk.torch import opspans  # noqa: E402
from tempotrace_sdk.torch import spans as torch_spans  # noqa: E402
from tempotrace_sdk.torch.groups import group_info  # noqa: E402
from tempotrace_sdk.torch.install import make_wrapper  # noqa: E402
from tempotrace_sdk.torch.p2p import RecordMark, posted, released, traced_batch  # noqa: E402
from tempotrace_sdk.torch.recorder import AMBIGUOUS, ENDED, p2p_word, peer_and_tag, recorder  # noqa: E402
from tempotrace_sdk.torchops import SPEC_INDEX, SPECS  # noqa: E402

T = "tempotrace.torch."


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(TempoTraceSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exp))
    monkeypatch.setattr(torch_spans, "tracer", lambda: provider.get_tracer("test"))
    tt.instrument(carriage="none", gpu=False)
    yield exp
    tt.uninstrument()
    provider.shutdown()


def _wrapped(peer: Peer) -> tuple[Any, Any]:
    return (make_wrapper(SPECS[SPEC_INDEX["send"]], peer.send), make_wrapper(SPECS[SPEC_INDEX["recv"]], peer.recv))


def _ops(exp: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exp.get_finished_spans() if s.name in ("torch.send", "torch.recv")]


def test_blocking_sends_and_receives_are_recorded_with_their_peer_tag_and_seq(
        group: None, exported: InMemorySpanExporter) -> None:
    peer = Peer()
    send, recv = _wrapped(peer)
    t = torch.ones(4)
    with tt.step(0):
        ended = recorder.state.count(ENDED)  # (issued may lag a begin whose reading failed: a number, no record)
        send(t, dst=1, tag=7)
        send(t, 1, None, 7)  # positionally: the same (group, src, dst, tag), the next seq
        assert recv(t, src=2, tag=-3) == 2
        assert _ops(exported) == []  # recorded: their spans come at the step's exit, as collectives'
        assert recorder.state.count(ENDED) == ended + 3
    assert peer.calls == [("send", 1, 7), ("send", 1, 7), ("recv", 2, -3)]
    ops = _ops(exported)
    got = [(s.name, {k[len(T):]: v for k, v in (s.attributes or {}).items() if k.startswith(T)}) for s in ops]
    assert got == [
        ("torch.send", {"group": "0", "group_rank": 0, "group_size": 1, "backend": "gloo", "op": "send", "bytes": 16,
                        "tag": 7, "peer": 1, "src": 0, "dst": 1, "p2p_seq": 0, "completion": "return"}),
        ("torch.send", {"group": "0", "group_rank": 0, "group_size": 1, "backend": "gloo", "op": "send", "bytes": 16,
                        "tag": 7, "peer": 1, "src": 0, "dst": 1, "p2p_seq": 1, "completion": "return"}),
        ("torch.recv", {"group": "0", "group_rank": 0, "group_size": 1, "backend": "gloo", "op": "recv", "bytes": 16,
                        "tag": -3, "peer": 2, "dst": 0, "src": 2, "p2p_seq": 0, "completion": "return"}),
    ], got
    step = next(s for s in exported.get_finished_spans() if s.name == "torch.step")
    assert all(s.parent is not None and s.parent.span_id == step.context.span_id for s in ops)
    assert all("tempotrace.stamps" in (s.attributes or {}) for s in ops)


def test_a_receive_overlapping_an_any_source_one_is_marked_on_its_record(
        group: None, exported: InMemorySpanExporter) -> None:
    """An any-source receive posted while a recorded one is outstanding marks both (p2p.posted), the recorded
    one through its record; one posted after it completed marks nothing."""
    peer = Peer()
    _, recv = _wrapped(peer)
    info = group_info(None)
    other = None

    def any_source_posted() -> None:
        nonlocal other
        other = posted(info.open_recvs, OpenRecv(), 5, True)[0]

    peer.during = any_source_posted
    with tt.step(1):
        recv(torch.ones(2), src=1, tag=5)
        peer.during = None
        recv(torch.ones(2), src=1, tag=6)  # another tag: no overlap
    assert other is not None and other.span.marked  # type: ignore[attr-defined]
    released(other)
    assert not info.open_recvs  # every receive released
    marked = {(s.attributes or {})[T + "tag"]: (s.attributes or {}).get(T + "p2p_ambiguous") for s in _ops(exported)}
    assert marked == {5: True, 6: None}, marked


def test_a_receive_that_raises_gets_its_error_span_at_once_and_is_released(
        group: None, exported: InMemorySpanExporter) -> None:
    peer = Peer()
    _, recv = _wrapped(peer)
    peer.fail = RuntimeError("peer gone")
    with pytest.raises(RuntimeError, match="peer gone"), tt.step(2):
        recv(torch.ones(2), src=1, tag=9)
        pytest.fail("the receive raised")
    (op,) = _ops(exported)
    attrs = op.attributes or {}
    assert attrs[T + "completion"] == "error" and attrs[T + "src"] == 1 and op.status.status_code.name == "ERROR"
    assert not group_info(None).open_recvs


def test_a_tag_no_record_holds_gets_an_sdk_span(group: None, exported: InMemorySpanExporter) -> None:
    """torch's tags are 32-bit; one beyond that (torch refuses it on a real group) is traced the SDK's way."""
    peer = Peer()
    send, _ = _wrapped(peer)
    issued = recorder.issued
    with tt.step(3):
        send(torch.ones(2), dst=1, tag=1 << 40)
        (op,) = _ops(exported)  # ended as it returned: an SDK span, not a record
    assert recorder.issued == issued and (op.attributes or {})[T + "tag"] == 1 << 40


def test_the_p2p_word_keeps_a_peer_and_any_32_bit_tag() -> None:
    for peer, tag in ((0, 0), (1, -1), ((1 << 31) - 1, -(1 << 31)), (5, (1 << 31) - 1)):
        assert peer_and_tag(p2p_word(peer, tag)) == (peer, tag)
    assert [p2p_word(*bad) for bad in ((-1, 0), (1 << 31, 0), (0, 1 << 31), (0, -(1 << 31) - 1))] == [None] * 4


def test_a_mark_after_the_record_left_the_ring_is_refused(group: None, exported: InMemorySpanExporter) -> None:
    """posted()'s mark on a record already exported cannot land: RecordMark raises, which _mark counts as a
    mark lost (``p2p_ambiguous_unmarked``), as on an ended SDK span."""
    word = p2p_word(1, 0)
    assert word is not None
    number = recorder.begin(SPEC_INDEX["recv"], group_info(None), 0, 8, word)
    assert number >= 0 and recorder.flag(number, AMBIGUOUS)
    assert recorder.end(number)
    record = recorder.take_one(number)
    assert record is not None and record.flags == AMBIGUOUS
    assert not recorder.flag(number, AMBIGUOUS)
    with pytest.raises(LookupError):
        RecordMark(number).set_attribute(T + "p2p_ambiguous", True)


class Work:
    """A gloo p2p work's stand-in: no future, complete when told (torch's own Work.wait is what pending.py wraps;
    this one's completion is seen by a sweep)."""

    def __init__(self) -> None:
        self.done = False

    def is_completed(self) -> bool:
        return self.done

    def get_future(self) -> Any:
        raise RuntimeError("Work::getFuture not implemented")  # as gloo's send/recv works say


def test_an_async_receive_is_recorded_and_ends_when_its_work_is_seen_complete(
        group: None, exported: InMemorySpanExporter) -> None:
    works: list[Work] = []

    def irecv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0, group_src: Any = None) -> Work:
        works.append(Work())
        return works[-1]

    wrapped = make_wrapper(SPECS[SPEC_INDEX["irecv"]], irecv)
    info = group_info(None)
    with tt.step(4):
        work = wrapped(torch.ones(2), src=1, tag=2)
        assert work is works[0]
        (number,) = recorder.open_numbers()  # open while its work is
        assert info.open_recvs  # outstanding: an any-source receive posted now would be marked with it
        tt.sweep()
        assert recorder.open_numbers() == [number]  # not complete: still open, its span not made
        work.done = True
    assert recorder.open_numbers() == [] and not info.open_recvs  # the step's exit swept it: ended, released
    (op,) = _ops_named(exported, "torch.irecv")
    attrs = {k[len(T):]: v for k, v in (op.attributes or {}).items() if k.startswith(T)}
    assert (attrs["completion"], attrs["src"], attrs["dst"], attrs["tag"], attrs["p2p_seq"]) == ("sweep", 1, 0, 2, 0)


def _ops_named(exp: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exp.get_finished_spans() if s.name == name]


def test_a_backends_p2p_works_are_asked_for_a_future_once(group: None, exported: InMemorySpanExporter) -> None:
    """Gloo's p2p works have no future, and asking costs a C++ exception each time (~20 µs): after one says so,
    the next are not asked; their completion is seen as any future-less work's is."""
    asked: list[int] = []

    class Asked(Work):
        def get_future(self) -> Any:
            asked.append(1)
            return super().get_future()

    def isend(tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0, group_dst: Any = None) -> Work:
        work = Asked()
        work.done = True
        return work

    wrapped = make_wrapper(SPECS[SPEC_INDEX["isend"]], isend)
    with tt.step(5):
        for _ in range(3):
            wrapped(torch.ones(2), dst=1, tag=2)
    assert len(asked) <= 1  # (none at all when an earlier test's p2p work already said so)
    ops = _ops_named(exported, "torch.isend")
    assert len(ops) == 3 and {(s.attributes or {})[T + "completion"] for s in ops} == {"return"}


def _p2p_op(func: Any, tensor: Any, peer: int, tag: int) -> Any:
    """A P2POp to a peer a group of one lacks (its constructor would refuse it): the fields _plan_each reads."""
    op = object.__new__(dist.P2POp)
    op.op, op.tensor, op.group, op.peer, op.tag, op.group_peer = func, tensor, dist.group.WORLD, peer, tag, peer
    return op


def test_a_batchs_ops_are_recorded_each_with_its_own_end(group: None, exported: InMemorySpanExporter) -> None:
    """batch_isend_irecv: each op a record flagged batched, ended when its own work is seen complete, its span
    the one the SDK path writes for a batch's op (``batched``, no completion until the end)."""
    works: list[Work] = []

    def batch(ops: list[Any]) -> list[Work]:
        works[:] = [Work() for _ in ops]
        return list(works)

    wrapped = traced_batch(batch)
    issued = recorder.issued
    with tt.step(6):
        out = wrapped([_p2p_op(dist.isend, torch.ones(4), 1, 3), _p2p_op(dist.irecv, torch.ones(2), 2, 3)])
        assert out == works and recorder.issued == issued + 2
        works[0].done = True
        tt.sweep()
        assert len(recorder.open_numbers()) == 1  # the receive's work is not complete yet
        works[1].done = True
    assert recorder.open_numbers() == [] and not group_info(None).open_recvs
    got = {s.name: {k[len(T):]: v for k, v in (s.attributes or {}).items() if k.startswith(T) and "group" not in k
                    and k != T + "backend"} for s in _ops_named(exported, "torch.isend") + _ops_named(exported,
                                                                                             "torch.irecv")}
    assert got == {
        "torch.isend": {"op": "isend", "batched": True, "peer": 1, "src": 0, "dst": 1, "tag": 3, "p2p_seq": 0,
                        "bytes": 16, "completion": "sweep"},
        "torch.irecv": {"op": "irecv", "batched": True, "peer": 2, "src": 2, "dst": 0, "tag": 3, "p2p_seq": 0,
                        "bytes": 8, "completion": "sweep"},
    }, got


def test_a_batch_that_raises_gives_each_recorded_op_its_error_span(group: None,
                                                                   exported: InMemorySpanExporter) -> None:
    def batch(ops: list[Any]) -> list[Work]:
        raise RuntimeError("batch refused")

    wrapped = traced_batch(batch)
    with pytest.raises(RuntimeError, match="batch refused"):
        wrapped([_p2p_op(dist.isend, torch.ones(4), 1, 8), _p2p_op(dist.irecv, torch.ones(2), 1, 8)])
    ops = _ops_named(exported, "torch.isend") + _ops_named(exported, "torch.irecv")
    assert [(s.attributes or {})[T + "completion"] for s in ops] == ["error", "error"]
    assert all(s.status.status_code.name == "ERROR" for s in ops) and not group_info(None).open_recvs
    assert recorder.open_numbers() == []


# -- review findings ---------------------------------------------------------------------------------------------
class _OpenSpan:
    """An any-source receive's open span, as posted() marks it."""

    def is_recording(self) -> bool:
        return True

    def set_attribute(self, key: str, value: Any) -> None:
        pass


def test_async_ops_ending_make_their_spans_before_the_ring_comes_round(group: None,
                                                                       exported: InMemorySpanExporter) -> None:
    """Ending an async op's record counts towards a release as a blocking op's end does: 3,000 isends outside any
    step, through a ring of 1,024, lose none of their spans (before the fix: 1,976 overwritten)."""
    tt.instrument(carriage="none", gpu=False, hang_timeout=0, ring_ops=1024)

    def isend(tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0, group_dst: Any = None) -> Work:
        work = Work()
        work.done = True
        return work

    wrapped = make_wrapper(SPECS[SPEC_INDEX["isend"]], isend)
    before = recorder.overwritten
    for _ in range(3000):
        wrapped(torch.ones(2), dst=1)
    assert recorder.overwritten == before
    assert len(_ops_named(exported, "torch.isend")) >= 3000 - 512  # (the last ones wait for the next release)
    tt.instrument(carriage="none", gpu=False, hang_timeout=0, ring_ops=16384)


def test_an_async_receive_tracing_cannot_watch_is_ended_and_released(group: None, exported: InMemorySpanExporter,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """registry.watch failing (counted trace_failed) leaves no record open for the watchdog to call a hang, and no
    receive outstanding to mark later any-source receives ambiguous."""
    from tempotrace_sdk.torch import pending

    def refuse(op: Any) -> None:
        raise MemoryError("watch failed")

    def irecv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0, group_src: Any = None) -> Work:
        return Work()

    monkeypatch.setattr(pending.registry, "watch", refuse)
    make_wrapper(SPECS[SPEC_INDEX["irecv"]], irecv)(torch.ones(2), src=1, tag=5)
    assert recorder.open_numbers() == [] and not group_info(None).open_recvs


def test_a_batch_that_runs_untraced_leaves_no_record_open(group: None, exported: InMemorySpanExporter) -> None:
    """A batch whose planning fails part-way (a tag torch will refuse) runs untraced: the records its first ops
    had begun are dropped, not left open for the watchdog to call a hang."""
    wrapped = traced_batch(lambda ops: [None] * len(ops))
    wrapped([_p2p_op(dist.isend, torch.ones(2), 1, 3), _p2p_op(dist.irecv, torch.ones(2), 1, "x")])
    assert recorder.open_numbers() == [] and not group_info(None).open_recvs
    opspans.release(force=True)
    assert _ops_named(exported, "torch.isend") == []


@pytest.mark.parametrize("name", ["recv", "irecv"])
def test_a_marked_receive_keeps_the_sdk_paths_order(group: None, exported: InMemorySpanExporter, name: str) -> None:
    """The mark lands where the SDK span had it: after the completion a blocking receive has from its start,
    before the one an async receive gets at its end."""
    info = group_info(None)

    def recv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0, group_src: Any = None) -> Any:
        other = posted(info.open_recvs, _OpenSpan(), tag, True)[0]  # an any-source one posted meanwhile
        released(other)
        if name == "irecv":
            work = Work()
            work.done = True
            return work
        return src

    with tt.step(7):
        make_wrapper(SPECS[SPEC_INDEX[name]], recv)(torch.ones(2), src=1, tag=4)
    (op,) = _ops_named(exported, "torch." + name)
    keys = [k[len(T):] for k in (op.attributes or {}) if k in (T + "completion", T + "p2p_ambiguous")]
    assert keys == (["completion", "p2p_ambiguous"] if name == "recv" else ["p2p_ambiguous", "completion"]), keys


def _never_completes(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0,
                     group_src: Any = None) -> Work:
    return Work()


@pytest.mark.parametrize("room", [True, False])
def test_an_async_receive_the_ring_came_round_to_is_still_a_hang_to_the_watchdog(
        group: None, exported: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, room: bool) -> None:
    """A receive outstanding while the ring comes round is set aside, still open (spec/torch.md §8.1); with no
    room left aside its record is lost, but its work is still open: the watchdog reads the registry's async
    records as well as the ring's, so a receive that never completes is a hang either way."""
    from tempotrace_sdk.torch import dumps
    from tempotrace_sdk.torch import recorder as recorder_module

    if not room:
        monkeypatch.setattr(recorder_module, "ASIDE_MAX", 0)
    tt.instrument(carriage="none", gpu=False, hang_timeout=0, ring_ops=8)
    try:
        send = make_wrapper(SPECS[SPEC_INDEX["send"]], Peer().send)
        make_wrapper(SPECS[SPEC_INDEX["irecv"]], _never_completes)(torch.ones(2), src=1, tag=5)
        (number,) = recorder.open_numbers()
        for _ in range(20):
            send(torch.ones(2), dst=1)
        assert (number in recorder.open_numbers()) is room  # its slot taken by a later op: set aside, or lost
        dog = dumps.Watchdog()
        dog.hang_timeout = 10.0
        reasons: list[str] = []
        monkeypatch.setattr(dumps, "dump", lambda reason, **_: reasons.append(reason) or 0)
        dog.poll(100.0)
        assert reasons == []
        dog.poll(110.0)
        assert reasons == ["hang"]
    finally:
        tt.uninstrument()
        tt.instrument(carriage="none", gpu=False, hang_timeout=0, ring_ops=16384)


def _irecv_spans(exp: InMemorySpanExporter) -> list[tuple[int, str]]:
    return [(s.context.span_id, (s.attributes or {})[T + "completion"]) for s in _ops_named(exp, "torch.irecv")]


def test_a_receive_the_ring_came_round_to_keeps_its_span_and_its_dump(group: None,
                                                                      exported: InMemorySpanExporter) -> None:
    """Set aside (spec/torch.md §8.1), an outstanding receive is dumped pending like one in the ring, and its end
    is exported when its work completes, under the same span id, its mark (§2) still set on it; nothing is
    counted lost for it."""
    tt.instrument(carriage="none", gpu=False, hang_timeout=0, ring_ops=8)
    try:
        works: list[Work] = []

        def irecv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0,
                  group_src: Any = None) -> Work:
            works.append(Work())
            return works[-1]

        send = make_wrapper(SPECS[SPEC_INDEX["send"]], Peer().send)
        with tt.step(7):
            make_wrapper(SPECS[SPEC_INDEX["irecv"]], irecv)(torch.ones(2), src=1, tag=5)
            (number,) = recorder.open_numbers()
            before = recorder.overwritten
            for _ in range(20):
                send(torch.ones(2), dst=1)
            assert number in recorder.aside and recorder.flag(number, AMBIGUOUS)
            # 21 ops through 8 slots: 13 came round to, the 12 ended sends (waiting for the step's exit) lost, not it
            assert recorder.overwritten - before == 12
            tt.dump("test")
            assert _irecv_spans(exported)[-1][1] == "pending"
            tt.dump("again")
            assert len(_irecv_spans(exported)) == 1  # a dump shows it once
            works[0].done = True
        (pending, ended) = _irecv_spans(exported)
        assert ended == (pending[0], "sweep") and not recorder.aside and number not in recorder.open_numbers()
        (op,) = [s for s in _ops_named(exported, "torch.irecv") if s.end_time and s.attributes and
                 s.attributes[T + "completion"] == "sweep"]
        assert (op.attributes or {})[T + "p2p_ambiguous"] is True
    finally:
        tt.instrument(carriage="none", gpu=False, hang_timeout=0, ring_ops=16384)


def test_a_resize_sets_open_records_aside(group: None, exported: InMemorySpanExporter) -> None:
    """instrument() with another ring_ops drops the old ring: an op open in it keeps its record and its span."""
    works: list[Work] = []

    def isend(tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0, group_dst: Any = None) -> Work:
        works.append(Work())
        return works[-1]

    before = recorder.overwritten
    make_wrapper(SPECS[SPEC_INDEX["isend"]], isend)(torch.ones(2), dst=1, tag=4)
    try:
        tt.instrument(carriage="none", gpu=False, hang_timeout=0, ring_ops=64)
        assert len(recorder.open_numbers()) == 1 and recorder.overwritten == before
        works[0].done = True
        tt.sweep()
        opspans.release(force=True)
        assert [(s.attributes or {})[T + "completion"] for s in _ops_named(exported, "torch.isend")] == ["sweep"]
    finally:
        tt.instrument(carriage="none", gpu=False, hang_timeout=0, ring_ops=16384)
