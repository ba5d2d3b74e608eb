"""JSON over HTTP between the demo's processes (stdlib only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from opentelemetry import propagate

__all__ = ["HOP_TIMEOUT_S", "post"]

#: Every hop and wait gives up after this long: a stuck demo must fail, not hang.
HOP_TIMEOUT_S = 15.0


def post(port: int, path: str, body: dict[str, Any], *, propagate_context: bool = True) -> dict[str, Any]:
    """POST JSON to a local worker and return its JSON answer.

    With ``propagate_context`` the current trace context is injected through
    OpenTelemetry's global propagator (``traceparent``, ``tt-ext``, ...): the
    inject is the hop's send event; the reply's ``tt-ext`` is extracted too
    (a receive: the Lamport counter moves past the server's). A worker's error answer (HTTP 500 with
    ``{"error": ...}``) is raised as ``OSError`` naming the worker's reason.
    """
    headers = {"Content-Type": "application/json"}
    if propagate_context:
        propagate.inject(headers)
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=HOP_TIMEOUT_S) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            if propagate_context:
                # The reply's tt-ext is a receive event: only its Lamport merge
                # matters here, the context itself is not needed.
                propagate.extract(response.headers)
    except urllib.error.HTTPError as err:
        try:
            reason = json.loads(err.read() or b"{}").get("error", err.reason)
        except ValueError:
            reason = err.reason
        raise OSError(f"127.0.0.1:{port}{path} answered {err.code}: {reason}") from None
    return answer
