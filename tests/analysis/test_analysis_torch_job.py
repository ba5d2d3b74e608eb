"""A torch job's report as an ML engineer reads it (spec/analysis.md §6.1 ``torch``, §5.5 jobs, §5.2 the
step's virtual parent): it opens on the steps (each one's slowest rank and by how much), each rank's time
in communication against the rest of its steps, the ops that failed with their exception, the collectives
a rank never joined, a lying clock; runs of several jobs in one input are named, not merged silently; the
step's virtual parent is not reported as lost data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tempotrace_sdk.analysis import analyze
from tempotrace_sdk.analysis.engine import Options
from tempotrace_sdk.analysis.inputs import expand
from tempotrace_sdk.analysis.merge import merge_reports
from tempotrace_sdk.cli.main import main as cli

from .otlpgen import line, span
from .torchgen import MS, TorchJob

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "spec" / "analysis-report.schema.json").read_text())


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _section(text: str) -> list[str]:
    """The report's lines before the edge decisions: the torch section (after the title line)."""
    lines = text.splitlines()
    return lines[1:lines.index("edge decisions (how TempoTrace ordered the events; spec/analysis.md §2):")]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[TorchJob, str]:
    job = TorchJob(ranks=3, steps=4, collectives=2, slow_rank=1, slow_ns=5 * MS)
    return job, job.write(str(tmp_path_factory.mktemp("clean") / "spans.jsonl"))


@pytest.fixture(scope="module")
def troubled(tmp_path_factory: pytest.TempPathFactory) -> tuple[TorchJob, str]:
    """Rank 1 slow by 15 ms, rank 2's clock 20 ms early (claiming 220 ns: by its readings its all_reduces end
    before ranks 0 and 1 start them); step 2's second all_reduce fails on every rank; rank 2 never joins step 3's
    first one."""
    job = TorchJob(ranks=3, steps=4, collectives=2, slow_rank=1, slow_ns=15 * MS, liar=2, liar_ns=-20 * MS,
                   fail=(2, 1), missing=(3, 0, 2))
    return job, job.write(str(tmp_path_factory.mktemp("troubled") / "spans.jsonl"))


def test_text_opens_on_each_steps_slowest_rank_and_by_how_much(clean: tuple[TorchJob, str]) -> None:
    """§6: the first lines name the job, then for every step the rank that arrived last at its collectives
    and how far behind the first arriver, before anything about edges."""
    job, path = clean
    section = _section(analyze(path).to_text())
    assert section[0] == f"torch job {job.job}: {job.ranks} ranks, {job.steps} steps"
    for step in range(job.steps):
        assert section[1 + step].startswith(
            f"  step {step}: slowest rank {job.slow_rank} (node{job.slow_rank}): last at {job.collectives} of "
            f"{job.collectives} collectives, {_ms(job.collectives * job.slow_ns)} behind the first arriver in all;")


def test_communication_against_the_rest_of_the_step_per_rank(clean: tuple[TorchJob, str]) -> None:
    """Per rank: time inside op spans (the others wait in them for the slow rank) against the rest of the
    step span, in the text and in the JSON."""
    job, path = clean
    report = analyze(path)
    step_ns = job.collectives * (job.compute_ns + job.slow_ns + job.comm_ns) + MS  # the step span ends 1 ms after
    waits = {r: job.collectives * (job.comm_ns + (0 if r == job.slow_rank else job.slow_ns)) for r in range(job.ranks)}
    (by_job,) = report.to_dict()["torch"]["by_job"]
    got = {row["rank"]: (row["step_ns"], row["comm_ns"], row["rest_ns"], row["slowest_in"]) for row in by_job["ranks"]}
    assert got == {r: (job.steps * step_ns, job.steps * waits[r], job.steps * (step_ns - waits[r]),
                       job.steps if r == job.slow_rank else 0) for r in range(job.ranks)}
    section = _section(report.to_text())
    for r in range(job.ranks):
        row = next(x for x in section if x.startswith(f"    rank {r} (node{r}) "))
        comm, rest = job.steps * waits[r], job.steps * (step_ns - waits[r])
        assert f"{_ms(comm)} ({100 * comm / (job.steps * step_ns):4.1f}%)" in row
        assert f"{_ms(rest)} ({100 * rest / (job.steps * step_ns):4.1f}%)" in row


def test_failed_op_incomplete_collective_and_liar_open_the_report(troubled: tuple[TorchJob, str]) -> None:
    """The failed all_reduce with its exception (all three ranks on one line), the collective rank 2 never
    joined, and the lying clock, all in the section above the edge decisions."""
    job, path = troubled
    report = analyze(path)
    section = _section(report.to_text())
    fail_step, fail_k = job.fail or (0, 0)
    miss_step, miss_k, miss_rank = job.missing or (0, 0, 0)
    assert f"    all_reduce [0-2] #{fail_step * job.collectives + fail_k}, step {fail_step}, on rank 0 (node0), " \
           f"rank 1 (node1), rank 2 (node2): {job.error}" in section
    assert f"    all_reduce [0-2] #{miss_step * job.collectives + miss_k}, step {miss_step}: rank {miss_rank} never " \
           "joined" in section
    liar = f"  LYING clock: rank {job.liar} (node{job.liar}) broke its ±220 ns claim"
    assert any(x.startswith(liar) for x in section)
    # The slow rank is named slowest; by the readings the first arriver is the liar, 20 ms early, so "behind"
    # holds its lie too: which is why the section names the lying clock.
    assert section[1].startswith(f"  step 0: slowest rank {job.slow_rank} (node{job.slow_rank}): last at 2 of 2 "
                                 f"collectives, {_ms(2 * (job.slow_ns - job.liar_ns))} behind")
    d = report.to_dict()
    jsonschema.validate(d, SCHEMA)
    assert d["torch"]["failed"]["total"] == job.ranks and d["summary"]["failed_ops"] == job.ranks
    assert {f["error"] for f in d["torch"]["failed"]["first"]} == {job.error}
    (incomplete,) = d["torch"]["incomplete_first"]
    assert (incomplete["step"], incomplete["missing_ranks"]) == (miss_step, [miss_rank])


def test_the_exception_event_speaks_when_the_status_has_no_message(tmp_path: Path) -> None:
    """An ERROR span without a status message: the error is its exception event's type and message."""
    job = TorchJob(fail=(1, 0))
    spans = job.spans()
    for rank_spans in spans.values():
        for sp in rank_spans:
            if "status" in sp and sp["status"].get("code") == 2:
                sp["status"] = {"code": "STATUS_CODE_ERROR"}
    path = tmp_path / "t.jsonl"
    path.write_text("".join(line(s) + "\n" for s in spans.values()))
    errors = {f["error"] for f in analyze(str(path)).to_dict()["torch"]["failed"]["first"]}
    assert errors == {job.error}


def test_step_parents_are_counted_apart_from_lost_ones(clean: tuple[TorchJob, str]) -> None:
    """§5.2: every step span's parent is the step's virtual parent, never exported: counted as such, and
    the torch trace reports no lost parent."""
    job, path = clean
    report = analyze(path)
    assert (report.unresolved_parents, report.virtual_parents) == (0, job.ranks * job.steps)
    text = report.to_text()
    assert "parents not in the input" not in text
    assert f"torch step parents: {job.ranks * job.steps:,} step spans" in text


def test_a_reused_step_number_is_its_own_step_with_its_own_virtual_parent(tmp_path: Path) -> None:
    """spec/torch.md §4.1: an epoch loop numbering steps 0, 1 again gives each use a trace of its own, whose
    virtual parent the occurrence derives: no lost parent, no two runs in one trace, each use listed."""
    path = tmp_path / "spans.jsonl"
    first = TorchJob(steps=2)
    first.write(str(path))
    TorchJob(steps=2, occurrence=1, sids=[0x7100_0000]).write(str(path), mode="a")
    report = analyze(str(path))
    assert (report.unresolved_parents, report.virtual_parents) == (0, 2 * first.ranks * first.steps)
    assert report.torch_job.repeated_steps == 0
    (by_job,) = report.to_dict()["torch"]["by_job"]
    assert [(s["step"], s["occurrence"]) for s in by_job["listed"]] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert "  step 0 (use 2): slowest rank" in report.to_text()


def _with(path: Path, job: TorchJob, extra: list[dict[str, Any]], resource: dict[str, Any] | None = None) -> str:
    job.write(str(path))
    with path.open("a") as fh:
        fh.write(line(extra, resource) + "\n")
    return str(path)


def test_a_really_missing_parent_still_warns(tmp_path: Path) -> None:
    """A span of a step trace whose parent is not in the input, and a step span whose parent is not the one
    its job, restart and step derive: both lost data, counted as before; the step parents stay apart."""
    job = TorchJob()
    spans = job.spans()
    step0 = next(s for s in spans[0] if s["name"] == "torch.step")
    trace = int(step0["traceId"], 16)
    orphan = span(trace, 0xDEAD01, 0xBAD0BAD, name="forward", host="node0")
    bad_step = span(trace, 0xDEAD02, 0xBAD0BAD, name="torch.step", host="node0",
                    attrs={"tempotrace.rank": 0, "tempotrace.torch.step": 0})
    report = analyze(_with(tmp_path / "t.jsonl", job, [orphan, bad_step],
                           {"tempotrace.job_id": job.job, "tempotrace.restart": 0}))
    assert (report.unresolved_parents, report.virtual_parents) == (2, job.ranks * job.steps)
    assert "parents not in the input: 2 (their edges are not counted)" in report.to_text()


def test_a_step_span_naming_no_job_is_taken_at_its_word(tmp_path: Path) -> None:
    """Ranks that agreed on a job id at the first step write none: the step attribute marks the parent."""
    job = TorchJob(steps=1)
    path = tmp_path / "t.jsonl"
    path.write_text("".join(line(s) + "\n" for s in job.spans().values()))  # no Resource: no job id
    report = analyze(str(path))
    assert (report.unresolved_parents, report.virtual_parents) == (0, job.ranks)
    assert report.to_dict()["jobs"]["by_job"] == [{"job_id": None, "restarts": [], "spans": report.spans}]


def test_two_jobs_in_one_file_are_named_and_reported_apart(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """§5.5: a re-run appended to the last run's file: the analysis warns (the report and stderr) naming both
    jobs with their spans, lists them in the JSON, and gives each its own steps."""
    path = tmp_path / "spans.jsonl"
    first, second = TorchJob(job="run-1", steps=3), TorchJob(job="run-2", steps=2, slow_rank=2)
    first.write(str(path))
    second.write(str(path), mode="a")
    n1, n2 = (sum(len(v) for v in j.spans().values()) for j in (first, second))
    assert cli(["analyze", str(path), "--quiet"]) == 0
    out, err = capsys.readouterr()
    said = f"this input holds 2 jobs: run-1 ({n1:,} spans), run-2 ({n2:,} spans)"
    assert f"WARNING: {said}" in out and f"warning: {said}" in err
    assert "torch job run-1: 3 ranks, 3 steps" in out and "torch job run-2: 3 ranks, 2 steps" in out
    assert cli(["analyze", str(path), "--json", "--quiet"]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)
    jsonschema.validate(d, SCHEMA)
    assert said in err
    assert d["jobs"] == {"count": 2, "beyond_limit_spans": 0, "by_job": [
        {"job_id": "run-1", "restarts": [0], "spans": n1}, {"job_id": "run-2", "restarts": [0], "spans": n2}]}
    steps = {j["job_id"]: [(s["step"], s["slowest"]["rank"]) for s in j["listed"]] for j in d["torch"]["by_job"]}
    assert steps == {"run-1": [(0, 1), (1, 1), (2, 1)], "run-2": [(0, 2), (1, 2)]}


def test_two_runs_under_one_job_id_are_found_in_their_steps(tmp_path: Path) -> None:
    """A job id fixed across runs (torchrun --rdzv-id=100) gives both runs the same step trace ids: each
    step then holds two step spans of a rank, and the report says the runs mixed."""
    path = tmp_path / "spans.jsonl"
    TorchJob(steps=2).write(str(path))
    TorchJob(steps=2, sids=[0x7100_0000]).write(str(path), mode="a")
    report = analyze(str(path))
    assert report.torch_job.repeated_steps == 2
    assert "2 steps hold two step spans of one rank: two runs named the same job id and restart" in report.to_text()


def test_a_split_run_reports_the_torch_job_one_process_does(troubled: tuple[TorchJob, str]) -> None:
    """§5.3: steps are traces, so partitions by trace add up to the single-process torch section."""
    from tempotrace_sdk.analysis.engine import run

    _, path = troubled
    one = analyze(path).to_dict()
    sources = expand([path])
    parts = [run(sources, None, Options(), shard=(k, 3)).partial for k in range(3)]
    merged = merge_reports(parts, Options().keep).to_dict()
    assert merged["torch"] == one["torch"] and merged["jobs"] == one["jobs"]
    assert merged["virtual_parents"] == one["virtual_parents"]


def test_strings_from_the_input_are_shown_escaped_in_the_torch_section(tmp_path: Path) -> None:
    """§6: a job id and an exception message from a hostile process cannot drive the terminal."""
    job = TorchJob(job="evil\x1b[2J", fail=(0, 0), error="RuntimeError: \x1b[31mred\u202e")
    text = analyze(job.write(str(tmp_path / "t.jsonl"))).to_text()
    assert "\x1b" not in text and "\u202e" not in text
    assert "torch job evil\\x1b[2J: 3 ranks" in text and "RuntimeError: \\x1b[31mred\\u202e" in text
