"""Real processes over HTTP on localhost, configured only through OTEL_PROPAGATORS and configure().

The receiver's spans carry the sender's header fields, Lamport values
increase along every hop, and sketches contain every ancestor's span id,
all read back from the one OTLP JSON-lines file the processes share.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _otel_helpers import Cluster, full_sketch

from tempotrace_sdk import semconv as S


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "spans.jsonl")
    yield c
    c.close()


def by_name(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in spans}


def assert_hop(sender: dict[str, Any], receiver: dict[str, Any], spans: list[dict[str, Any]]) -> None:
    """The receiver saw exactly what the sender sent, and the counters moved forward."""
    sent, got = sender["attrs"], receiver["attrs"]
    i = sent[S.SEND_LTS].index(got[S.REMOTE_LTS])  # matched the way the analysis matches hops
    assert got[S.REMOTE_PTP_NS] == sent[S.SEND_PTP_NS][i]
    assert got[S.REMOTE_UNCERTAINTY_NS] == sent[S.SEND_UNCERTAINTY_NS][i]
    assert got[S.REMOTE_CLK_QUALITY] == sent[S.CLK_QUALITY]
    assert got[S.REMOTE_TS_SOURCE] == sent[S.TS_SOURCE]
    assert sent[S.LTS] < got[S.REMOTE_LTS] < got[S.RECV_LTS] < got[S.LTS]
    assert receiver["parent"] == sender["span_id"]
    assert receiver["trace_id"] == sender["trace_id"]
    assert full_sketch(sender, spans).issubset(full_sketch(receiver, spans))
    assert S.SVC_SKETCH in receiver["attrs"]  # written where a header brought it (§4)


def test_three_stdlib_processes(cluster: Cluster) -> None:
    port_c = cluster.server("server", "C", host="node-c", clock="sim:ptp")
    port_b = cluster.server("server", "B", f"http://127.0.0.1:{port_c}/hop", host="node-b", clock="sim:liar")
    assert cluster.client(f"http://127.0.0.1:{port_b}/hop", "urllib") == "B,C"
    exported = cluster.spans(5)
    spans = by_name(exported)
    root, a_out = spans["client-root"], spans["client GET"]
    b_in, b_out, c_in = spans["B /hop"], spans["B GET"], spans["C /hop"]
    assert_hop(a_out, b_in, exported)
    assert_hop(b_out, c_in, exported)
    assert [s["attrs"][S.HOST] for s in (a_out, b_in, c_in)] == ["node-a", "node-b", "node-c"]
    assert [s["attrs"][S.CLOCK] for s in (a_out, b_in, c_in)] == ["sim:ntp", "sim:liar", "sim:ptp"]
    # Causality survives two process boundaries: C's sketch holds every ancestor.
    for ancestor in (root, a_out, b_in, b_out, c_in):
        assert full_sketch(c_in, [c_in]).contains(int(ancestor["span_id"], 16)), ancestor["name"]
    # OTel span times are our clock's readings converted to UTC (TAI - 37 s).
    for s in spans.values():
        assert s["attrs"][S.PTP_NS] - s["start"] == 37_000_000_000


def test_flask_and_requests_instrumentations(cluster: Cluster) -> None:
    port = cluster.server("flask", "F", host="node-f")
    assert cluster.client(f"http://127.0.0.1:{port}/hop", "requests") == "F:/hop"
    spans = cluster.spans(4)
    client_span = next(s for s in spans if s["attrs"].get(S.SEND_LTS))  # made by the requests instrumentation
    server_span = next(s for s in spans if S.REMOTE_LTS in s["attrs"])  # made by the flask instrumentation
    work = by_name(spans)["F work"]
    assert_hop(client_span, server_span, spans)
    assert work["parent"] == server_span["span_id"]
    assert S.REMOTE_LTS not in work["attrs"]
    assert full_sketch(work, spans).contains(int(by_name(spans)["client-root"]["span_id"], 16))
    assert work["attrs"][S.LTS] > server_span["attrs"][S.LTS]


def test_a_second_extract_in_one_request_is_not_a_second_receive(cluster: Cluster) -> None:
    """Issue 14: the README's ``span(..., context=extract(request.headers))`` under the Flask
    instrumentation extracted every header twice, so 6 requests made 12 receives. The second
    extract of the same header is not a receive: one span per request records the hop."""
    port = cluster.server("flask", "F", host="node-f")
    assert cluster.client(f"http://127.0.0.1:{port}/readme", "requests6").split() == ["F:/readme"] * 6
    spans = cluster.spans(1 + 6 * 3)
    sends = [s for s in spans if s["attrs"].get(S.SEND_LTS)]
    receivers = [s for s in spans if S.REMOTE_LTS in s["attrs"]]
    readme = [s for s in spans if s["name"] == "F readme"]
    assert len(sends) == len(receivers) == len(readme) == 6
    assert len({s["attrs"][S.RECV_LTS] for s in receivers}) == 6
    by_sent = {s["attrs"][S.SEND_LTS][0]: s for s in sends}
    for receiver in receivers:  # each hop matched once, the way the analysis matches hops
        assert_hop(by_sent[receiver["attrs"][S.REMOTE_LTS]], receiver, spans)
    for span_ in readme:  # parented by the client span, whose causal past it still carries
        client_span = next(s for s in sends if s["span_id"] == span_["parent"])
        assert full_sketch(client_span, spans).issubset(full_sketch(span_, [span_]))  # its own, written
        assert S.RECV_LTS not in span_["attrs"]
