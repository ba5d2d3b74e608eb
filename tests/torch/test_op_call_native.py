"""The C call of a traced blocking host collective (native/opcall, torch/wrappers.py ``native_wrapper``;
spec/torch.md §1.4): it records what the Python wrapper records, makes the same spans, hands every case it does
not take to the Python wrapper, and lets torch's exceptions out as they are."""

from __future__ import annotations

import itertools
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402

from tempotrace_sdk import torch as tt  # noqa: E402
from tempotrace_sdk.otel.context import get_state  # noqa: E402
from tempotrace_sdk.otel.stamp import NativeStamp  # noqa: E402
from tempotrace_sdk.torch import wrappers  # noqa: E402
from tempotrace_sdk.torch.recorder import COMPLETIONS, ENDED, OpRecord, recorder  # noqa: E402

opcall = pytest.importorskip("tempotrace_sdk._opcall", reason="the C call is not built (not Linux, no compiler)")


@pytest.fixture
def native_stamp() -> None:
    if not isinstance(get_state().stamp, NativeStamp):
        pytest.skip("the native stamp is not loaded here (TEMPOTRACE_PUREPYTHON)")


def _ops() -> list[tuple[str, Callable[[], Any]]]:
    """Blocking collectives gloo runs on one rank, called positionally and by keyword, rooted and not."""
    t = torch.ones(8)
    out = torch.empty(8)
    return [
        ("all_reduce", lambda: dist.all_reduce(t)),
        ("all_reduce", lambda: dist.all_reduce(tensor=t, op=dist.ReduceOp.SUM)),
        ("all_gather", lambda: dist.all_gather([torch.empty(8)], t)),
        ("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(out, t)),
        ("all_to_all_single", lambda: dist.all_to_all_single(out, t)),
        ("barrier", lambda: dist.barrier()),
        ("all_reduce", lambda: dist.all_reduce(t, group=dist.group.WORLD)),
        ("broadcast", lambda: dist.broadcast(t, 0)),  # rooted: the root a global rank ...
        ("broadcast", lambda: dist.broadcast(t, group_src=0)),  # ... or the group's
        ("reduce", lambda: dist.reduce(t, dst=0)),
        ("gather", lambda: dist.gather(t, gather_list=[torch.empty(8)], dst=0)),
        ("scatter", lambda: dist.scatter(out, scatter_list=[t], src=0)),
    ]


def _run(native: bool, monkeypatch: pytest.MonkeyPatch, **options: Any) -> list[OpRecord]:
    """The ops traced once (the Python wrapper: native=False), their records as the ring holds them."""
    monkeypatch.setattr(wrappers, "NATIVE_CALL", native)
    tt.instrument(carriage="none", retain="ring", **options)
    try:
        assert isinstance(dist.all_reduce, opcall.HostOp) == native
        first = recorder.issued
        for _, op in _ops():
            op()
        return [recorder.unpack(n & recorder.mask) for n in range(first, recorder.issued)]
    finally:
        tt.uninstrument()


def _facts(record: OpRecord) -> tuple[Any, ...]:
    return (record.op, record.group.key, record.nbytes, record.root, COMPLETIONS[record.completion],
            record.start[2:4], record.end is not None and record.end[2:4])


def test_the_c_call_records_what_the_python_wrapper_records(group: None, native_stamp: None,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    python = _run(False, monkeypatch)
    before = opcall.stats()["fast"]
    c = _run(True, monkeypatch)
    # every op but a group's first (which registers the group, in Python) is taken by the C call
    assert opcall.stats()["fast"] - before == len(_ops()) - 1
    assert [_facts(r) for r in c] == [_facts(r) for r in python]
    assert [r.seq - c[0].seq for r in c] == [r.seq - python[0].seq for r in python] == list(range(len(_ops())))
    for record in c:  # each op's readings: an end after its start, the Lamport counter ticked at both
        assert record.end is not None and record.end[0] >= record.start[0] and record.end[4] > record.start[4]
    assert all(b.start[4] > a.end[4] for a, b in itertools.pairwise(c))  # type: ignore[index]


def test_an_op_in_a_step_has_the_step_for_parent_either_way(group: None, native_stamp: None, exporter: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    spans = {}
    for native in (False, True):
        monkeypatch.setattr(wrappers, "NATIVE_CALL", native)
        tt.instrument(carriage="none")
        t = torch.ones(4)
        dist.all_reduce(t)  # the group's first op: registered
        exporter.get_finished_spans()  # (its span made now)
        exporter.clear()
        with tt.step(10 + native):
            dist.all_reduce(t)
            dist.barrier()
        tt.uninstrument()
        finished = exporter.get_finished_spans()
        step = next(s for s in finished if s.name == "torch.step")
        ops = [s for s in finished if s.name.startswith("torch.") and s is not step]
        assert [s.parent.span_id for s in ops] == [step.context.span_id] * 2  # type: ignore[union-attr]
        spans[native] = [(s.name, {k: v for k, v in (s.attributes or {}).items()
                                   if k not in ("tempotrace.stamps", "tempotrace.torch.seq", "tempotrace.torch.step")})
                         for s in ops]
    assert spans[True] == spans[False]


def test_torchs_exception_leaves_the_c_call_as_torch_raised_it(group: None, native_stamp: None, exporter: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wrappers, "NATIVE_CALL", True)
    tt.instrument(carriage="none")
    t = torch.ones(4)
    dist.all_reduce(t)
    exporter.get_finished_spans()
    exporter.clear()
    fast = opcall.stats()["fast"]
    with pytest.raises(Exception) as caught:
        dist.all_reduce(t, op="not an op")  # torch refuses it, inside its own function
    assert opcall.stats()["fast"] == fast + 1
    assert getattr(caught.value, "_tempotrace_torch_op", None) == "all_reduce"  # step() knows it came from torch
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert not [f for f in frames if "tempotrace_sdk" in f.filename]
    errors = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("tempotrace.torch.completion")
              == "error"]
    assert [s.name for s in errors] == ["torch.all_reduce"]
    dist.all_reduce(t)  # and the next op is traced as before
    assert opcall.stats()["fast"] == fast + 2


@pytest.mark.parametrize("case", ["async_op", "inside", "not a plain tensor", "sdk_spans"])
def test_a_case_the_c_call_does_not_take_goes_to_the_python_wrapper(
        case: str, group: None, native_stamp: None, exporter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wrappers, "NATIVE_CALL", True)
    tt.instrument(carriage="none", sdk_spans=case == "sdk_spans")
    t = torch.ones(4)
    dist.all_reduce(t)
    exporter.get_finished_spans()
    exporter.clear()
    stats = opcall.stats()
    if case == "async_op":
        dist.all_reduce(t, async_op=True).wait()
    elif case == "inside":
        token = wrappers.inside.set(True)  # inside another traced op of this thread: not traced again
        try:
            dist.all_reduce(t)
        finally:
            wrappers.inside.reset(token)
    elif case == "not a plain tensor":
        class Sub(torch.Tensor):
            pass
        dist.all_reduce(torch.ones(4).as_subclass(Sub))
    else:
        dist.all_reduce(t)
    after = opcall.stats()
    assert (after["fast"], after["slow"]) == (stats["fast"], stats["slow"] + 1)
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ([] if case == "inside" else ["torch.all_reduce"])


def test_a_setting_changed_after_instrument_reaches_the_c_call_at_once(
        group: None, native_stamp: None, exporter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The C call reads its copy of wrappers.settings (Settings.__setattr__ renews it): a change made by hand
    decides the very next op, as the attribute it copies would."""
    monkeypatch.setattr(wrappers, "NATIVE_CALL", True)
    tt.instrument(carriage="none")
    t = torch.ones(4)
    dist.all_reduce(t)
    exporter.clear()

    def taken(**changes: Any) -> tuple[int, int]:
        saved = {name: getattr(wrappers.settings, name) for name in changes}
        before = opcall.stats()
        for name, value in changes.items():
            setattr(wrappers.settings, name, value)
        try:
            dist.all_reduce(t)
        finally:
            for name, value in saved.items():
                setattr(wrappers.settings, name, value)
        after = opcall.stats()
        return after["fast"] - before["fast"], after["slow"] - before["slow"]

    assert taken(sdk_spans=True) == (0, 1)
    assert taken(carriage="op") == (0, 1)
    assert taken(active=False) == (0, 1)  # the Python wrapper then calls torch untraced
    assert taken() == (1, 0)  # each put back: the C call again


def test_the_inside_flag_is_the_threads_own(group: None, native_stamp: None) -> None:
    """wrappers.inside (the C call's thread-local flag) set on one thread says nothing on another, and reset
    puts back what set found."""
    import threading

    inside = wrappers.inside
    seen: list[bool] = []
    token = inside.set(True)
    try:
        worker = threading.Thread(target=lambda: seen.append(inside.get()))
        worker.start()
        worker.join()
        inner = inside.set(True)
        inside.reset(inner)
        assert inside.get() is True
    finally:
        inside.reset(token)
    assert seen == [False] and inside.get() is False


def test_the_c_call_waits_for_the_slot_lock_python_holds(group: None, native_stamp: None, exporter: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder's _slot_lock is the C call's own (taken with no Python call): while a Python section holds
    it, an op on another thread waits (the GIL released, so the holder runs on), then records as usual."""
    import threading

    monkeypatch.setattr(wrappers, "NATIVE_CALL", True)
    tt.instrument(carriage="none")
    t = torch.ones(4)
    dist.all_reduce(t)
    lock = recorder._slot_lock
    assert type(lock) is opcall.SlotLock
    before = recorder.issued
    fast = opcall.stats()["fast"]
    with lock:
        assert lock.locked()
        worker = threading.Thread(target=dist.all_reduce, args=(t,))
        worker.start()
        worker.join(0.3)
        assert worker.is_alive() and recorder.issued == before  # its begin waits for the lock
    worker.join(10)
    assert not worker.is_alive() and not lock.locked()
    assert recorder.issued == before + 1 and opcall.stats()["fast"] == fast + 1
    with pytest.raises(RuntimeError):  # as a threading.Lock: a free lock released is an error, not a permit
        lock.release()
    assert lock.acquire() and lock.locked()
    lock.release()


def test_a_full_ring_counts_what_the_c_call_overwrote(group: None, native_stamp: None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tempotrace_sdk.torch.counts import carriage_counts

    monkeypatch.setattr(wrappers, "NATIVE_CALL", True)
    tt.instrument(carriage="none", retain="ring", ring_ops=8)
    try:
        t = torch.ones(4)
        dist.all_reduce(t)
        overwritten, counted = recorder.overwritten, carriage_counts().get("ring_overwritten", 0)
        fast = opcall.stats()["fast"]
        for _ in range(20):
            dist.all_reduce(t)
        assert opcall.stats()["fast"] == fast + 20
        assert recorder.overwritten - overwritten == 21 - 8
        assert carriage_counts().get("ring_overwritten", 0) - counted == 21 - 8
    finally:
        tt.uninstrument()


def test_an_op_the_ring_came_round_to_while_it_ran_keeps_its_span(group: None, native_stamp: None, exporter: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A blocking op outlived by more than ``ring_ops`` ops of another thread is set aside at the C call's begin
    and ended by the C call's end from there (spec/torch.md §8.1): its span is made, nothing counted lost for it."""
    import threading

    real = dist.all_reduce

    def all_reduce(tensor: Any, op: Any = dist.ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Any:
        if slow:
            worker = threading.Thread(target=lambda: [dist.barrier() for _ in range(70)])  # 70 ops meanwhile
            worker.start()
            worker.join()
        return real(tensor, op=op, group=group, async_op=async_op)

    slow = False
    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    monkeypatch.setattr(wrappers, "NATIVE_CALL", True)
    tt.instrument(carriage="none", ring_ops=64)
    try:
        t = torch.ones(4)
        dist.all_reduce(t)  # the group's first op (registered in Python)
        exporter.get_finished_spans()  # (made now)
        fast, overwritten = opcall.stats()["fast"], recorder.overwritten
        slow = True
        with tt.step(1):
            dist.all_reduce(t)
            assert opcall.stats()["fast"] - fast == 71
            assert [e[0] for e in recorder.aside.values()] == [ENDED]  # set aside, ended there, waiting
        assert not recorder.aside  # its span made at the step's exit
        names = [s.name for s in exporter.get_finished_spans()]
        # 71 ops through 64 slots: the first 7 came round to, the all_reduce set aside, 6 ended barriers lost
        assert recorder.overwritten - overwritten == 6
        assert (names.count("torch.all_reduce"), names.count("torch.barrier")) == (2, 70 - 6)
    finally:
        tt.instrument(carriage="none", ring_ops=16384)


def test_recorder_begin_and_end_in_c_write_what_pythons_write(group: None, native_stamp: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorder.begin/end take the C call's begin and end (record_begin, record_end) for the ops Python records:
    the same words, flags, completion and parent as its own; None (Python's) for a recorder it was not given."""
    from opentelemetry import trace

    from tempotrace_sdk.torch import recorder as recorder_module
    from tempotrace_sdk.torch.groups import group_info
    from tempotrace_sdk.torch.recorder import AMBIGUOUS, BATCHED, Recorder

    monkeypatch.setattr(wrappers, "NATIVE_CALL", True)
    tt.instrument(carriage="none")
    try:
        info = group_info(None)
        cases = [(3, 5, 16, -1, 0, 1), (7, 0, -1, (9 << 32) | 2, BATCHED, 2), (7, 1, 0, (-4 << 32) | 1, 0, 6)]

        def recorded() -> list[OpRecord]:
            out = []
            with trace.get_tracer("test").start_as_current_span("parent"):
                for op, seq, nbytes, root, flags, completion in cases:
                    number = recorder.begin(op, info, seq, nbytes, root, flags)
                    assert recorder.flag(number, AMBIGUOUS) and recorder.end(number, completion)
                    out.append(recorder.unpack(number & recorder.mask))
            return out

        c = recorded()
        monkeypatch.setattr(recorder_module, "_record_begin", None)
        monkeypatch.setattr(recorder_module, "_record_end", None)
        python = recorded()
        strip = [(r.op, r.group.key, r.seq, r.nbytes, r.root, r.start[2:4], r.end is not None and r.end[2:4],
                  r.completion, r.flags, r.parent is not None) for r in c]
        assert strip == [(r.op, r.group.key, r.seq, r.nbytes, r.root, r.start[2:4], r.end is not None and
                          r.end[2:4], r.completion, r.flags, r.parent is not None) for r in python]
        assert [r.completion for r in c] == [1, 2, 6] and all(r.flags == r.flags | AMBIGUOUS for r in c)
        assert [r.start[4] < r.end[4] for r in c if r.end is not None] == [True] * 3  # Lamport ticks
        other = Recorder(8)
        assert opcall.record_begin(other, 0, 0, -1, -1) is None and opcall.record_end(other, 0, 1) is None
    finally:
        tt.uninstrument()


def test_uninstrument_restores_torchs_function(group: None, monkeypatch: pytest.MonkeyPatch) -> None:
    original = dist.all_reduce
    monkeypatch.setattr(wrappers, "NATIVE_CALL", True)
    tt.instrument(carriage="none")
    wrapped = dist.all_reduce
    assert wrapped.__wrapped__ is original and wrapped.__name__ == "all_reduce"  # functools.wraps, as before
    tt.uninstrument()
    assert dist.all_reduce is original


@pytest.fixture(autouse=True)
def _no_instrumentation_left() -> Iterator[None]:
    yield
    tt.uninstrument()


def test_the_ring_the_c_call_reads_is_the_recorders_after_a_resize_and_a_fork() -> None:
    """The C call reads the ring's objects from ``Recorder.ring`` (one attribute an op): replaced whole, so it
    never writes into a ring the recorder has let go."""
    from tempotrace_sdk.torch.recorder import Recorder

    rec = Recorder(8)

    def current() -> tuple[Any, ...]:
        return (rec.state, rec.buffer, rec._slot_lock, rec.mask, rec.numbers, rec.parents)

    assert all(a is b for a, b in zip(rec.ring, current(), strict=True))
    rec.resize(64)
    assert rec.mask == 63 and all(a is b for a, b in zip(rec.ring, current(), strict=True))
    rec.after_fork_in_child()
    assert all(a is b for a, b in zip(rec.ring, current(), strict=True))
