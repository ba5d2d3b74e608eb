"""What the span table tests share (spec/parquet.md): converting, comparing reports, replicating an export."""

from __future__ import annotations

import json
import random
from typing import Any

from tempotrace_sdk.analysis import analyze
from tempotrace_sdk.analysis.parquet_convert import convert


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A report without what differs between two reads of the same spans: the time taken, the input's name and
    how many files it was."""
    out = dict(report)
    out.pop("elapsed_s")
    out.pop("source")
    out.pop("inputs")
    return out


def report_of(inputs: str | list[str], **options: Any) -> dict[str, Any]:
    return comparable(analyze(inputs, **options).to_dict())


def converted(inputs: list[str], out: str, **options: Any) -> str:
    convert(inputs, out, **options)
    return out


def replicate(src: str, dst: str, copies: int, seed: int = 7) -> str:
    """``copies`` of an OTLP JSON export with fresh trace and span ids and times moved on: what a longer run of
    the same workload writes (the same bytes per span, nothing a compressor could take from repeats of ids)."""
    lines = [json.loads(line) for line in open(src, encoding="utf-8") if line.strip()]
    rnd = random.Random(seed)
    with open(dst, "w", encoding="utf-8") as out:
        for copy in range(copies):
            m16, m8, shift = rnd.getrandbits(128), rnd.getrandbits(64), copy * 10_000_000_000
            for doc in lines:
                doc = json.loads(json.dumps(doc))
                for rs in doc["resourceSpans"]:
                    for ss in rs.get("scopeSpans", []):
                        for sp in ss["spans"]:
                            sp["traceId"] = f"{int(sp['traceId'], 16) ^ m16:032x}"
                            sp["spanId"] = f"{int(sp['spanId'], 16) ^ m8:016x}"
                            if sp.get("parentSpanId"):
                                sp["parentSpanId"] = f"{int(sp['parentSpanId'], 16) ^ m8:016x}"
                            for key in ("startTimeUnixNano", "endTimeUnixNano"):
                                sp[key] = str(int(sp[key]) + shift)
                out.write(json.dumps(doc, separators=(",", ":")) + "\n")
    return dst
