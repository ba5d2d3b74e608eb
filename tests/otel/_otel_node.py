"""A node of the multi-process HTTP tests. Configured only by environment + configure().

    python _otel_node.py server NAME [NEXT_URL]   stdlib http.server; prints its port
    python _otel_node.py flask NAME               Flask + OTel instrumentation; prints its port
    python _otel_node.py client URL urllib|requests|requests6|forge

``forge`` is a hostile sender: a traced client whose tt-ext header, otherwise
its own, claims lts = 2^63-1 (Lamport poisoning, issue 13 item 5). A stdlib
server answers ``GET /tempotrace-state`` (no span) with its Lamport counter
and rejection counts as JSON.

Every process reads OTEL_PROPAGATORS, TEMPOTRACE_CLOCK, TEMPOTRACE_HOST and
TEMPOTRACE_EXPORT_PATH (one shared file) from its environment.
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import msgspec
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import SpanKind

from tempotrace_sdk.otel import configure, get_state, rejection_counts, span, traced
from tempotrace_sdk.wire import TTExt


def call(url: str, name: str, forge_lts: int | None = None) -> str:
    with span(f"{name} GET", kind=SpanKind.CLIENT):
        headers: dict[str, str] = {}
        inject(headers)
        if forge_lts is not None:
            honest = TTExt.from_header(headers["tt-ext"])
            headers["tt-ext"] = msgspec.structs.replace(honest, lts=forge_lts).to_header()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return str(response.read().decode())


def state_json() -> bytes:
    lamport = get_state().lamport
    return json.dumps({"lts": lamport.value, "saturated": lamport.saturated, "rejections": rejection_counts()}).encode()


def stdlib_server(name: str, next_url: str | None) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/tempotrace-state":
                self.reply(state_json())
                return
            ctx = extract(self.headers)
            with span(f"{name} {self.path}", kind=SpanKind.SERVER, context=ctx):
                self.reply((name + ("," + call(next_url, name) if next_url else "")).encode())

        def reply(self, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def flask_server(name: str) -> None:
    from flask import Flask, request
    from opentelemetry.instrumentation.flask import FlaskInstrumentor
    from werkzeug.serving import make_server

    app = Flask(name)
    FlaskInstrumentor().instrument_app(app)

    @app.get("/hop")
    def hop() -> str:
        @traced(name=f"{name} work")
        def work() -> str:
            return name + ":" + request.path

        return work()

    @app.get("/readme")
    def readme() -> str:
        # The README's receive pattern under the Flask instrumentation, which
        # has already extracted these headers once for its own server span.
        with span(f"{name} readme", kind=SpanKind.SERVER, context=extract(request.headers)):
            return name + ":" + request.path

    server = make_server("127.0.0.1", 0, app, threaded=True)
    print(server.port, flush=True)
    server.serve_forever()


def client(url: str, how: str) -> None:
    if how in ("requests", "requests6"):
        import requests
        from opentelemetry.instrumentation.requests import RequestsInstrumentor

        RequestsInstrumentor().instrument()
        with span("client-root"):
            for _ in range(6 if how == "requests6" else 1):
                print(requests.get(url, timeout=10).text, flush=True)
    else:
        with span("client-root"):
            print(call(url, "client", forge_lts=2**63 - 1 if how == "forge" else None), flush=True)


def main() -> None:
    mode = sys.argv[1]
    handle = configure(service_name=f"node-{mode}")
    try:
        if mode == "server":
            threading.current_thread().name = sys.argv[2]
            stdlib_server(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
        elif mode == "flask":
            flask_server(sys.argv[2])
        else:
            client(sys.argv[2], sys.argv[3])
    finally:
        handle.shutdown()


if __name__ == "__main__":
    main()
