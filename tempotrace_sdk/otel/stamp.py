"""The per-event stamp: clock reading, Lamport tick, sketch.

Every span start, span end and send (inject) needs the same few numbers: a
clock reading (ptp_ns, uncertainty, source, quality), a Lamport tick, and
for a start the span's sketch (its parent's plus its own id).
``NativeStamp`` computes them in the native module (native/stamp/tt_stamp.c;
one call for a start, two plain-int calls for an end or send): the clock
through the source's cached mapping (vDSO ``clock_gettime``, no Python
object per reading), the counter ticked atomically, the span id hashed into
a copy of the parent's sketch.
``PureStamp`` computes exactly the same values in Python (TEMPOTRACE_PUREPYTHON=1,
no compiler, or a caller-supplied ``LamportClock``);
tests/otel/test_otel_stamp.py compares the two on random inputs.

A receive (extract) reads no clock: it is the counter's own
``receive(remote) -> (lts, merged)``, the bounded merge of tt-ext §10.1, on
either counter (``NativeLamport``: one native call; ``wire.LamportClock``).

Results are plain tuples (with, for a start, the new sketch: nothing else is
allocated per event; the native output structs are reused):
``start`` -> (ptp_ns, uncertainty_ns, ts_source, clk_quality, lts, sketch),
``tick`` -> (ptp_ns, uncertainty_ns, ts_source, clk_quality, lts).
``ts_source``/``clk_quality`` are ints (or the equal enum members): index
them, compare them, never ``is`` them.
"""

from __future__ import annotations

import errno
import logging
import struct
from typing import Any, Protocol

from ..clocks._native import native
from ..clocks.base import ClockSource, Timestamp
from ..errors import ClockError, FieldError
from ..wire import LamportClock, Sketch
from ..wire._layout import LTS_MAX, SKETCH_BYTES
from ..wire.lamport import LAMPORT_MAX_AHEAD
from ..wire.sketch import from_wire

__all__ = ["Lamport", "NativeLamport", "NativeStamp", "PureStamp", "Stamp", "new_lamport", "stamp_for"]

_log = logging.getLogger(__name__)

StartResult = tuple[int, int, int, int, int, Sketch]
TickResult = tuple[int, int, int, int, int]


class Lamport(Protocol):
    """What the OTel layer needs of a Lamport counter (``wire.LamportClock`` or ``NativeLamport``)."""

    @property
    def value(self) -> int: ...
    @property
    def saturated(self) -> bool: ...
    def tick(self) -> int: ...
    def merge(self, remote: int) -> int: ...
    def receive(self, remote: int) -> tuple[int, bool]: ...


class Stamp(Protocol):
    """One event's numbers; the two implementations agree value for value."""

    lamport: Any

    def start(self, clock: ClockSource, reading: Timestamp | None, base: Sketch, span_id: int) -> StartResult: ...
    def tick(self, clock: ClockSource) -> TickResult: ...


def _check_remote(remote: object) -> None:
    if not (type(remote) is int and 0 <= remote <= LTS_MAX) and (
        not isinstance(remote, int) or isinstance(remote, bool) or not 0 <= remote <= LTS_MAX
    ):
        raise FieldError("lts", "remote value must be 0..2^63-1", error_class="LTS_RANGE", remote=True)


# -- pure Python --------------------------------------------------------------------
class PureStamp:
    """The events in Python over a ``wire.LamportClock``."""

    __slots__ = ("lamport",)

    def __init__(self, lamport: LamportClock) -> None:
        self.lamport = lamport

    def start(self, clock: ClockSource, reading: Timestamp | None, base: Sketch, span_id: int) -> StartResult:
        ts = reading if reading is not None else clock.now()
        return (
            ts.ptp_ns,
            ts.uncertainty_ns,
            ts.ts_source,
            ts.clk_quality,
            self.lamport.tick(),
            base.with_span(span_id),
        )

    def tick(self, clock: ClockSource) -> TickResult:
        ts = clock.now()
        return ts.ptp_ns, ts.uncertainty_ns, ts.ts_source, ts.clk_quality, self.lamport.tick()


# -- native ---------------------------------------------------------------------------
#: struct tt_event (native/stamp/tt_stamp.h), native byte order and alignment:
#: ptp_ns, lts, saturated, sketch.
_EVENT = struct.Struct("@qqB32s")


class NativeLamport:
    """A Lamport counter in C memory, ticked and merged atomically (no lock to hold or renew at fork).

    The same interface and values as ``wire.LamportClock``: saturates at
    2^63-1 instead of wrapping (``saturated`` turns True, and one warning is
    logged, the first time an event finds it there), refuses a remote value
    outside 0..2^63-1 with ``FieldError`` leaving the counter untouched, and
    does not merge a remote more than ``LAMPORT_MAX_AHEAD`` ahead (spec §10.1).
    """

    __slots__ = ("__weakref__", "_cell", "_ffi", "_free", "_lib", "_receive", "_saturated", "_tick")

    def __init__(self, start: int = 0) -> None:
        loaded = native()
        if loaded is None:
            raise ClockError(errno.ENOSYS, "NativeLamport needs the native module (see clocks.native_status())")
        if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= LTS_MAX:
            raise FieldError("lts", "must be an integer 0..2^63-1", error_class="LTS_RANGE")
        self._lib, self._ffi = loaded
        # The unpack format and the compiler's layout must agree field for field.
        if self._ffi.offsetof("struct tt_event", "sketch") != _EVENT.size - SKETCH_BYTES:
            raise ClockError(errno.ENOEXEC, "native stamp: struct tt_event layout differs from _EVENT; rebuild")
        self._cell = self._ffi.new("int64_t *", start)
        self._saturated = False
        self._tick = self._lib.tt_lamport_tick
        self._receive = self._lib.tt_lamport_receive
        #: Output structs for span starts, each (struct tt_event *, its
        #: buffer). The call runs without the GIL, so each start takes one of
        #: its own (list.pop and append are atomic): two threads, or a signal
        #: handler that makes a span between a call and the read of its
        #: result, never share one.
        self._free: list[tuple[Any, Any]] = []

    def _new_out(self) -> tuple[Any, Any]:
        out = self._ffi.new("struct tt_event *")
        return out, self._ffi.buffer(out)

    @property
    def value(self) -> int:
        return int(self._cell[0])

    @property
    def saturated(self) -> bool:
        return self._saturated

    def tick(self) -> int:
        lts = self._tick(self._cell)
        return lts if lts >= 0 else self._saturate()

    def merge(self, remote: int) -> int:
        """A receive of ``remote``: the new lts (``receive`` without the ``merged`` flag)."""
        return self.receive(remote)[0]

    def receive(self, remote: int, max_ahead: int = LAMPORT_MAX_AHEAD) -> tuple[int, bool]:
        """(lts, merged) of a receive of ``remote``, exactly as ``wire.LamportClock.receive``: a
        remote more than ``max_ahead`` ahead of the counter is not merged (a plain local tick).
        A ``max_ahead`` other than the wire's ``LAMPORT_MAX_AHEAD`` is for tests (< 0: no bound)."""
        if not (type(remote) is int and 0 <= remote <= LTS_MAX):
            _check_remote(remote)
        result = self._receive(self._cell, remote, max_ahead)
        if result > 0:
            return result, True
        if result == -1:
            return self._saturate(), True
        return ~result, False  # not merged: tt_lamport_receive returns the value bit-inverted

    def _saturate(self) -> int:
        if not self._saturated:
            self._saturated = True
            _log.warning("Lamport counter saturated at 2^63-1; later events share this value")
        return LTS_MAX

    def __repr__(self) -> str:
        return f"NativeLamport(value={self.value})"


class NativeStamp:
    """The events in native calls, over a ``NativeLamport``.

    A clock with a ``raw_mapping`` (the CPU clock: a tuple it replaces whole
    when it refreshes) is read in C through that mapping; the reading's
    source, quality and bound are the mapping's own. Any other source is read
    with its own ``now()``, and the rest of the event still happens in C, as
    does an event whose mapping has gone stale (after that source's ``now()``
    has refreshed it). A start is one call filling an output struct from the
    counter's free list (see ``NativeLamport``; an exception between taking
    one and giving it back only costs the list that entry); a tick is two
    calls returning plain ints, which is cheaper than one call whose struct
    Python must then unpack.
    """

    __slots__ = ("_cell", "_ffi", "_free", "_last", "_mapped", "_start_fn", "_tick", "lamport")

    def __init__(self, lamport: NativeLamport) -> None:
        self.lamport = lamport
        self._ffi, self._cell, self._free = lamport._ffi, lamport._cell, lamport._free
        self._start_fn = lamport._lib.tt_stamp_start
        self._mapped = lamport._lib.tt_clock_mapped_ns
        self._tick = lamport._lib.tt_lamport_tick
        #: (the mapping tuple last seen, its struct tt_clock_map): rebuilt when the source refreshes.
        self._last: tuple[object, Any] = (None, None)

    def _clock_map(self, mapping: tuple[int, int, int, int, int, int, int]) -> Any:
        clock_id, valid_from, valid_until, offset, quality, uncertainty, source = mapping
        cmap = self._ffi.new("struct tt_clock_map *")
        cmap.clock_id, cmap.offset_ns = clock_id, offset
        cmap.valid_from_ns, cmap.valid_until_ns = valid_from, valid_until
        cmap.uncertainty_ns, cmap.ts_source, cmap.clk_quality = uncertainty, source, quality
        self._last = (mapping, cmap)  # one store: a reader sees the old pair or the new one
        return cmap

    def _refused(self, rc: int, clock: Any) -> None:
        if rc != -errno.EAGAIN:  # a stale mapping falls through to the source's own now()
            raise ClockError(-rc, f"native stamp: reading clock {getattr(clock, 'name', '?')!r}")

    def start(self, clock: ClockSource, reading: Timestamp | None, base: Sketch, span_id: int) -> StartResult:
        raw = base.to_bytes()
        mapping = getattr(clock, "raw_mapping", None) if reading is None else None
        free = self._free
        out, buf = free.pop() if free else self.lamport._new_out()
        try:
            if mapping is not None:
                last = self._last
                cmap = last[1] if last[0] is mapping else self._clock_map(mapping)
                rc = self._start_fn(cmap, self._cell, raw, span_id, out)
                if rc == 0:
                    ptp_ns, lts, saturated, sketch = _EVENT.unpack_from(buf)
                    if saturated:
                        self.lamport._saturate()
                    return ptp_ns, mapping[5], mapping[6], mapping[4], lts, from_wire(sketch)
                self._refused(rc, clock)
            ts = reading if reading is not None else clock.now()
            self._start_fn(self._ffi.NULL, self._cell, raw, span_id, out)  # cannot fail: both pointers are set
            _, lts, saturated, sketch = _EVENT.unpack_from(buf)
        finally:
            free.append((out, buf))
        if saturated:
            self.lamport._saturate()
        return ts.ptp_ns, ts.uncertainty_ns, ts.ts_source, ts.clk_quality, lts, from_wire(sketch)

    def tick(self, clock: ClockSource) -> TickResult:
        mapping = getattr(clock, "raw_mapping", None)
        if mapping is not None:
            last = self._last
            ptp_ns = self._mapped(last[1] if last[0] is mapping else self._clock_map(mapping))
            if ptp_ns >= 0:
                lts = self._tick(self._cell)
                return ptp_ns, mapping[5], mapping[6], mapping[4], lts if lts >= 0 else self.lamport._saturate()
            self._refused(ptp_ns, clock)
        ts = clock.now()
        lts = self._tick(self._cell)
        return ts.ptp_ns, ts.uncertainty_ns, ts.ts_source, ts.clk_quality, lts if lts >= 0 else self.lamport._saturate()


def new_lamport(*, native_stamp: bool | None = None) -> Lamport:
    """The process's counter: native when the module is loaded (and not refused), else ``LamportClock``."""
    if native_stamp is not False and native() is not None:
        return NativeLamport()
    if native_stamp:
        raise ClockError(errno.ENOSYS, "the native stamp was asked for but the native module is not loaded")
    return LamportClock()


def stamp_for(lamport: Any) -> PureStamp | NativeStamp:
    """The stamp over ``lamport``: native for a ``NativeLamport``, Python for anything else."""
    return NativeStamp(lamport) if isinstance(lamport, NativeLamport) else PureStamp(lamport)
