"""The HTML timeline's layout, decided in Python (spec/analysis.md §6.3): rows, lanes, exact times,
colours, legend, what is cut. The browser tests (test_analysis_html_chromium.py) check the drawing."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tempotrace_sdk.analysis import AnalysisReport, html_model
from tempotrace_sdk.analysis.html import render_html
from tempotrace_sdk.analysis.html_model import LEGEND, span_times, timeline_model

from .timeline_fixture import LEAP_S, MS, ROWS, T0, synthetic_report


def _payload(page: str) -> dict[str, Any]:
    m = re.search(r'id="tt-data">(.*?)</script>', page, re.S)
    assert m is not None
    return dict(json.loads(m.group(1)))


def test_rows_by_rank_then_host_then_processes_without_a_rank() -> None:
    """Ranks numerically (10 after 3), hosts naturally (infer2 before infer10), then one row per host and
    clock for spans without a rank (ps has two clocks: two rows, not one)."""
    model = timeline_model(synthetic_report())
    assert [r["label"] for r in model["rows"]] == ROWS
    # Every span sits in the row of its own host, rank and (rank-less) clock.
    rep = synthetic_report()
    by_id = {s["span_id"]: s for s in rep.spans_kept}
    for s in model["spans"]:
        row, rec = model["rows"][s["row"]], by_id[s["id"]]
        assert (row["host"], row["rank"]) == (rec["host"], rec["rank"])
        if rec["rank"] is None:
            assert row["clock"] == rec["clock"]


def test_times_are_exact_ns_from_the_origin_and_unstamped_spans_sit_on_tai() -> None:
    """TAI ns since 1970 exceed 2^53, so the page gets exact offsets from the origin; a span with only
    OpenTelemetry (UTC) times is moved onto TAI by the leap-second offset, not drawn 37 s early."""
    model = timeline_model(synthetic_report())
    assert model["origin_ns"] == T0
    spans = {s["id"]: s for s in model["spans"]}
    assert all(isinstance(s["s"], int) and abs(s["s"]) < 2**53 for s in model["spans"])
    render = spans["00000000000000d1"]  # the unstamped span: UTC in the record, 26 ms after T0 in TAI
    assert (render["s"], render["e"]) == (26 * MS, 27 * MS)
    assert render["su"] is None and render["eu"] is None and "span-unstamped" in render["enc"]
    assert spans["00000000000000f1"]["s"] == 8 * MS and spans["00000000000000f1"]["su"] == 220


@pytest.mark.parametrize(("case", "end", "end_bound", "expect_end", "end_is_stamp"), [
    ("end stamped", T0 + 5 * MS, 220, T0 + 5 * MS, True),
    ("noisy clock stamps its end before its start", T0 - 300_000, 65535, T0 - 300_000, True),
    ("no end stamp: the OpenTelemetry end", T0 + 5 * MS - LEAP_S * 10**9, None, T0 + 5 * MS, False),
    ("end event without a reading: UTC with a bound", T0 + 5 * MS - LEAP_S * 10**9, 65535, T0 + 5 * MS, False),
])
def test_span_end_on_the_tai_axis(case: str, end: int, end_bound: int | None, expect_end: int,
                                  end_is_stamp: bool) -> None:
    rec = {"stamped": True, "start_ptp_ns": T0, "end_ptp_ns": end, "end_uncertainty_ns": end_bound}
    assert span_times(rec) == (T0, expect_end, end_is_stamp), case


def test_lanes_nest_children_and_reuse_free_lanes() -> None:
    """A child runs below its parent; a span after another ends reuses its lane."""
    model = timeline_model(synthetic_report())
    node0 = ROWS.index("rank 0 · node0")
    lanes = {(s["name"], s["s"]): s["lane"] for s in model["spans"] if s["row"] == node0}
    assert lanes[("train_step", 0)] == 0 and lanes[("nccl:all_reduce", 1 * MS)] == 1
    assert lanes[("train_step", 10 * MS)] == 0  # the next iteration: lane 0 again
    assert model["rows"][node0]["lanes"] == 2


def test_many_concurrent_spans_are_capped_in_lanes() -> None:
    rep = synthetic_report()
    base = rep.spans_kept[0]
    rep.spans_kept = [dict(base, span_id=f"{i:016x}", start_ptp_ns=T0 + i, end_ptp_ns=T0 + MS) for i in range(40)]
    rep.hops_kept, rep.collectives_kept = [], []
    model = timeline_model(rep)
    assert len(model["rows"]) == 1
    assert model["rows"][0]["lanes"] == html_model.MAX_LANES
    assert max(s["lane"] for s in model["spans"]) == html_model.MAX_LANES - 1


def test_hops_p2p_and_collectives_coloured_by_decision() -> None:
    """A record without ``kind`` is a hop; contradiction wins over the method; every kept record is drawn."""
    rep = synthetic_report()
    model = timeline_model(rep)
    assert len(model["hops"]) == len(rep.hops_kept) and len(model["collectives"]) == len(rep.collectives_kept)
    assert Counter(h["kind"] for h in model["hops"]) == {"p2p": 3, "hop": 3}
    assert Counter(h["c"] for h in model["hops"]) == Counter(h["decision"]["method"] for h in rep.hops_kept)
    assert [c["c"] for c in model["collectives"]] == ["physics", "lamport", "contradiction"]
    incomplete = model["collectives"][1]
    assert incomplete["missing"] == [3] and "collective-incomplete" in incomplete["enc"]
    assert len(incomplete["members"]) == 3
    # The last arriver is rank 2's member span: its row and its start.
    node2 = ROWS.index("rank 2 · node2")
    for c in model["collectives"]:
        assert c["last"][0] == node2 and c["last"][2] == c["t1"] == max(m[2] for m in c["members"])


def test_legend_lists_exactly_the_encodings_used() -> None:
    """Every legend entry is used by something drawn, and everything drawn is explained."""
    model = timeline_model(synthetic_report())
    used = {tok for kind in ("rows", "spans", "hops", "collectives") for item in model[kind]
            for tok in item["enc"].split()}
    assert set(model["legend"]) == used
    assert used == set(LEGEND)  # the fixture uses every encoding the page knows
    one = synthetic_report()
    one.spans_kept = [s for s in one.spans_kept if s["host"] in ("ps", "web") and s["span_id"][-2:] in ("c1", "c2")]
    one.hops_kept = [h for h in one.hops_kept if h["decision"]["method"] == "lamport"]
    one.collectives_kept, one.faults = [], []
    assert timeline_model(one)["legend"] == ["lamport", "kind-hop", "span-stamped", "whisker"]


def test_a_hop_without_a_reading_is_not_drawn_and_the_page_says_so() -> None:
    rep = synthetic_report()
    rep.hops_kept[0] = dict(rep.hops_kept[0], send_ptp_ns=None)
    page = render_html(rep)
    assert len(_payload(page)["hops"]) == len(rep.hops_kept) - 1
    assert "1 hop has no TempoTrace reading at one end: not drawn." in page


def test_endpoint_without_a_kept_span_gets_its_row() -> None:
    """A hop from a sender whose span the analysis did not keep (or never saw: host "?") is still drawn,
    from a row of its own."""
    rep = synthetic_report()
    rep.hops_kept.append(dict(rep.hops_kept[0], send_span="ffffffffffffffff", send_host="?", send_rank=None))
    model = timeline_model(rep)
    labels = [r["label"] for r in model["rows"]]
    assert labels == [*ROWS[:7], "?", *ROWS[7:]]  # rank-less, by host
    assert model["hops"][-1]["a"][0] == labels.index("?")


def test_cut_timeline_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most HTML_MAX_* records are drawn; the page says how many of how many, and why a collective whose
    member spans were cut is not drawn."""
    monkeypatch.setattr(html_model, "HTML_MAX_COLLECTIVES", 1)
    rep = synthetic_report()
    page = render_html(rep)
    assert len(_payload(page)["collectives"]) == 1 and "Timeline shows 1 of 3 collectives" in page
    monkeypatch.setattr(html_model, "HTML_MAX_SPANS", 5)
    page = render_html(rep)
    assert len(_payload(page)["spans"]) == 5 and not _payload(page)["collectives"]
    assert f"Timeline shows 5 of {rep.spans:,} spans, 1 of 3 collectives" in page
    assert "1 collective has no member span drawn: not drawn." in page
    assert 'id="cut"' not in render_html(AnalysisReport())


def test_json_carries_the_collectives_as_the_contract_says() -> None:
    """report.collectives_kept is the JSON's ``collectives`` and matches the schema's contract."""
    import jsonschema

    rep = synthetic_report()
    out = rep.to_dict()
    assert out["collectives"] == rep.collectives_kept
    schema = json.loads((Path(__file__).resolve().parents[2] / "spec" / "analysis-report.schema.json").read_text())
    jsonschema.validate(out, schema)
    broken = dict(out, collectives=[{k: v for k, v in rep.collectives_kept[0].items() if k != "last_arriver"}])
    with pytest.raises(jsonschema.ValidationError, match="last_arriver"):
        jsonschema.validate(broken, schema)


def test_page_is_self_contained_and_numbers_come_from_the_summary() -> None:
    rep = synthetic_report()
    page = render_html(rep)
    assert "default-src 'none'" in page and "<script src" not in page and "<link" not in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    for key, value in rep.summary().items():
        assert f'data-key="{key}" data-value="{value}"' in page
    assert f'data-origin-ns="{T0}"' in page and "1,796,065,698,000,000,000 ns" in page
    assert "2026-11-30 19:08:18.000000000 TAI = 2026-11-30 19:07:41.000000000 UTC" in page


def test_a_torch_job_page_opens_on_its_steps_and_shows_the_straggler_summary(tmp_path: Path) -> None:
    """§6.3: the view the page opens on spans the torch.step spans (with their bounds), not the clock check
    seconds before them; the torch section names each listed step's slowest rank, per-rank communication and
    the stragglers, from the same records as the JSON."""
    from .torchgen import TorchJob

    job = TorchJob(check_ns=5_000 * MS)
    rep = _analyze(job.write(str(tmp_path / "t.jsonl")))
    page = render_html(rep)
    data = _payload(page)
    steps = [s for s in data["spans"] if s["name"] == "torch.step"]
    assert data["open"] == [min(s["s"] - s["su"] for s in steps), max(s["e"] + s["eu"] for s in steps)]
    check = [s for s in data["spans"] if s["name"] == "torch.check_clocks"]
    assert check and all(s["e"] < data["open"][0] for s in check)  # seconds before: not in the opening view
    slowest = re.findall(r'<tr data-step="(\d+)"[^>]*><td>\d+</td><td data-slowest-rank="(\d*)"', page)
    assert slowest == [(str(step), str(job.slow_rank)) for step in range(job.steps)]
    ranks = {row["rank"]: row for row in rep.to_dict()["torch"]["by_job"][0]["ranks"]}
    for r, row in ranks.items():
        assert f'<tr data-rank="{r}" data-comm-ns="{row["comm_ns"]}" data-rest-ns="{row["rest_ns"]}">' in page
    assert f'<tr data-rank="{job.slow_rank}" data-host="node{job.slow_rank}">' in page.split('id="stragglers"')[1]
    assert 'id="tl-steps"' in page
    plain = render_html(synthetic_report())  # no step spans: opens on everything, no Steps button
    assert _payload(plain)["open"] is None and 'id="tl-steps"' not in plain and 'id="torch"' not in plain


def test_left_out_spans_are_counted_and_the_option_to_draw_them_named(tmp_path: Path) -> None:
    """More spans than --html-max-spans: the page says how many it left out and names the option (with the
    number that draws them all); the default draws more than 5,000."""
    from tempotrace_sdk.cli.main import main as cli

    from .torchgen import TorchJob

    trace = TorchJob(steps=700).write(str(tmp_path / "t.jsonl"))  # 3 + 700 * 9 = 6,303 spans
    full, cut = tmp_path / "full.html", tmp_path / "cut.html"
    assert cli(["analyze", trace, "--html", str(full), "--quiet"]) == 0
    drawn = _payload(full.read_text())["spans"]
    assert len(drawn) == 3 + 700 * 9 > 5000 and 'id="cut-spans"' not in full.read_text()
    assert cli(["analyze", trace, "--html", str(cut), "--html-max-spans", "1000", "--quiet"]) == 0
    page = cut.read_text()
    assert len(_payload(page)["spans"]) == 1000
    left = len(drawn) - 1000
    assert f'<span id="cut-spans" data-left-out="{left}">{left:,} spans are left out' in page
    assert f"--html-max-spans {len(drawn)}" in page


def _analyze(path: str) -> AnalysisReport:
    from tempotrace_sdk.analysis import analyze

    return analyze(path, keep=100_000)
