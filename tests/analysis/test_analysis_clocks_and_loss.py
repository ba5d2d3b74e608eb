"""Rows per clock (spec/analysis.md §4: host and rank) and exporter loss in the report (§5.4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempotrace_sdk.analysis import TraceFileError, analyze_file
from tempotrace_sdk.cli.main import main as cli

from .otlpgen import line, loss_line, span, stamp

T = 1_800_000_037_000_000_000
LIAR_RANK = 3


def _eight_ranks_on_one_node(ranks: bool) -> list[str]:
    """Two coordinators call each of eight ranks on node0; rank 3's clock reads 50 µs early while it
    claims ±220 ns. With ``ranks`` False the spans carry no tempotrace.rank."""
    lines = []
    for c, coord in enumerate(("coord-a", "coord-b")):
        trace = c + 1
        root = 0x100 * trace
        spans = [span(trace, root, host=coord, attrs=stamp("", T, lts=1))]
        for r in range(8):
            t = T + (r + 1) * 100_000
            client, server = root + 2 * r + 1, root + 2 * r + 2
            send_lts = 10 * r + 2
            spans.append(span(trace, client, root, kind=3, host=coord, attrs={
                **stamp("", t, lts=send_lts - 1), "tempotrace.send.lts": [send_lts],
                "tempotrace.send.ptp_ns": [t + 1_000], "tempotrace.send.uncertainty_ns": [220]}))
            offset = -50_000 if r == LIAR_RANK else 0
            attrs = {**stamp("", t + 11_000 + offset, lts=send_lts + 2), **stamp("remote.", t + 1_000, lts=send_lts),
                     "tempotrace.recv.lts": send_lts + 1}
            if ranks:
                attrs["tempotrace.rank"] = r
            spans.append(span(trace, server, client, kind=2, host="node0", attrs=attrs))
        lines.append(line(spans))
    return lines


def test_ranks_on_one_node_are_rows_of_their_own(tmp_path: Path) -> None:
    """Eight ranks on one node with eight clocks: the lying rank is named, the seven honest ones are not
    merged into its row."""
    path = tmp_path / "ranks.jsonl"
    path.write_text("\n".join(_eight_ranks_on_one_node(ranks=True)) + "\n")
    d = analyze_file(str(path)).to_dict()
    (fault,) = d["faults"]
    assert (fault["host"], fault["rank"], fault["verdict"]) == ("node0", LIAR_RANK, "lying")
    assert fault["edges"] == 4  # its two hops and two parent -> child edges, not the node's 32
    assert sorted(p["host"] for p in fault["peer_sample"]) == ["coord-a", "coord-b"]
    assert all(p["rank"] is None for p in fault["peer_sample"])
    assert d["lying_hosts"] == ["node0"]
    pairs = d["wrong_by_pair"]
    assert pairs and all(p["ranks"][p["hosts"].index("node0")] == LIAR_RANK for p in pairs)
    rep = analyze_file(str(path))
    assert "clock fault: node0 rank 3 LYING" in rep.to_text()


def test_without_ranks_the_node_is_one_row(tmp_path: Path) -> None:
    """The contrast: spans without tempotrace.rank are keyed by host alone (as before)."""
    path = tmp_path / "node.jsonl"
    path.write_text("\n".join(_eight_ranks_on_one_node(ranks=False)) + "\n")
    (fault,) = analyze_file(str(path)).to_dict()["faults"]
    assert (fault["host"], fault["rank"]) == ("node0", None) and fault["edges"] == 32


@pytest.fixture
def with_loss(tmp_path: Path) -> Path:
    """Spans from two exporters, one of which says, cumulatively, that it dropped 3 then 7 spans."""
    path = tmp_path / "loss.jsonl"
    good = line([span(1, 0xA1, attrs=stamp("", T, lts=1)), span(1, 0xB2, 0xA1, attrs=stamp("", T + 5_000, lts=2))])
    path.write_text("\n".join([loss_line("w-1", 3), good, loss_line("w-2", 0), loss_line("w-1", 7),
                               loss_line("w-1", 5)]) + "\n")
    return path


def test_exporter_loss_is_reported_never_an_error_never_a_span(with_loss: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    d = analyze_file(str(with_loss)).to_dict()
    assert d["spans"] == 2 and d["bad"] == {"lines": 0, "spans": 0, "first": [], "not_trace_files": []}
    assert d["export_loss"] == {"dropped_spans": 7, "writers": 2, "writers_with_loss": 1}
    assert d["summary"]["export_dropped_spans"] == 7
    assert cli(["analyze", str(with_loss)]) == 0
    out = capsys.readouterr().out
    assert "WARNING: the exporters dropped 7 spans before writing them (1 of 2 writers)" in out
    assert cli(["analyze", str(with_loss), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["export_loss"]["dropped_spans"] == 7 and "dropped 7 spans" in captured.err


def test_loss_adds_up_over_writers_and_partitions(with_loss: Path, tmp_path: Path) -> None:
    """The largest count per writer, summed over writers; the same with the work split by trace."""
    other = tmp_path / "other.jsonl"
    other.write_text(loss_line("w-3", 4) + "\n")
    assert analyze_file(str(tmp_path)).to_dict()["export_loss"]["dropped_spans"] == 11
    assert analyze_file(str(tmp_path), jobs=2).to_dict()["export_loss"]["dropped_spans"] == 11


def test_only_loss_records_is_no_trace_but_says_what_was_lost(tmp_path: Path) -> None:
    path = tmp_path / "lost.jsonl"
    path.write_text(loss_line("w-1", 12) + "\n")
    with pytest.raises(TraceFileError, match=r"no spans \(the exporters said they dropped 12\)"):
        analyze_file(str(path))
