"""One rank of the 2-rank gloo job that tests/torch/test_faults.py starts: faults tracing must survive.

Each scenario is a function run by both ranks in turn (``TT_SCENARIOS`` picks
some, default all), between barriers, on its own step numbers. What a scenario
returns, with the carriage counters it moved on this rank, goes to
``$OUT/result-<rank>.json``; spans go to ``$OUT/spans-<rank>.jsonl``. A
scenario that raises records the error and the job goes on, so one broken
promise does not hide the others (a desynchronised job still fails at its
next collective, which the test reports with the logs).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from tempotrace_sdk import torch as tt
from tempotrace_sdk.otel import configure
from tempotrace_sdk.torch import wrappers
from tempotrace_sdk.torch.carriage import records

OUT = Path(os.environ["TT_TEST_OUT"])
RANK = int(os.environ["RANK"])
PEER = 1 - RANK
#: The job's groups time out after this long: a desynchronised job fails in bounded time.
PG_TIMEOUT_S = 20
#: The group a side-send wait could time out (scenario untraced_receiver): shorter than the pause.
SHORT_TIMEOUT_S = 3
PAUSE_S = SHORT_TIMEOUT_S + 1.5

# Bound before instrument(): untraced, as spec/torch.md §1.1 says (e.g. a library imported first).
untraced_isend = dist.isend
untraced_irecv = dist.irecv


@contextmanager
def failing(owner: Any, name: str, *, on_rank: int, times: int = 1) -> Iterator[None]:
    """``owner.name`` raises (a local failure: CUDA OOM, a broken clock...) on ``on_rank``, ``times`` times."""
    original = getattr(owner, name)
    left = [times if RANK == on_rank else 0]

    def broken(*args: Any, **kwargs: Any) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise RuntimeError(f"injected failure of {name}")
        return original(*args, **kwargs)

    setattr(owner, name, broken)
    try:
        yield
    finally:
        setattr(owner, name, original)


def untraced_sender() -> dict[str, Any]:
    """Finding 1: rank 0 sends through a function bound before instrument(), rank 1 receives traced.

    No side message comes for that receive: its span must end at once (record missing), and no later
    step may wait for it. The next traced messages on that channel still carry their records.
    """
    t = torch.ones(4)
    with tt.step(100):
        if RANK == 0:
            untraced_isend(t, 1, tag=3).wait()
        else:
            dist.irecv(torch.zeros(4), 0, tag=3).wait()
    for i in range(101, 104):
        with tt.step(i):
            dist.all_reduce(t)
    with tt.step(104):
        if RANK == 0:
            dist.send(t, 1, tag=3)
        else:
            dist.recv(torch.zeros(4), 0, tag=3)
    return {"t": t.tolist()}


def untraced_receiver() -> dict[str, Any]:
    """Rank 1 receives through a function bound before instrument(); rank 0's side message is never taken.

    Waiting for that side send with gloo's own timeout would close every connection of the group
    (gloo fails all pairs when a wait times out): the group must still work after its timeout.
    """
    short = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=SHORT_TIMEOUT_S), backend="gloo")
    t = torch.ones(4)
    with tt.step(200):
        if RANK == 0:
            dist.isend(t, 1, group=short, tag=5).wait()
        else:
            untraced_irecv(torch.zeros(4), 0, group=short, tag=5).wait()
    dist.barrier()
    time.sleep(PAUSE_S)
    dist.barrier()
    x = torch.ones(2)
    try:
        dist.all_reduce(x, group=short)
        ok = float(x[0]) == 2.0
    except Exception as err:  # the group was closed under us
        ok = False
        print(f"rank {RANK}: short group broken: {err}", file=sys.stderr, flush=True)
    return {"short_group_ok": ok}


class _Raised(Exception):
    pass


def step_exception() -> dict[str, Any]:
    """Finding 2: a handled exception inside step() on rank 0 only; every later collective must still pair."""
    t = torch.ones(4)
    try:
        with tt.step(300):
            dist.all_reduce(t)
            if RANK == 0:
                raise _Raised("a rank-local error after the step's collectives")
    except _Raised:
        pass
    values = []
    for i in range(301, 303):
        with tt.step(i):
            x = torch.full((4,), float(RANK + 1))
            dist.all_reduce(x)
            values.append(float(x[0]))
    return {"values": values}


def step_exception_then_bare_op() -> dict[str, Any]:
    """§4.2: rank 0 handles an exception of step 305, then both ranks issue a collective outside any step:
    rank 0's owed exchange goes first, so it pairs with rank 1's step-exit all_gather."""
    try:
        with tt.step(305):
            dist.all_reduce(torch.ones(4))
            if RANK == 0:
                raise _Raised("a rank-local error after the step's collectives")
    except _Raised:
        pass
    x = torch.full((4,), float(RANK + 1))
    dist.all_reduce(x)
    return {"value": float(x[0])}


def both_raise() -> dict[str, Any]:
    """§4.2: every rank raises and handles inside step 320: each owes its exchange and pays it at step 321."""
    try:
        with tt.step(320):
            dist.all_reduce(torch.ones(4))
            raise _Raised("every rank fails alike")
    except _Raised:
        pass
    with tt.step(321):
        x = torch.full((4,), float(RANK + 1))
        dist.all_reduce(x)
    return {"value": float(x[0])}


def step_dist_error() -> dict[str, Any]:
    """A torch.distributed failure (or a non-Exception exit) leaves the step without its exchange, on every rank."""
    t = torch.ones(4)
    for number, exc in ((310, dist.DistBackendError("simulated communication failure")),):
        try:
            with tt.step(number):
                dist.all_reduce(t)
                raise exc
        except dist.DistError:
            pass
    try:
        with tt.step(311):
            dist.broadcast(t, src=0, group_src=0)  # torch refuses it, on every rank: the error came from an op
    except ValueError:
        pass
    with tt.step(312):
        x = torch.full((4,), float(RANK + 1))
        dist.all_reduce(x)
    return {"value": float(x[0])}


def op_exchange_failure() -> dict[str, Any]:
    """Finding 11: in op mode the exchange's tensors cannot be made on rank 1 (say, CUDA OOM): it still joins."""
    tt.instrument(carriage="op")
    try:
        with tt.step(400):
            t = torch.ones(4)
            with failing(records, "device_record", on_rank=1):
                dist.all_reduce(t)
            x = torch.full((4,), float(RANK + 1))
            dist.all_reduce(x)
    finally:
        tt.instrument(carriage="step+p2p")
    return {"value": float(x[0])}


def step_exchange_failure() -> dict[str, Any]:
    """Finding 11: the step exchange's tensors cannot be made on rank 1: the all_gather is issued all the same."""
    with failing(records, "device_record", on_rank=1), tt.step(410):
        dist.all_reduce(torch.ones(4))
    with tt.step(411):
        x = torch.full((4,), float(RANK + 1))
        dist.all_reduce(x)
    return {"value": float(x[0])}


def side_send_failure() -> dict[str, Any]:
    """Finding 11: the side message's tensor cannot be made on the sender: the absent record goes instead."""
    with tt.step(420):
        if RANK == 0:
            with failing(records, "device_record", on_rank=0):
                dist.send(torch.ones(4), 1, tag=7)
        else:
            dist.recv(torch.zeros(4), 0, tag=7)
    return {}


def span_failure() -> dict[str, Any]:
    """Finding 13: starting the span fails on rank 0 (op mode): the op runs untraced, the exchange still pairs."""
    tt.instrument(carriage="op")
    raised = []
    try:
        with tt.step(500):
            t = torch.ones(4)
            try:
                with failing(wrappers, "start_span", on_rank=0):
                    dist.all_reduce(t)
            except RuntimeError as err:
                raised.append(str(err))
            x = torch.full((4,), float(RANK + 1))
            dist.all_reduce(x)
    finally:
        tt.instrument(carriage="step+p2p")
    with tt.step(501):
        try:
            with failing(wrappers, "start_span", on_rank=0):
                if RANK == 0:
                    dist.send(torch.ones(4), 1, tag=9)
                else:
                    dist.recv(torch.zeros(4), 0, tag=9)
        except RuntimeError as err:
            raised.append(str(err))
    return {"raised": raised, "value": float(x[0]), "t": float(t[0])}


class _BrokenTimer:
    """A GPU timer whose event record fails (as it does inside CUDA graph capture)."""

    def begin(self, *args: Any) -> Any:
        raise RuntimeError("injected: event record not permitted")

    def harvest(self, *, final: bool = False) -> int:
        return 0


def gpu_begin_failure() -> dict[str, Any]:
    """Finding 13: the GPU timer fails before the op on rank 0: the op runs, its span is CPU-timed. (With SDK
    spans: an op on the host is recorded, spec/torch.md §1.4, and never reaches a GPU timer, which times only
    CUDA data; only a device op, or one given an SDK span, asks the timer.)"""
    raised = []
    settings = wrappers.settings
    saved = settings.gpu
    settings.gpu = _BrokenTimer() if RANK == 0 else None
    settings.sdk_spans = True
    try:
        with tt.step(510):
            t = torch.ones(4)
            try:
                work = dist.all_reduce(t, async_op=True)
                if work is not None:
                    work.wait()
            except RuntimeError as err:
                raised.append(str(err))
    finally:
        settings.gpu = saved
        settings.sdk_spans = False
    return {"raised": raised, "t": float(t[0])}


def any_source_overlap() -> dict[str, Any]:
    """Review R4, spec/torch.md §2: receives torch may pair otherwise than their numbers. Rank 0 sends 1.0,
    2.0... on one tag per step; rank 1 receives them with the two kinds outstanding together (step 600: any-source
    posted first; 601: a specific one in a batch posted while the any-source one is out), two any-source
    ones waited in reverse (602), then plainly (603: one at a time of each kind, two specific ones together,
    two any-source ones waited in order), which must not be marked."""
    got: dict[str, list[float]] = {}
    for number, tag in ((600, 11), (601, 12), (602, 13), (603, 14)):
        with tt.step(number):
            if RANK == 0:
                for k in range(1, 7 if number == 603 else 3):
                    dist.send(torch.full((4,), float(k)), 1, tag=tag)
                continue
            bufs = [torch.zeros(4) for _ in range(6)]
            if number == 600:
                a = dist.irecv(bufs[0], tag=tag)
                b = dist.irecv(bufs[1], src=0, tag=tag)
                b.wait()
                a.wait()
            elif number == 601:
                a = dist.irecv(bufs[0], tag=tag)
                (b,) = dist.batch_isend_irecv([dist.P2POp(dist.irecv, bufs[1], 0, tag=tag)])
                b.wait()
                a.wait()
            elif number == 602:
                a, b = dist.irecv(bufs[0], tag=tag), dist.irecv(bufs[1], tag=tag)
                b.wait()
                a.wait()
            else:
                dist.recv(bufs[0], tag=tag)
                dist.irecv(bufs[1], src=0, tag=tag).wait()
                for src in (0, None):  # two specific ones together, then two any-source ones, waited in order
                    pair = [dist.irecv(bufs[k], src=src, tag=tag) for k in ((2, 3) if src == 0 else (4, 5))]
                    for w in pair:
                        w.wait()
            got[str(number)] = [float(b[0]) for b in bufs]
    return {"got": got}


SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {
    f.__name__: f for f in (untraced_sender, untraced_receiver, step_exception, step_exception_then_bare_op,
                            both_raise, step_dist_error, op_exchange_failure, step_exchange_failure,
                            side_send_failure, span_failure, gpu_begin_failure, any_source_overlap)
}


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)
            if after.get(k, 0) != before.get(k, 0)}


def main() -> None:
    handle = configure(service_name="faults", export_path=OUT / f"spans-{RANK}.jsonl", batch=False)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=PG_TIMEOUT_S))
    tt.instrument(carriage="step+p2p")
    chosen = os.environ.get("TT_SCENARIOS", "").split(",") if os.environ.get("TT_SCENARIOS") else list(SCENARIOS)
    results: dict[str, Any] = {}
    for name in chosen:
        dist.barrier()
        before = tt.carriage_counts()
        started = time.monotonic()
        try:
            out = SCENARIOS[name]()
        except Exception as err:
            traceback.print_exc()
            out = {"error": f"{type(err).__name__}: {err}"}
        tt.sweep()
        out["counts"] = _delta(before, tt.carriage_counts())
        out["seconds"] = round(time.monotonic() - started, 2)
        results[name] = out
        (OUT / f"result-{RANK}.json").write_text(json.dumps(results))
    dist.barrier()
    tt.uninstrument()
    dist.destroy_process_group()
    handle.shutdown()
    (OUT / f"result-{RANK}.json").write_text(json.dumps(results))


def crash() -> None:
    """§4.2 (``TT_CRASH=1``, a job of its own): rank 0 dies of an exception raised inside a step (a CUDA OOM
    in forward) before a collective rank 1 issues. Rank 0 must issue nothing on its way out, so both ranks
    fail at once; an all_gather at its step exit would pair with rank 1's all_reduce and hold both until the
    group's timeout. Each rank writes how long its failure took to reach it, then exits as a crashed one."""
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=PG_TIMEOUT_S))
    tt.instrument(carriage="step+p2p")
    with tt.step(0):
        dist.all_reduce(torch.ones(2))
    started = time.monotonic()
    try:
        with tt.step(1):
            if RANK == 0:
                raise MemoryError("simulated: out of memory in forward on rank 0 only")
            dist.all_reduce(torch.ones(48))  # 192 bytes: the size of the exchange's all_gather
        outcome = "finished"
    except BaseException as err:
        outcome = type(err).__name__
    seconds = round(time.monotonic() - started, 2)
    (OUT / f"crash-{RANK}.json").write_text(json.dumps({"outcome": outcome, "seconds": seconds}))
    os._exit(0)  # no teardown: what a crashed process leaves (the test reads the file, not the exit code)


if __name__ == "__main__":
    try:
        if os.environ.get("TT_CRASH") == "1":
            crash()
        main()
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
