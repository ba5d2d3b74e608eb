"""What the OTel layer remembers per received header and per open span: ``RemoteHop`` and ``SpanRecord``.

msgspec Structs (the project's one record strategy): a RemoteHop is frozen
(built once from a validated header), a SpanRecord is not (its sends, its
resolved sketch and its end's bookkeeping change while the span is open).
Neither holds a reference cycle, so neither is tracked by the cyclic garbage
collector (``gc=False``).
"""

from __future__ import annotations

import msgspec
from opentelemetry.trace import SpanContext

from ..wire import Sketch, TTExt

__all__ = ["SKETCH_CHAIN_MAX", "RemoteHop", "Sent", "SpanRecord"]


class RemoteHop(msgspec.Struct, frozen=True, gc=False):
    """A header received at extract, and the Lamport value of that receive.

    Built only by ``hop.receive`` from a header that is already a validated
    ``TTExt``, so it has nothing left to check.
    """

    header: TTExt
    #: The receive event's Lamport value.
    recv_lts: int
    #: The remote parent's span id when the tracecontext propagator ran first
    #: (0 when unknown): a span only takes this hop if its parent is that span.
    parent_span_id: int = 0
    #: True when this header had already been received in this process (a
    #: second extract of one request's headers): the span it parents takes
    #: its sketch but records no receive, so the hop is counted once.
    repeat: bool = False
    #: False when the header's lts was more than LAMPORT_MAX_AHEAD ahead of
    #: this process's counter and was not merged (tt-ext §10.1): the receive
    #: was a plain local tick, the hop carries no Lamport evidence, and the
    #: span it parents writes no ``tempotrace.recv.lts``.
    merged: bool = True

    def applies_to(self, parent: SpanContext | None) -> bool:
        if self.parent_span_id == 0:
            return parent is None or parent.is_remote
        return parent is not None and parent.is_remote and parent.span_id == self.parent_span_id


#: (lts, ptp_ns, uncertainty_ns, clk_quality) of one header a span sent.
Sent = tuple[int, int, int, int]

#: Unresolved sketch links above a record before its parent's sketch is computed at the child's
#: start (see SpanRecord): keeps the chain of records one span can hold alive short.
SKETCH_CHAIN_MAX = 32


class SpanRecord(msgspec.Struct, gc=False):
    """What we remember about an open span: its start reading, the header it came with, its sends,
    and what its sketch is built on.

    The span's sketch (its parent's plus its own id, spec tt-ext §8) is computed when first asked
    for -- by a send, a child's send, or the end of a span that received a header -- not at every
    start: most spans never send, and only receiving spans write theirs. ``base`` is the parent's
    record (an open span of ours), a Sketch (a received header's), or None (empty); ``extra`` a span
    id added before our own (a remote parent, or a local one this process no longer knows).
    Resolving sets ``known`` and then drops ``base``, so a reader that sees ``base`` gone sees
    ``known`` set (attribute writes are atomic; two threads resolving compute the same value).

    ``sends`` and ``finished`` change only under the state's ``_sends_lock``: a send either lands
    in ``sends`` before the end takes them, or sees ``finished`` and is not recorded (the span had
    already ended), never appended to a list the end has already written out. ``written`` is how
    many sends an end stamp written before ``end()`` (our decorators) already holds (-1: none was).
    """

    lts: int
    ptp_ns: int
    uncertainty_ns: int
    clk_quality: int
    ts_source: int
    span_id: int
    base: SpanRecord | Sketch | None = None
    extra: int = 0
    hop: RemoteHop | None = None
    depth: int = 0
    known: Sketch | None = None
    sends: list[Sent] | None = None
    finished: bool = False
    written: int = -1

    @property
    def sketch(self) -> Sketch:
        """The span's sketch (computed on first use, then kept)."""
        known = self.known
        if known is not None:
            return known
        chain: list[SpanRecord] = []
        record = self
        while True:
            base = record.base  # read before known: see the class doc
            found = record.known
            if found is not None:
                sketch = found
                break
            chain.append(record)
            if type(base) is SpanRecord:
                record = base
                continue
            sketch = Sketch.EMPTY if base is None else base  # type: ignore[assignment]
            break
        for record in reversed(chain):
            if record.extra:
                sketch = sketch.with_span(record.extra)
            sketch = sketch.with_span(record.span_id)
            record.known = sketch
            record.base = None
        return sketch
