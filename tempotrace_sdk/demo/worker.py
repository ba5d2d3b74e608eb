"""One rank of the demo's traced training step, as its own process.

Instrumented only through the public API: ``configure()``, ``@traced`` and
``span()`` from ``tempotrace_sdk.otel``, and OpenTelemetry's own
``propagate.inject`` / ``propagate.extract`` with
``OTEL_PROPAGATORS=tracecontext,baggage,tempotrace`` set by the coordinator,
so every HTTP hop carries ``traceparent`` and ``tt-ext``. The clock comes
from ``TEMPOTRACE_CLOCK=sim:...``, the host name from ``TEMPOTRACE_HOST``
and the OTLP JSON-lines file (shared by all ranks) from ``TEMPOTRACE_EXPORT_PATH``.

Protocol with the coordinator: the worker prints ``READY <port>`` on stdout
once its HTTP server listens, then serves. It exits when told to
(``POST /shutdown``) or when its stdin closes (the coordinator died), so no
worker outlives the demo.

One iteration (``POST /step``) of rank r in a world of n:
  ring all-reduce   n-1 rounds; each round r sends a chunk to r+1 and waits
                    for the chunk from r-1
  pipeline          rank 0 sends an activation to rank 1, which forwards it
                    to rank 2, ... (nested hops)
  barrier           every rank calls rank 0, which answers when all arrived
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind

from .. import semconv as S
from ..otel import configure, span, traced
from .transport import HOP_TIMEOUT_S, post

__all__ = ["Worker", "main"]


class Worker:
    """The state of one rank: peers, the ring inbox, the barrier."""

    def __init__(self, rank: int, world: int, profile: str) -> None:
        self.rank = rank
        self.world = world
        self.attributes: dict[str, Any] = {S.RANK: rank, S.CLOCK_PROFILE: profile}
        self.ports: list[int] = []
        self.inbox: dict[tuple[int, int], queue.Queue[float]] = {}
        self._inbox_lock = threading.Lock()
        self._barriers: dict[int, threading.Barrier] = {}
        self._barrier_lock = threading.Lock()
        self.stop = threading.Event()

    def _attrs(self, **extra: Any) -> dict[str, Any]:
        return {**self.attributes, **{f"demo.{k}": v for k, v in extra.items()}}

    def _slot(self, iteration: int, round_: int) -> queue.Queue[float]:
        with self._inbox_lock:
            return self.inbox.setdefault((iteration, round_), queue.Queue(maxsize=1))

    # -- client side: one training step --------------------------------------
    @traced(name="train_step")
    def step(self, iteration: int) -> dict[str, Any]:
        """One training iteration: ring all-reduce, pipeline chain, barrier."""
        trace.get_current_span().set_attributes(self._attrs(iteration=iteration))
        hops = 0
        value = float(self.rank + 1)
        nxt = self.ports[(self.rank + 1) % self.world]
        with span("allreduce", attributes=self._attrs(iteration=iteration)):
            for round_ in range(self.world - 1):
                with span("ring.send", kind=SpanKind.CLIENT, attributes=self._attrs(iteration=iteration, round=round_)):
                    post(nxt, "/ring", {"iteration": iteration, "round": round_, "chunk": value})
                    hops += 1
                with span("ring.wait", attributes=self._attrs(iteration=iteration, round=round_)):
                    value += self._slot(iteration, round_).get(timeout=HOP_TIMEOUT_S)
                with self._inbox_lock:
                    del self.inbox[(iteration, round_)]  # consumed: keep memory flat over many iterations
        if self.rank == 0 and self.world > 1:
            with span("pipeline.send", kind=SpanKind.CLIENT, attributes=self._attrs(iteration=iteration, stage=0)):
                answer = post(self.ports[1], "/forward", {"iteration": iteration, "stage": 1, "activation": value})
                hops += 1 + int(answer["downstream_hops"])
        with span("barrier.arrive", kind=SpanKind.CLIENT, attributes=self._attrs(iteration=iteration)):
            post(self.ports[0], "/barrier", {"iteration": iteration, "rank": self.rank})
            hops += 1
        return {"rank": self.rank, "iteration": iteration, "hops_sent": hops, "sum": value}

    # -- server side -------------------------------------------------------------
    def on_ring(self, body: dict[str, Any]) -> dict[str, Any]:
        with span("ring.recv", kind=SpanKind.SERVER, attributes=self._attrs(iteration=body["iteration"])):
            self._slot(int(body["iteration"]), int(body["round"])).put(float(body["chunk"]), timeout=HOP_TIMEOUT_S)
        return {}

    def on_forward(self, body: dict[str, Any]) -> dict[str, Any]:
        stage = int(body["stage"])
        with span("pipeline.forward", kind=SpanKind.SERVER, attributes=self._attrs(iteration=body["iteration"])):
            activation = float(body["activation"]) * 1.5
            downstream = 0
            if stage + 1 < self.world:
                answer = post(
                    self.ports[stage + 1],
                    "/forward",
                    {"iteration": body["iteration"], "stage": stage + 1, "activation": activation},
                )
                downstream = 1 + int(answer["downstream_hops"])
        return {"stage": stage, "downstream_hops": downstream}

    def on_barrier(self, body: dict[str, Any]) -> dict[str, Any]:
        iteration = int(body["iteration"])
        with self._barrier_lock:
            barrier = self._barriers.setdefault(iteration, threading.Barrier(self.world))
        with span("barrier.wait", kind=SpanKind.SERVER, attributes=self._attrs(iteration=iteration)):
            if barrier.wait(timeout=HOP_TIMEOUT_S) == 0:
                with self._barrier_lock:  # every rank has passed: the next iteration uses a new barrier
                    self._barriers.pop(iteration, None)
        return {}


def make_handler(worker: Worker) -> type[BaseHTTPRequestHandler]:
    routes = {"/ring": worker.on_ring, "/forward": worker.on_forward, "/barrier": worker.on_barrier}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the coordinator's terminal clean

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            reply_headers: dict[str, str] = {}
            try:
                answer = self._dispatch(body, reply_headers)
                status = 200
            except Exception as err:  # report to the caller, who fails the demo loudly
                answer, status = {"error": f"{type(err).__name__}: {err}"}, 500
            data = json.dumps(answer).encode()
            self.send_response(status)
            for name, value in reply_headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _dispatch(self, body: dict[str, Any], reply_headers: dict[str, str]) -> dict[str, Any]:
            if self.path == "/peers":
                worker.ports = [int(p) for p in body["ports"]]
                return {"rank": worker.rank}
            if self.path == "/step":
                return worker.step(int(body["iteration"]))
            if self.path == "/shutdown":
                worker.stop.set()
                return {}
            route = routes.get(self.path)
            if route is None:
                raise LookupError(f"no route {self.path}")
            # The hop's receive: parent context and tt-ext from the headers.
            token = otel_context.attach(propagate.extract(self.headers))
            try:
                answer = route(body)
                # The reply is a hop too (server -> client): stamping it lets
                # the caller's Lamport counter pass everything this rank did
                # for the request, so "server span ended before client span
                # ended" holds for logical clocks as well, as in gRPC, which
                # carries metadata on responses.
                propagate.inject(reply_headers)
                return answer
            finally:
                otel_context.detach(token)

    return Handler


def _watch_stdin(stop: threading.Event) -> None:
    # The coordinator holds our stdin open; EOF means it is gone.
    try:
        while sys.stdin.buffer.read(1):
            pass
    except (OSError, ValueError):
        pass
    stop.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tempotrace_sdk.demo.worker")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--profile", required=True, help="clock profile label for the spans")
    args = parser.parse_args(argv)

    # Clock, host and export file come from TEMPOTRACE_CLOCK / _HOST /
    # _EXPORT_PATH, propagators from OTEL_PROPAGATORS: set by the coordinator.
    handle = configure(service_name=f"demo-rank{args.rank}")
    worker = Worker(args.rank, args.world, args.profile)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(worker))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    threading.Thread(target=_watch_stdin, args=(worker.stop,), name="stdin", daemon=True).start()
    print(f"READY {server.server_address[1]} pid={os.getpid()}", flush=True)
    try:
        worker.stop.wait()
    finally:
        server.shutdown()
        handle.shutdown()  # flushes the exporter: every span is on disk before we exit
    return 0


if __name__ == "__main__":
    sys.exit(main())
