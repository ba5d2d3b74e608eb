"""What the stamp writes: attribute-write cost and OTLP JSON size per span, measured, not yet changed.

    python -m benchmarks.bench_attributes [--json]

Issue 12 asks for both figures against the same span without tempotrace.*
attributes (target: at most 1.5x), before the attribute set changes (that
change goes with spec/semantic-conventions.md and the analysis reader).

A demo-like span is made for real: a server span (``ring.recv``) whose
parent came over a real tt-ext hop, with one send of its own, through our
processor on a real TracerProvider, and encoded by the real OTLP JSON file
exporter. Three attribute sets are compared on that one span:

- plain: the span with every tempotrace.* attribute removed (what the user
  had without us);
- today: what the processor writes now (spec/semantic-conventions.md);
- proposal: the same information in fewer, denser attributes (see the
  report printed at the end), built from today's values so the two carry
  the same numbers.

Size is bytes of OTLP JSON: per exported line when each span is its own line
(sync export: the resource and scope repeat on every line) and per span in a
batch of 100 (the marginal cost). Write cost is building the attribute dicts
a span gets (start + end) and storing them into a real span's attribute map;
encode cost is the exporter's work per span in a batch.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from benchmarks.harness import Row, as_json, compare, print_table
from tempotrace_sdk import semconv as S
from tempotrace_sdk.clocks.select import select_clock
from tempotrace_sdk.otel import TempoTracePropagator, TempoTraceSpanProcessor, TempoTraceState
from tempotrace_sdk.otel.sdk_internals import attribute_store
from tempotrace_sdk.wire import Sketch
from tempotrace_sdk.wire.header import header_text

TARGET_RATIO = 1.5
#: What opentelemetry-instrumentation-flask puts on a server span (semantic conventions 1.2x):
#: the same span measured again with these as the user's own attributes.
HTTP_SERVER_ATTRIBUTES = {
    "http.request.method": "POST",
    "url.scheme": "http",
    "url.path": "/ring/recv",
    "server.address": "10.0.3.17",
    "server.port": 8443,
    "network.protocol.version": "1.1",
    "network.peer.address": "10.0.3.16",
    "network.peer.port": 51234,
    "client.address": "10.0.3.16",
    "user_agent.original": "python-requests/2.32.3",
    "http.route": "/ring/recv",
    "http.response.status_code": 200,
}
#: Attributes that describe the process, not the span: the proposal moves them to the Resource.
PER_PROCESS = (S.CLOCK, S.HOST, S.TENANT_ID)


def demo_span() -> tuple[ReadableSpan, Resource]:
    """One real ring.recv span: a received hop, one send, our processor's stamps."""
    resource = Resource.create({"service.name": "tempotrace-demo-rank-1"})
    state = TempoTraceState(clock=select_clock("cpu"), tenant=1, host="rank-1")
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tempotrace_sdk")
    ours, w3c = TempoTracePropagator(state=state), TraceContextTextMapPropagator()
    carrier: dict[str, str] = {}
    with tracer.start_as_current_span("ring.send", kind=SpanKind.CLIENT):
        w3c.inject(carrier)
        ours.inject(carrier)
    ctx = ours.extract(carrier, w3c.extract(carrier))
    user = {S.RANK: 1, S.CLOCK_PROFILE: "ptp", "iteration": 3}
    with tracer.start_as_current_span("ring.recv", context=ctx, kind=SpanKind.SERVER, attributes=user):
        ours.inject({})
    provider.shutdown()
    received = next(s for s in exporter.get_finished_spans() if s.name == "ring.recv")
    return received, resource


def _ints(values: Any) -> list[int]:
    return [int(v) for v in values]


def _head(tenant: int, ptp_ns: int, source: int, quality: int, uncertainty_ns: int, lts: int) -> str:
    """The first 28 characters of a tt-ext text: bytes 0..20 (version/tenant .. lts), no sketch (spec §5.1)."""
    return header_text(tenant, ptp_ns, source, quality, uncertainty_ns, lts, Sketch.EMPTY)[:28]


_QUALITY = {"OK": 0, "DEGRADED": 1, "UNKNOWN": 2}
_SOURCE = {"GTE": 0, "SW_GCC": 1, "CPU": 2}


def proposal(attrs: dict[str, Any]) -> dict[str, Any]:
    """Today's values in the proposed encoding (see PROPOSAL)."""
    out = {k: v for k, v in attrs.items() if not k.startswith(S.PREFIX) or k in (S.RANK, S.CLOCK_PROFILE)}
    tenant, source = attrs[S.TENANT_ID], _SOURCE[attrs[S.TS_SOURCE]]
    sketch = Sketch.from_bytes(bytes.fromhex(attrs[S.SVC_SKETCH]))
    out["tempotrace.ext"] = header_text(tenant, attrs[S.PTP_NS], source, _QUALITY[attrs[S.CLK_QUALITY]],
                                        attrs[S.UNCERTAINTY_NS], attrs[S.LTS], sketch)  # fmt: skip
    out[S.CLK_QUALITY] = attrs[S.CLK_QUALITY]  # kept for filtering in a backend
    out[S.UNCERTAINTY_NS] = attrs[S.UNCERTAINTY_NS]  # kept for filtering in a backend
    out["tempotrace.end"] = _head(tenant, attrs[S.END_PTP_NS], source, _QUALITY[attrs[S.END_CLK_QUALITY]],
                                  attrs[S.END_UNCERTAINTY_NS], attrs[S.END_LTS])  # fmt: skip
    if S.REMOTE_LTS in attrs:
        out["tempotrace.remote"] = _head(attrs[S.REMOTE_TENANT_ID], attrs[S.REMOTE_PTP_NS],
                                         _SOURCE[attrs[S.REMOTE_TS_SOURCE]], _QUALITY[attrs[S.REMOTE_CLK_QUALITY]],
                                         attrs[S.REMOTE_UNCERTAINTY_NS], attrs[S.REMOTE_LTS])  # fmt: skip
        out[S.RECV_LTS] = attrs[S.RECV_LTS]
    if S.SEND_LTS in attrs:
        quality = _QUALITY[attrs[S.CLK_QUALITY]]  # a send's quality is not recorded today either
        sends = zip(attrs[S.SEND_LTS], attrs[S.SEND_PTP_NS], attrs[S.SEND_UNCERTAINTY_NS], strict=True)
        out["tempotrace.send"] = [_head(tenant, ptp, source, quality, unc, lts) for lts, ptp, unc in sends]
    if attrs.get(S.POLICY_VERDICT, "pass") != "pass":  # only when a contract was broken
        out[S.POLICY_VERDICT], out[S.POLICY_REASON] = attrs[S.POLICY_VERDICT], attrs[S.POLICY_REASON]
    return out


def _with(span: ReadableSpan, attributes: dict[str, Any], resource: Resource) -> ReadableSpan:
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=resource, attributes=attributes,
        events=span.events, links=span.links, kind=span.kind, status=span.status, start_time=span.start_time,
        end_time=span.end_time, instrumentation_scope=span.instrumentation_scope,
    )  # fmt: skip


def _line_bytes(spans: Sequence[ReadableSpan]) -> int:
    stream = io.StringIO()
    FileSpanExporter(stream=stream).export(spans)
    return len(stream.getvalue().encode())


def sizes(span: ReadableSpan, resource: Resource, extra: dict[str, Any]) -> dict[str, tuple[int, int, ReadableSpan]]:
    attrs = {**extra, **dict(span.attributes or {})}
    plain = {k: v for k, v in attrs.items() if not k.startswith(S.PREFIX) or k in (S.RANK, S.CLOCK_PROFILE)}
    moved = Resource.create({**resource.attributes, **{k: attrs[k] for k in PER_PROCESS}})
    variants = {
        "plain": _with(span, plain, resource),
        "today": _with(span, attrs, resource),
        "proposal": _with(span, proposal(attrs), moved),
    }
    out = {}
    for name, variant in variants.items():
        one = _line_bytes([variant])
        batch = (_line_bytes([variant] * 101) - _line_bytes([variant])) // 100
        out[name] = (one, batch, variant)
    return out


def write_cost(span: ReadableSpan, min_time: float) -> dict[str, tuple[float, float]]:
    """(ns, ratio to today's direct store) to build one span's start+end attribute dicts and store them."""
    attrs = dict(span.attributes or {})
    start = {k: v for k, v in attrs.items() if k.startswith(S.PREFIX) and not k.startswith("tempotrace.end.")}
    end = {k: v for k, v in attrs.items() if k.startswith("tempotrace.end.")}
    prop = proposal(attrs)
    p_start = {k: v for k, v in prop.items() if k != "tempotrace.end"}
    p_end = {"tempotrace.end": prop["tempotrace.end"]}
    target = TracerProvider().get_tracer("w").start_span("w")
    store = attribute_store(target, 64)  # type: ignore[arg-type]
    assert store is not None
    public = TracerProvider().get_tracer("w").start_span("w")

    def today() -> None:
        store.update(dict(start))
        store.update(dict(end))

    def ours_proposal() -> None:
        store.update(dict(p_start))
        store.update(dict(p_end))

    def today_public() -> None:
        public.set_attributes(start)
        public.set_attributes(end)

    ns, base, ratio = compare(ours_proposal, today, min_time=min_time)
    pub, _, pub_ratio = compare(today_public, today, min_time=min_time)
    return {"today": (base, 1.0), "proposal": (ns, ratio), "today_public": (pub, pub_ratio)}


def encode_cost(variants: dict[str, tuple[int, int, ReadableSpan]], min_time: float) -> dict[str, tuple[float, float]]:
    """(ns per span, ratio to plain) of the exporter's encoding, in batches of 10, paired with plain."""
    from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans

    plain = [variants["plain"][2]] * 10
    out = {}
    for name, (_, _, variant) in variants.items():
        batch = [variant] * 10
        ns, _, ratio = compare(lambda b=batch: encode_spans(b), lambda: encode_spans(plain), min_time=min_time)
        out[name] = (ns / 10, ratio)
    return out


PROPOSAL = """\
Proposal (measured above as "proposal", not applied: it changes spec/semantic-conventions.md and
the analysis reader together, after the new reader lands). Every number today's attributes carry
is kept; what changes is the encoding, and what repeats per span:
  tempotrace.ext              str: the start stamp as the 71-char tt-ext text (tenant, ptp_ns,
                              ts_source, clk_quality, uncertainty_ns, lts, svc_sketch), decoded by
                              TTExt.from_header; replaces 7 attributes (the sketch: 43 base64url
                              characters instead of 64 hex)
  tempotrace.clk_quality      kept as is: backends filter and group on it
  tempotrace.uncertainty_ns   kept as is: backends filter on it (e.g. > 1000)
  tempotrace.end              str: the end stamp as the 28-char head of a tt-ext text (bytes 0..20:
                              tenant, ptp_ns, ts_source, clk_quality, uncertainty_ns, lts); replaces 4
  tempotrace.remote           str: the received header's 28-char head; replaces 6 (the remote sketch
                              is dropped: it is the sender span's own tempotrace.ext sketch, and the
                              receiver's sketch contains it)
  tempotrace.recv.lts         kept as is
  tempotrace.send             str[]: one 28-char head per send; replaces 3 parallel arrays
  tempotrace.clock/.host/.tenant_id  move to the Resource (per process: once per batch, not per span)
  tempotrace.policy.verdict/.reason  only when the verdict is not "pass"; tier and retention are per
                              tenant (the policy file), not per span
The analysis reader then reads tempotrace.ext/end/remote/send with wire.TTExt (old files: the
current attributes, still accepted), recv.lts, and clock/host from the resource. The floor: two
stamps are 53 + 21 bytes of information, about 100 base64 characters plus keys and OTLP JSON's
framing: against a span with few attributes of its own (demo: 3) no JSON encoding reaches 1.5x
(see demo/proposal); against an instrumented HTTP span (http rows) the proposal is measured above.
A binary OTLP (protobuf) export would carry the 53 + 21 bytes as bytes."""


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    min_time = 0.05 if "--quick" in args else 0.2
    span, resource = demo_span()
    size_table = []
    for label, extra in (("demo", {}), ("http", HTTP_SERVER_ATTRIBUTES)):
        variants = sizes(span, resource, extra)
        plain_line, plain_batch, _ = variants["plain"]
        for name, (line, batch, variant) in variants.items():
            count = len(variant.attributes or {})
            size_table.append((f"{label}/{name}", count, line, line / plain_line, batch, batch / plain_batch))
    writes = write_cost(span, min_time)
    encodes = encode_cost(sizes(span, resource, {}), min_time)
    cost_rows = [
        Row("attribute writes, today (direct store)", writes["today"][0]),
        Row("attribute writes, today (set_attributes)", writes["today_public"][0], "direct store",
            writes["today_public"][1]),
        Row("attribute writes, proposal (direct store)", writes["proposal"][0], "today", writes["proposal"][1]),
        *[Row(f"OTLP JSON encode per span, {name}", ns, "plain", ratio) for name, (ns, ratio) in encodes.items()],
    ]  # fmt: skip
    if "--json" in args:
        keys = ("variant", "attributes", "line_bytes", "line_ratio", "batch_bytes", "batch_ratio")
        sizes_json = [dict(zip(keys, row, strict=True)) for row in size_table]
        print(json.dumps({"export_size": sizes_json, "target_ratio": TARGET_RATIO,
                          "cost": as_json("attributes: write and encode cost", cost_rows)}, indent=2))  # fmt: skip
        return
    print("\n## attributes: OTLP JSON size of one span (ring.recv with a hop and a send; ratio = / plain)")
    print("   demo: the demo's 3 user attributes; http: plus what the Flask instrumentation adds (12)")
    print(f"{'variant':<14}  {'attrs':>5}  {'bytes/line':>10}  {'ratio':>6}  {'bytes/span in batch':>19}  {'ratio':>6}")
    for name, count, line, line_ratio, batch, batch_ratio in size_table:
        mark = "" if name.endswith("plain") else ("  ok" if batch_ratio <= TARGET_RATIO else f"  > {TARGET_RATIO}x")
        print(f"{name:<14}  {count:>5}  {line:>10}  {line_ratio:>6.2f}  {batch:>19}  {batch_ratio:>6.2f}{mark}")
    print_table("attributes: write and encode cost per span", cost_rows)
    print(PROPOSAL)


if __name__ == "__main__":
    main()
