"""A span's ``tempotrace.stamps`` text -> its ``stamps.*`` columns (spec/parquet.md §2.3), by the C reference
decoder where the native module is built, else by stamptext.decode.

Both decoders read a text alike: every conformance vector goes through both (mk/conformance.mk), and
tests/analysis/test_parquet_stamps.py compares them on the demos' texts and on mutated ones. The C one
is the span table writer's: one call and one unpacking per span, a tenth of the Python decoder's time,
which was the largest part of turning a torch span into a row.
"""

from __future__ import annotations

from typing import Any

from ..errors import StampsError
from ..stamptext import decode as decode_stamps
from . import parquet_layout as L
from .stampsread import NativeStamps

__all__ = ["QUALITY_NAMES", "SOURCE_NAMES", "StampsColumns", "stamps_row"]

#: tt-ext numbers -> the names the attributes use (wire/layout.py ClockQuality, TsSource)
QUALITY_NAMES = ("OK", "DEGRADED", "UNKNOWN")
SOURCE_NAMES = ("GTE", "SW_GCC", "CPU")


def stamps_row(st: Any) -> dict[str, Any]:
    """The ``stamps.*`` columns of a decoded stamps text (stamptext.SpanStamps)."""
    s = st.start
    row: dict[str, Any] = {L.STAMPS_SOURCE: SOURCE_NAMES[st.ts_source]}
    row.update(zip(L.STAMPS_START, (s.ptp_ns, s.uncertainty_ns, QUALITY_NAMES[s.clk_quality], s.lts), strict=True))
    e = st.end
    if e is not None:
        row.update(zip(L.STAMPS_END, (e.ptp_ns, e.uncertainty_ns, QUALITY_NAMES[e.clk_quality], e.lts), strict=True))
    r = st.remote
    if r is not None:
        row.update(zip(L.STAMPS_REMOTE, (r.ptp_ns, r.uncertainty_ns, QUALITY_NAMES[r.clk_quality],
                                         SOURCE_NAMES[r.ts_source], r.tenant_id, r.lts), strict=True))
        if r.recv_lts is not None:
            row[L.STAMPS_RECV_LTS] = r.recv_lts
    if st.sketch is not None:
        row[L.STAMPS_SKETCH] = st.sketch
    if st.sends:
        row[L.STAMPS_SENDS] = [{"lts": x.lts, "ptp_ns": x.ptp_ns, "uncertainty_ns": x.uncertainty_ns,
                                "clk_quality": QUALITY_NAMES[x.clk_quality]} for x in st.sends]
    return row


class StampsColumns:
    """Decodes stamps texts into columns, reusing one set of C buffers (one per writer: not thread-safe)."""

    def __init__(self, use_native: bool = True) -> None:
        self.reader = NativeStamps() if use_native else None
        self.native = self.reader is not None and self.reader.native

    def row(self, text: str, start: int, end: int, uncertainty: int | None, quality: int | None
            ) -> dict[str, Any] | None:
        """The columns of ``text`` for a span of OpenTelemetry times ``start``/``end`` (0..2^63-1) whose plain
        attributes are ``uncertainty``/``quality`` (None: absent; -1: present, not of their kind); None when
        the text breaks a rule (stamptext.decode would raise)."""
        if not self.native:
            try:
                return stamps_row(decode_stamps(text, start, end, uncertainty, quality))
            except StampsError:
                return None
        assert self.reader is not None
        got = self.reader.slots(text, start, end, uncertainty, quality)
        if got is None:
            return None
        v, sketch, x = got
        row: dict[str, Any] = {
            L.STAMPS_SOURCE: SOURCE_NAMES[v[1]],
            L.STAMPS_START[0]: v[2], L.STAMPS_START[1]: v[3], L.STAMPS_START[2]: QUALITY_NAMES[v[4]],
            L.STAMPS_START[3]: v[5],
        }
        if v[6]:
            row.update(((L.STAMPS_END[0], v[7]), (L.STAMPS_END[1], v[8]), (L.STAMPS_END[2], QUALITY_NAMES[v[9]]),
                        (L.STAMPS_END[3], v[10])))
        if v[11]:
            r = L.STAMPS_REMOTE
            row.update(((r[0], v[12]), (r[1], v[13]), (r[2], QUALITY_NAMES[v[14]]), (r[3], SOURCE_NAMES[v[15]]),
                        (r[4], v[16]), (r[5], v[17])))
            if v[18]:
                row[L.STAMPS_RECV_LTS] = v[19]
        if sketch is not None:
            row[L.STAMPS_SKETCH] = sketch
        if x:
            row[L.STAMPS_SENDS] = [{"lts": x[i], "ptp_ns": x[i + 1], "uncertainty_ns": x[i + 2],
                                    "clk_quality": QUALITY_NAMES[x[i + 3]]} for i in range(0, len(x), 4)]
        return row
