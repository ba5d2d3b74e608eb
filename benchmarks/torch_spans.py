"""torch op spans as a 4-rank gloo job writes them, and a proposal for their attributes, measured.

The attribute sets below are copied from a real export: ``tests/torch``'s
4-rank job (rank_worker.py under tests/torch/test_distributed.py, gloo, CPU),
rank 0 and 1's ``spans-<rank>.jsonl``. bench_attributes prints their OTLP JSON
size beside the proposal's. Nothing here changes what torch writes
(semantic-conventions §9 is being built on by the collective analysis).
"""

from __future__ import annotations

import base64
import io
from typing import Any

from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind

__all__ = ["SAMPLES", "TORCH_PROPOSAL", "op_spans", "proposal", "torch_rows"]

_LAUNCH = {"tempotrace.rank": 1, "tempotrace.world_size": 4, "tempotrace.local_rank": 1, "tempotrace.restart": 0,
           "tempotrace.job_id": "job-test"}  # fmt: skip
_GROUP = {"tempotrace.torch.group": "0-3", "tempotrace.torch.group_rank": 1, "tempotrace.torch.group_size": 4,
          "tempotrace.torch.backend": "gloo"}  # fmt: skip
_STAMP = {"tempotrace.clk_quality": "OK", "tempotrace.uncertainty_ns": 220}

#: span name -> attributes, as exported (values from the run; the collective in op mode adds the carried
#: records an all_reduce receives from its 3 peers, semantic-conventions §9.4).
SAMPLES: dict[str, dict[str, Any]] = {
    "torch.all_reduce (step)": {
        **_GROUP, "tempotrace.torch.op": "all_reduce", "tempotrace.torch.bytes": 16, "tempotrace.torch.seq": 0,
        "tempotrace.torch.completion": "return", **_LAUNCH, "tempotrace.stamps": "s4,0 e1", **_STAMP,
    },
    "torch.all_reduce (op mode)": {
        **_GROUP, "tempotrace.torch.op": "all_reduce", "tempotrace.torch.bytes": 16, "tempotrace.torch.seq": 7,
        "tempotrace.torch.completion": "return", **_LAUNCH, "tempotrace.torch.recv.count": 3,
        "tempotrace.torch.recv.lts": 212, "tempotrace.torch.recv.missing": (),
        "tempotrace.torch.recv.svc_sketch": "0000210002111108040000400000000000008000010000800000401000000020",
        "tempotrace.stamps": "s205,0 e9 x1,15210", **_STAMP,
    },
    "torch.isend": {
        **_GROUP, "tempotrace.torch.op": "isend", "tempotrace.torch.bytes": 16, "tempotrace.torch.tag": 0,
        "tempotrace.torch.peer": 0, "tempotrace.torch.src": 1, "tempotrace.torch.dst": 0,
        "tempotrace.torch.p2p_seq": 0, **_LAUNCH, "tempotrace.torch.completion": "wait",
        "tempotrace.stamps": "s51,0 e4 x1,108965", **_STAMP,
    },
    "torch.irecv": {
        **_GROUP, "tempotrace.torch.op": "irecv", "tempotrace.torch.bytes": 16, "tempotrace.torch.tag": 0,
        "tempotrace.torch.peer": 1, "tempotrace.torch.dst": 0, "tempotrace.torch.src": 1,
        "tempotrace.torch.p2p_seq": 0, **_LAUNCH, "tempotrace.torch.completion": "wait",
        "tempotrace.torch.recv.count": 1, "tempotrace.torch.recv.lts": 58,
        "tempotrace.torch.recv.svc_sketch": "0000000800111100000000000200000000200000088880000000000000000080",
        "tempotrace.torch.remote.ptp_ns": 1796067801065492495, "tempotrace.torch.remote.uncertainty_ns": 220,
        "tempotrace.torch.remote.clk_quality": "OK", "tempotrace.torch.remote.lts": 52,
        "tempotrace.torch.remote.span_id": "5f8e650dc819a0ad", "tempotrace.stamps": "s54,0 e5", **_STAMP,
    },
    "torch.step": {
        "tempotrace.torch.step": 0, "tempotrace.torch.carriage": "step", **_LAUNCH,
        "tempotrace.torch.recv.count": 3, "tempotrace.torch.recv.lts": 73,
        "tempotrace.torch.recv.svc_sketch": "0000210002111108040000400000000000008000010000800000401000000020",
        "tempotrace.stamps": "s3,0 e71 x69,168965930", **_STAMP,
    },
}  # fmt: skip
#: The start time of the irecv sample's span, TAI (its remote.ptp_ns becomes a dptp against it).
_IRECV_START_PTP = 1796067801065540121
_QUALITY = {"OK": 0, "DEGRADED": 1, "UNKNOWN": 2}


def proposal(attrs: dict[str, Any], start_lts: int, start_ptp: int) -> dict[str, Any]:
    """The proposal applied to one span's attributes (see TORCH_PROPOSAL)."""
    out = {k: v for k, v in attrs.items() if k not in _LAUNCH}  # per process: the Resource
    for derivable in ("tempotrace.torch.group_rank", "tempotrace.torch.group_size", "tempotrace.torch.peer"):
        out.pop(derivable, None)
    tokens = []
    if "tempotrace.torch.recv.count" in out:
        missing = "".join(f",{r}" for r in out.pop("tempotrace.torch.recv.missing", ()))
        back = start_lts - out.pop("tempotrace.torch.recv.lts")
        tokens.append(f"c{back},{out.pop('tempotrace.torch.recv.count')}{missing}")
        sketch = bytes.fromhex(out.pop("tempotrace.torch.recv.svc_sketch"))
        tokens.append("m" + base64.urlsafe_b64encode(sketch)[:43].decode())
    if "tempotrace.torch.remote.lts" in out:
        dptp = out.pop("tempotrace.torch.remote.ptp_ns") - start_ptp
        unc, quality = out.pop("tempotrace.torch.remote.uncertainty_ns"), out.pop("tempotrace.torch.remote.clk_quality")
        tokens.append(f"p{out.pop('tempotrace.torch.remote.lts')},{dptp},{unc},{_QUALITY[quality]}")
    if tokens:
        head, _, sends = out["tempotrace.stamps"].partition(" x")
        out["tempotrace.stamps"] = " ".join([head, *tokens]) + (" x" + sends if sends else "")
    return out


_START = {"torch.all_reduce (step)": (4, 0), "torch.all_reduce (op mode)": (205, 0), "torch.isend": (51, 0),
          "torch.irecv": (54, _IRECV_START_PTP), "torch.step": (3, 0)}  # fmt: skip


def _batch_bytes(name: str, attrs: dict[str, Any]) -> int:
    span = ReadableSpan(
        name=name.split(" ")[0], context=SpanContext(0x5B8EFFF798038103D269B633813FC60C, 0xEEE19B7EC3C1B174, False),
        parent=SpanContext(0x5B8EFFF798038103D269B633813FC60C, 0xEEE19B7EC3C1B173, False), resource=Resource({}),
        attributes=attrs, kind=SpanKind.INTERNAL, start_time=1796067764065540121, end_time=1796067764065640121,
    )  # fmt: skip

    def size(n: int) -> int:
        stream = io.StringIO()
        FileSpanExporter(stream=stream).export([span] * n)
        return len(stream.getvalue().encode())

    return (size(101) - size(1)) // 100


def _varied(attrs: dict[str, Any], i: int) -> dict[str, Any]:
    """A sample's attributes as op ``i`` of a run has them: counters, Lamport times, stamps, sketches and
    the remote record move from op to op (what repeats, the group, op, rank..., stays)."""
    out = dict(attrs)
    lts = 10 * i + 4
    for counter in ("tempotrace.torch.seq", "tempotrace.torch.p2p_seq", "tempotrace.torch.step"):
        if counter in out:
            out[counter] = i
    for older in ("tempotrace.torch.recv.lts", "tempotrace.torch.remote.lts"):
        if older in out:
            out[older] = lts - 3
    if "tempotrace.torch.recv.svc_sketch" in out:
        out["tempotrace.torch.recv.svc_sketch"] = f"{(i * 0x9E3779B97F4A7C15) % 2**256:064x}"
    if "tempotrace.torch.remote.ptp_ns" in out:
        out["tempotrace.torch.remote.ptp_ns"] += 1_000_003 * i
        out["tempotrace.torch.remote.span_id"] = f"{i * 0x9E3779B97F4A7C15 % 2**64:016x}"
    _head, _, sends = out["tempotrace.stamps"].partition(" x")
    out["tempotrace.stamps"] = f"s{lts},0 e{i % 97}" + (f" x{i % 5 + 1},{15210 + 7 * i}" if sends else "")
    return out


def op_spans(count: int) -> list[ReadableSpan]:
    """``count`` ended op spans from a real TracerProvider, the samples in turn, each with the values that
    change from op to op in a run changed (so an encoder reusing repeated values meets no more repeats
    than a real batch has): what the torch tracing hands its exporter."""
    memory = InMemorySpanExporter()
    resource = Resource.create({"service.name": "trainer", "tempotrace.host": "node-1", "tempotrace.clock": "ptp",
                                "tempotrace.tenant_id": 0})  # fmt: skip
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tempotrace_sdk.torch")
    names = list(SAMPLES)
    for i in range(count):
        name = names[i % len(names)]
        with tracer.start_as_current_span(name.split(" ")[0], attributes=_varied(SAMPLES[name], i)):
            pass
    return list(memory.get_finished_spans())


def torch_rows() -> list[tuple[str, str, int, int]]:
    """(span, today/proposal, attributes, bytes per span in a batch) for each sample."""
    rows = []
    for name, attrs in SAMPLES.items():
        lts, ptp = _START[name]
        after = proposal(attrs, lts, ptp)
        rows.append((name, "today", len(attrs), _batch_bytes(name, attrs)))
        rows.append((name, "proposal", len(after), _batch_bytes(name, after)))
    return rows


TORCH_PROPOSAL = """\
Proposal for the torch attributes (measured above, not applied: the collective analysis is being
built on semantic-conventions §9 now; to be done with it, through §9, the analysis reader and torch/):
  - the launch facts (rank, world_size, local_rank, node_rank, restart, job_id) are per process: on the
    Resource, as host/clock/tenant are now (otel/process.py does it; a query by rank works on either);
  - group_rank and group_size follow from the group key and the rank (the key lists the members), and
    peer from src/dst: not written;
  - kept as plain attributes, because they are what a backend filters and joins on: op, group, backend,
    bytes, completion, seq, root, src, dst, tag, p2p_seq, remote.span_id, step, carriage (a collective is
    joined across ranks by group + seq, a message by group, src, dst, tag, p2p_seq);
  - the carried records become tokens of tempotrace.stamps: 'c<start lts - recv.lts>,<count>[,<missing>]'
    and 'm<43 base64url>' (the merged sketch), and a p2p receive's remote record
    'p<lts>,<ptp - start ptp>,<uncertainty>,<quality>' (as the r token of an HTTP hop)."""
