"""The per-event stamp: clock reading, Lamport tick or merge, sketch -- one call per event.

Every span start, span end, send (inject) and receive (extract) needs the
same few numbers: a clock reading (ptp_ns, uncertainty, source, quality), a
Lamport value, and for a start the span's sketch (its parent's plus its own
id). ``NativeStamp`` computes them in one call into the native module
(native/stamp/tt_stamp.c): the clock through the source's cached mapping
(vDSO ``clock_gettime``, no Python object per reading), the counter ticked or
merged atomically, the span id hashed into a copy of the parent's sketch.
``PureStamp`` computes exactly the same values in Python (TEMPOTRACE_PUREPYTHON=1,
no compiler, or a caller-supplied ``LamportClock``);
tests/otel/test_otel_stamp.py compares the two on random inputs.

Results are plain tuples (with, for a start, the new sketch: nothing else is
allocated per event; the native output structs are reused):
``start`` -> (ptp_ns, uncertainty_ns, ts_source, clk_quality, lts, sketch),
``tick`` -> (ptp_ns, uncertainty_ns, ts_source, clk_quality, lts),
``receive`` -> (lts, merged). ``ts_source``/``clk_quality`` are ints (or the
equal enum members): index them, compare them, never ``is`` them.
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
from ..wire import lamport as _wire_lamport
from ..wire._layout import LTS_MAX, SKETCH_BYTES
from ..wire.sketch import from_wire

__all__ = ["Lamport", "NativeLamport", "NativeStamp", "PureStamp", "Stamp", "new_lamport", "stamp_for"]

_log = logging.getLogger(__name__)

#: The wire counter's bound on merging a remote far ahead (spec §10.1, issue 13 item 5), or None
#: where ``wire.lamport`` has none: the native counter follows whichever rule ``LamportClock`` has,
#: so the two stay identical. A receive's ``merged`` flag says when the bound refused a merge.
WIRE_MAX_AHEAD: int | None = getattr(_wire_lamport, "LAMPORT_MAX_AHEAD", None)
_NO_BOUND = -1  # max_ahead < 0: merge without bound (native/stamp/tt_stamp.h)

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


class Stamp(Protocol):
    """One event's numbers; the two implementations agree value for value."""

    lamport: Any

    def start(self, clock: ClockSource, reading: Timestamp | None, base: Sketch, span_id: int) -> StartResult: ...
    def tick(self, clock: ClockSource) -> TickResult: ...
    def receive(self, remote: int, max_ahead: int | None = None) -> tuple[int, bool]: ...


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

    def receive(self, remote: int, max_ahead: int | None = None) -> tuple[int, bool]:
        # The wire counter applies its own bound (WIRE_MAX_AHEAD), if it has one.
        if max_ahead is not None and max_ahead != WIRE_MAX_AHEAD:
            raise ValueError(f"the pure stamp merges by the wire counter's bound ({WIRE_MAX_AHEAD}), not {max_ahead}")
        receive = getattr(self.lamport, "receive", None)
        if receive is not None:
            return receive(remote)  # type: ignore[no-any-return]
        return self.lamport.merge(remote), True


# -- native ---------------------------------------------------------------------------
#: struct tt_event, native byte order and alignment: ptp_ns, lts, uncertainty_ns,
#: ts_source, clk_quality, merged, saturated, sketch.
_EVENT = struct.Struct("@qqHBBBB32s")
#: Its fields up to the sketch (an end or send reads no sketch).
_TICK = struct.Struct("@qqHBBBB")
#: tt_stamp_event flags (native/stamp/tt_stamp.h) for events around a reading taken in Python.
_START = 2 | 8  # TT_EV_TICK | TT_EV_ADD_SPAN
_TICK_FLAGS = 2 | 16  # TT_EV_TICK | TT_EV_KEEP_SKETCH


class NativeLamport:
    """A Lamport counter in C memory, ticked and merged atomically (no lock to hold or renew at fork).

    The same interface and values as ``wire.LamportClock``: saturates at
    2^63-1 instead of wrapping (``saturated`` turns True, and one warning is
    logged, the first time an event finds it there), refuses a remote value
    outside 0..2^63-1 with ``FieldError`` leaving the counter untouched.
    """

    __slots__ = ("__weakref__", "_cell", "_ffi", "_free", "_lib", "_merge", "_saturated")

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
        self._merge = self._lib.TT_EV_MERGE
        if (self._lib.TT_EV_TICK | self._lib.TT_EV_ADD_SPAN, self._lib.TT_EV_TICK | self._lib.TT_EV_KEEP_SKETCH) != (
            _START,
            _TICK_FLAGS,
        ):
            raise ClockError(errno.ENOEXEC, "native stamp: event flags differ from stamp.py's; rebuild")
        #: Output structs, each (struct tt_event *, its buffer). The call runs
        #: without the GIL, so each event takes one of its own (list.pop and
        #: append are atomic): two threads, or a signal handler that makes a
        #: span between a call and the read of its result, never share one.
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
        lts = self._lib.tt_lamport_tick(self._cell)
        return lts if lts >= 0 else self._saturate()

    def merge(self, remote: int) -> int:
        """A receive of ``remote``: the new lts, by the wire counter's rule (``WIRE_MAX_AHEAD``)."""
        _check_remote(remote)
        lts = self._lib.tt_lamport_merge(self._cell, remote, _NO_BOUND if WIRE_MAX_AHEAD is None else WIRE_MAX_AHEAD)
        return lts if lts >= 0 else self._saturate()

    def receive(self, remote: int, max_ahead: int | None = None) -> tuple[int, bool]:
        """(lts, merged): a receive that leaves out a remote more than ``max_ahead`` ahead of the
        counter (default: the wire counter's ``WIRE_MAX_AHEAD``; none when that is None)."""
        if max_ahead is None:
            max_ahead = WIRE_MAX_AHEAD
        _check_remote(remote)
        free = self._free
        out, buf = free.pop() if free else self._new_out()
        try:
            self._lib.tt_stamp_event(self._ffi.NULL, self._cell, remote, _NO_BOUND if max_ahead is None else max_ahead,
                                     self._ffi.NULL, 0, self._merge, out)  # fmt: skip
            fields = _EVENT.unpack_from(buf)
        finally:
            free.append((out, buf))
        if fields[6]:
            self._saturate()
        return fields[1], fields[5] == 1

    def _saturate(self) -> int:
        if not self._saturated:
            self._saturated = True
            _log.warning("Lamport counter saturated at 2^63-1; later events share this value")
        return LTS_MAX

    def __repr__(self) -> str:
        return f"NativeLamport(value={self.value})"


class NativeStamp:
    """The events in one native call each, over a ``NativeLamport``.

    A clock with a ``raw_mapping`` (the CPU clock: a tuple it replaces whole
    when it refreshes) is read in C through that mapping; any other source is
    read with its own ``now()`` and the rest of the event still happens in C,
    as does an event whose mapping has gone stale (after that source's
    ``now()`` has refreshed it). Output structs come from the counter's free
    list (see ``NativeLamport``); an exception between taking one and giving
    it back only costs the list that entry.
    """

    __slots__ = ("_cell", "_ffi", "_free", "_given_event", "_last", "_lib", "_start_fn", "_tick_fn", "lamport")

    def __init__(self, lamport: NativeLamport) -> None:
        self.lamport = lamport
        self._ffi, self._cell, self._free, self._lib = lamport._ffi, lamport._cell, lamport._free, lamport._lib
        self._start_fn = self._lib.tt_stamp_start
        self._tick_fn = self._lib.tt_stamp_tick
        self._given_event = self._lib.tt_stamp_event
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

    def _given(self, ts: Timestamp, sketch: Any, span_id: int, flags: int) -> Any:
        """The event around a reading taken in Python, as the fields of a mapped one."""
        free = self._free
        out, buf = free.pop() if free else self.lamport._new_out()
        self._given_event(self._ffi.NULL, self._cell, 0, -1, sketch, span_id, flags, out)
        fields = _EVENT.unpack_from(buf)
        free.append((out, buf))
        if fields[6]:
            self.lamport._saturate()
        return (ts.ptp_ns, fields[1], ts.uncertainty_ns, ts.ts_source, ts.clk_quality, *fields[5:])

    def start(self, clock: ClockSource, reading: Timestamp | None, base: Sketch, span_id: int) -> StartResult:
        raw = base.to_bytes()
        mapping = getattr(clock, "raw_mapping", None) if reading is None else None
        if mapping is not None:
            last = self._last
            cmap = last[1] if last[0] is mapping else self._clock_map(mapping)
            free = self._free
            out, buf = free.pop() if free else self.lamport._new_out()
            rc = self._start_fn(cmap, self._cell, raw, span_id, out)
            if rc == 0:
                ptp_ns, lts, uncertainty_ns, source, quality, _, saturated, sketch = _EVENT.unpack_from(buf)
                free.append((out, buf))
                if saturated:
                    self.lamport._saturate()
                return ptp_ns, uncertainty_ns, source, quality, lts, from_wire(sketch)
            free.append((out, buf))
            self._refused(rc, clock)
        f = self._given(reading if reading is not None else clock.now(), raw, span_id, _START)
        return f[0], f[2], f[3], f[4], f[1], from_wire(f[7])

    def tick(self, clock: ClockSource) -> TickResult:
        mapping = getattr(clock, "raw_mapping", None)
        if mapping is not None:
            last = self._last
            cmap = last[1] if last[0] is mapping else self._clock_map(mapping)
            free = self._free
            out, buf = free.pop() if free else self.lamport._new_out()
            rc = self._tick_fn(cmap, self._cell, out)
            if rc == 0:
                ptp_ns, lts, uncertainty_ns, source, quality, _, saturated = _TICK.unpack_from(buf)
                free.append((out, buf))
                if saturated:
                    self.lamport._saturate()
                return ptp_ns, uncertainty_ns, source, quality, lts
            free.append((out, buf))
            self._refused(rc, clock)
        f = self._given(clock.now(), self._ffi.NULL, 0, _TICK_FLAGS)
        return f[0], f[2], f[3], f[4], f[1]

    def receive(self, remote: int, max_ahead: int | None = None) -> tuple[int, bool]:
        return self.lamport.receive(remote, max_ahead)


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
