"""`tempotrace analyze` end to end on traces written by the real OTel SDK, the real
TempoTrace processor/propagator and the real OTLP JSON exporter (spec/analysis.md §6)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tempotrace_sdk.analysis import analyze_file, analyze_spans, iter_spans, write_html, write_perfetto
from tempotrace_sdk.cli.main import main as _cli

from .tracegen import write_trace

HONEST = {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:ptp", "w3": "sim:ptp"}
WITH_LIAR = {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp", "w4": "sim:ptp"}
MIXED = {"coord": "sim:ptp", "w1": "sim:ntp", "w2": "sim:ptp", "w3": "sim:unsynced"}



@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, int]]:
    path = str(tmp_path_factory.mktemp("tt") / "honest.jsonl")
    return path, write_trace(path, HONEST)


@pytest.fixture(scope="module")
def liar(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("tt") / "liar.jsonl")
    write_trace(path, WITH_LIAR)
    return path


def test_honest_trace_every_hop_matched_nothing_wrong(honest: tuple[str, dict[str, int]]) -> None:
    path, truth = honest
    rep = analyze_file(path)
    d = rep.to_dict()
    assert d["hops"] == {"total": truth["hops"], "matched": truth["hops"]}
    assert d["edges"]["by_kind"]["hop"] == truth["hops"]
    assert d["edges"]["wrong_total"] == 0 and d["faults"] == [] and d["lying_hosts"] == []
    assert d["edges"]["decided"]["physics"] > 0
    assert sum(d["edges"]["decided"].values()) == d["edges"]["total"]
    assert d["unresolved_parents"] == 0


def test_lying_clock_is_flagged_and_no_honest_host_is(liar: str) -> None:
    rep = analyze_file(liar)
    assert rep.lying_hosts == ["w2"]
    assert rep.suspect_hosts == []
    (fault,) = rep.faults
    assert fault.kind == "physics" and fault.violations == sum(rep.edges.wrong.values())
    # The liar claims its bound and is off by the profile's offset: the evidence says how far.
    from tempotrace_sdk.clocks.simulated import PROFILES

    liar_profile = PROFILES["liar"]
    assert fault.claimed_bound_ns == liar_profile.bound_ns
    assert liar_profile.offset_ns / 2 < fault.max_excess_ns <= liar_profile.offset_ns
    assert len(fault.peers) >= 2
    assert rep.edges.naive_inversions >= fault.violations


def test_saturated_and_unknown_clocks_fall_back_to_logical_order(tmp_path: Path) -> None:
    path = str(tmp_path / "mixed.jsonl")
    write_trace(path, MIXED)
    d = analyze_file(path).to_dict()["edges"]
    assert d["wrong_total"] == 0
    assert d["decided"]["svc"] > 0 and d["decided"]["physics"] > 0
    # NTP (saturated) and UNKNOWN stamps are never physics-ordered, so some edges need Lamport/SVC.
    assert d["decided"]["svc"] + d["decided"]["lamport"] + d["decided"]["undecided"] > 0


def test_in_memory_spans_give_the_same_report(honest: tuple[str, dict[str, int]]) -> None:
    path, _ = honest
    from_file = analyze_file(path).summary()
    from_records = analyze_spans(list(iter_spans(path))).summary()
    assert from_file == from_records


def test_a_span_exported_twice_counts_once(honest: tuple[str, dict[str, int]], tmp_path: Path) -> None:
    path, _ = honest
    doubled = tmp_path / "doubled.jsonl"
    text = Path(path).read_text()
    doubled.write_text(text + text)
    once, twice = analyze_file(path).to_dict(), analyze_file(str(doubled)).to_dict()
    assert twice["duplicate_spans"] == once["spans"]
    assert twice["edges"] == once["edges"] and twice["hops"] == once["hops"]


def test_small_window_still_counts_every_edge(honest: tuple[str, dict[str, int]]) -> None:
    """§5: the window bounds memory; a trace analysed early loses only edges across the split."""
    path, _ = honest
    full = analyze_file(path).to_dict()
    tiny = analyze_file(path, window_spans=4).to_dict()
    assert tiny["spans"] == full["spans"]
    assert tiny["edges"]["total"] + tiny["unresolved_parents"] * 2 >= full["edges"]["total"] - tiny["hops"]["total"]
    assert tiny["edges"]["wrong_total"] == 0


def test_cli_writes_json_perfetto_html(honest: tuple[str, dict[str, int]], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path, truth = honest
    pf, ht = tmp_path / "p.json", tmp_path / "t.html"
    assert _cli(["analyze", path, "--json", "--perfetto", str(pf), "--html", str(ht), "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == "tempotrace.analysis/7"
    trace = json.loads(pf.read_text())
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == report["spans"]
    assert {e["args"]["name"] for e in events if e.get("name") == "process_name"} == set(HONEST)
    starts = [e for e in events if e["ph"] == "s"]
    finishes = [e for e in events if e["ph"] == "f"]
    assert len(starts) == len(finishes) == truth["hops"]
    assert all(e["args"]["method"] in ("physics", "lamport", "svc", "undecided") for e in starts)
    assert all("start_uncertainty_ns" in e["args"] for e in spans)
    assert trace["otherData"]["tempotrace"] == report["summary"]
    page = ht.read_text()
    assert "<script src" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert f'data-key="edges" data-value="{report["summary"]["edges"]}"' in page


def test_cli_text_summary(liar: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["analyze", liar, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "clock fault: w2 LYING" in out and "naive" in out
    assert _cli(["analyze", liar, "--quiet", "--fail-on-wrong"]) == 1


def test_cli_bad_trace_exit_2_with_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": []}\nnot json\n')
    out = tmp_path / "out.html"
    assert _cli(["analyze", str(bad), "--html", str(out)]) == 2
    assert f"{bad}:2: not JSON" in capsys.readouterr().err
    assert not out.exists()


def test_failed_write_leaves_no_partial_file(honest: tuple[str, dict[str, int]], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    rep = analyze_file(honest[0], keep=100)
    target = tmp_path / "out.json"

    def boom(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dump", boom)
    with pytest.raises(OSError):
        write_perfetto(rep, str(target))
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    write_html(rep, str(target.with_suffix(".html")))
    assert os.listdir(tmp_path) == ["out.html"]


def test_topology_extra_error_makes_physics_more_careful(honest: tuple[str, dict[str, int]], tmp_path: Path) -> None:
    """§3: a large cross-rack extra error moves cross-rack edges from physics to Lamport/SVC, never to WRONG."""
    path, _ = honest
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps({"racks": {"coord": "r1", "w1": "r1", "w2": "r2", "w3": "r2"},
                                "rack_pairs": [{"racks": ["r1", "r2"], "extra_ns": 10**9}]}))
    flat = analyze_file(path).to_dict()["edges"]
    racked = analyze_file(path, str(topo)).to_dict()
    e = racked["edges"]
    assert racked["topology"]["rack_pairs"] == [{"racks": ["r1", "r2"], "extra_ns": 10**9}]
    assert e["decided"]["physics"] < flat["decided"]["physics"]
    assert e["decided"]["svc"] + e["decided"]["lamport"] > 0
    assert e["wrong_total"] == 0 and e["total"] == flat["total"]


def test_html_embeds_hostile_names_safely() -> None:
    """§6.3: a span name cannot end the data script early; the embedded JSON parses back unchanged."""
    import re

    from tempotrace_sdk.analysis.html import render_html
    from tempotrace_sdk.analysis.report import AnalysisReport

    rep = AnalysisReport(source="<src>")
    name = "</script><!--<script>alert(1)</script>"
    rep.spans_kept.append({"trace_id": "t", "span_id": "s", "parent_id": "", "name": name, "host": "<h>",
                           "rank": None, "clock": "", "start_ptp_ns": 1, "start_uncertainty_ns": 1,
                           "start_quality": "OK", "start_lts": 1, "end_ptp_ns": 2, "end_uncertainty_ns": 1,
                           "end_quality": "OK", "stamped": True})
    page = render_html(rep)
    assert page.count("</script>") == 2  # the data block's and the code block's, nothing else
    data = re.search(r'id="tt-data">(.*?)</script>', page, re.S)
    assert data is not None and json.loads(data.group(1))["spans"][0]["name"] == name
    assert "<src>" not in page and "&lt;src&gt;" in page


def test_json_report_matches_its_schema(liar: str, honest: tuple[str, dict[str, int]]) -> None:
    """§6.1: the --json contract is spec/analysis-report.schema.json."""
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "spec" / "analysis-report.schema.json").read_text())
    for path in (liar, honest[0]):
        report = analyze_file(path).to_dict()
        jsonschema.validate(report, schema)
        s = report["summary"]
        assert s["physics"] + s["lamport"] + s["svc"] + s["undecided"] + s["wrong"] == s["edges"]
