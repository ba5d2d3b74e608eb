"""Threads, asyncio tasks and a forked child: right parents, sketches, monotone Lamport values."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from typing import Any

import pytest
from _otel_helpers import Pipeline
from opentelemetry import trace

from tempotrace_sdk import semconv as S
from tempotrace_sdk.stamptext import expand
from tempotrace_sdk.wire import Sketch, TTExt


def _sketch(pipe: Pipeline, span: Any) -> Sketch:
    """The sketch the SDK keeps for a span (its sends carry it; only receiving spans write it)."""
    found = pipe.state.sketch_of(span.context.span_id)
    assert found is not None
    return found


def test_threads_keep_parents_sketches_and_lose_no_tick(pipe: Pipeline) -> None:
    per_thread = 50
    injected: dict[int, list[int]] = {}

    def work(n: int) -> None:
        sent = injected.setdefault(n, [])
        with pipe.tracer.start_as_current_span(f"root-{n}"):
            for i in range(per_thread):
                with pipe.tracer.start_as_current_span(f"child-{n}-{i}"):
                    carrier: dict[str, str] = {}
                    pipe.propagator.inject(carrier)
                    sent.append(TTExt.from_header(carrier["tt-ext"]).lts)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = pipe.spans()
    all_lts = []
    for n in range(8):
        root = spans[f"root-{n}"]
        for i in range(per_thread):
            child = spans[f"child-{n}-{i}"]
            assert child.parent.span_id == root.context.span_id
            assert _sketch(pipe, child).contains(root.context.span_id)
            all_lts += [child.attributes[S.LTS], child.attributes[S.END_LTS]]
        assert injected[n] == sorted(injected[n])  # monotone within a thread
        all_lts += injected[n] + [root.attributes[S.LTS], root.attributes[S.END_LTS]]
    # Every event took its own tick: 8 roots x 2 + 8 x 50 x 3 events, no duplicates.
    assert len(all_lts) == len(set(all_lts)) == 8 * 2 + 8 * per_thread * 3
    assert max(all_lts) == pipe.state.lamport.value


def test_asyncio_tasks_keep_their_parents(pipe: Pipeline) -> None:
    async def leaf(i: int) -> None:
        with pipe.tracer.start_as_current_span(f"leaf-{i}"):
            await asyncio.sleep(0.001 * (3 - i))

    async def branch(i: int) -> None:
        with pipe.tracer.start_as_current_span(f"branch-{i}"):
            await asyncio.gather(leaf(i))

    async def main() -> None:
        with pipe.tracer.start_as_current_span("main"):
            await asyncio.gather(*(branch(i) for i in range(3)))

    asyncio.run(main())
    spans = pipe.spans()
    for i in range(3):
        leaf_span, branch_span = spans[f"leaf-{i}"], spans[f"branch-{i}"]
        assert leaf_span.parent.span_id == branch_span.context.span_id
        assert _sketch(pipe, branch_span).issubset(_sketch(pipe, leaf_span))
        assert leaf_span.attributes[S.LTS] > branch_span.attributes[S.LTS]
        for j in range(3):
            if j != i:
                assert not _sketch(pipe, leaf_span).contains(spans[f"branch-{j}"].context.span_id)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_continues_causality_even_with_locks_held(pipe: Pipeline) -> None:
    """A lock held by another thread at fork time must not deadlock the child."""
    holding, release = threading.Event(), threading.Event()

    def hold_locks() -> None:
        # A NativeLamport has no lock to hold (atomic in C); a LamportClock's is held too.
        lamport_lock = getattr(pipe.state.lamport, "_lock", None) or threading.Lock()
        with lamport_lock, pipe.state._counts_lock:
            holding.set()
            release.wait(5)

    with pipe.tracer.start_as_current_span("parent") as parent:
        parent_lts = pipe.state.lamport.value
        holder = threading.Thread(target=hold_locks)
        holder.start()
        holding.wait(5)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: report what it sees, then leave without running pytest's teardown
            os.close(read_fd)
            signal.alarm(5)  # a deadlock kills the child instead of hanging the suite
            try:
                with pipe.tracer.start_as_current_span("in-child") as child:
                    carrier: dict[str, str] = {}
                    pipe.propagator.inject(carrier)
                attrs = expand(child.attributes, child.start_time, child.end_time)  # type: ignore[attr-defined]
                out = {
                    "parent": trace.format_span_id(child.parent.span_id),  # type: ignore[union-attr]
                    "attrs": {k: v for k, v in attrs.items() if isinstance(v, (int, str))},
                    "sketch": pipe.state.sketch_of(child.get_span_context().span_id).to_bytes().hex(),  # type: ignore[union-attr]
                    "sent_lts": TTExt.from_header(carrier["tt-ext"]).lts,
                }
                os.write(write_fd, json.dumps(out).encode())
            finally:
                os._exit(0)
        os.close(write_fd)
        release.set()
        holder.join()
        with os.fdopen(read_fd) as reader:
            report = json.loads(reader.read() or "{}")
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), "child deadlocked or crashed"
    assert report, "child wrote nothing"
    assert report["parent"] == trace.format_span_id(parent.get_span_context().span_id)
    child_sketch = Sketch.from_bytes(bytes.fromhex(report["sketch"]))
    assert child_sketch.contains(parent.get_span_context().span_id)
    assert parent_lts < report["attrs"][S.LTS] < report["sent_lts"]


def test_a_send_racing_the_end_is_on_the_span_whenever_its_header_goes_out(pipe: Pipeline) -> None:
    # Force the interleaving the race needs: the sender has found the span's
    # send list and is about to append when another thread ends the span.
    # Ending must wait for that append (or the send must see the span as
    # ended); before the fix the end took the list first and the appended
    # send was lost, though its header went out.
    span = pipe.tracer.start_span("client")
    with trace.use_span(span):
        pipe.propagator.inject({})  # the record now holds a send list
    record = pipe.state.live[span.get_span_context().span_id]
    ender = threading.Thread(target=span.end)

    class EndsBeforeAppending(list):  # type: ignore[type-arg]
        def append(self, item: object) -> None:
            ender.start()
            ender.join(0.3)  # returns at once without the fix; times out with it (the end waits for us)
            super().append(item)

    record.sends = EndsBeforeAppending(record.sends or [])
    carrier: dict[str, str] = {}
    with trace.use_span(span, end_on_exit=False):
        pipe.propagator.inject(carrier)
    ender.join()
    sent = TTExt.from_header(carrier["tt-ext"]).lts
    assert sent in pipe.spans()["client"].attributes[S.SEND_LTS]
    assert len(pipe.spans()["client"].attributes[S.SEND_LTS]) == 2
    assert pipe.state.errors() == {}
