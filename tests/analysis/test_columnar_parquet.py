"""A span table's rows read from its columns (analysis/columnar/parquet.py; spec/analysis.md §5.6): each stretch
of rows gives what ``parquet_records.RowGroup.records`` gives (records equal field for field, the same
refusals, loss records and positions), on drawn traces, a torch job's, hostile lines converted, and cells
changed one at a time past the rules; whole or one partition's traces. A difference is a bug in the columnar
reader: RowGroup is the reference for span tables (test_parquet_*.py hold it to the JSON reader)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

import pyarrow as pa
import pyarrow.parquet as pq

from tempotrace_sdk.analysis import analyze
from tempotrace_sdk.analysis import parquet_layout as L
from tempotrace_sdk.analysis.columnar.parquet import ParquetRows
from tempotrace_sdk.analysis.parquet_records import COLUMNS_READ, RowGroup

from .enginegen import drawn_trace
from .parquetgen import comparable, converted
from .test_columnar_lines import _TEXT, HOSTILE, STAMPS, _job_lines, _one
from .torchgen import TorchJob

SHARDS = (None, (0, 2), (1, 3))


def _groups(path: str) -> list[tuple[Any, int]]:
    """The row groups of a span table as the reader reads them (its columns), each with its first row."""
    file = pq.ParquetFile(path)
    names = set(file.schema_arrow.names)
    out, first = [], 0
    for g in range(file.metadata.num_row_groups):
        table = file.read_row_group(g, columns=[c for c in COLUMNS_READ if c in names])
        out.append((table, first))
        first += table.num_rows
    return out


def assert_rows_same(table: Any, first: int = 0, cuts: tuple[int, ...] = ()) -> None:
    """Every stretch between ``cuts`` (and the whole) read both ways, for each shard."""
    n = table.num_rows
    bounds = sorted({0, n, *(c for c in cuts if 0 < c < n)})
    for shard in SHARDS:
        want, got = RowGroup(table, "t.parquet", first), ParquetRows(table, "t.parquet", first)
        for lo, hi in pairwise(bounds):
            a, b = want.records(lo, hi, 100 + lo, shard), got.records(lo, hi, 100 + lo, shard)
            assert a.bad == b.bad, f"rows {lo}..{hi} (shard {shard}): refusals differ"
            assert a.loss == b.loss, f"rows {lo}..{hi} (shard {shard}): loss records differ"
            for x, y in zip(a.records, b.records, strict=True):
                assert x == y, f"rows {lo}..{hi} (shard {shard}): RowGroup's {x!r}\n!= the columnar {y!r}"


def _table_of(lines: list[str], tmp_path: Path, name: str = "t") -> Any:
    src = tmp_path / f"{name}.jsonl"
    src.write_text("\n".join(lines) + "\n")
    return _groups(converted([str(src)], str(tmp_path / f"{name}.parquet")))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drawn=drawn_trace(), cut=st.integers(0, 200))
def test_drawn_rows_are_the_row_groups_records(drawn: Any, cut: int, tmp_path_factory: Any) -> None:
    tmp = tmp_path_factory.mktemp("drawn")
    for table, first in _table_of(drawn.lines, tmp):
        assert_rows_same(table, first, (cut, cut + 7))


def _torch_table(tmp_path: Path) -> Any:
    job = TorchJob(ranks=4, steps=2, collectives=3, liar=1, liar_ns=30_000)
    [(table, _)] = _table_of(_job_lines(job, 8), tmp_path, "job")
    return table


def _row_groups_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rows of each RowGroup the columnar reader makes from now on."""
    from tempotrace_sdk.analysis.columnar import parquet

    made: list[int] = []

    def spy(t: Any, path: str, first: int = 0) -> Any:
        made.append(t.num_rows)
        return RowGroup(t, path, first)

    monkeypatch.setattr(parquet, "RowGroup", spy)
    return made


def test_a_torch_jobs_rows_are_made_from_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _torch_table(tmp_path)
    assert_rows_same(table, 0, (5, 6, 40))
    handed = _row_groups_made(monkeypatch)
    rows = ParquetRows(table, "t.parquet")
    assert len(rows.records(0, table.num_rows, 0, None).records) == table.num_rows
    assert handed == []  # the exporter's own spans: none left to the reference


@pytest.mark.parametrize(("name", "text"), [h for h in HOSTILE if isinstance(h[1], str)],
                         ids=[h[0] for h in HOSTILE if isinstance(h[1], str)])
def test_a_hostile_line_converted_reads_as_the_row_groups(name: str, text: str, tmp_path: Path) -> None:
    good = _one({STAMPS: _TEXT})
    for table, first in _table_of([good, text, good], tmp_path):
        assert_rows_same(table, first, (1, 2, 3))


def _set(table: Any, name: str, row: int, value: Any) -> Any:
    """The table with one cell of column ``name`` changed (the column added, null elsewhere, if it has none)."""
    if name in table.column_names:
        column = table.column(name)
        values = column.to_pylist()
        values[row] = value
        return table.set_column(table.column_names.index(name), name, pa.array(values, column.type))
    from tempotrace_sdk.analysis.parquet_schema import SCHEMA

    values = [None] * table.num_rows
    values[row] = value
    return table.append_column(name, pa.array(values, SCHEMA.field(name).type))


_SEND = {"lts": 3, "ptp_ns": 5, "uncertainty_ns": 9, "clk_quality": "OK"}
CELLS: list[tuple[str, str, Any]] = [
    ("a negative start", L.START, -1),
    ("no end", L.END, None),
    ("a kind past 5", L.KIND, 6),
    ("no kind", L.KIND, None),
    ("no trace id", L.TRACE_ID, None),
    ("no span id", L.SPAN_ID, None),
    ("no parent", L.PARENT_SPAN_ID, None),
    ("no name", L.NAME, None),
    ("an ERROR status", L.STATUS_CODE, 2),
    ("an OK status", L.STATUS_CODE, 1),
    ("a known attribute in the map", L.ATTRIBUTES, [("tempotrace.rank", '{"intValue":"3"}')]),
    ("an unknown attribute in the map", L.ATTRIBUTES, [("user.key", '{"stringValue":"v"}')]),
    ("a known Resource attribute in its map", L.RESOURCE_ATTRIBUTES, [("tempotrace.host", '{"stringValue":"h"}')]),
    ("a span kept as written", L.OTLP_JSON, '{"traceId":"zz","spanId":"01"}'),
    ("an input line", L.INPUT_LINE, 77),
    ("no input line: the row's number", L.INPUT_LINE, None),
    ("a rank out of range", "tempotrace.rank", -4),
    ("a Resource rank out of range", "resource.tempotrace.rank", -4),
    ("a quality not among the choices", "tempotrace.clk_quality", "FINE"),
    ("a bound past the saturated one", "tempotrace.uncertainty_ns", 70_000),
    ("stamps: an unknown source", L.STAMPS_SOURCE, "NTP"),
    ("stamps: no source", L.STAMPS_SOURCE, None),
    ("stamps: a negative start", L.STAMPS_START[0], -3),
    ("stamps: no start reading", L.STAMPS_START[0], None),
    ("stamps: an end quality unknown", L.STAMPS_END[2], "BAD"),
    ("stamps: an end bound too large", L.STAMPS_END[1], 1 << 20),
    ("stamps: no end", L.STAMPS_END[3], None),
    ("stamps: a remote tenant past 15", L.STAMPS_REMOTE[4], 16),
    ("stamps: a remote reading", L.STAMPS_REMOTE[5], 7),
    ("stamps: a receive counter past 2^63", L.STAMPS_RECV_LTS, -1),
    ("stamps: a receive counter", L.STAMPS_RECV_LTS, 5),
    ("stamps: a sketch", L.STAMPS_SKETCH, b"\x01" * 32),
    ("stamps: sends", L.STAMPS_SENDS, [_SEND, {**_SEND, "lts": 4}]),
    ("stamps: a send's quality unknown", L.STAMPS_SENDS, [{**_SEND, "clk_quality": "X"}]),
    ("stamps: a send's bound negative", L.STAMPS_SENDS, [{**_SEND, "uncertainty_ns": -1}]),
    ("previous set: sends beside stamps", "tempotrace.send.lts", [1, 2]),
    ("previous set: a send bound without a counter", "tempotrace.send.uncertainty_ns", [7]),
    ("a group key of another size", "tempotrace.torch.group", "0-7"),
    ("a null in an integer list", "tempotrace.torch.recv.missing", [1, None]),
    ("a null send counter", "tempotrace.send.lts", [None]),
    ("a known attribute in the map without a value", L.ATTRIBUTES, [("tempotrace.rank", None)]),
    ("stamps: a null send", L.STAMPS_SENDS, [None]),
    ("a recv sketch", "tempotrace.torch.recv.svc_sketch", b"\xab" * 32),
    ("a sender's span id", "tempotrace.torch.remote.span_id", b"\x0c" * 8),
    ("a clock domain of the Resource", "resource.tempotrace.clock.domain", "kernel:x:tai"),
]


def _stamps_table(tmp_path: Path) -> Any:
    """Rows with stamps texts decoded: a span with an end and a send, its child received with a sketch."""
    [(table, _)] = _table_of([_one({STAMPS: _TEXT})] * 3, tmp_path, "stamps")
    assert table.column(L.STAMPS_SENDS)[0].as_py() and table.column(L.STAMPS_REMOTE[5])[1].as_py() is not None
    return table


@pytest.mark.parametrize(("name", "column", "value"), CELLS, ids=[c[0] for c in CELLS])
def test_a_cell_changed_reads_as_the_row_groups(name: str, column: str, value: Any, tmp_path: Path) -> None:
    for table in (_torch_table(tmp_path), _stamps_table(tmp_path)):
        for row in (0, 1, 3):
            assert_rows_same(_set(table, column, row, value), 0, (row, row + 1))


@pytest.mark.parametrize(("every", "groups"), [(3, 1), (200, 0)])
def test_rows_for_the_reference_are_read_by_one_row_group_when_many(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    every: int, groups: int) -> None:
    """ERROR spans scattered through a table: one RowGroup of the whole group reads them, not one per run (each
    reads every column); a few runs are read over slices of their own rows."""
    table = pa.concat_tables([_torch_table(tmp_path)] * 20).combine_chunks()
    status = [2 if i % every == 1 else 0 for i in range(table.num_rows)]
    table = table.set_column(table.column_names.index(L.STATUS_CODE), L.STATUS_CODE, pa.array(status, pa.int64()))
    want = RowGroup(table, "t.parquet").records(0, table.num_rows, 0, None)
    made = _row_groups_made(monkeypatch)
    got = ParquetRows(table, "t.parquet").records(0, table.num_rows, 0, None)
    assert got == want
    assert made.count(table.num_rows) == groups and len(made) == (1 if groups else table.num_rows // every + 1)


def test_columns_of_other_types_are_read_by_the_row_group(tmp_path: Path) -> None:
    table = _torch_table(tmp_path)
    other = table.set_column(table.column_names.index(L.KIND), L.KIND, table.column(L.KIND).cast(pa.int32()))
    assert not ParquetRows(other, "t.parquet").plain
    assert_rows_same(other, 0, (3,))


def test_the_columnar_engine_reads_a_span_table_as_the_reference(tmp_path: Path) -> None:
    """The reader's side: notes among the rows, two row groups, a part its writer did not finish."""
    job = TorchJob(ranks=4, steps=3, collectives=2, liar=2, liar_ns=-40_000)
    lines = _job_lines(job, 8)
    src = tmp_path / "job.jsonl"
    src.write_text("\n".join([*lines[:5], '{"resourceSpans": [', *lines[5:]]) + "\n")
    folder = tmp_path / "tables"
    folder.mkdir()
    converted([str(src)], str(folder / "a.parquet"), row_group_rows=50)
    (folder / "part-1-ab-00000001.parquet.tmp").write_bytes(b"PAR1")
    want = comparable(analyze(str(folder)).to_dict())
    assert want["bad"]["lines"] == 2 and want["spans"] == sum(1 for line in lines for _ in line.split('"spanId"')[1:])
    assert comparable(analyze(str(folder), engine="columnar").to_dict()) == want
