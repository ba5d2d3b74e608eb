"""The default carriage adds no message to a point-to-point op (spec/torch.md §3): a pipeline's send/recv move
only the job's own messages, counted where torch.distributed hands them to the process group; "step+p2p" adds
its side messages (the count can fail)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from rank_job import run_ranks

WORKER = Path(__file__).with_name("pipeline_worker.py")
WORLD = 3
STEPS = 3


def _moved(out: Path) -> dict[int, dict[str, int]]:
    return {r: json.loads((out / f"result-{r}.json").read_text())["moved"] for r in range(WORLD)}


def test_the_default_carriage_moves_only_the_jobs_own_messages(tmp_path: Path) -> None:
    run_ranks(WORKER, WORLD, tmp_path, 120, lambda rank: {"TEMPOTRACE_JOB_ID": "pipeline"})
    moved = _moved(tmp_path)
    assert moved[0] == {"send": STEPS}
    assert moved[1] == {"send": STEPS, "recv": STEPS}
    assert moved[2] == {"recv": STEPS}


def test_step_p2p_adds_one_side_message_per_send(tmp_path: Path) -> None:
    run_ranks(WORKER, WORLD, tmp_path, 120, lambda rank: {"TEMPOTRACE_JOB_ID": "pipeline", "TT_CARRIAGE": "step+p2p"})
    moved = _moved(tmp_path)
    assert moved[0] == {"send": 2 * STEPS}
    assert moved[1] == {"send": 2 * STEPS, "recv": 2 * STEPS}
    assert moved[2] == {"recv": 2 * STEPS}
