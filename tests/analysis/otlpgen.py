"""Hand-built OTLP JSON trace lines for tests that need exact stamps (the real exporter's shape:
tracegen.py makes traces with the real SDK; this makes the cases a real clock does not produce on
demand: a coarse clock, a lying rank, an unstamped child, a policy verdict)."""

from __future__ import annotations

import json
from typing import Any

TAI_UTC_NS = 37_000_000_000  # TAI - UTC since 2017


def kv(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    if isinstance(value, list):
        return {"key": key, "value": {"arrayValue": {"values": [{"intValue": str(v)} for v in value]}}}
    return {"key": key, "value": {"intValue": str(value)}}


def stamp(prefix: str, ptp: int | None, u: int = 220, quality: str = "OK", lts: int | None = None) -> dict[str, Any]:
    """tempotrace.<prefix>ptp_ns / uncertainty_ns / clk_quality / lts (prefix "", "end.", "remote.")."""
    out: dict[str, Any] = {}
    if ptp is not None:
        out[f"tempotrace.{prefix}ptp_ns"] = ptp
        out[f"tempotrace.{prefix}uncertainty_ns"] = u
        out[f"tempotrace.{prefix}clk_quality"] = quality
    if lts is not None:
        out[f"tempotrace.{prefix}lts"] = lts
    return out


def span(trace: int, span_id: int, parent: int = 0, *, name: str = "s", kind: int = 1, host: str | None = "h",
         start: int = 1_800_000_000_000_000_000, end: int | None = None, attrs: dict[str, Any] | None = None,
         **extra: Any) -> dict[str, Any]:
    """One OTLP span; ``start``/``end`` are OTel (UTC) times; ``attrs`` the tempotrace.* (or any) attributes."""
    a = dict(attrs or {})
    if host is not None:
        a.setdefault("tempotrace.host", host)
    out: dict[str, Any] = {"traceId": f"{trace:032x}", "spanId": f"{span_id:016x}"}
    if parent:
        out["parentSpanId"] = f"{parent:016x}"
    out.update({"name": name, "kind": kind, "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(end if end is not None else start + 1000),
                "attributes": [kv(k, v) for k, v in a.items()], "status": {}})
    out.update(extra)
    return out


def line(spans: list[dict[str, Any]], resource: dict[str, Any] | None = None) -> str:
    rs = {"resource": {"attributes": [kv(k, v) for k, v in (resource or {}).items()]},
          "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}]}
    return json.dumps({"resourceSpans": [rs]}, separators=(",", ":"))


def loss_line(writer: str, dropped: int) -> str:
    """An exporter's loss record (spec/analysis.md §5.4): resource attributes, no spans."""
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        kv("tempotrace.export.dropped_spans", dropped), kv("tempotrace.export.writer_id", writer),
        kv("service.name", "x")]}, "scopeSpans": []}]}, separators=(",", ":"))
