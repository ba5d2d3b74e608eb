"""``tempotrace convert`` and span tables as ``analyze`` inputs (spec/parquet.md §5-§6): row groups of a bounded
size, nothing left behind by a conversion that fails, a fifth of the JSON's bytes (or less) on a real export,
and what a file that cannot be read counts as."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from tempotrace_sdk.analysis import analyze
from tempotrace_sdk.cli.main import main as cli
from tempotrace_sdk.demo import DemoConfig, run_demo

from .otlpgen import line, span
from .parquetgen import converted, replicate, report_of

pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    return Path(run_demo(DemoConfig(http=True, ranks=2, iterations=2, out=out), io.StringIO()).paths["trace"])


def test_convert_writes_a_span_table_and_says_how_big(demo_trace: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.parquet"
    assert cli(["convert", str(demo_trace), "--parquet", str(out), "--quiet"]) == 0
    said = capsys.readouterr()
    assert said.out.startswith(f"wrote {out}: ") and "x the input's" in said.out and said.err == ""
    assert report_of(str(out)) == report_of(str(demo_trace))
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]  # no temporary file left


def test_a_real_export_is_at_most_a_quarter_of_its_json(demo_trace: Path, tmp_path: Path) -> None:
    """§6, issue 24's bound: the HTTP demo's export, 40 runs' worth (fresh ids, later times), zstd + dictionaries."""
    big = replicate(str(demo_trace), str(tmp_path / "big.jsonl"), 40)
    out = converted([big], str(tmp_path / "big.parquet"))
    ratio = Path(out).stat().st_size / Path(big).stat().st_size
    print(f"span table / OTLP JSON = {ratio:.3f} ({Path(out).stat().st_size:,} / {Path(big).stat().st_size:,} bytes)")
    assert ratio <= 0.25


def test_row_groups_are_bounded(demo_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "rg.parquet"
    assert cli(["convert", str(demo_trace), "--parquet", str(out), "--row-group-spans", "50", "--quiet"]) == 0
    meta = pq.ParquetFile(out).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert meta.num_row_groups > 1 and max(sizes) == 50 and sum(sizes) == meta.num_rows
    assert report_of(str(out)) == report_of(str(demo_trace))


def test_bad_lines_are_said_as_analyze_says_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(line([span(1, 1)]) + "\n{torn\n")
    assert cli(["convert", str(trace), "--parquet", str(tmp_path / "t.parquet"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "tempotrace convert: warning: skipped 1 unreadable lines and 0 malformed spans" in err
    assert f"(first: {trace}:2: not JSON" in err


@pytest.mark.parametrize(("content", "args", "said"), [
    pytest.param("", [], "no OTLP trace lines", id="empty"),
    pytest.param("{torn\n", ["--strict"], ":1: not JSON", id="strict-stops-at-the-first-bad-line"),
    pytest.param('{"resourceMetrics":[]}\n', [], "no OTLP trace lines", id="metrics"),
])
def test_a_conversion_that_fails_writes_nothing(tmp_path: Path, content: str, args: list[str], said: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(content)
    out = tmp_path / "out.parquet"
    assert cli(["convert", str(trace), "--parquet", str(out), "--quiet", *args]) == 2
    assert said in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]


def test_the_output_cannot_be_an_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(line([span(1, 1)]) + "\n")
    out = converted([str(trace)], str(tmp_path / "t.parquet"))
    assert cli(["convert", str(trace), out, "--parquet", out, "--quiet"]) == 2
    assert "the output is also an input" in capsys.readouterr().err


def test_a_directory_of_json_and_span_tables(demo_trace: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    converted([str(demo_trace)], str(folder / "a.parquet"))
    shutil.copy(demo_trace, folder / "b.jsonl")
    d = analyze(str(folder)).to_dict()
    assert d["spans"] == 2 * report_of(str(demo_trace))["spans"] and d["duplicate_spans"] == d["spans"] // 2


def test_a_file_without_its_footer_is_a_bad_line_and_the_rest_is_read(demo_trace: Path, tmp_path: Path) -> None:
    """§4: what a writer killed before its footer leaves; counted as a torn line is."""
    good = converted([str(demo_trace)], str(tmp_path / "good.parquet"))
    torn = tmp_path / "torn.parquet"
    torn.write_bytes(Path(good).read_bytes()[: Path(good).stat().st_size // 2])
    d = analyze([good, str(torn)]).to_dict()
    assert d["bad"]["lines"] == 1 and d["bad"]["first"][0]["path"] == str(torn)
    assert "not a readable Parquet file" in d["bad"]["first"][0]["reason"]
    assert d["spans"] == report_of(good)["spans"]


def test_a_parquet_file_that_is_no_span_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pa = pytest.importorskip("pyarrow")
    other = tmp_path / "dir" / "other.parquet"
    other.parent.mkdir()
    pq.write_table(pa.table({"x": [1, 2]}), other)
    assert cli(["analyze", str(other), "--quiet"]) == 2
    assert "not a TempoTrace span table" in capsys.readouterr().err
    trace = other.parent / "t.jsonl"
    trace.write_text(line([span(1, 1)]) + "\n")
    d = analyze(str(other.parent)).to_dict()
    assert d["spans"] == 1 and d["bad"]["not_trace_files"] == [f"{other}: a Parquet file without "
                                                               "'tempotrace.parquet' in its metadata: not a TempoTrace "
                                                               "span table"]


def test_engine_dask_reads_span_tables_and_gives_the_same_report(demo_trace: Path, tmp_path: Path) -> None:
    """§5.3: with a span table among the inputs, each Dask partition reads the inputs itself: the report is
    the one-process report of the same files (and of the JSON they came from)."""
    pytest.importorskip("distributed")
    out = converted([str(demo_trace)], str(tmp_path / "t.parquet"))
    mixed = [out, str(demo_trace)]  # a table and a JSON file side by side: every span twice, as duplicates
    for inputs in ([out], mixed):
        one = analyze(inputs).to_dict()
        spread = analyze(inputs, engine="dask", jobs=2).to_dict()
        for d in (one, spread):
            d.pop("elapsed_s")
        assert spread == one
    assert analyze([out], engine="dask", jobs=2).to_dict()["edges"] == report_of(str(demo_trace))["edges"]


def test_analyze_json_output_of_a_span_table(demo_trace: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = converted([str(demo_trace)], str(tmp_path / "t.parquet"))
    assert cli(["analyze", out, "--json", "--jobs", "2"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["source"] == out and d["spans"] == report_of(str(demo_trace))["spans"]
