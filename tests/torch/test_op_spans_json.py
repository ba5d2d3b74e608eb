"""Op spans written in C (native/opcall/tt_opspans.c, torch/opspans.py; spec/torch.md §1.4 "Spans from
records"): for the same records, the span JSON the C pass writes is, byte for byte, what make_span's
ReadableSpan encoded by otel/otlp_json.py is; what it cannot write it leaves to that path; and the file an
export-mode job writes holds every op's span."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from opentelemetry import context as context_api  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased  # noqa: E402
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState  # noqa: E402

from tempotrace_sdk import torch as tt  # noqa: E402
from tempotrace_sdk.clocks.domain import Epoch  # noqa: E402
from tempotrace_sdk.otel import otlp_json  # noqa: E402
from tempotrace_sdk.otel.batching import TempoTraceBatchProcessor  # noqa: E402
from tempotrace_sdk.otel.context import get_state  # noqa: E402
from tempotrace_sdk.otel.export import file_exporter  # noqa: E402
from tempotrace_sdk.otel.file_export import JsonLinesSpanExporter  # noqa: E402
from tempotrace_sdk.otel.process import process_attributes  # noqa: E402
from tempotrace_sdk.otel.processor import TempoTraceSpanProcessor  # noqa: E402
from tempotrace_sdk.otel.stamp import NativeStamp  # noqa: E402
from tempotrace_sdk.semconv import CLOCK_EPOCH_NS, CLOCK_STEPPED  # noqa: E402
from tempotrace_sdk.torch import opspans  # noqa: E402
from tempotrace_sdk.torch import spans as torch_spans  # noqa: E402
from tempotrace_sdk.torch.install import make_wrapper  # noqa: E402
from tempotrace_sdk.torch.p2p import traced_batch  # noqa: E402
from tempotrace_sdk.torch.recorder import AMBIGUOUS, ENDED, OPEN, RECORD_BYTES, recorder  # noqa: E402
from tempotrace_sdk.torchops import SPEC_INDEX, SPECS  # noqa: E402

pytest.importorskip("tempotrace_sdk._opcall", reason="the C pass is not built (not Linux, no compiler)")


class Sink:
    """A provider as configure() builds one (stamping processor, our batch processor, our file exporter)."""

    def __init__(self, path: Path, resource: Resource, sampler: Any = None) -> None:
        exporter, self.path = file_exporter(path)
        assert type(exporter) is JsonLinesSpanExporter
        self.exporter = exporter
        self.processor = TempoTraceBatchProcessor(self.exporter)
        self.provider = TracerProvider(resource=resource, **({"sampler": sampler} if sampler is not None else {}))
        self.provider.add_span_processor(TempoTraceSpanProcessor())
        self.provider.add_span_processor(self.processor)

    def close(self) -> None:
        self.provider.shutdown()


@pytest.fixture
def native_stamp() -> None:
    if not isinstance(get_state().stamp, NativeStamp):
        pytest.skip("the native stamp is not loaded here (TEMPOTRACE_PUREPYTHON)")


@pytest.fixture
def sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Sink]:
    kind = getattr(request, "param", "process")
    resource = Resource.create({"service.name": "json", **(process_attributes(get_state()) if kind == "process"
                                                            else {})})
    made = Sink(tmp_path / "spans.jsonl", resource, TraceIdRatioBased(0.5) if kind == "ratio" else None)
    monkeypatch.setattr(torch_spans, "tracer", lambda: made.provider.get_tracer("test"))
    recorder.take_ended()  # what earlier tests left ended in the ring is not this test's
    yield made
    tt.uninstrument()
    made.close()


def _in(ctx: Any, fn: Callable[[], Any]) -> Any:
    token = context_api.attach(ctx)
    try:
        return fn()
    finally:
        context_api.detach(token)


def _remote(sampled: bool, state: TraceState | None = None) -> Any:
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else 0)
    parent = SpanContext(0x1234 << 64 | 0xABCD, 0x42, True, flags, state or TraceState())
    return trace.set_span_in_context(NonRecordingSpan(parent))


def _ops() -> None:
    """Ops in every kind of context a record's parent can be: a step, none (root ops), a remote parent with a
    trace state, a parent not sampled; bytes, roots, no data."""
    t, out = torch.ones(8), torch.empty(8)
    dist.all_reduce(t)  # the group's first op
    with tt.step():
        dist.all_reduce(t)
        dist.barrier()
        dist.broadcast(t, 0)
        dist.all_gather_into_tensor(out, t)
    dist.all_reduce(t)  # a root op
    dist.reduce(t, dst=0)
    _in(_remote(True, TraceState([("vendor", "ab")])), lambda: dist.all_reduce(t))
    _in(_remote(True), lambda: dist.scatter(out, scatter_list=[t], src=0))
    _in(_remote(False), lambda: dist.all_reduce(t))  # not sampled: no span either way


def _snapshot() -> tuple[bytes, bytes, list[Any], int]:
    return bytes(recorder.state), bytes(recorder.buffer), list(recorder.parents), recorder.next_due


def _restore(snap: tuple[bytes, bytes, list[Any], int]) -> None:
    recorder.state[:], recorder.buffer[:], recorder.parents[:] = snap[0], snap[1], snap[2]
    recorder.next_due = snap[3]


def _by_id(encoded: list[bytes]) -> dict[int, bytes]:
    return {int(json.loads(b)["spanId"], 16): b for b in encoded}


def _both_ways(mutate: Callable[[bytearray], None] | None = None) -> tuple[dict[int, bytes], dict[int, bytes], int]:
    """The ring's ended records as spans the old way and the C way (each from the same snapshot): each span's
    JSON by span id, and how many records the C pass left to Python."""
    if mutate is not None:
        mutate(recorder.buffer)
    snap = _snapshot()
    state = get_state()
    resource, scope, processors = opspans.destination()
    records, _ = recorder._take_ended(recorder.next_due, recorder.issued)
    old = _by_id([msgspec.json.encode(otlp_json._span(sp, {}))
                  for sp in opspans.make_spans(state, records, resource, scope)])
    _restore(snap)
    native = opspans.json_spans(state, resource, scope, processors, recorder.groups, opspans._sampler(),
                               opspans._Nonce.value, opspans._Nonce.high)
    assert native is not None
    items, left = recorder.take_ended(None, native)  # (the C pass checks the clock itself, after its scan)
    made = [msgspec.json.encode(otlp_json._span(sp, {})) for sp in opspans.make_spans(state, left, resource, scope)]
    new = _by_id([b for _, b in items] + made)
    assert len(new) == len(items) + len(made)  # no span both ways
    return old, new, len(left)


def _poke(number: int, word: int, shift: int, width: int, value: int) -> None:
    """Set bits ``shift``..``shift + width`` of record word ``word`` (recorder.py's layout) of op ``number``."""
    at = (number & recorder.mask) * RECORD_BYTES + 8 * word
    old = int.from_bytes(recorder.buffer[at:at + 8], "little", signed=True)
    mask = ((1 << width) - 1) << shift
    new = (old & ~mask) | ((value << shift) & mask)
    recorder.buffer[at:at + 8] = (new - (1 << 64) if new >= 1 << 63 else new).to_bytes(8, "little", signed=True)


@pytest.mark.parametrize("sink", ["process", "bare"], indirect=True)
def test_the_c_pass_writes_each_span_as_make_span_and_otlp_json_do(group: None, native_stamp: None,
                                                                    sink: Sink) -> None:
    """Every record of _ops' contexts, under a Resource with the process attributes (configure()'s) and under a
    bare one (each span then carries them): the same bytes, none left to Python, the unsampled op in neither."""
    tt.instrument(carriage="none", retain="ring", hang_timeout=0)
    first = recorder.issued
    _ops()
    old, new, left = _both_ways()
    assert left == 0
    assert len(old) == recorder.issued - first - 1  # all but the unsampled op
    assert new == old


#: (what the record says, its word, bit shift, width, value, records the C pass leaves to Python)
MUTATIONS = [
    ("an end bound other than the start's", 9, 0, 64, 12345, 0),
    ("an end quality other than the start's", 11, 16, 8, 1, 0),
    ("no bytes", 3, 0, 64, -1, 0),
    ("a start before the last leap second", 5, 0, 64, 1_000_000_000, 1),
    ("a start source with no digit in the text", 1, 40, 8, 3, 1),
]


@pytest.mark.parametrize(("name", "word", "shift", "width", "value", "left"), MUTATIONS,
                         ids=[m[0] for m in MUTATIONS])
def test_a_record_either_way_gives_the_same_span_or_none(group: None, native_stamp: None, sink: Sink, name: str,
                                                         word: int, shift: int, width: int, value: int,
                                                         left: int) -> None:
    """One record of a step changed: written in C where the text carries what changed (its bound, its quality),
    left to Python where the C pass cannot write it (which writes it, or refuses it, as before)."""
    tt.instrument(carriage="none", retain="ring", hang_timeout=0)
    t = torch.ones(8)
    dist.all_reduce(t)
    with tt.step():
        dist.all_reduce(t)
        dist.all_reduce(t)
    old, new, left_to_python = _both_ways(lambda _buffer: _poke(recorder.issued - 1, word, shift, width, value))
    assert left_to_python == left
    assert new == old


@pytest.mark.parametrize("how", ["no JSON for its group", "its group past the list"])
def test_a_record_whose_group_the_c_pass_cannot_write_is_left_to_python(group: None, native_stamp: None,
                                                                        sink: Sink, how: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The group list the C pass is given holds None for a group whose attributes it must not write (a key the op
    writes again), and may be shorter than the ring's group indices: those records are Python's, the same bytes."""
    tt.instrument(carriage="none", retain="ring", hang_timeout=0)
    t = torch.ones(8)
    dist.all_reduce(t)
    with tt.step():
        dist.all_reduce(t)
        dist.barrier()
    at = (recorder.issued - 1 & recorder.mask) * RECORD_BYTES + 8
    index = int.from_bytes(recorder.buffer[at:at + 8], "little") >> 16 & 0xFFFFFF
    given = opspans._groups

    def groups(infos: Any, tail_keys: frozenset[str]) -> list[bytes | None]:
        out = given(infos, tail_keys)
        if how == "its group past the list":
            return out[:index]
        out[index] = None
        return out

    monkeypatch.setattr(opspans, "_groups", groups)
    old, new, left = _both_ways()
    assert left == 3  # every op is of that group
    assert new == old


@pytest.mark.parametrize("sink", ["ratio"], indirect=True)
def test_root_ops_under_a_sampler_that_decides_are_left_to_it(group: None, native_stamp: None, sink: Sink) -> None:
    """A ratio sampler must be asked for each root op: the C pass leaves those records, writes the others."""
    tt.instrument(carriage="none", retain="ring", hang_timeout=0)
    t = torch.ones(8)
    dist.all_reduce(t)
    with tt.step():
        dist.all_reduce(t)
    for _ in range(6):
        dist.all_reduce(t)
    old, new, left = _both_ways()
    assert left == 7  # the first op and the six after the step
    assert new == old


def _p2p_op(func: Any, tensor: Any, peer: int, tag: int) -> Any:
    """A P2POp to a peer a group of one lacks (its constructor would refuse it): the fields a batch reads."""
    op = object.__new__(dist.P2POp)
    op.op, op.tensor, op.group, op.peer, op.tag, op.group_peer = func, tensor, dist.group.WORLD, peer, tag, peer
    return op


def _p2p(name: str) -> Any:
    """dist.send / dist.recv wrapped as instrument() wraps them, around a stand-in with torch's signature (a group
    of one cannot send to itself): their records are the real wrapper's."""

    def send(tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0, group_dst: Any = None) -> None:
        return None

    def recv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0, group_src: Any = None) -> int:
        return int(src or 0)

    return make_wrapper(SPECS[SPEC_INDEX[name]], send if name == "send" else recv)


def test_point_to_point_records_are_written_as_make_span_writes_them(group: None, native_stamp: None,
                                                                     sink: Sink) -> None:
    """Sends and receives -- a negative tag, the largest one, no bytes, a receive marked ambiguous, a batch's --
    in a step and as root ops: the same bytes either way, none left to Python."""
    tt.instrument(carriage="none", retain="ring", hang_timeout=0)
    send, recv = _p2p("send"), _p2p("recv")
    t = torch.ones(8)
    first = recorder.issued
    with tt.step():
        send(t, dst=3, tag=-7)
        recv(t, src=2, tag=(1 << 31) - 1)
        recv(torch.empty(0), src=1, tag=0)
    send(t, dst=1)  # a root op
    assert recorder.flag(recorder.issued - 2, AMBIGUOUS)  # the receive of no bytes, as p2p.posted marks it
    batch = traced_batch(lambda ops: [None] * len(ops))  # a batch whose works are done (none to wait for)
    with tt.step():
        batch([_p2p_op(dist.isend, t, 2, 5), _p2p_op(dist.irecv, torch.empty(0), 3, -5)])
    old, new, left = _both_ways()
    assert left == 0 and len(old) == recorder.issued - first == 6
    assert new == old
    assert sum(b'"tempotrace.torch.batched","value":{"boolValue":true}' in b for b in new.values()) == 2
    texts = sorted(new.values())
    assert sum(b'"tempotrace.torch.p2p_ambiguous","value":{"boolValue":true}' in b for b in texts) == 1
    assert sum(b'"tempotrace.torch.tag","value":{"intValue":"-7"}' in b for b in texts) == 1


def test_an_export_mode_job_writes_every_ops_span_to_the_file(group: None, native_stamp: None, sink: Sink) -> None:
    """retain="export" through the batch processor and the file exporter: every op of three steps in the file,
    each span written once, parented to its step, with its stamps."""
    tt.instrument(carriage="none", hang_timeout=0)
    t = torch.ones(8)
    dist.all_reduce(t)
    for _ in range(3):
        with tt.step():
            for _ in range(100):
                dist.all_reduce(t)
    tt.uninstrument()
    assert sink.provider.force_flush()
    spans = [sp for line in Path(sink.path).read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    ops = [sp for sp in spans if sp["name"] == "torch.all_reduce"]
    steps = {sp["spanId"]: sp for sp in spans if sp["name"] == "torch.step"}
    assert len(ops) == 301 and len({sp["spanId"] for sp in ops}) == 301
    assert sum(sp.get("parentSpanId") in steps for sp in ops) == 300
    assert all(any(a["key"] == "tempotrace.stamps" for a in sp["attributes"]) for sp in ops)


def test_spans_after_a_clock_epoch_change_carry_their_epoch_either_way(group: None, native_stamp: None, sink: Sink,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The host clock domain saw a change (clocks.md §9): a record taken before it is of the first epoch (which the
    Resource names), one after of the new, whose epoch attributes each such span carries; the C pass labels them
    as HostDomain.label does."""
    tt.instrument(carriage="none", retain="ring", hang_timeout=0)
    t = torch.ones(8)
    dist.all_reduce(t)
    domain = get_state().domain
    if domain is None:
        pytest.skip("no host clock domain for this clock")
    first, made, _ = domain._epochs[0]
    split = time.monotonic_ns()
    moved = Epoch(first.mid_ns + 300, 500)  # meets what a check measures: no further change seen
    monkeypatch.setattr(domain, "_epochs", [(first, made, split), (moved, split, None)])
    with tt.step():
        dist.all_reduce(t)
        dist.barrier()
    old, new, left = _both_ways()
    assert left == 0
    assert new == old
    epochs = [{a["key"]: a["value"] for a in json.loads(b)["attributes"]}.get(CLOCK_EPOCH_NS) for b in new.values()]
    assert {"intValue": str(moved.mid_ns)} in epochs and None in epochs  # the op before the split names none


def test_a_root_op_made_while_an_unsampled_span_is_current_is_still_sampled(group: None, native_stamp: None,
                                                                            sink: Sink) -> None:
    """A root op's sampling is the one start_span made at the op (no span around it), whatever span is current
    on the thread that makes its span later: both ways export it."""
    tt.instrument(carriage="none", retain="ring", hang_timeout=0)
    t = torch.ones(8)
    dist.all_reduce(t)
    dist.all_reduce(t)  # root ops
    old, new, left = _in(_remote(False), _both_ways)
    assert left == 0
    assert len(old) == 2 and new == old


def test_an_op_that_ends_while_a_release_checks_the_clock_waits_for_the_next(group: None, native_stamp: None,
                                                                             sink: Sink,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock is checked after the scan: an op still open when a release scanned the ring, ending (its reading
    taken) only after that release's check, is the next release's, labelled by the next check. Checked before
    the scan, its reading would lie past that check's window: its span would say the clock may have stepped."""
    tt.instrument(carriage="none", hang_timeout=0)
    domain = get_state().domain
    if domain is None:
        pytest.skip("no host clock domain for this clock")
    t = torch.ones(8)
    dist.all_reduce(t)
    dist.all_reduce(t)
    late = recorder.issued - 1
    slot = late & recorder.mask
    recorder.state[slot] = OPEN  # as though it were still running
    check = domain.label_windows
    calls = []

    def check_then_end() -> Any:
        windows = check()
        if not calls:  # the op ends now: its end reading after this check
            _poke(late, 8, 0, 64, domain._read())
            recorder.state[slot] = ENDED
        calls.append(windows)
        return windows

    monkeypatch.setattr(domain, "label_windows", check_then_end)
    opspans.release(force=True)
    assert recorder.state[slot] == ENDED  # not this release's: it was open when the ring was scanned
    opspans.release(force=True)
    assert len(calls) == 2
    tt.uninstrument()
    assert sink.provider.force_flush()
    spans = {int(sp["spanId"], 16): sp for line in Path(sink.path).read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]}
    span = spans[opspans.span_id_of(late)]
    assert CLOCK_STEPPED not in {a["key"] for a in span["attributes"]}
    assert opspans.span_id_of(late - 1) in spans


def test_a_processor_refusing_the_written_spans_still_gets_those_python_made(group: None, native_stamp: None,
                                                                             sink: Sink,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch processor raises on the spans the C pass wrote: counted (export_failed), never raised, and the
    span Python made in the same release (a start before the last leap second) is still handed on."""
    tt.instrument(carriage="none", hang_timeout=0)
    t = torch.ones(8)
    dist.all_reduce(t)
    dist.all_reduce(t)
    old = recorder.issued - 1
    _poke(old, 5, 0, 64, 1_000_000_000)

    def refuse(items: Any) -> None:
        raise RuntimeError("queue gone")

    monkeypatch.setattr(sink.processor, "on_end_encoded", refuse)
    before = tt.carriage_counts().get("export_failed", 0)
    opspans.release(force=True)
    assert tt.carriage_counts().get("export_failed", 0) == before + 1
    tt.uninstrument()
    assert sink.provider.force_flush()
    ids = {int(sp["spanId"], 16) for line in Path(sink.path).read_text().splitlines()
           for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]}
    assert opspans.span_id_of(old) in ids and opspans.span_id_of(old - 1) not in ids
