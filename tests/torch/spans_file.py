"""Reading the OTLP JSON-lines span files the rank workers write (shared by the torch tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tempotrace_sdk.stamptext import expand


def _value(v: dict[str, Any]) -> Any:
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    return None


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attrs: dict[str, Any]
    status: str = ""  #: the OTLP status code ("" when unset)

    def __getitem__(self, key: str) -> Any:
        return self.attrs["tempotrace." + key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.attrs.get("tempotrace." + key, default)


def read_spans(path: Path) -> list[Span]:
    spans: list[Span] = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        for rs in json.loads(line)["resourceSpans"]:
            # what every span of the process shares (host, rank, ...) is on the Resource (semantic-conventions
            # §1.2, §9.1); a span's own attributes win, as in the analysis
            shared = {kv["key"]: _value(kv["value"]) for kv in rs.get("resource", {}).get("attributes", [])}
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    attrs = {**shared, **{kv["key"]: _value(kv["value"]) for kv in s.get("attributes", [])}}
                    # tempotrace.stamps under the names of each field (semantic-conventions §1.5)
                    attrs = expand(attrs, int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"]))
                    spans.append(Span(s["name"], s["traceId"], s["spanId"], s.get("parentSpanId", ""), attrs,
                                      str(s.get("status", {}).get("code", ""))))
    return spans
