"""A decoded span's identity as the reference record has it (values.build_record; spec/analysis.md §5.6): its
host, rank, clock key, clock source and job, each the span's own attribute, else its Resource's, as columns.

For rows rules.may_break does not mark (their values keep every rule); the rest are the reference's.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ... import semconv as S

__all__ = ["identity"]

_HOST, _NAME, _RANK, _CLOCK = S.HOST, "host.name", S.RANK, S.CLOCK


def _span(table: pa.Table, key: str) -> pa.ChunkedArray:
    return table.column("attribute." + key)


def _resource(table: pa.Table, key: str) -> pa.ChunkedArray:
    return table.column("resource." + key)


def identity(table: pa.Table) -> dict[str, pa.ChunkedArray]:
    """``host`` (NUL shown as U+FFFD, "?" when nothing names one), ``rank`` (null: none), ``clock`` (the clock
    key: the host, and the rank where there is one, NUL between), ``clock_source`` ("" when none names it),
    ``job_id`` and ``restart`` (the span's launch facts, else its Resource's; restart 0 where a job is named
    without one; both null when no job is named)."""
    host = pc.coalesce(_span(table, _HOST), _resource(table, _HOST), _resource(table, _NAME), pa.scalar("?"))
    host = pc.replace_substring(host, "\x00", "\ufffd")  # (values.host_name: NUL is the clock key's separator)
    rank = pc.coalesce(_span(table, _RANK), _resource(table, _RANK))
    clock = pc.if_else(pc.is_null(rank), host, pc.binary_join_element_wise(host, pc.cast(rank, pa.string()), "\x00"))
    source = pc.coalesce(_span(table, _CLOCK), _resource(table, _CLOCK), pa.scalar(""))
    job_id = pc.coalesce(_span(table, S.JOB_ID), _resource(table, S.JOB_ID))
    restart = pc.if_else(pc.is_null(job_id), pa.scalar(None, pa.int64()),
                         pc.coalesce(_span(table, S.RESTART), _resource(table, S.RESTART), pa.scalar(0)))
    return {"host": host, "rank": rank, "clock": clock, "clock_source": source, "job_id": job_id, "restart": restart}
