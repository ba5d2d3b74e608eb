"""The simulator (spec/analysis.md §7): Table 2 reproduced by the right model, no
wrong decision with honest clocks over 10^6 edges, the liar caught, reproducible."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tempotrace_sdk.analysis.simulate import PAPER_TABLE2, analytic_rate, run_simulation, table2

from .test_analysis_end_to_end import _cli


def test_table2_rows_match_the_models_we_claim() -> None:
    """§7.1: 6 and 38 µs match Gaussian (σ_pair 707 µs); 145 µs and 1.82 ms match pairwise Laplace b = 500 µs."""
    rows = table2(samples=400_000, seed=1)
    matches = {r["operation"]: r["matches"] for r in rows}
    assert "gaussian" in matches["barrier"] and matches["pipeline activation"] == ["gaussian"]
    assert matches["all-to-all (MoE)"] == ["laplace-pair"] and matches["all-reduce"] == ["laplace-pair"]
    for r in rows:  # the Monte Carlo agrees with the closed form
        for model, pct in r["simulated_pct"].items():
            assert abs(pct - r["analytic_pct"][model]) < 0.5, (r["operation"], model)


def test_closed_forms() -> None:
    assert analytic_rate("gaussian", 0, 500_000) == pytest.approx(0.5)
    assert analytic_rate("laplace-pair", 145_000, 500_000) == pytest.approx(0.374, abs=5e-4)
    assert [row[2] for row in PAPER_TABLE2] == [49.7, 47.9, 37.4, 1.3]


@pytest.fixture(scope="module")
def million() -> dict:  # type: ignore[type-arg]
    return run_simulation(edges=1_000_000, seed=7)


def test_no_wrong_decision_with_honest_clocks_over_a_million_edges(million: dict) -> None:  # type: ignore[type-arg]
    for c in million["classes"]:
        assert c["edges"] == 1_000_000
        assert c["wrong_total"] == 0, c["class"]
        assert sum(c["decided"].values()) == c["edges"]
    ptp = [c for c in million["classes"] if c["class"].startswith("PTP")]
    assert all(c["decided"]["physics"] == c["edges"] for c in ptp)
    ntp = next(c for c in million["classes"] if c["class"].startswith("NTP"))
    # NTP's 3σ bound saturates the field: never physics; Lamport and SVC decide, naive gets ~35% wrong.
    assert ntp["decided"]["physics"] == 0 and ntp["decided"]["svc"] > 0 and ntp["decided"]["lamport"] > 0
    assert 0.30 < ntp["naive_inversions"] / ntp["edges"] < 0.40


def test_lying_clock_is_detected_not_silently_wrong(million: dict) -> None:  # type: ignore[type-arg]
    liar = million["liar"]
    assert liar["wrong_total"] > 0
    (fault,) = liar["faults"]
    assert fault["host"] == "node-7" and fault["verdict"] == "lying"
    assert fault["violations"] == liar["wrong"]["physics"] == liar["wrong_total"]  # every wrong one reported
    assert liar["after_demotion"]["wrong_total"] == 0


def test_seeded_and_reproducible() -> None:
    assert run_simulation(edges=20_000, seed=3) == run_simulation(edges=20_000, seed=3)
    assert run_simulation(edges=20_000, seed=3) != run_simulation(edges=20_000, seed=4)


def test_cli_prints_table_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim.json"
    assert _cli(["simulate", "--edges", "50000", "--seed", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "barrier" in text and "49.7" in text and "WRONG" in text and "lying clock caught: node-7" in text
    assert json.loads(out.read_text())["edges_per_class"] == 50_000
