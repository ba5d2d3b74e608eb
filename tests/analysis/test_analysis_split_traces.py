"""Hops whose client span is not in the analysed group (spec/analysis.md §4, §5): a trace split by
the window, or a sender whose spans were never exported. The sender is never guessed: the
receiver side is not blamed for it, and a split trace still matches its hops."""

from __future__ import annotations

from pathlib import Path

import pytest

from tempotrace_sdk.analysis import analyze_file, analyze_spans, iter_spans

from .tracegen import write_trace

WITH_LIAR = {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp", "w4": "sim:ptp"}


@pytest.fixture(scope="module")
def liar(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("split") / "liar.jsonl")
    write_trace(path, WITH_LIAR, steps=3)
    return path


@pytest.mark.parametrize("window", [4, 10, 30])
def test_small_window_still_names_the_liar_and_no_one_else(liar: str, window: int) -> None:
    whole = analyze_file(liar).to_dict()
    assert whole["lying_hosts"] == ["w2"]
    d = analyze_file(liar, window_spans=window).to_dict()
    hosts = {f["host"] for f in d["faults"]}
    assert "?" not in hosts
    assert d["lying_hosts"] == ["w2"], d["faults"]
    # hops split across a flush are matched through the flushed-span map
    assert d["hops"] == whole["hops"]
    # a trace analysed in parts is still one trace
    assert d["traces"] == whole["traces"] == 3 and d["trace_parts"] > d["traces"]


def test_unexported_sender_is_unattributed_not_a_made_up_host(liar: str) -> None:
    # Drop the liar's client spans (a sampled-out or crashed sender): its hops lose their sender.
    spans = [s for s in iter_spans(liar) if not (s.host == "w2" and s.sends)]
    rep = analyze_spans(spans)
    d = rep.to_dict()
    assert "?" not in {f["host"] for f in d["faults"]}
    honest = set(WITH_LIAR) - {"w2"}
    assert not honest & set(d["lying_hosts"]), d["faults"]
    assert d["hops"]["matched"] < d["hops"]["total"]
    # the contradictions on those hops are still counted, as evidence nobody can be blamed for
    assert d["unattributed"] > 0
    assert "unattributed" in rep.to_text()


def test_honest_trace_has_no_unattributed_evidence(tmp_path: Path) -> None:
    path = str(tmp_path / "h.jsonl")
    write_trace(path, {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:ptp"})
    assert analyze_file(path, window_spans=4).to_dict()["unattributed"] == 0


def test_evicted_waiting_receivers_blame_nobody(liar: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing remembered, split hops lose their sender: counted as unattributed, no host made up."""
    from tempotrace_sdk.analysis import analyzer as analyzer_mod

    monkeypatch.setattr(analyzer_mod, "MIN_REMEMBER", 1)
    d = analyze_file(liar, window_spans=2).to_dict()
    assert "?" not in {f["host"] for f in d["faults"]}
    assert set(d["lying_hosts"]) <= {"w2"}, d["faults"]
    wrong = d["edges"]["wrong_total"]
    assert wrong > 0 and d["unattributed"] + sum(p["count"] for p in d["wrong_by_pair"]) == wrong
