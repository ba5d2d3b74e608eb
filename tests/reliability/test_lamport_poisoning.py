"""Lamport poisoning is contained (issue 13 item 5, tt-ext v3 §10.1, semantic conventions §4).

Real processes over real HTTP, A -> B -> C, each configured only through
OTEL_PROPAGATORS and configure(), exporting to one shared OTLP JSON-lines
file (the node program is tests/otel/_otel_node.py). A is hostile: a traced
client whose tt-ext header claims lts = 2^63-1. Before the merge bound that
one header saturated B's counter, and through B's sends C's, until restart.
Now B keeps the hop (parented, the sender's sketch) without merging it,
counts LAMPORT_AHEAD, writes no recv.lts for it, and neither B nor C
saturates, then or on the honest request that follows.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "otel"))  # the node program and its helpers
from _otel_helpers import Cluster, full_sketch

from tempotrace_sdk import semconv as S
from tempotrace_sdk.wire import Sketch
from tempotrace_sdk.wire.lamport import LAMPORT_MAX_AHEAD
from tempotrace_sdk.wire.layout import LTS_MAX

#: Every Lamport attribute a span carries, bar remote.lts (what a peer claims).
OWN_LAMPORT = (S.LTS, S.END_LTS, S.RECV_LTS, S.SEND_LTS)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "spans.jsonl")
    yield c
    c.close()


def _state(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/tempotrace-state", timeout=30) as response:
        return dict(json.loads(response.read()))


def _sketch(span: dict[str, Any]) -> Sketch:
    """The sketch a receiving span wrote (semantic-conventions §4)."""
    return Sketch.from_bytes(bytes.fromhex(span["attrs"][S.SVC_SKETCH]))


def _own_lamport_values(span: dict[str, Any]) -> list[int]:
    values: list[int] = []
    for key in OWN_LAMPORT:
        value = span["attrs"].get(key)
        values.extend(value if isinstance(value, (list, tuple)) else [] if value is None else [value])
    return values


def test_one_hostile_header_saturates_neither_the_receiver_nor_downstream(cluster: Cluster) -> None:
    port_c = cluster.server("server", "C", host="node-c")
    port_b = cluster.server("server", "B", f"http://127.0.0.1:{port_c}/hop", host="node-b")
    assert cluster.client(f"http://127.0.0.1:{port_b}/hop", "forge", host="node-a") == "B,C"
    assert cluster.client(f"http://127.0.0.1:{port_b}/hop", "urllib", host="node-a2") == "B,C"
    spans = cluster.spans(2 * 5)
    assert len(spans) == 10, [s["name"] for s in spans]
    roots = sorted((s for s in spans if s["name"] == "client-root"), key=lambda s: s["start"])
    hostile, honest = (root["trace_id"] for root in roots)
    by = {(s["trace_id"], s["name"]): s for s in spans}

    # B kept the hostile hop: parented by A's span, A's sketch recorded and carried, no Lamport evidence.
    a_out, b_in = by[hostile, "client GET"], by[hostile, "B /hop"]
    assert b_in["parent"] == a_out["span_id"] and b_in["trace_id"] == a_out["trace_id"]
    assert b_in["attrs"][S.REMOTE_LTS] == LTS_MAX
    assert full_sketch(a_out, spans).issubset(_sketch(b_in))
    assert S.RECV_LTS not in b_in["attrs"]
    # ... and so did C, through B: A's span is in C's causal past.
    assert _sketch(by[hostile, "C /hop"]).contains(int(a_out["span_id"], 16))

    # Nothing anyone stamped came near the end of the range: not B, not C, not on the next request.
    for span in spans:
        assert all(v < LAMPORT_MAX_AHEAD for v in _own_lamport_values(span)), span["name"]
    # B -> C hops, hostile trace and honest one, merged normally, and the honest A -> B hop too.
    for trace in (hostile, honest):
        sent, got = by[trace, "B GET"]["attrs"], by[trace, "C /hop"]["attrs"]
        assert got[S.REMOTE_LTS] in sent[S.SEND_LTS] and got[S.REMOTE_LTS] < got[S.RECV_LTS] < got[S.LTS]
    honest_in = by[honest, "B /hop"]["attrs"]
    assert honest_in[S.REMOTE_LTS] < honest_in[S.RECV_LTS] < honest_in[S.LTS]

    b_state, c_state = _state(port_b), _state(port_c)
    assert b_state["rejections"] == {"LAMPORT_AHEAD": 1} and not b_state["saturated"]
    assert c_state["rejections"] == {} and not c_state["saturated"]
    assert b_state["lts"] < LAMPORT_MAX_AHEAD and c_state["lts"] < LAMPORT_MAX_AHEAD


def test_the_analysis_takes_no_lamport_evidence_from_an_unmerged_hop(cluster: Cluster) -> None:
    """spec/analysis.md §2.2: a hop whose server span has remote.lts but no recv.lts gives no
    Lamport evidence. With NTP-class clocks (saturated bounds) physics is silent, so before that
    rule the forged lts (2^63-1 > B's own) made the hop WRONG by Lamport and blamed node-a/node-b."""
    from tempotrace_sdk.analysis import analyze_file

    port_c = cluster.server("server", "C", host="node-c", clock="sim:ntp")
    port_b = cluster.server("server", "B", f"http://127.0.0.1:{port_c}/hop", host="node-b", clock="sim:ntp")
    assert cluster.client(f"http://127.0.0.1:{port_b}/hop", "forge", host="node-a") == "B,C"
    assert cluster.client(f"http://127.0.0.1:{port_b}/hop", "urllib", host="node-a2") == "B,C"
    assert len(cluster.spans(2 * 5)) == 10
    report = analyze_file(str(cluster.export))
    summary = report.summary()
    assert summary["hops"] == 4 and summary["physics"] == 0, summary
    assert summary["wrong"] == 0 and report.faults == [], (summary, report.faults)
