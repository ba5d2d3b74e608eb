"""The per-event stamp: clock reading and Lamport tick.

Every span start, span end and send (inject) needs the same few numbers: a
clock reading (ptp_ns, uncertainty, source, quality) and a Lamport tick.
``NativeStamp`` computes them in the native module (native/stamp/tt_stamp.c;
two plain-int calls): the clock through the source's cached mapping (vDSO
``clock_gettime``, no Python object per reading), the counter ticked
atomically. ``PureStamp`` computes exactly the same values in Python
(TEMPOTRACE_PUREPYTHON=1, no compiler, or a caller-supplied ``LamportClock``);
tests/otel/test_otel_stamp.py compares the two on random inputs.

A span's sketch (its parent's plus its own id) is not part of the event: it
is computed when first needed -- a send, or the end of a span that received
a header (otel/context.py ``SpanRecord``) -- since most spans never send and
only those write theirs.

A receive (extract) reads no clock: it is the counter's own
``receive(remote) -> (lts, merged)``, the bounded merge of tt-ext §10.1, on
either counter (``NativeLamport``: one native call; ``wire.LamportClock``).

``tick`` returns a plain tuple (ptp_ns, uncertainty_ns, ts_source,
clk_quality, lts); ``ts_source``/``clk_quality`` are ints (or the equal enum
members): index them, compare them, never ``is`` them.
"""

from __future__ import annotations

import errno
import logging
from typing import Any, Protocol

from ..clocks._native import native
from ..clocks.base import ClockSource
from ..errors import ClockError, FieldError
from ..wire import LamportClock
from ..wire.lamport import LAMPORT_MAX_AHEAD
from ..wire.layout import LTS_MAX

__all__ = ["Lamport", "NativeLamport", "NativeStamp", "PureStamp", "Stamp", "new_lamport", "stamp_for"]

_log = logging.getLogger(__name__)

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

    def tick(self, clock: ClockSource) -> TickResult:
        ts = clock.now()
        return ts.ptp_ns, ts.uncertainty_ns, ts.ts_source, ts.clk_quality, self.lamport.tick()


# -- native ---------------------------------------------------------------------------

class NativeLamport:
    """A Lamport counter in C memory, ticked and merged atomically (no lock to hold or renew at fork).

    The same interface and values as ``wire.LamportClock``: saturates at
    2^63-1 instead of wrapping (``saturated`` turns True, and one warning is
    logged, the first time an event finds it there), refuses a remote value
    outside 0..2^63-1 with ``FieldError`` leaving the counter untouched, and
    does not merge a remote more than ``LAMPORT_MAX_AHEAD`` ahead (spec §10.1).
    """

    __slots__ = ("__weakref__", "_cell", "_ffi", "_lib", "_receive", "_saturated", "_tick")

    def __init__(self, start: int = 0) -> None:
        loaded = native()
        if loaded is None:
            raise ClockError(errno.ENOSYS, "NativeLamport needs the native module (see clocks.native_status())")
        if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= LTS_MAX:
            raise FieldError("lts", "must be an integer 0..2^63-1", error_class="LTS_RANGE")
        self._lib, self._ffi = loaded
        self._cell = self._ffi.new("int64_t *", start)
        self._saturated = False
        self._tick = self._lib.tt_lamport_tick
        self._receive = self._lib.tt_lamport_receive

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
    with its own ``now()``, and the tick still happens in C, as it does for
    an event whose mapping has gone stale (after that source's ``now()`` has
    refreshed it). An event is two calls returning plain ints, which is
    cheaper than one call whose output struct Python must then unpack.
    """

    __slots__ = ("_buffer", "_cell", "_ffi", "_last", "_mapped", "_op_end", "_op_start", "_tick", "lamport")

    def __init__(self, lamport: NativeLamport) -> None:
        self.lamport = lamport
        self._ffi, self._cell = lamport._ffi, lamport._cell
        self._mapped = lamport._lib.tt_clock_mapped_ns
        self._tick = lamport._lib.tt_lamport_tick
        self._op_start = lamport._lib.tt_oprec_start
        self._op_end = lamport._lib.tt_oprec_end
        #: (the mapping tuple last seen, its struct tt_clock_map): rebuilt when the source refreshes.
        self._last: tuple[object, Any] = (None, None)
        #: (the op recorder's ring buffer last seen, a cdata over it): rebuilt when the ring is replaced.
        self._buffer: tuple[object, Any] = (None, None)

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

    def _cmap(self, clock: ClockSource) -> Any:
        """The struct tt_clock_map of ``clock``'s current mapping; None for a source without one."""
        mapping = getattr(clock, "raw_mapping", None)
        return None if mapping is None else self._struct_of(mapping)

    def _struct_of(self, mapping: tuple[int, int, int, int, int, int, int]) -> Any:
        """``mapping``'s struct tt_clock_map: the one last made while the source has not refreshed."""
        last = self._last
        return last[1] if last[0] is mapping else self._clock_map(mapping)

    def op_target(self, mapping: tuple[int, int, int, int, int, int, int] | None) -> tuple[int, int, object]:
        """For the C call of a traced op (native/opcall/tt_opcall.c): the addresses of ``mapping``'s struct
        tt_clock_map (0: no mapping, the reading is taken the Python way) and of the Lamport counter, and what
        keeps both alive while the C side holds them."""
        cast = self._ffi.cast
        if mapping is None:
            return 0, int(cast("uintptr_t", self._cell)), (self._cell,)
        cmap = self._struct_of(mapping)
        return int(cast("uintptr_t", cmap)), int(cast("uintptr_t", self._cell)), (cmap, self._cell, mapping)

    def forget_buffer(self) -> None:
        """Let go of the ring buffer last written (the recorder replaced it: its memory is freed now)."""
        self._buffer = (None, None)

    def _at(self, buffer: bytearray, offset: int) -> Any:
        held = self._buffer
        if held[0] is not buffer:
            held = self._buffer = (buffer, self._ffi.from_buffer("char[]", buffer))
        return held[1] + offset

    def op_start(self, clock: ClockSource, buffer: bytearray, offset: int, number: int, facts: int, seq: int,
                 nbytes: int, root: int) -> bool:
        """An op record's start (torch/recorder.py) written at ``offset`` of ``buffer`` in one native call: the
        reading, its tick, the words. False when nothing was written: a source without a mapping, or one the
        native read refused (stale, failed): the caller then takes the reading the Python way (``tick``)."""
        cmap = self._cmap(clock)
        if cmap is None or not 0 <= offset <= len(buffer) - 64:  # C writes 64 octets: never past the buffer
            return False
        rc = self._op_start(cmap, self._cell, self._at(buffer, offset), number, facts, seq, nbytes, root)
        if rc == 1:
            self.lamport._saturate()
        return bool(rc >= 0)

    def op_end(self, clock: ClockSource, buffer: bytearray, offset: int, completion: int) -> bool:
        """``op_start`` for the record's end words (the 32 octets at ``offset``)."""
        cmap = self._cmap(clock)
        if cmap is None or not 0 <= offset <= len(buffer) - 32:
            return False
        rc = self._op_end(cmap, self._cell, self._at(buffer, offset), completion)
        if rc == 1:
            self.lamport._saturate()
        return bool(rc >= 0)

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
