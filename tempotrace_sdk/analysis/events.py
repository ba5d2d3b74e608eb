"""The values the analysis works on: stamps, events and span records (spec/analysis.md §1).

msgspec frozen Structs (the project's one immutable-record strategy), no
OpenTelemetry import: the reader builds them from OTLP JSON lines
(values.py holds the rules), ``records_from_readable`` from in-memory SDK
spans, the simulator from arrays. None of them holds a reference cycle, so
they are not tracked by the cyclic garbage collector (``gc=False``).
"""

from __future__ import annotations

import msgspec

from ..wire.layout import UNCERTAINTY_SATURATED
from .clockdomain import Domain

__all__ = [
    "KIND_END", "KIND_SEND", "KIND_START", "QUALITIES", "DumpInfo", "Event", "JobKey", "SpanRecord", "Stamp",
    "TorchOp", "clock_id", "split_clock",
]

KIND_START = "start"
KIND_END = "end"
KIND_SEND = "send"

#: Quality strings as the span processor writes them (semconv CLK_QUALITY).
QUALITIES = ("OK", "DEGRADED", "UNKNOWN")

#: A job as its spans name it: (job id, restart count); one object per distinct key (values.py).
JobKey = tuple[str, int]

#: Sends of a client span: (lts, ptp_ns, uncertainty_ns) of each header it injected, in send order.
Sends = tuple[tuple[int, "int | None", "int | None"], ...]


class Stamp(msgspec.Struct, frozen=True, gc=False):
    """One clock reading with its claimed bound and Lamport value.

    ``ptp_ns`` is None when the span carried no TempoTrace stamp for this
    event; ``lts`` is None when no Lamport value was recorded. ``degraded``
    is True when the span's policy verdict is ``degrade`` (spec/policy.md §4):
    the reading is kept for display but physics never orders it. Whether physics
    may use a stamp is ``order.stamp_usable``; two readings of one host clock domain are compared by
    their difference (``domain``, order.physics_gap).
    """

    ptp_ns: int | None
    uncertainty_ns: int = UNCERTAINTY_SATURATED
    quality: str = "UNKNOWN"
    lts: int | None = None
    degraded: bool = False
    #: The host clock domain the reading was taken in (clockdomain.py), None when the span names none.
    domain: Domain | None = None


NO_STAMP = Stamp(None)


class Event(msgspec.Struct, frozen=True, gc=False):
    """One event to order: a span's start or end, or a hop's send.

    ``span_id`` is the span the event belongs to (the client span for a send);
    ``host`` the host whose clock stamped it (the topology's key, §3);
    ``sketch`` is the SVC sketch (as an int) known to hold the causal past of
    this event, or None; ``raw_ns`` is the span's OpenTelemetry time for the
    event (UTC), None for a send (a header carries only its TAI reading): the
    naive view (§6.1) compares it when a side has no TempoTrace reading.
    """

    kind: str
    span_id: str
    host: str
    stamp: Stamp
    sketch: int | None = None
    raw_ns: int | None = None


def clock_id(host: str, rank: int | None) -> str:
    """The key of one clock in the report's per-clock rows: the host, and the rank where spans carry one
    (eight ranks on one node may each read a different clock; §4). Host names never hold NUL (values.py)."""
    return host if rank is None else f"{host}\x00{rank}"


def split_clock(key: str) -> tuple[str, int | None]:
    """(host, rank) of a ``clock_id`` key."""
    host, sep, rank = key.rpartition("\x00")
    return (host, int(rank)) if sep else (key, None)


class TorchOp(msgspec.Struct, frozen=True, gc=False):
    """What a torch.distributed op span says about its op (spec/semantic-conventions.md §9.2, §9.4).

    A collective has ``seq`` (and ``root`` for a rooted op); a point-to-point op has ``src``, ``dst``,
    ``tag`` and ``p2p_seq`` (``src`` and ``p2p_seq`` are None on an any-source receive that never
    learned its sender). ``recv_lts`` is the Lamport value of a recorded merge of carried records (None:
    nothing merged, so the span's Lamport values say nothing about other ranks), ``recv_missing`` the
    ranks whose record was not merged, ``recv_sketch`` the union of the merged records' sketches;
    ``remote`` and ``remote_span`` the sender's record on a point-to-point receive; ``ambiguous`` a receive
    torch may have paired otherwise than its ``p2p_seq`` says (spec/torch.md §2: never paired by it)."""

    op: str
    group: str | None = None
    group_rank: int | None = None
    seq: int | None = None
    root: int | None = None
    completion: str | None = None
    src: int | None = None
    dst: int | None = None
    tag: int = 0
    p2p_seq: int | None = None
    recv_lts: int | None = None
    recv_missing: tuple[int, ...] = ()
    recv_sketch: int | None = None
    remote: Stamp | None = None
    remote_span: str | None = None
    ambiguous: bool = False


class DumpInfo(msgspec.Struct, frozen=True, gc=False):
    """What a flight-recorder dump record says (a ``torch.dump`` span, one per rank per dump; spec/torch.md
    §7.3): why the dump was taken, the op spans it wrote and how many of them were ``pending``, the ops the
    rank's ring overwrote without exporting them since the process started, and for a dump another rank's
    hang dump asked for (reason "peer"), that rank."""

    reason: str
    ops: int = 0
    pending: int = 0
    overwritten: int = 0
    requested_by: int | None = None


class SpanRecord(msgspec.Struct, gc=False):
    """What the analysis keeps of one exported span (hex ids, ints, strings).

    ``clock`` is the per-clock key (``clock_id(host, rank)``); ``clock_source``
    the ``tempotrace.clock`` attribute (the clock source's name); ``pos`` the
    span's position in the input (spec/analysis.md §5: windows count positions),
    -1 when the analyzer numbers spans itself; ``line`` the input line."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    host: str
    start: Stamp
    end: Stamp | None
    otel_start_ns: int
    otel_end_ns: int
    sketch: int | None = None
    rank: int | None = None
    clock_source: str = ""
    profile: str = ""
    sends: Sends = ()
    #: the header the span's remote parent came with (extract side of a hop)
    remote: Stamp | None = None
    remote_sketch: int | None = None
    recv_lts: int | None = None
    line: int = 0
    pos: int = -1
    #: the span's policy verdict was ``degrade`` (its stamps carry it too)
    degraded: bool = False
    clock: str = ""
    #: the torch.distributed op this span traced (spans of ``tempotrace_sdk.torch``), else None
    torch: TorchOp | None = None
    #: ``tempotrace.torch.step``: the training step of a step span (spec/torch.md §4), else None
    step: int | None = None
    #: ``tempotrace.torch.step_occurrence``: the step number's earlier uses in its process (0: its first use)
    step_occurrence: int = 0
    #: (``tempotrace.job_id``, ``tempotrace.restart``) of the span or its Resource, None when neither names a job
    job: JobKey | None = None
    #: the exception (or status message) of a span whose status is ERROR, else None
    error: str | None = None
    #: a flight-recorder dump record's facts (``tempotrace.torch.dump.*``), else None
    dump: DumpInfo | None = None

    def __post_init__(self) -> None:
        if not self.clock:
            self.clock = clock_id(self.host, self.rank)

    def start_event(self) -> Event:
        return Event(KIND_START, self.span_id, self.host, self.start, self.sketch, self.otel_start_ns)

    def end_event(self) -> Event:
        return Event(KIND_END, self.span_id, self.host, self.end or NO_STAMP, self.sketch, self.otel_end_ns)
