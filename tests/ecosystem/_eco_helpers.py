"""Helpers for the ecosystem tests (a unique module name: tests/ecosystem is not a package)."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
INSTRUMENT = BIN / "opentelemetry-instrument"


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without OTEL_* / TEMPOTRACE_* (a user's shell), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TEMPOTRACE_"))}
    env.pop("PYTHONPATH", None)
    env.update(extra)
    return env


def read_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The next stdout line of ``proc``, or AssertionError (with its stderr) after ``timeout_s``."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if sel.select(timeout_s):
            line = proc.stdout.readline()
            if line:
                return line.strip()
    proc.kill()
    _, err = proc.communicate(timeout=10)
    raise AssertionError(f"no output from {proc.args} within {timeout_s} s (exit {proc.returncode}):\n{err}")


def interrupt(proc: subprocess.Popen[str]) -> str:
    """SIGINT (Ctrl-C) and wait: a normal exit, so the SDK flushes at exit. Returns stderr."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
    return err or ""


def read_spans(path: Path) -> list[dict[str, Any]]:
    """OTLP JSON lines → one dict per span: name, kind, ids, attributes (``attrs``: tempotrace.stamps written out
    under the previous names, stamptext.expand; ``raw``: as written), resource attributes."""
    from tempotrace_sdk.stamptext import expand

    spans = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            resource = {a["key"]: _value(a["value"]) for a in rs["resource"].get("attributes", [])}
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    spans.append(
                        {
                            "name": sp["name"],
                            "kind": sp.get("kind"),
                            "trace_id": sp["traceId"],
                            "span_id": sp["spanId"],
                            "parent": sp.get("parentSpanId") or None,
                            "attrs": expand(
                                {a["key"]: _value(a["value"]) for a in sp.get("attributes", [])},
                                int(sp["startTimeUnixNano"]),
                                int(sp["endTimeUnixNano"]),
                            ),
                            "raw": {a["key"]: _value(a["value"]) for a in sp.get("attributes", [])},
                            "resource": resource,
                        }
                    )
    return spans


def _value(v: dict[str, Any]) -> Any:
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    return next((v[k] for k in ("stringValue", "boolValue", "doubleValue") if k in v), v)
