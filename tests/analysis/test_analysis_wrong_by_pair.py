"""``wrong_by_pair`` (spec/analysis.md §6.1): every wrong decision, SVC ones included, tallied per
host pair and method, so "no wrong decision between honest clocks" can be checked directly."""

from __future__ import annotations

from pathlib import Path

from tempotrace_sdk.analysis import analyze_file, analyze_spans
from tempotrace_sdk.analysis.events import SpanRecord, Stamp
from tempotrace_sdk.analysis.order import span_mask

from .tracegen import write_trace

PARENT, CHILD = "00000000000000a1", "00000000000000b2"


def _span(span_id: str, parent: str, host: str, sketch: int) -> SpanRecord:
    return SpanRecord("1" * 32, span_id, parent, "s", 1, host, Stamp(None), None, 10, 20, sketch=sketch)


def test_an_svc_false_positive_is_tallied_for_its_host_pair() -> None:
    # The parent's sketch claims the child (a false positive); the child's does not claim the parent:
    # SVC says the child came first, against the known parent -> child edge.
    d = analyze_spans([_span(PARENT, "", "zeta", span_mask(CHILD)), _span(CHILD, PARENT, "alpha", 0)]).to_dict()
    assert d["edges"]["wrong"]["svc"] == 1
    assert d["wrong_by_pair"] == [{"hosts": ["alpha", "zeta"], "ranks": [None, None], "method": "svc",
                                  "count": 1}]
    assert d["faults"] == []  # SVC is not clock evidence, but the tally still shows it


def test_liar_wrong_decisions_all_involve_the_liar(tmp_path: Path) -> None:
    path = str(tmp_path / "liar.jsonl")
    write_trace(path, {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp"})
    d = analyze_file(path).to_dict()
    pairs = d["wrong_by_pair"]
    assert pairs and all("w2" in p["hosts"] and p["hosts"] == sorted(p["hosts"]) for p in pairs)
    assert pairs == sorted(pairs, key=lambda p: (p["hosts"], p["method"]))
    assert sum(p["count"] for p in pairs) + d["unattributed"] == d["edges"]["wrong_total"]


def test_honest_trace_has_no_wrong_pairs(tmp_path: Path) -> None:
    path = str(tmp_path / "h.jsonl")
    write_trace(path, {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:ntp"})
    assert analyze_file(path).to_dict()["wrong_by_pair"] == []
