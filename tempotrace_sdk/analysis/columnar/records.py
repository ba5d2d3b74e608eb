"""A decoded span's record fields as the reference has them (values.build_record, torch_op; spec/analysis.md
§5.6), as columns: its identity (host, rank, clock key, clock source and job, each the span's own attribute,
else its Resource's) and its torch op.

For rows rules.may_break does not mark (their values keep every rule); the rest are the reference's.
``torch_refusals`` marks the rows whose torch op build_record refuses although every rule holds (a group key
naming another number of ranks than the span's group size, a group rank beyond it): the reference's too.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import semconv as S
from ...wire.layout import UNCERTAINTY_SATURATED
from ..groupkey import parse_key
from .arrow import scalar
from .decode import ATTRIBUTE_PREFIX, RESOURCE_PREFIX

__all__ = ["TORCH_FIELDS", "identity", "steps_and_dumps", "torch_ops", "torch_refusals"]

_HOST, _NAME, _RANK, _CLOCK = S.HOST, "host.name", S.RANK, S.CLOCK


def _span(table: pa.Table, key: str) -> pa.ChunkedArray:
    return table.column(ATTRIBUTE_PREFIX + key)


def _resource(table: pa.Table, key: str) -> pa.ChunkedArray:
    return table.column(RESOURCE_PREFIX + key)


def _named(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Null where the name is "" (build_record falls back with ``or``: an empty name names nothing)."""
    return pc.if_else(pc.equal(values, scalar("")), scalar(None, values.type), values)


def identity(table: pa.Table) -> dict[str, pa.ChunkedArray]:
    """``host`` (NUL shown as U+FFFD, "?" when nothing names one; "" names nothing, here and for the clock
    source), ``rank`` (null: none), ``clock`` (the clock key: the host, and the rank where there is one, NUL
    between), ``clock_source`` ("" when none names it),
    ``job_id`` and ``restart`` (the span's launch facts, else its Resource's; restart 0 where a job is named
    without one; both null when no job is named)."""
    host = pc.coalesce(_named(_span(table, _HOST)), _named(_resource(table, _HOST)), _named(_resource(table, _NAME)),
                       scalar("?"))
    host = pc.replace_substring(host, "\x00", "\ufffd")  # (values.host_name: NUL is the clock key's separator)
    rank = pc.coalesce(_span(table, _RANK), _resource(table, _RANK))
    clock = pc.if_else(pc.is_null(rank), host, pc.binary_join_element_wise(host, pc.cast(rank, pa.string()), "\x00"))
    source = pc.coalesce(_named(_span(table, _CLOCK)), _named(_resource(table, _CLOCK)), scalar(""))
    job_id = pc.coalesce(_span(table, S.JOB_ID), _resource(table, S.JOB_ID))
    restart = pc.if_else(pc.is_null(job_id), scalar(None, pa.int64()),
                         pc.coalesce(_span(table, S.RESTART), _resource(table, S.RESTART), scalar(0)))
    return {"host": host, "rank": rank, "clock": clock, "clock_source": source, "job_id": job_id, "restart": restart}


#: TorchOp's fields read straight from one attribute each (events.TorchOp)
TORCH_FIELDS = {"op": S.TORCH_OP, "group": S.TORCH_GROUP, "group_rank": S.TORCH_GROUP_RANK, "seq": S.TORCH_SEQ,
                "root": S.TORCH_ROOT, "completion": S.TORCH_COMPLETION, "src": S.TORCH_SRC, "dst": S.TORCH_DST,
                "p2p_seq": S.TORCH_P2P_SEQ, "recv_lts": S.TORCH_RECV_LTS}


def torch_ops(table: pa.Table) -> dict[str, pa.ChunkedArray]:
    """TorchOp's fields, null where a row has no ``tempotrace.torch.op`` (no TorchOp): those of TORCH_FIELDS,
    ``tag`` (0 when absent), ``recv_missing`` (a list), ``recv_sketch`` and ``remote_span`` (their hex digits,
    lower case), ``ambiguous``, and the sender's record ``remote.ptp_ns`` / ``.uncertainty_ns`` (saturated when
    absent) / ``.clk_quality`` ("UNKNOWN" when absent) / ``.lts``, null where it has neither a reading nor a
    Lamport value."""
    op = _span(table, S.TORCH_OP)
    has = pc.is_valid(op)

    def only(values: pa.ChunkedArray) -> pa.ChunkedArray:
        return pc.if_else(has, values, scalar(None, values.type))

    out = {name: only(_span(table, key)) for name, key in TORCH_FIELDS.items()}
    out["tag"] = only(pc.coalesce(_span(table, S.TORCH_TAG), scalar(0)))
    out["recv_missing"] = only(_span(table, S.TORCH_RECV_MISSING))
    out["recv_sketch"] = only(pc.utf8_lower(_span(table, S.TORCH_RECV_SKETCH)))
    out["remote_span"] = only(pc.utf8_lower(_span(table, S.TORCH_REMOTE_SPAN_ID)))
    out["ambiguous"] = only(pc.fill_null(_span(table, S.TORCH_P2P_AMBIGUOUS), scalar(False)))
    rptp, rlts = _span(table, S.TORCH_REMOTE_PTP_NS), _span(table, S.TORCH_REMOTE_LTS)
    remote = pc.and_(has, pc.or_(pc.is_valid(rptp), pc.is_valid(rlts)))

    def of_remote(values: pa.ChunkedArray) -> pa.ChunkedArray:
        return pc.if_else(remote, values, scalar(None, values.type))

    out["remote.ptp_ns"] = of_remote(rptp)
    out["remote.uncertainty_ns"] = of_remote(pc.coalesce(_span(table, S.TORCH_REMOTE_UNCERTAINTY_NS),
                                                         scalar(UNCERTAINTY_SATURATED)))
    out["remote.clk_quality"] = of_remote(pc.coalesce(_span(table, S.TORCH_REMOTE_CLK_QUALITY), scalar("UNKNOWN")))
    out["remote.lts"] = of_remote(rlts)
    return out


def torch_refusals(table: pa.Table) -> np.ndarray:
    """Rows whose TorchOp build_record refuses: a group key that does not parse (a rule's pattern lets more
    through than the parser takes), names another number of ranks than ``group_size``, or a ``group_rank`` at or
    beyond the ranks it names. Each distinct key is parsed once."""
    group = _span(table, S.TORCH_GROUP).combine_chunks()
    has = pc.and_(pc.is_valid(_span(table, S.TORCH_OP)), pc.is_valid(group)).to_numpy(zero_copy_only=False)
    if not has.any():
        return np.zeros(table.num_rows, dtype=bool)
    keys = pc.unique(group.filter(pa.array(has))).to_pylist()
    sizes = []
    for key in keys:
        try:
            sizes.append(parse_key(key).size)
        except ValueError:
            sizes.append(-1)
    named = np.array(sizes, dtype=np.int64)[pc.fill_null(pc.index_in(group, value_set=pa.array(keys, pa.string())),
                                                         0).to_numpy(zero_copy_only=False)]
    size = pc.fill_null(_span(table, S.TORCH_GROUP_SIZE), scalar(-2)).to_numpy(zero_copy_only=False)
    rank = pc.fill_null(_span(table, S.TORCH_GROUP_RANK), scalar(-1)).to_numpy(zero_copy_only=False)
    bad: np.ndarray = (named < 0) | ((size != -2) & (named != size)) | ((rank >= 0) & (rank >= named))
    return np.asarray(has & bad, dtype=bool)


def steps_and_dumps(table: pa.Table) -> dict[str, pa.ChunkedArray]:
    """A step span's ``step`` and ``step_occurrence`` (0 when absent), and a dump record's fields (a
    ``torch.dump`` span): ``dump.reason`` (null: no dump record), ``dump.ops`` / ``.pending`` / ``.overwritten``
    (0 when absent) and ``dump.requested_by``, null on the other rows."""
    reason = _span(table, S.TORCH_DUMP_REASON)
    is_dump = pc.is_valid(reason)

    def of_dump(values: pa.ChunkedArray) -> pa.ChunkedArray:
        return pc.if_else(is_dump, values, scalar(None, values.type))

    return {
        "step": _span(table, S.TORCH_STEP),
        "step_occurrence": pc.coalesce(_span(table, S.TORCH_STEP_OCCURRENCE), scalar(0)),
        "dump.reason": reason,
        "dump.ops": of_dump(pc.coalesce(_span(table, S.TORCH_DUMP_OPS), scalar(0))),
        "dump.pending": of_dump(pc.coalesce(_span(table, S.TORCH_DUMP_PENDING), scalar(0))),
        "dump.overwritten": of_dump(pc.coalesce(_span(table, S.TORCH_DUMP_OVERWRITTEN), scalar(0))),
        "dump.requested_by": of_dump(_span(table, S.TORCH_DUMP_REQUESTED_BY)),
    }
