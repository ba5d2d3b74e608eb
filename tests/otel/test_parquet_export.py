"""``TEMPOTRACE_EXPORT_FORMAT=parquet``: the file exporter writes one Parquet part per batch (spec/parquet.md §4),
processes share the directory, a SIGKILL loses at most the part being written (counted as a torn line is),
losses go through the LossLedger as the JSON exporter's do, and the parts give the report the JSON gives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _otel_helpers import subprocess_env

from tempotrace_sdk.analysis import analyze
from tempotrace_sdk.otel.appender import AppendStream
from tempotrace_sdk.otel.export import EXPORT_FORMAT_ENV, export_format, file_exporter
from tempotrace_sdk.otel.file_export import JsonLinesSpanExporter
from tempotrace_sdk.otel.loss import LossLedger
from tempotrace_sdk.otel.parquet_export import ParquetSpanExporter, PartDirectory

pytest.importorskip("pyarrow")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the analysis's trace generator
from analysis.tracegen import trace_spans

WRITER = """
import sys
from tempotrace_sdk.otel import configure, span
handle = configure(service_name="w" + sys.argv[1])
for i in range(int(sys.argv[2])):
    with span(f"w{sys.argv[1]}-{i}"):
        pass
    if i % 25 == 24:
        handle.force_flush()
handle.shutdown()
print(handle.export_path)
"""


def _comparable(d: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in d.items() if k not in ("elapsed_s", "source", "inputs")}


@pytest.mark.parametrize(("value", "want"), [("", "jsonl"), ("jsonl", "jsonl"), (" Parquet ", "parquet")])
def test_the_format_variable(monkeypatch: pytest.MonkeyPatch, value: str, want: str) -> None:
    monkeypatch.setenv(EXPORT_FORMAT_ENV, value)
    assert export_format() == want


def test_any_other_format_is_a_configuration_mistake(tmp_path: Path) -> None:
    code = "from tempotrace_sdk.otel import configure\nconfigure()\n"
    out = subprocess.run([sys.executable, "-c", code], env=subprocess_env(TEMPOTRACE_EXPORT_FORMAT="csv"),
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "TEMPOTRACE_EXPORT_FORMAT='csv': must be one of jsonl, parquet" in out.stderr
    assert list(tmp_path.iterdir()) == []  # found before any exporter made a file


def test_processes_share_the_parts_directory(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    env = subprocess_env(TEMPOTRACE_EXPORT_PATH=str(path), TEMPOTRACE_EXPORT_FORMAT="parquet",
                         TEMPOTRACE_CLOCK="sim:ptp")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(n), "100"], env=env, stdout=subprocess.PIPE,
                              text=True) for n in range(3)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    folder = tmp_path / "shared.parquet.d"
    assert outs == [str(folder)] * 3 and not path.exists()
    parts = sorted(p.name for p in folder.iterdir())
    assert len({name.rsplit("-", 1)[0] for name in parts}) == 3 and len(parts) >= 12  # 3 writers, a part per flush
    assert not [name for name in parts if name.endswith(".tmp")]
    d = analyze(str(folder)).to_dict()
    assert d["spans"] == 300 and d["bad"]["lines"] == 0


def test_a_directory_gives_each_process_its_parts_directory(tmp_path: Path) -> None:
    env = subprocess_env(TEMPOTRACE_EXPORT_DIR=str(tmp_path / "out"), TEMPOTRACE_EXPORT_FORMAT="parquet",
                         TEMPOTRACE_CLOCK="cpu")
    out = subprocess.run([sys.executable, "-c", WRITER, "0", "3"], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    (folder,) = (tmp_path / "out").iterdir()
    assert folder.name.startswith("spans-") and folder.name.endswith(".parquet.d") and out.stdout.strip() == str(folder)
    assert analyze(str(tmp_path / "out")).spans == 3


def test_the_parts_give_the_report_the_json_lines_give(tmp_path: Path) -> None:
    """The same batches through both exporters: the parts hold the rows convert makes of the JSON lines."""
    spans = trace_spans({"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ntp"}, steps=3)
    json_exporter = JsonLinesSpanExporter(AppendStream(lambda _pid: str(tmp_path / "t.jsonl")))
    parts = PartDirectory(lambda _pid: str(tmp_path / "t.parquet.d"))
    parquet_exporter = ParquetSpanExporter(parts)
    for i in range(0, len(spans), 7):
        json_exporter.export(spans[i:i + 7])
        parquet_exporter.export(spans[i:i + 7])
    json_exporter.shutdown()
    parquet_exporter.shutdown()
    want = analyze(str(tmp_path / "t.jsonl"), window_spans=30).to_dict()
    assert _comparable(analyze(str(tmp_path / "t.parquet.d"), window_spans=30).to_dict()) == _comparable(want)
    assert want["spans"] == len(spans) and want["hops"]["total"] > 0 and parts.seq == (len(spans) + 6) // 7


def test_a_drop_record_goes_through_the_ledger(tmp_path: Path) -> None:
    ledger = LossLedger(lambda _where, _n: None)
    exporter = ParquetSpanExporter(PartDirectory(lambda _pid: str(tmp_path / "d.parquet.d")), ledger=ledger)
    spans = trace_spans({"a": "sim:ptp", "b": "sim:ptp"}, steps=1)
    exporter.export(spans)
    ledger.drop(12, "queue_full", "the queue was full")
    assert exporter.force_flush()
    exporter.shutdown()
    d = analyze(str(tmp_path / "d.parquet.d")).to_dict()
    assert d["export_loss"] == {"dropped_spans": 12, "writers": 1, "writers_with_loss": 1}
    assert d["spans"] == len(spans)


def test_a_directory_that_cannot_be_made_is_counted_and_retried(tmp_path: Path) -> None:
    """spec/reliability.md §3 as for the JSON file: a warning and a count, the parts kept and written later."""
    counted: dict[str, int] = {}
    ledger = LossLedger(lambda where, n: counted.__setitem__(where, counted.get(where, 0) + n))
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the directory should be")
    exporter = ParquetSpanExporter(PartDirectory(lambda _pid: str(blocker / "t.parquet.d")), ledger=ledger)
    spans = trace_spans({"a": "sim:ptp", "b": "sim:ptp"}, steps=1)
    assert exporter.export(spans).name == "FAILURE"
    assert counted.get("export_open_failed", 0) >= 1 and not counted.get("export_dropped")
    blocker.unlink()
    time.sleep(1.1)  # appender.REOPEN_INTERVAL_S: no new attempt before it
    assert exporter.force_flush()
    exporter.shutdown()
    assert analyze(str(blocker / "t.parquet.d")).spans == len(spans)


def test_file_exporter_names_the_parts_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(EXPORT_FORMAT_ENV, "parquet")
    exporter, where = file_exporter(tmp_path / "x.jsonl")
    assert isinstance(exporter, ParquetSpanExporter) and where == str(tmp_path / "x.parquet.d")
    exporter.shutdown()


KILLED = """
import os, sys, time
import tempotrace_sdk.otel.parquet_export as parts
from tempotrace_sdk.otel import configure, span

real = os
marker, hang_at = sys.argv[1], int(sys.argv[2])
class HalfWrite:  # the write of part `hang_at` stops half-way, as a SIGKILL in the middle of it leaves it
    def __getattr__(self, name):
        return getattr(real, name)
    def write(self, fd, data):
        if handle.export_processors and parts_written() == hang_at:
            real.write(fd, bytes(data[: len(data) // 2]))
            open(marker, "w").close()
            time.sleep(120)
        return real.write(fd, data)
def parts_written():
    return sum(1 for n in os.listdir(handle.export_path) if n.endswith(".parquet"))
parts.os = HalfWrite()
handle = configure(service_name="k")
for batch in range(hang_at + 1):
    for i in range(10):
        with span(f"s{batch}-{i}"):
            pass
    handle.force_flush(timeout_millis=200)
time.sleep(120)
"""


def test_a_writer_killed_mid_part_loses_that_part_only(tmp_path: Path) -> None:
    """SIGKILL while a part is half written: the complete parts are read, the half one counted as lost."""
    marker = tmp_path / "stuck"
    env = subprocess_env(TEMPOTRACE_EXPORT_PATH=str(tmp_path / "k.jsonl"), TEMPOTRACE_EXPORT_FORMAT="parquet",
                         TEMPOTRACE_CLOCK="cpu")
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(marker), "4"], env=env, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    folder = tmp_path / "k.parquet.d"
    names = sorted(os.listdir(folder))
    assert len([n for n in names if n.endswith(".parquet")]) == 4 and len([n for n in names if n.endswith(".tmp")]) == 1
    d = analyze(str(folder)).to_dict()
    assert d["spans"] == 40  # four batches of ten, whole
    assert d["bad"]["lines"] == 1 and "unfinished part" in d["bad"]["first"][0]["reason"]
    assert d["bad"]["first"][0]["path"].endswith(".parquet.tmp")


def test_refused_spans_are_named_by_part_and_row_before_and_after_convert(tmp_path: Path) -> None:
    """Rows an exporter wrote have no input line: a refused one is named ``part:row``, in the parts and in the
    file convert compacts them into (row groups of 3: rows counted in the file, not the row group)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tempotrace_sdk.analysis.parquet_convert import convert

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    for i in range(8):
        with tracer.start_as_current_span(f"s{i}", attributes={"tempotrace.rank": -1 if i % 3 == 2 else i}):
            pass
    spans = list(memory.get_finished_spans())
    exporter = ParquetSpanExporter(PartDirectory(lambda _pid: str(tmp_path / "p.parquet.d")))
    exporter.export(spans[:4])
    exporter.export(spans[4:])
    exporter.shutdown()
    parts = analyze(str(tmp_path / "p.parquet.d")).to_dict()
    named = [(b["path"].rsplit("-", 1)[1], b["line"]) for b in parts["bad"]["first"]]
    assert parts["bad"]["spans"] == 2 and named == [("00000000.parquet", 3), ("00000001.parquet", 2)]
    convert([str(tmp_path / "p.parquet.d")], str(tmp_path / "one.parquet"), row_group_rows=3)
    assert _comparable(analyze(str(tmp_path / "one.parquet")).to_dict()) == _comparable(parts)
