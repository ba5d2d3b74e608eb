"""The C reference decoder of the ``tempotrace.stamps`` text (native/stamp ``tt_stamps_read``; spec/clocks.md
§2.1), bound once per thread: for the span table's writer (parquet_stamps.py) and the analysis's span reader
(values.py), which read a text exactly as stamptext.decode does (tests/analysis/test_parquet_stamps.py).
"""

from __future__ import annotations

import threading

from ..clocks._native import native

__all__ = ["ABSENT_QUALITY", "ABSENT_UNCERTAINTY", "OUT_OF_RANGE", "NativeStamps", "thread_reader"]

ABSENT_UNCERTAINTY, ABSENT_QUALITY = 65535, 2
#: what the C decoder is handed for a plain attribute present but out of its range: refused as Python refuses
OUT_OF_RANGE = 0xFFFFFFFF
_SENDS_ROOM = 64

Slots = tuple[list[int], bytes | None, tuple[int, ...]]


class NativeStamps:
    """One set of C buffers and the call that fills them (not thread-safe: one per thread, ``thread_reader``)."""

    def __init__(self) -> None:
        bound = native()
        self.native = bound is not None
        if bound is not None:
            self._lib, self._ffi = bound
            self._slots = int(self._lib.TT_STAMPS_SLOTS)
            self._out = self._ffi.new("int64_t[]", self._slots)
            self._sketch = self._ffi.new("uint8_t[]", 32)
            self._room = _SENDS_ROOM
            self._sends = self._ffi.new("int64_t[]", 4 * self._room)

    def slots(self, text: str, start: int, end: int, uncertainty: int | None, quality: int | None) -> Slots | None:
        """``text`` decoded for a span of OpenTelemetry times ``start``/``end`` (0..2^63-1) whose plain attributes
        are ``uncertainty``/``quality`` (None: absent; -1: present, not of their kind): the TT_STAMPS_SLOTS values,
        the sketch octets (None: none written) and the sends' values, four a send (lts, ptp_ns, uncertainty_ns,
        clk_quality). None when the text breaks a rule, or when the native module is not loaded."""
        if not self.native:
            return None
        unc = ABSENT_UNCERTAINTY if uncertainty is None else (
            uncertainty if 0 <= uncertainty <= ABSENT_UNCERTAINTY else OUT_OF_RANGE)
        qual = ABSENT_QUALITY if quality is None else (quality if 0 <= quality <= ABSENT_QUALITY else OUT_OF_RANGE)
        data = text.encode("utf-8", "surrogatepass")
        lib, out = self._lib, self._out
        status = lib.tt_stamps_read(data, len(data), start, end, unc, qual, out, self._sketch, self._sends, self._room)
        if status == lib.TT_ST_MORE_ROOM:  # a text of many sends: room for all of them, and again
            self._room = int(out[lib.TT_ST_SENDS])
            self._sends = self._ffi.new("int64_t[]", 4 * self._room)
            status = lib.tt_stamps_read(data, len(data), start, end, unc, qual, out, self._sketch, self._sends,
                                        self._room)
        if status == lib.TT_ST_NO_MEMORY:
            raise MemoryError("the stamps decoder's room for a text of many sends")
        if status != 0:
            return None
        v = self._ffi.unpack(out, self._slots)
        sketch = self._ffi.buffer(self._sketch, 32)[:] if v[20] else None
        return v, sketch, tuple(self._ffi.unpack(self._sends, 4 * v[21])) if v[21] else ()


_local = threading.local()


def thread_reader() -> NativeStamps:
    """This thread's reader (Dask runs partitions on threads: buffers are not shared)."""
    reader: NativeStamps | None = getattr(_local, "reader", None)
    if reader is None:
        reader = _local.reader = NativeStamps()
    return reader
