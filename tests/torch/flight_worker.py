"""One rank of the flight-recorder jobs tests/torch/test_flight_recorder.py starts (as torchrun would: env vars).

``retain="ring"`` with a short ``hang_timeout``: five steps of three all_reduces and a barrier; in step
``TT_BAD_STEP`` the rank ``TT_BAD_RANK`` does what ``TT_SCENARIO`` says before the step's second all_reduce:
``hang`` (sleeps: the others wait in the all_reduce until their watchdogs dump everyone), ``kill`` (SIGKILLs
itself), ``raise`` (raises out of step(): an exception dump, then exits 3), ``recv`` (rank 0 waits in a receive
from it that it never sends, the other ranks sleep outside any op: only that recorded receive is open),
``anyrecv`` (the same from any source: an op with an SDK span) or ``none``; ``TT_SIDE`` "sdk" traces
the same job with ``sdk_spans=True`` and ``retain="export"`` (the differential test); ``TT_P2P`` adds to each
step a pipeline's sends and receives, blocking, async and batched (rank r receives from r - 1, then sends to r + 1), and
an async all_reduce, and prints how many p2p spans a processor of the user's own saw. Spans go to
``$TT_TEST_OUT/spans-<rank>.jsonl``.
"""

from __future__ import annotations

import datetime
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from tempotrace_sdk import torch as tt
from tempotrace_sdk.otel import configure

OUT = Path(os.environ["TT_TEST_OUT"])
RANK = int(os.environ["RANK"])
SCENARIO = os.environ.get("TT_SCENARIO", "none")
BAD_RANK = int(os.environ.get("TT_BAD_RANK", "-1"))
BAD_STEP = int(os.environ.get("TT_BAD_STEP", "3"))
SIDE = os.environ.get("TT_SIDE", "ring")

P2P = bool(os.environ.get("TT_P2P"))


class SeenP2P(SpanProcessor):
    """A processor of the user's own: the point-to-point spans it is shown."""

    seen = 0

    def on_end(self, span: ReadableSpan) -> None:
        if span.name in ("torch.send", "torch.recv", "torch.isend", "torch.irecv"):
            SeenP2P.seen += 1


def fast_calls() -> int:
    """Ops the C call took (native/opcall), since the process began; 0 where it is not built."""
    try:
        from tempotrace_sdk import _opcall
    except ImportError:
        return 0
    return int(_opcall.stats()["fast"])


P2P_IN_C = 0  # blocking sends and receives the C call took
handle = configure(service_name="flight", export_path=OUT / f"spans-{RANK}.jsonl")
handle.provider.add_span_processor(SeenP2P())
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("TT_PG_TIMEOUT", "60"))))
if SIDE == "sdk":
    tt.instrument(carriage="none", sdk_spans=True, hang_timeout=0)
elif SIDE == "export":
    tt.instrument(carriage="none", hang_timeout=0)
else:
    tt.instrument(carriage="none", retain="ring", hang_timeout=float(os.environ.get("TT_HANG_TIMEOUT", "2")),
                  dump_signal=signal.SIGUSR1)
print("ready", flush=True)
t = torch.ones(8)
try:
    for number in range(5):
        with tt.step():
            dist.all_reduce(t)
            if number == BAD_STEP and RANK == BAD_RANK:
                print(f"bad {SCENARIO} {time.time_ns()}", flush=True)
                if SCENARIO in ("hang", "recv", "anyrecv"):
                    time.sleep(600)
                elif SCENARIO == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                elif SCENARIO == "raise":
                    raise RuntimeError("tt-test: this rank gives up")
            if number == BAD_STEP and SCENARIO in ("recv", "anyrecv"):
                if RANK != 0:
                    time.sleep(600)
                elif SCENARIO == "recv":
                    dist.recv(torch.zeros(4), src=BAD_RANK, tag=5)
                else:
                    dist.recv(torch.zeros(4), tag=5)  # from any source
            dist.all_reduce(t)
            if P2P:
                world = dist.get_world_size()
                if RANK > 0:
                    in_c = fast_calls()
                    dist.recv(torch.zeros(8), src=RANK - 1, tag=3)
                    P2P_IN_C += fast_calls() - in_c
                    dist.irecv(torch.zeros(8), src=RANK - 1, tag=4).wait()
                    for work in dist.batch_isend_irecv([dist.P2POp(dist.irecv, torch.zeros(8), RANK - 1, tag=6)]):
                        work.wait()
                if RANK < world - 1:
                    in_c = fast_calls()
                    dist.send(t, dst=RANK + 1, tag=3)
                    P2P_IN_C += fast_calls() - in_c
                    dist.isend(t, dst=RANK + 1, tag=4).wait()
                    for work in dist.batch_isend_irecv([dist.P2POp(dist.isend, t, RANK + 1, tag=6)]):
                        work.wait()
                dist.all_reduce(t, async_op=True).wait()
            dist.all_reduce(t)
            dist.barrier()
except RuntimeError as err:
    if "tt-test" not in str(err):
        raise
    print("raised", flush=True)
    handle.shutdown()
    os._exit(3)  # as a rank that gives up would: no destroy, no barrier with ranks that wait for it
if os.environ.get("TT_WAIT_SIGNAL"):
    print("waiting", flush=True)
    time.sleep(30)
tt.uninstrument()
dist.destroy_process_group()
handle.shutdown()
if P2P:
    print(f"p2p spans seen by the user's processor: {SeenP2P.seen}", flush=True)
    print(f"blocking p2p ops the C call took: {P2P_IN_C}", flush=True)
print("done", flush=True)
