"""The C call of a blocking send or receive with its peer named (native/opcall/tt_opcall.c ``p2p_call``;
spec/torch.md §1.4): it records what the Python wrapper records (the p2p seq, the peer below the tag, the
bytes), tracks a receive for ambiguity as the Python wrapper does, hands every case it does not take to the
Python wrapper, and lets torch's exceptions out as they are.

A group of one cannot send to itself, so torch's send and recv are replaced by stand-ins with their signatures
before instrument() wraps them; the job tests (test_flight_recorder's differential) run real ones.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from p2p_standins import OpenRecv, Peer  # noqa: E402  # tests/torch is on sys.path (no package: it would be torch)

from tempotrace_sdk import torch as tt  # noqa: E402
from tempotrace_sdk.otel.context import get_state  # noqa: E402
from tempotrace_sdk.otel.stamp import NativeStamp  # noqa: E402
from tempotrace_sdk.torch import wrappers  # noqa: E402
from tempotrace_sdk.torch.groups import group_info  # noqa: E402
from tempotrace_sdk.torch.p2p import posted, released  # noqa: E402
from tempotrace_sdk.torch.recorder import AMBIGUOUS, COMPLETIONS, OpRecord, peer_and_tag, recorder  # noqa: E402

opcall = pytest.importorskip("tempotrace_sdk._opcall", reason="the C call is not built (not Linux, no compiler)")

T = "tempotrace.torch."


@pytest.fixture
def peer(group: None, exporter: Any, monkeypatch: pytest.MonkeyPatch) -> Peer:
    if not isinstance(get_state().stamp, NativeStamp):
        pytest.skip("the native stamp is not loaded here (TEMPOTRACE_PUREPYTHON)")
    stand_in = Peer()
    monkeypatch.setattr(dist, "send", stand_in.send)
    monkeypatch.setattr(dist, "recv", stand_in.recv)
    return stand_in


def _instrument(native: bool, monkeypatch: pytest.MonkeyPatch, exporter: Any, **options: Any) -> None:
    monkeypatch.setattr(wrappers, "NATIVE_CALL", native)
    tt.instrument(**{"carriage": "none", **options})
    assert isinstance(dist.send, opcall.HostOp) == native and isinstance(dist.recv, opcall.HostOp) == native
    dist.barrier()  # the group's first op: registered for the C call
    exporter.get_finished_spans()  # (its span made now)
    exporter.clear()


def _ops() -> list[tuple[str, Callable[[], Any]]]:
    t = torch.ones(4)
    return [
        ("send", lambda: dist.send(t, dst=1, tag=7)),
        ("send", lambda: dist.send(t, 1, None, 7)),  # positionally: the same channel, the next seq
        ("send", lambda: dist.send(torch.ones(2), group_dst=0)),  # the group's rank, a global one in the record
        ("send", lambda: dist.send(t, dst=2, tag=-3)),  # the channel 0 -> 2 ...
        ("recv", lambda: dist.recv(t, src=2, tag=-3)),  # ... is not 2 -> 0 (a negative tag)
        ("recv", lambda: dist.recv(t, 2, None, -3)),
        ("recv", lambda: dist.recv(torch.ones(1), src=(1 << 31) - 1, tag=(1 << 31) - 1)),  # the largest that fit
    ]


def _run(native: bool, monkeypatch: pytest.MonkeyPatch, exporter: Any) -> tuple[list[OpRecord], list[Any]]:
    """The ops traced in one step, their records as the ring holds them and their spans' attributes."""
    _instrument(native, monkeypatch, exporter)
    try:
        with tt.step(3):
            first = recorder.issued
            for _, op in _ops():
                op()
            records = [recorder.unpack(n & recorder.mask) for n in range(first, recorder.issued)]
        spans = [(s.name, {k: v for k, v in (s.attributes or {}).items() if k.startswith(T) and k != T + "step"})
                 for s in exporter.get_finished_spans() if s.name in ("torch.send", "torch.recv")]
        return records, spans
    finally:
        tt.uninstrument()


def _facts(r: OpRecord) -> tuple[Any, ...]:
    return (r.op, r.group.key, r.seq, r.nbytes, peer_and_tag(r.root), COMPLETIONS[r.completion], r.flags,
            r.start[2:4], r.end is not None and r.end[2:4], r.parent is not None)


def test_the_c_call_records_a_send_and_a_receive_as_the_python_wrapper_does(
        peer: Peer, exporter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    python, python_spans = _run(False, monkeypatch, exporter)
    before = opcall.stats()["fast"]
    c, c_spans = _run(True, monkeypatch, exporter)
    assert opcall.stats()["fast"] - before == len(_ops())  # every one
    assert [_facts(r) for r in c] == [_facts(r) for r in python]
    assert [(r.seq, peer_and_tag(r.root)) for r in c] == [(0, (1, 7)), (1, (1, 7)), (0, (0, 0)), (0, (2, -3)),
                                                           (0, (2, -3)), (1, (2, -3)),
                                                           (0, ((1 << 31) - 1, (1 << 31) - 1))]
    assert c_spans == python_spans and len(c_spans) == len(_ops())
    assert peer.calls[:len(_ops())] == peer.calls[len(_ops()):]  # torch asked the same, positionally or not


@pytest.mark.parametrize("case", ["any source", "a tag past int32", "carried", "not a plain tensor", "sdk_spans"])
def test_a_p2p_case_the_c_call_does_not_take_goes_to_the_python_wrapper(
        case: str, peer: Peer, exporter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _instrument(True, monkeypatch, exporter, sdk_spans=case == "sdk_spans",
                **({"carriage": "step+p2p"} if case == "carried" else {}))
    stats = opcall.stats()
    if case == "any source":
        dist.recv(torch.ones(2))
    elif case == "a tag past int32":
        dist.send(torch.ones(2), dst=1, tag=1 << 31)
    elif case == "carried":  # a side message follows each send: the Python wrapper's
        dist.send(torch.ones(2), dst=1)
    elif case == "not a plain tensor":
        class Sub(torch.Tensor):
            pass
        dist.send(torch.ones(2).as_subclass(Sub), dst=1)
    else:
        dist.send(torch.ones(2), dst=1)
    after = opcall.stats()
    assert (after["fast"], after["slow"]) == (stats["fast"], stats["slow"] + 1)
    assert len([s for s in exporter.get_finished_spans() if s.name in ("torch.send", "torch.recv")]) == 1


def test_a_receive_in_c_is_marked_when_an_any_source_one_overlaps_it(
        peer: Peer, exporter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """posted() before torch posts it, released once it returned (spec/torch.md §2), as the Python wrapper does:
    an any-source receive posted meanwhile marks its record; one after it marks nothing."""
    _instrument(True, monkeypatch, exporter)
    info = group_info(None)
    other = None

    def any_source_posted() -> None:
        nonlocal other
        other = posted(info.open_recvs, OpenRecv(), 5, True)[0]

    fast = opcall.stats()["fast"]
    peer.during = any_source_posted
    with tt.step(1):
        dist.recv(torch.ones(2), src=1, tag=5)
        peer.during = None
        dist.recv(torch.ones(2), src=1, tag=6)  # another tag: no overlap
        number = recorder.issued - 2
        assert recorder.unpack(number & recorder.mask).flags == AMBIGUOUS
        assert recorder.unpack((number + 1) & recorder.mask).flags == 0
    assert opcall.stats()["fast"] - fast == 2
    assert other is not None and other.span.marked  # type: ignore[attr-defined]
    released(other)
    assert not info.open_recvs  # every receive released
    marked = [(s.attributes or {}).get(T + "p2p_ambiguous") for s in exporter.get_finished_spans()
              if s.name == "torch.recv"]
    assert marked == [True, None]
    tt.uninstrument()


def test_a_receive_torch_refuses_leaves_the_c_call_as_raised_released(
        peer: Peer, exporter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _instrument(True, monkeypatch, exporter)
    info = group_info(None)
    peer.fail = RuntimeError("connection reset by peer")
    fast = opcall.stats()["fast"]
    with pytest.raises(RuntimeError, match="connection reset") as caught:
        dist.recv(torch.ones(2), src=1, tag=4)
    assert opcall.stats()["fast"] == fast + 1
    assert getattr(caught.value, "_tempotrace_torch_op", None) == "recv"
    assert not [f for f in traceback.extract_tb(caught.value.__traceback__) if "tempotrace_sdk" in f.filename]
    assert not info.open_recvs  # released: a later any-source receive overlaps nothing
    (error,) = [s for s in exporter.get_finished_spans() if s.name == "torch.recv"]
    assert (error.attributes or {})[T + "completion"] == "error" and error.status.status_code.name == "ERROR"
    peer.fail = None
    dist.recv(torch.ones(2), src=1, tag=4)  # the next is traced as before, the next seq
    assert opcall.stats()["fast"] == fast + 2
    seqs = [(s.attributes or {})[T + "p2p_seq"] for s in exporter.get_finished_spans() if s.name == "torch.recv"]
    assert seqs == [0, 1]
    tt.uninstrument()


def test_an_op_set_aside_while_it_ran_is_released_at_its_end_like_one_in_the_ring(
        peer: Peer, exporter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ring came round to a receive's record while torch ran it: its end is made aside (end_aside), and
    counts towards the release as any end does (here one ended op releases)."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    release_at = wrappers.RELEASE_AT
    monkeypatch.setattr(wrappers, "RELEASE_AT", 1)
    monkeypatch.setattr(wrappers, "_configured", False)  # (the C call is configured once a process)
    _instrument(True, monkeypatch, exporter, gpu=False, retain="export", ring_ops=16, hang_timeout=0)
    info = group_info(None)

    def ring_comes_round() -> None:
        for _ in range(recorder.size):
            recorder.end(recorder.begin(0, info, 2, 4, -1))
        recorder.take_ended()

    fast = opcall.stats()["fast"]
    peer.during = ring_comes_round
    try:
        with tt.step(1):
            dist.recv(torch.ones(2), src=1, tag=5)
            assert opcall.stats()["fast"] - fast == 1  # the C call took it
            # exported at its end, before the step's exit (the fixture's reading would release first)
            made = [s.name for s in InMemorySpanExporter.get_finished_spans(exporter)]
            assert made == ["torch.recv"], made
            assert not recorder.aside
    finally:
        tt.uninstrument()
        wrappers.RELEASE_AT, wrappers._configured = release_at, False
        assert wrappers._configure()  # the C call as every other test has it
