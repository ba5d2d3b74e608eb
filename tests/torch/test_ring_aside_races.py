"""Records set aside (spec/torch.md §8.1) against what other threads do meanwhile: an end or an export while a
begin's reading fails and gives its slot back, a resize while begins and ends wait for the slot lock, an
interrupt inside a begin. Each case was found by review (stop 40) with the scenario its test replays: the
other thread's step is run at the point it would have to run for the race to show, so each is deterministic.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tempotrace_sdk import torch as tt  # noqa: E402
from tempotrace_sdk.otel.context import get_state  # noqa: E402
from tempotrace_sdk.torch import recorder as recorder_module  # noqa: E402
from tempotrace_sdk.torch.groups import group_info  # noqa: E402
from tempotrace_sdk.torch.recorder import AMBIGUOUS, ENDED, OPEN, recorder  # noqa: E402


@pytest.fixture
def ring(group: None, exporter: Any) -> Iterator[Any]:
    tt.instrument(carriage="none", gpu=False, retain="export", ring_ops=16, hang_timeout=0)
    recorder.take_all()
    yield exporter
    tt.uninstrument()
    tt.instrument(carriage="none", ring_ops=16384)
    tt.uninstrument()


def _set_aside_then(info: Any) -> int:
    """An op begun, then the ring's other slots filled with ended ops: the next begin sets it aside."""
    number = recorder.begin(0, info, 1, 4, -1)
    for _ in range(recorder.size - 1):
        recorder.end(recorder.begin(0, info, 2, 4, -1))
    recorder.take_ended()
    return number


def _failing_reading(monkeypatch: pytest.MonkeyPatch, meanwhile: Any) -> None:
    """The next begin's reading fails (in Python, so a test can make it fail), ``meanwhile`` run first: the
    other thread's step, inside the reading (test_flight_recorder's ``clock_fails`` fails every reading)."""
    monkeypatch.setattr(recorder_module, "_record_begin", None)
    stamp = get_state().stamp
    real = type(stamp).tick
    state = {"done": False}

    def tick(self: Any, clock: Any) -> Any:
        if state["done"]:
            return real(self, clock)
        state["done"] = True
        meanwhile()
        raise OSError("the clock went away")

    monkeypatch.setattr(type(stamp), "op_start", lambda *a, **k: False, raising=False)
    monkeypatch.setattr(type(stamp), "tick", tick)


def test_a_record_exported_while_its_slot_is_given_back_stays_exported(ring: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    info = group_info(None)
    number = _set_aside_then(info)

    def ended_and_exported() -> None:
        assert recorder.end(number)
        assert [r.number for r in recorder.take_ended()[1]] == [number]

    _failing_reading(monkeypatch, ended_and_exported)
    before = recorder.overwritten
    assert recorder.begin(0, info, 3, 4, -1) == -1
    monkeypatch.undo()
    assert number not in recorder.open_numbers() and recorder.state[number & recorder.mask] != OPEN
    assert recorder.overwritten == before and recorder.take_all() == []  # no second span, nothing lost


def test_a_record_flagged_while_aside_keeps_the_flag_when_put_back(ring: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    info = group_info(None)
    number = _set_aside_then(info)
    _failing_reading(monkeypatch, lambda: recorder.flag(number, AMBIGUOUS))
    assert recorder.begin(0, info, 3, 4, -1) == -1
    monkeypatch.undo()
    assert not recorder.aside and recorder.open_numbers() == [number]
    assert recorder.unpack(number & recorder.mask).flags == AMBIGUOUS and recorder.end(number)


def test_an_end_that_met_the_slot_being_written_ends_the_record_put_back(ring: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The end (the C call's, here) saw the slot WRITING and asks the table; the begin's reading fails and the
    record goes back to the ring before the end looks there: it is ended in the ring."""
    info = group_info(None)
    number = _set_aside_then(info)
    at_aside, put_back = threading.Event(), threading.Event()
    real_end_aside = recorder.end_aside

    def end_aside(n: int, completion: int) -> bool:
        at_aside.set()
        put_back.wait(5)
        return real_end_aside(n, completion)

    monkeypatch.setattr(recorder, "end_aside", end_aside)
    result: dict[str, Any] = {}

    def end_starts() -> None:
        result["thread"] = threading.Thread(target=lambda: result.setdefault("ended", recorder.end(number)))
        result["thread"].start()
        assert at_aside.wait(5)

    _failing_reading(monkeypatch, end_starts)
    assert recorder.begin(0, info, 3, 4, -1) == -1  # gives the slot back: the record is the slot's again
    put_back.set()
    result["thread"].join(5)
    monkeypatch.undo()
    assert result["ended"] is True and number not in recorder.open_numbers()


@pytest.mark.parametrize("waiting", ["end", "begin"])
def test_a_resize_under_the_slot_lock_leaves_no_stale_reader(ring: Any, waiting: str) -> None:
    """A begin or end waiting for the slot lock while instrument() resizes reads the new ring: the open op set
    aside by the resize ends once, from the table; a new op is recorded in the new ring, nothing made up aside."""
    info = group_info(None)
    number = recorder.begin(0, info, 1, 4, -1)
    lock = recorder._slot_lock
    lock.acquire()
    result: dict[str, Any] = {}
    work = (lambda: result.setdefault("ended", recorder.end(number))) if waiting == "end" else (
        lambda: result.setdefault("begun", recorder.begin(0, info, 3, 4, -1)))
    thread = threading.Thread(target=work)
    thread.start()
    time.sleep(0.3)  # it has read what it reads before the lock, and waits for it
    recorder._slot_lock = threading.Lock()  # (the resize runs now, ahead of the waiting thread)
    recorder.resize(64)
    recorder._slot_lock = lock
    recorder._publish()
    lock.release()
    thread.join(5)
    if waiting == "end":
        assert result["ended"] is True and recorder.open_numbers() == []
        assert {n: e[0] for n, e in recorder.aside.items()} == {number: ENDED}  # ended there, waiting
    else:
        begun = result["begun"]
        assert list(recorder.aside) == [number] and sorted(recorder.open_numbers()) == [number, begun]
        assert recorder.end(begun) and recorder.end(number)


def test_an_interrupt_inside_a_begin_leaves_no_record_open(ring: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt raised by Python a begin runs (setting a record aside) goes out of the begin; the
    record it made goes with it, not left open for the watchdog to call a hang."""
    info = group_info(None)
    number = _set_aside_then(info)
    real = recorder._overwriting

    def interrupted(held: int, n: int, slot: int = -1) -> None:
        real(held, n, slot)
        raise KeyboardInterrupt

    monkeypatch.setattr(recorder, "_overwriting", interrupted)
    issued = recorder.issued
    with pytest.raises(KeyboardInterrupt):
        recorder.begin(0, info, 3, 4, -1)
    monkeypatch.undo()
    assert issued not in recorder.open_numbers()  # its own record went with the interrupt
    assert recorder.open_numbers() == [number]  # the op it set aside goes on
    assert recorder.end(number)


def test_a_begin_whose_reading_fails_after_a_resize_leaves_the_new_ring_alone(
        ring: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Op A's reading fails after instrument() replaced the ring and op B began in A's slot of the new one: A
    gives nothing back there (B's slot stays B's, the count of what the resize dropped stays as it is)."""
    info = group_info(None)
    for _ in range(recorder.size):  # every slot holds an ended op not yet exported: A's begin overwrites one
        recorder.end(recorder.begin(0, info, 1, 4, -1))
    monkeypatch.setattr(recorder_module, "_record_begin", None)
    stamp = get_state().stamp
    real = type(stamp).tick
    monkeypatch.setattr(type(stamp), "op_start", lambda *a, **k: False, raising=False)
    writing, go = threading.Event(), threading.Event()
    seen: dict[str, Any] = {"ticks": 0}

    def tick(self: Any, clock: Any) -> Any:
        seen["ticks"] += 1
        if seen["ticks"] == 2:  # B's reading: B holds its slot WRITING until let go
            writing.set()
            go.wait(5)
            return real(self, clock)
        if seen["ticks"] > 2:
            return real(self, clock)
        a = recorder.issued  # A's reading: the resize, then B in A's slot of the new ring
        recorder.resize(recorder.size)
        seen["dropped"] = recorder.overwritten
        for _ in range(recorder.size - 1):
            next(recorder.numbers)
        seen["b"] = threading.Thread(target=lambda: seen.setdefault("b_number", recorder.begin(0, info, 3, 4, -1)))
        seen["b"].start()
        assert writing.wait(5) and recorder.state[a & recorder.mask] != 0
        seen["a"] = a
        raise OSError("the clock went away")

    monkeypatch.setattr(type(stamp), "tick", tick)
    assert recorder.begin(0, info, 2, 4, -1) == -1
    slot = seen["a"] & recorder.mask
    assert recorder.state[slot] == recorder_module.WRITING  # B's, still
    assert recorder.overwritten == seen["dropped"]
    go.set()
    seen["b"].join(5)
    monkeypatch.undo()
    assert seen["b_number"] == seen["a"] + recorder.size and recorder.open_numbers() == [seen["b_number"]]
    assert recorder.end(seen["b_number"])
