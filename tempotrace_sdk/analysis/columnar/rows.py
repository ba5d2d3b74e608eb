"""Decoded spans' columns -> the reference's SpanRecords (values.build_record, torch_op; spec/analysis.md §5.6):
for the rows every earlier stage passed, each value read from its column as the reference reads it from the
span, so the records are equal field for field. The stamps come from a source of their own: a column of
``tempotrace.stamps`` texts decoded in C (``TextStamps``; OTLP JSON) or a span table's decoded stamps
columns (parquet.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any, NamedTuple, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import semconv as S
from ..clockdomain import domain_of
from ..events import NO_STAMP, QUALITIES, DumpInfo, SpanRecord, Stamp, TorchOp
from ..values import DEGRADED_NO_STAMP, AttributeRuleError, _in_domain, _job_key, _sends, _span_domain
from .arrow import scalar
from .decode import ATTRIBUTE_PREFIX, RESOURCE_PREFIX, SpanFields
from .records import identity, steps_and_dumps, torch_ops
from .sketchmask import own_sketches
from .stamps import StampsBlock, read_column

try:
    from ... import _columns
except ImportError:  # not built: the readings made in Python
    _columns = None

__all__ = ["Records", "StampsSource", "TextStamps"]

_SAT = Stamp(None).uncertainty_ns


class StampsSource(Protocol):
    """Where a table's rows' stamps come from: which rows have them, which of those the source refuses (the
    reference reads them), and the readings of the rest."""

    present: np.ndarray
    refused: np.ndarray

    def fill(self, rows: np.ndarray, span_id: list[str], parent: list[str], degraded: list[bool],
             out: list[Any]) -> None:
        """``out[i]``: (start, end, remote, recv lts, sends, sketch, None) of each row i in ``rows``."""


class TextStamps:
    """The ``tempotrace.stamps`` texts of a decode table, decoded as one column by the C decoder (stamps.py);
    without it (``native`` False, or not built) every text is refused: the reference decodes it."""

    def __init__(self, table: pa.Table, native: bool = True) -> None:
        text = table.column(ATTRIBUTE_PREFIX + S.STAMPS)
        self.present: np.ndarray = pc.is_valid(text).to_numpy(zero_copy_only=False)
        self.block: StampsBlock | None = None if not native or not self.present.any() else read_column(
            text.combine_chunks(), table.column("start").combine_chunks(), table.column("end").combine_chunks(),
            table.column(ATTRIBUTE_PREFIX + S.UNCERTAINTY_NS).combine_chunks(),
            table.column(ATTRIBUTE_PREFIX + S.CLK_QUALITY).combine_chunks())
        if self.block is None:
            self.refused = self.present
        else:  # (the reference names what such a text breaks)
            self.refused = self.present & (self.block.slots[:, 0] != 0)

    def fill(self, rows: np.ndarray, span_id: list[str], parent: list[str], degraded: list[bool],
             out: list[Any]) -> None:
        """values._from_slots of each row's decoded text: in C from the slots (native/columns/tt_readings.c)
        where it is built, else a field at a time, the Stamps made by ``map`` over columns (a Python loop over
        rows only where a row has something the others lack)."""
        block = self.block
        if block is None or not len(rows):
            return
        at = rows.tolist()
        v = block.slots[rows]
        recorded = v[:, 20] != 0
        sketches = own_sketches(span_id, parent, at, ~recorded)
        if _columns is not None and _columns.stamp_readings(block.slots, block.sketch, block.sends,
                                                            block.send_offsets, at, degraded, sketches, Stamp,
                                                            QUALITIES, out):
            return
        names = _QUALITY_NAMES
        deg = [degraded[i] for i in at]
        starts = list(map(Stamp, v[:, 2].tolist(), v[:, 3].tolist(), names[v[:, 4]].tolist(), v[:, 5].tolist(), deg))
        ends = _some(v[:, 6] != 0, lambda k: map(Stamp, v[k, 7].tolist(), v[k, 8].tolist(), names[v[k, 9]].tolist(),
                                                 v[k, 10].tolist(), [deg[x] for x in k.tolist()]))
        has_remote = v[:, 11] != 0
        remotes = _some(has_remote, lambda k: map(Stamp, v[k, 12].tolist(), v[k, 13].tolist(),
                                                  names[v[k, 14]].tolist(), v[k, 17].tolist()))
        recvs = _some(has_remote & (v[:, 18] != 0), lambda k: v[k, 19].tolist())
        sent: list[Any] = [()] * len(at)
        offsets = block.send_offsets
        lo, hi = offsets[rows], offsets[rows + 1]
        if (hi > lo).any():
            sends = block.sends.tolist()
            for k in np.flatnonzero(hi > lo).tolist():
                sent[k] = tuple((x[0], x[1], x[2]) for x in sends[lo[k]:hi[k]])
        for k in np.flatnonzero(recorded).tolist():
            sketches[k] = int.from_bytes(block.sketch[at[k]].tobytes(), "big")
        for i, readings in zip(at, zip(starts, ends, remotes, recvs, sent, sketches, repeat(None)), strict=True):
            out[i] = readings


_QUALITY_NAMES = np.array(QUALITIES, dtype=object)


def _some(which: np.ndarray, make: Any) -> list[Any]:
    """A list over the rows: ``make(k)``'s values at the rows ``k`` where ``which`` holds, None elsewhere."""
    if which.all():
        return list(make(np.arange(len(which))))
    values: list[Any] = [None] * len(which)
    k = np.flatnonzero(which)
    for x, value in zip(k.tolist(), make(k), strict=True):
        values[x] = value
    return values


def _shared(values: Any) -> list[Any]:
    """A string column as Python strings, one object per distinct value: a window holds 10^5 records, whose
    names, hosts, clocks, ops and trace ids are a few values repeated (the reference's records share them)."""
    coded = pc.dictionary_encode(values)
    if isinstance(coded, pa.ChunkedArray):
        coded = coded.combine_chunks()
    distinct = [*coded.dictionary.to_pylist(), None]
    index = pc.fill_null(coded.indices, scalar(len(distinct) - 1, coded.indices.type))
    return [distinct[i] for i in index.to_numpy(zero_copy_only=False).tolist()]


def _owned(trace_id: list[Any], rows: np.ndarray, shard: tuple[int, int]) -> np.ndarray:
    """Which of ``rows`` (their trace ids hex: clean rows) are of traces partition ``shard`` owns (shard_of), each
    distinct id computed once."""
    k, parts = shard
    owns: dict[str, bool] = {}
    out = np.zeros(len(trace_id), dtype=bool)
    for i in np.flatnonzero(rows).tolist():
        tid = trace_id[i]
        mine = owns.get(tid)
        if mine is None:
            mine = owns[tid] = int(tid[-8:], 16) % parts == k
        out[i] = mine
    return out


def _lower(table: pa.Table, name: str) -> list[Any]:
    values: list[Any] = pc.utf8_lower(table.column(name)).to_pylist()
    return values


class _TableFields(NamedTuple):
    """The OTLP fields Records reads (decode.SpanFields'), from a span table's columns."""

    trace_id: list[Any]
    span_id: list[Any]
    parent: list[Any]
    name: list[Any]
    kind: list[Any]
    start: list[Any]
    end: list[Any]


def _table_fields(table: pa.Table) -> _TableFields:
    return _TableFields(_shared(pc.utf8_lower(table.column("trace_id"))), _lower(table, "span_id"),
                        _lower(table, "parent_span_id"), _shared(table.column("name")),
                        table.column("kind").to_pylist(), table.column("start").to_pylist(),
                        table.column("end").to_pylist())


def _plain_stamp(ptp: int | None, unc: int | None, qual: str | None, lts: int | None, degraded: bool) -> Stamp:
    return Stamp(ptp, _SAT if unc is None else unc, qual or "UNKNOWN", lts, degraded)


def _hex_int(text: str | None) -> int | None:
    return None if text is None else int(text, 16)


def _valid(table: pa.Table, names: Sequence[str]) -> np.ndarray:
    """Rows where any of the columns ``names`` holds a value."""
    out = np.zeros(table.num_rows, dtype=bool)
    for name in names:
        out |= pc.is_valid(table.column(name)).to_numpy(zero_copy_only=False)
    return out


_PLAIN = (S.PTP_NS, S.UNCERTAINTY_NS, S.CLK_QUALITY, S.LTS, S.SVC_SKETCH, S.END_PTP_NS, S.END_UNCERTAINTY_NS,
          S.END_CLK_QUALITY, S.END_LTS, S.REMOTE_PTP_NS, S.REMOTE_UNCERTAINTY_NS, S.REMOTE_CLK_QUALITY, S.REMOTE_LTS,
          S.REMOTE_SVC_SKETCH, S.RECV_LTS)
_SENDS = (S.SEND_LTS, S.SEND_PTP_NS, S.SEND_UNCERTAINTY_NS)
_DOMAIN = (S.CLOCK_DOMAIN, S.CLOCK_EPOCH_NS, S.CLOCK_EPOCH_BOUND_NS, S.CLOCK_READ_NS)


#: torch_ops' columns in TorchOp's order (the sender's record's four where TorchOp has its Stamp)
_TORCH_COLUMNS = ("op", "group", "group_rank", "seq", "root", "completion", "src", "dst", "tag", "p2p_seq",
                  "recv_lts", "recv_missing", "recv_sketch", "remote.ptp_ns", "remote.uncertainty_ns",
                  "remote.clk_quality", "remote.lts", "remote_span", "ambiguous")


class Records:
    """The records of a table's clean rows (a decode.SpanColumns table with its lines' ``fields``, or a span
    table's in that shape, ids and all), made from its columns: the values of every row first (each kind only
    where a row has one), then one SpanRecord a row, a stretch of rows at a time. ``stamps`` reads the rows'
    decoded stamps (a stamps text column decoded in C, or a span table's stamps columns); a row whose stamps it
    refuses is no longer clean (``clean`` is updated in place: the caller hands such a row to the reference)."""

    def __init__(self, table: pa.Table, clean: np.ndarray, shard: tuple[int, int] | None, stamps: StampsSource,
                 fields: SpanFields | None = None, plain: np.ndarray | None = None) -> None:
        self.shard = shard
        n = table.num_rows
        # the OTLP fields: decoded with the table's lines (decode.SpanFields), else a span table's columns
        otlp: SpanFields | _TableFields = _table_fields(table) if fields is None else fields
        self.trace_id = otlp.trace_id
        has_text = stamps.present
        clean &= ~stamps.refused
        span_id, parent = otlp.span_id, otlp.parent
        degraded = pc.fill_null(pc.equal(table.column(ATTRIBUTE_PREFIX + S.POLICY_VERDICT), scalar("degrade")),
                                scalar(False)).to_numpy(zero_copy_only=False).tolist()
        # the rows whose records stretch() makes: clean, and of the owned traces (the values of others are not read)
        made = clean if shard is None else clean & _owned(self.trace_id, clean, shard)
        readings: list[Any] = [None] * n  # (start, end, remote, recv lts, sends, sketch, remote sketch)
        # the plain lane's rows (columnar/plain.py) are read from the stamps' arrays: their readings are made
        # only for a row it hands back (``records_at``)
        self._stamps, self._degraded, self._readings = stamps, degraded, readings
        stamps.fill(np.flatnonzero(has_text & made & (True if plain is None else ~plain)), span_id, parent,
                    degraded, readings)
        self._plain(table, np.flatnonzero(~has_text & made), degraded, readings, clean)
        self._in_domains(table, np.flatnonzero(made), readings)
        ident = self.ident = identity(table)
        job_id, restart = _shared(ident["job_id"]), ident["restart"].to_pylist()
        jobs = [None if j is None else _job_key(j, r) for j, r in zip(job_id, restart, strict=True)]
        torch: list[TorchOp | None] = [None] * n
        ops = torch_ops(table)
        self._torch(ops, np.flatnonzero(pc.is_valid(ops["op"]).to_numpy(zero_copy_only=False) & made), torch)
        steps = steps_and_dumps(table)
        dumps: list[DumpInfo | None] = [None] * n
        self._dumps(steps, np.flatnonzero(pc.is_valid(steps["dump.reason"]).to_numpy(zero_copy_only=False) & made),
                    dumps)
        self.columns = (
            self.trace_id, span_id, parent, otlp.name, otlp.kind, _shared(ident["host"]), readings, otlp.start,
            otlp.end,
            ident["rank"].to_pylist(), _shared(ident["clock_source"]),
            _shared(pc.fill_null(table.column(ATTRIBUTE_PREFIX + S.CLOCK_PROFILE), scalar(""))),
            table.column("line").to_pylist(), degraded, _shared(ident["clock"]), torch,
            steps["step"].to_pylist(), steps["step_occurrence"].to_pylist(), jobs, dumps)

    @staticmethod
    def _plain(table: pa.Table, rows: np.ndarray, degraded: list[bool], out: list[Any], clean: np.ndarray) -> None:
        """build_record's readings from the previous attribute set (a span without a stamps text); a row whose send
        arrays values._sends refuses (lengths that differ) is no longer clean."""
        if not len(rows):
            return
        index = pa.array(rows)
        (ptp, unc, qual, lts, sketch, eptp, eunc, equal, elts, rptp, runc, rqual, rlts, rsketch, recv) = (
            table.column(ATTRIBUTE_PREFIX + key).take(index).to_pylist() for key in _PLAIN)
        send_lts, send_ptp, send_unc = (table.column(ATTRIBUTE_PREFIX + key).take(index) for key in _SENDS)
        with_sends = pc.or_(pc.or_(pc.is_valid(send_lts), pc.is_valid(send_ptp)), pc.is_valid(send_unc))
        sends: dict[int, Any] = {}
        if pc.any(with_sends).as_py():
            at = np.flatnonzero(with_sends.to_numpy(zero_copy_only=False))
            taken = [c.take(pa.array(at)).to_pylist() for c in (send_lts, send_ptp, send_unc)]
            for k, x, y, z in zip(at.tolist(), *taken, strict=True):
                try:
                    sends[k] = _sends(x, y, z)
                except AttributeRuleError:
                    clean[rows[k]] = False  # (the reference names the rule)
        for k, i in enumerate(rows.tolist()):
            d = degraded[i]
            start = (NO_STAMP if not d else DEGRADED_NO_STAMP) if ptp[k] is None and lts[k] is None else \
                _plain_stamp(ptp[k], unc[k], qual[k], lts[k], d)
            end = None if eptp[k] is None and elts[k] is None else _plain_stamp(eptp[k], eunc[k], equal[k], elts[k], d)
            remote = None if rptp[k] is None and rlts[k] is None else \
                _plain_stamp(rptp[k], runc[k], rqual[k], rlts[k], False)
            out[i] = (start, end, remote, recv[k], sends.get(k, ()), _hex_int(sketch[k]), _hex_int(rsketch[k]))

    @staticmethod
    def _in_domains(table: pa.Table, rows: np.ndarray, out: list[Any]) -> None:
        """The host clock domain of the readings (build_record: the Resource's where the span was stamped with the
        Resource's clock, the span's own over it), on the rows that name one."""
        span_cols = [ATTRIBUTE_PREFIX + k for k in (*_DOMAIN, S.CLOCK_STEPPED)]
        resource_cols = [RESOURCE_PREFIX + k for k in _DOMAIN]
        rows = rows[(_valid(table, span_cols) | _valid(table, resource_cols))[rows]]
        if not len(rows):
            return
        index = pa.array(rows)
        own = [table.column(c).take(index).to_pylist() for c in span_cols]
        theirs = [table.column(c).take(index).to_pylist() for c in resource_cols]
        span_clock = table.column(ATTRIBUTE_PREFIX + S.CLOCK).take(index).to_pylist()
        resource_clock = table.column(RESOURCE_PREFIX + S.CLOCK).take(index).to_pylist()
        for k, i in enumerate(rows.tolist()):
            domain = domain_of(*(c[k] for c in theirs))
            if span_clock[k] is not None and span_clock[k] != resource_clock[k]:
                domain = None
            mine = [c[k] for c in own]
            if any(v is not None for v in mine):
                domain = _span_domain(mine, domain)
            if domain is not None:
                start, end, *rest = out[i]
                out[i] = (_in_domain(start, domain), None if end is None else _in_domain(end, domain), *rest)

    @staticmethod
    def _torch(ops: dict[str, pa.ChunkedArray], rows: np.ndarray, out: list[TorchOp | None]) -> None:
        """values.torch_op of the rows with a torch op."""
        if not len(rows):
            return
        index = pa.array(rows)
        t = {name: (_shared(col.take(index)) if pa.types.is_string(col.type) else col.take(index).to_pylist())
             for name, col in ops.items()}
        fields = zip(*(t[name] for name in _TORCH_COLUMNS), strict=True)
        for i, (op, group, group_rank, seq, root, completion, src, dst, tag, p2p_seq, recv_lts, missing, sketch,
                rptp, runc, rqual, rlts, remote_span, ambiguous) in zip(rows.tolist(), fields, strict=True):
            remote = None if rptp is None and rlts is None else Stamp(rptp, runc, rqual, rlts)
            out[i] = TorchOp(op, group, group_rank, seq, root, completion, src, dst, tag, p2p_seq, recv_lts,
                             tuple(missing) if missing else (), None if sketch is None else int(sketch, 16),
                             remote, remote_span, ambiguous is True)

    @staticmethod
    def _dumps(steps: dict[str, pa.ChunkedArray], rows: np.ndarray, out: list[DumpInfo | None]) -> None:
        if not len(rows):
            return
        index = pa.array(rows)
        reason, ops, pending, overwritten, by = (steps[f"dump.{k}"].take(index).to_pylist() for k in (
            "reason", "ops", "pending", "overwritten", "requested_by"))
        for k, i in enumerate(rows.tolist()):
            out[i] = DumpInfo(reason[k], ops[k], pending[k], overwritten[k], by[k])

    def records_at(self, rows: list[int], positions: list[int]) -> list[SpanRecord]:
        """The records of the plain lane's ``rows`` at ``positions`` (rows it hands back to the per-span stages),
        their readings made now: equal to the ones ``stretch`` makes."""
        readings = self._readings
        todo = [i for i in rows if readings[i] is None]
        if todo:
            _, span_id, parent, *_ = self.columns
            self._stamps.fill(np.array(todo, dtype=np.int64), span_id, parent, self._degraded, readings)
        return [self._record(i, p) for i, p in zip(rows, positions, strict=True)]

    def _record(self, i: int, pos: int) -> SpanRecord:
        (trace_id, span_id, parent, name, kind, host, stamps, start_ns, end_ns, rank, source, profile, number,
         degraded, clock, torch, step, occurrence, job, dump) = self.columns
        start, end, remote, recv, sends, sketch, rsketch = stamps[i]
        return SpanRecord(
            trace_id[i], span_id[i], parent[i], name[i], kind[i], host[i], start, end, start_ns[i], end_ns[i],
            sketch, rank[i], source[i], profile[i], sends, remote, rsketch, recv, number[i], pos, degraded[i],
            clock[i], torch[i], step[i], occurrence[i], job[i], None, dump[i])

    def stretch(self, first: int, n: int, pos: int) -> list[SpanRecord]:
        """The records of rows first..first+n-1 (a line, or a stretch of a span table's rows; the first at
        ``pos``) of the owned traces."""
        (trace_id, span_id, parent, name, kind, host, stamps, start_ns, end_ns, rank, source, profile, number,
         degraded, clock, torch, step, occurrence, job, dump) = self.columns
        shard = self.shard
        out = []
        for i in range(first, first + n):
            tid = trace_id[i]
            if shard is not None and int(tid[-8:], 16) % shard[1] != shard[0]:
                continue
            start, end, remote, recv, sends, sketch, rsketch = stamps[i]
            out.append(SpanRecord(
                tid, span_id[i], parent[i], name[i], kind[i], host[i], start, end, start_ns[i], end_ns[i], sketch,
                rank[i], source[i], profile[i], sends, remote, rsketch, recv, number[i], pos + i - first,
                degraded[i], clock[i], torch[i], step[i], occurrence[i], job[i], None, dump[i]))
        return out
