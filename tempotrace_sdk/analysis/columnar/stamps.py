"""A column of ``tempotrace.stamps`` texts decoded at once by the C reference decoder (native/stamp
``tt_stamps_read_column``; spec/analysis.md §5.6): one call for the column, the readings as int64 columns.

Each text is decoded exactly as stampsread.NativeStamps decodes it alone (the same C function, the same
plain-attribute conventions: absent 65535 / 2, present but out of range refused), so a row's slots are the
ones the reference reader's decoder returns for its span.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...clocks._native import native
from ..stampsread import ABSENT_QUALITY, ABSENT_UNCERTAINTY, OUT_OF_RANGE
from .arrow import scalar

__all__ = ["QUALITY_NAMES", "StampsBlock", "read_column"]

#: clk_quality names by their tt-ext number (the attribute's choices)
QUALITY_NAMES = ("OK", "DEGRADED", "UNKNOWN")
_QUALITY_SET = pa.array(QUALITY_NAMES)


class StampsBlock:
    """What a column decoded to: ``slots`` (rows x TT_STAMPS_SLOTS int64: stampsread's slots, the status first,
    -1 where a row had no text), ``sketch`` (rows x 32 octets, meaningful where its slot says one was written)
    and the sends: ``sends`` (4 int64 a send: lts, ptp_ns, uncertainty_ns, clk_quality) with each row's in
    ``sends[send_offsets[i]:send_offsets[i + 1]]``."""

    def __init__(self, slots: np.ndarray, sketch: np.ndarray, sends: np.ndarray, send_offsets: np.ndarray) -> None:
        self.slots = slots
        self.sketch = sketch
        self.sends = sends
        self.send_offsets = send_offsets


def _plain_uncertainty(column: pa.Array) -> np.ndarray:
    values = pc.fill_null(column, scalar(ABSENT_UNCERTAINTY)).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.where((values >= 0) & (values <= ABSENT_UNCERTAINTY), values, OUT_OF_RANGE).astype(np.uint32)


def _plain_quality(column: pa.Array) -> np.ndarray:
    index = pc.fill_null(pc.index_in(column, value_set=_QUALITY_SET), scalar(-1, pa.int32()))
    index = index.to_numpy(zero_copy_only=False)
    present = pc.is_valid(column).to_numpy(zero_copy_only=False)
    return np.where(index >= 0, index, np.where(present, OUT_OF_RANGE, ABSENT_QUALITY)).astype(np.uint32)


def read_column(texts: pa.Array, start: pa.Array, end: pa.Array, uncertainty: pa.Array,
                quality: pa.Array) -> StampsBlock | None:
    """The texts (a string array) of spans of OpenTelemetry times ``start``/``end`` (uint64; a null reads as 0:
    rules.py marks its row) with plain ``uncertainty`` (int64) and ``quality`` (string) attributes; None where
    the native module is not built."""
    bound = native()
    if bound is None:
        return None
    lib, ffi = bound
    n = len(texts)
    texts = pa.concat_arrays([texts.cast(pa.string())])  # (its own buffers, offset 0)
    validity, offsets, data = texts.buffers()
    present = np.frombuffer(validity, dtype=np.uint8) if validity is not None else np.full((n + 7) // 8, 255,
                                                                                               np.uint8)
    offsets_np = np.frombuffer(offsets, dtype=np.int32, count=n + 1)
    data_np = np.frombuffer(data, dtype=np.uint8) if data is not None and data.size else np.zeros(1, np.uint8)
    zero = scalar(0, pa.uint64())
    start_np = np.ascontiguousarray(pc.fill_null(start, zero).to_numpy(zero_copy_only=False), dtype=np.uint64)
    end_np = np.ascontiguousarray(pc.fill_null(end, zero).to_numpy(zero_copy_only=False), dtype=np.uint64)
    unc = np.ascontiguousarray(_plain_uncertainty(uncertainty))
    qual = np.ascontiguousarray(_plain_quality(quality))
    width = int(lib.TT_STAMPS_SLOTS)
    slots = np.zeros((n, width), dtype=np.int64)
    sketch = np.zeros((n, 32), dtype=np.uint8)
    room = max(16, n)

    def ptr(a: np.ndarray, kind: str) -> object:
        return ffi.cast(kind, a.ctypes.data)

    for _ in range(2):  # the second time with room for every send the column holds
        sends = np.zeros(4 * room, dtype=np.int64)
        total = int(lib.tt_stamps_read_column(
            ptr(data_np, "char *"), ptr(offsets_np, "int32_t *"), ptr(present, "uint8_t *"), n,
            ptr(start_np, "uint64_t *"), ptr(end_np, "uint64_t *"), ptr(unc, "uint32_t *"), ptr(qual, "uint32_t *"),
            ptr(slots, "int64_t *"), ptr(sketch, "uint8_t *"), ptr(sends, "int64_t *"), room))
        if total <= room:
            break
        room = total
    if (slots[:, 0] == int(lib.TT_ST_NO_MEMORY)).any():
        raise MemoryError("the stamps decoder's room for a text of many sends")
    # (the last call had room: every row decoded is OK, its sends one after another in row order)
    counts = np.where(slots[:, 0] == 0, slots[:, int(lib.TT_ST_SENDS)], 0)
    send_offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
    rows = sends.reshape(-1, 4)[:total]
    return StampsBlock(slots, sketch, rows, send_offsets)
