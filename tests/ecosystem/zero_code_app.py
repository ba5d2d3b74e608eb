"""A plain Flask service for the zero-code tests: no TempoTrace or OpenTelemetry code at all.

    opentelemetry-instrument python zero_code_app.py     prints its port, serves until SIGINT

``/hello`` answers with the trace headers it received (JSON), so the test can
see what the instrumented client sent. With APP_CALLS_CONFIGURE=1 the app
also calls ``tempotrace_sdk.otel.configure()`` itself, as a user following the
README's in-code setup would.
"""

from __future__ import annotations

import os

from flask import Flask, jsonify, request
from werkzeug.serving import make_server

if os.environ.get("APP_CALLS_CONFIGURE") == "1":
    from tempotrace_sdk.otel import configure

    configure()

app = Flask(__name__)


@app.route("/hello")
def hello() -> object:
    return jsonify({name: request.headers.get(name) for name in ("traceparent", "tt-ext", "baggage")})


if __name__ == "__main__":
    server = make_server("127.0.0.1", 0, app, threaded=True)
    print(server.server_port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # SIGINT, like Ctrl-C: exit normally so the SDK flushes at exit
        pass
