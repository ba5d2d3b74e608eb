"""The derived order on a real 4-rank gloo job traced with carriage "none" (spec/analysis.md §2.8): nothing is
carried between ranks, so no Lamport value links two ranks; the messages and collectives are still ordered,
by the trace's structure, and never wrongly. Clocks as tests/torch/torch_job.py's: ranks 0 and 1 PTP-class,
rank 2 NTP-class (honest, saturated bound: physics never uses it), rank 3 the simulated liar (10 ms off,
claiming 220 ns)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "torch"))
from rank_job import run_ranks  # tests/torch: a package there would be named torch

from tempotrace_sdk.analysis import analyze

#: Not beside torchgen.py: the worker's folder comes first on its path, and that module would shadow torch's.
WORKER = Path(__file__).parent / "workers" / "derived_job_worker.py"
WORLD = 4
LIAR, NTP = 3, 2
CLOCKS = {0: "sim:ptp,seed=0", 1: "sim:ptp,seed=1", NTP: "sim:ntp,seed=2", LIAR: "sim:liar"}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("derived-job")
    run_ranks(WORKER, WORLD, out, 240, lambda rank: {
        "TEMPOTRACE_JOB_ID": "derived-job", "TEMPOTRACE_CLOCK": CLOCKS[rank], "TEMPOTRACE_HOST": f"node{rank}",
        "TT_CARRIAGE": "none"})
    return analyze(sorted(str(p) for p in out.glob("spans-*.jsonl")), keep=100_000).to_dict()


def test_nothing_was_carried_and_every_message_and_collective_is_matched(report: dict[str, Any]) -> None:
    p, c = report["p2p"], report["collective_counts"]
    assert (p["total"], p["matched"], p["carried"]) == (3 * WORLD, 3 * WORLD, 0)  # 3 pipeline messages + 1 back
    assert (c["total"], c["complete"]) == (3 * 2, 3 * 2)
    assert report["edges"]["by_kind"]["p2p"] == 3 * WORLD and report["edges"]["by_kind"]["collective"] == 6


def test_derived_orders_what_physics_and_no_recorded_value_can(report: dict[str, Any]) -> None:
    """Every message or claim with the NTP-class rank or the liar paired with it has physics silent and no
    recorded counter: derived decides it. None of them is wrong; the liar is caught by physics alone."""
    e = report["edges"]
    assert e["decided"]["derived"] > 0 and e["wrong"]["derived"] == 0
    assert report["derived"]["cycles"] == 0 and report["derived"]["repeated"] == 0
    assert e["decided"]["undecided"] == 0  # no cross-rank edge is left to a guess, and none is made
    derived = [h for h in report["collectives"] if h["decision"]["method"] == "derived"]
    assert derived and all(h["outcome"] == "consistent" for h in derived)
    assert all(pair["method"] == "physics" and LIAR in pair["ranks"] for pair in report["wrong_by_pair"])
    assert {f["rank"] for f in report["faults"] if f["verdict"] == "lying"} <= {LIAR}


def test_no_recorded_lamport_value_crosses_ranks(report: dict[str, Any]) -> None:
    """Carriage "none": Lamport decides only what one rank's own counter orders (its step and op spans)."""
    e = report["edges"]
    cross = e["by_kind"]["p2p"] + e["by_kind"]["collective"]
    assert e["decided"]["physics"] + e["decided"]["derived"] + e["wrong"]["physics"] >= cross
    assert e["decided"]["lamport"] <= e["by_kind"]["parent_child"] + e["by_kind"]["child_end"]
