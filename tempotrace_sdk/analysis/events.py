"""The values the analysis works on: stamps, events and span records (spec/analysis.md §1).

Plain slotted classes, no OpenTelemetry import: the reader builds them from
OTLP JSON lines, ``from_readable`` builds them from in-memory SDK spans, and
the simulator builds them from arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..wire._layout import UNCERTAINTY_SATURATED

__all__ = ["KIND_END", "KIND_SEND", "KIND_START", "Event", "SpanRecord", "Stamp"]

KIND_START = "start"
KIND_END = "end"
KIND_SEND = "send"

#: Quality strings as the span processor writes them (semconv CLK_QUALITY).
QUALITIES = ("OK", "DEGRADED", "UNKNOWN")


@dataclass(frozen=True, slots=True)
class Stamp:
    """One clock reading with its claimed bound and Lamport value.

    ``ptp_ns`` is None when the span carried no TempoTrace stamp for this
    event; ``lts`` is None when no Lamport value was recorded.
    """

    ptp_ns: int | None
    uncertainty_ns: int = UNCERTAINTY_SATURATED
    quality: str = "UNKNOWN"
    lts: int | None = None

    @property
    def usable(self) -> bool:
        """True when physics may use this stamp (§2.1): a reading, quality not
        UNKNOWN, and a bound that is not saturated (65535 is only a lower bound)."""
        return self.ptp_ns is not None and self.quality != "UNKNOWN" and self.uncertainty_ns < UNCERTAINTY_SATURATED

    def interval(self) -> tuple[int, int] | None:
        """[ptp − u, ptp + u], or None when the stamp is not usable."""
        if not self.usable:
            return None
        assert self.ptp_ns is not None
        return self.ptp_ns - self.uncertainty_ns, self.ptp_ns + self.uncertainty_ns


def _stamp_maker() -> Callable[[int | None, int, str, int | None], Stamp]:
    """A Stamp built without the frozen dataclass __init__ (which pays an object.__setattr__ call per
    field: half the cost of a stamp, and the reader makes three per span). Stamp has no __post_init__
    and no validation, so the result is the same object __init__ would build; a test checks the fields."""
    new = object.__new__
    put_ptp, put_u, put_q, put_lts = (Stamp.__dict__[f].__set__ for f in STAMP_FIELDS)

    def make(ptp_ns: int | None, uncertainty_ns: int, quality: str, lts: int | None) -> Stamp:
        s: Stamp = new(Stamp)
        put_ptp(s, ptp_ns)
        put_u(s, uncertainty_ns)
        put_q(s, quality)
        put_lts(s, lts)
        return s

    return make


#: Stamp's fields in order (make_stamp sets exactly these).
STAMP_FIELDS = ("ptp_ns", "uncertainty_ns", "quality", "lts")
#: make_stamp(ptp_ns, uncertainty_ns, quality, lts) == Stamp(ptp_ns, uncertainty_ns, quality, lts), faster.
make_stamp = _stamp_maker()


@dataclass(frozen=True, slots=True)
class Event:
    """One event to order: a span's start or end, or a hop's send.

    ``span_id`` is the span the event belongs to (the client span for a send);
    ``sketch`` is the SVC sketch (as an int) known to hold the causal past of
    this event, or None; ``raw_ns`` is what a tracer that trusts timestamps
    would sort by (§4).
    """

    kind: str
    span_id: str
    host: str
    stamp: Stamp
    sketch: int | None = None
    raw_ns: int | None = None


@dataclass(slots=True)
class SpanRecord:
    """What the analysis keeps of one exported span (hex ids, ints, strings)."""

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
    clock: str = ""
    profile: str = ""
    #: (lts, ptp_ns, uncertainty_ns) of each header this span injected
    sends: tuple[tuple[int, int | None, int | None], ...] = ()
    #: the header the span's remote parent came with (extract side of a hop)
    remote: Stamp | None = None
    remote_sketch: int | None = None
    recv_lts: int | None = None
    line: int = 0

    def start_event(self) -> Event:
        raw = self.start.ptp_ns if self.start.ptp_ns is not None else self.otel_start_ns
        return Event(KIND_START, self.span_id, self.host, self.start, self.sketch, raw)

    def end_event(self) -> Event:
        if self.end is None:
            # No TempoTrace end stamp: the event exists but has no bound (§1).
            return Event(KIND_END, self.span_id, self.host, Stamp(None), self.sketch, self.otel_end_ns)
        raw = self.end.ptp_ns if self.end.ptp_ns is not None else self.otel_end_ns
        return Event(KIND_END, self.span_id, self.host, self.end, self.sketch, raw)
