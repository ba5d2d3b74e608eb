"""The README's torch example under torchrun, 3 gloo ranks on this one host, the system clock, no simulated
profiles (issue 21): the job trains to the end whatever the host's sync state, and the analysis decides
its collectives and stragglers by physics within the host clock domain (spec/analysis.md §2.1,
spec/clocks.md §9), 0 wrong; the report opens on the slowest rank of each step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "examples" / "torchrun" / "train.py"
RANKS = 3
STEPS = 6  # train.py: 2 epochs of 3 batches


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("host-domain")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPOTRACE_", "TT_EXAMPLE_"))}
    env.update(TEMPOTRACE_CLOCK="cpu", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={RANKS}", str(TRAIN)],
        cwd=out, env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"epoch 1 step {STEPS - 1}: loss" in run.stdout, "trained to the end"
    return out


def _trace(job: Path) -> Path:
    files = list(job.glob("tempotrace-spans-*.jsonl"))
    assert len(files) == 1, files  # one file, named after the job
    return files[0]


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tempotrace_sdk", "analyze", *args], capture_output=True, text=True,
                          timeout=120)


def test_every_rank_names_the_one_host_clock(job: Path) -> None:
    domains = set()
    for line in _trace(job).read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            attrs = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
            if rs["scopeSpans"]:
                domains.add(attrs["tempotrace.clock.domain"]["stringValue"])
    assert len(domains) == 1 and next(iter(domains)).startswith("kernel:"), domains


def test_collectives_and_stragglers_are_decided_by_physics_with_nothing_wrong(job: Path) -> None:
    run = _analyze(str(_trace(job)), "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    counts = report["collective_counts"]
    assert counts["complete"] == counts["total"] >= 2 * STEPS  # the step's all_reduce and the loss's
    # Physics decides a collective when its last start's reading clears its first end's by the host clock's
    # read bound. A gloo all_reduce of a few floats on 2 shared cores can, rarely, be that short (seen once in
    # about a dozen CI runs: 11 of 12 by physics); one left so is honestly silent, never wrong. Most, not each.
    left = counts["total"] - counts["decided"]["physics"]
    assert left * 4 <= counts["total"], counts
    assert counts["outcomes"]["contradiction"] == 0
    assert report["edges"]["wrong_total"] == 0
    assert report["edges"]["decided"]["undecided"] <= left, report["edges"]  # only a claim physics left open
    stragglers = report["stragglers"]
    assert sum(s["last"] for s in stragglers) == counts["total"]
    # Certain where the last arrival's bounds clear every other's: most collectives here, not each one, since
    # ranks racing on 2 shared cores may enter one within the host clock's read bound of each other (seen in
    # about 1 run in 3: a straggler then honestly counts as not certain, never as certain in error).
    assert all(s["last_certain"] <= s["last"] for s in stragglers), stragglers
    assert sum(s["last_certain"] for s in stragglers) * 2 >= counts["total"], stragglers


def test_the_report_opens_on_the_slowest_rank_of_each_step(job: Path) -> None:
    run = _analyze(str(_trace(job)))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert f"{RANKS} ranks, {STEPS} steps" in lines[1], lines[:3]
    for step in range(STEPS):
        assert lines[2 + step].startswith(f"  step {step}: slowest rank "), lines[2 + step]
