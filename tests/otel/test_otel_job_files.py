"""One export file per job (spec/reliability.md §4 "One file per job", spec/configuration.md): re-running a
job in the same folder writes a new file instead of appending to the last run's, and no process appends to
a file another job wrote; the ranks of one job still share one file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _otel_helpers import read_spans, subprocess_env

from tempotrace_sdk import semconv as S
from tempotrace_sdk.otel.jobfile import default_path, file_job, for_job, safe_name

#: One rank of a job as torchrun starts it: configure() reads RANK, WORLD_SIZE and the run id.
RANK = """
import sys
from tempotrace_sdk.otel import configure, span
handle = configure(service_name="train")
with span("rank-" + sys.argv[1]):
    pass
handle.shutdown()
print(handle.export_path)
"""


def _rank(cwd: Path, rank: int, run_id: str, **env: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([sys.executable, "-c", RANK, str(rank)], cwd=cwd, capture_output=True, text=True, timeout=60,
                         env=subprocess_env(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                                            TORCHELASTIC_RUN_ID=run_id, TEMPOTRACE_CLOCK="cpu", **env))
    assert out.returncode == 0, out.stderr
    return out


def test_two_runs_in_one_folder_write_two_files(tmp_path: Path) -> None:
    """Two torchrun runs (each its run id) in one folder: a file each, named after its job, both ranks of
    a run in its file; the first run's file holds none of the second run's spans."""
    for run in ("run-1", "run-2"):
        paths = {_rank(tmp_path, r, run).stdout.strip() for r in (0, 1)}
        assert paths == {str(tmp_path / f"tempotrace-spans-{run}.jsonl")}
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"tempotrace-spans-{run}.jsonl" for run in ("run-1", "run-2")]
    for run in ("run-1", "run-2"):
        spans = read_spans(tmp_path / f"tempotrace-spans-{run}.jsonl")
        assert sorted(s["name"] for s in spans) == ["rank-0", "rank-1"]
        assert {s["attrs"][S.JOB_ID] for s in spans} == {run}


def test_an_explicit_path_of_another_job_is_not_appended_to(tmp_path: Path) -> None:
    """The ranks of one job share TEMPOTRACE_EXPORT_PATH; a later job given the same path writes its own file
    beside it and says so; the first job's file is left as it was."""
    shared = tmp_path / "spans.jsonl"
    for r in (0, 1):
        assert _rank(tmp_path, r, "job-a", TEMPOTRACE_EXPORT_PATH=str(shared)).stdout.strip() == str(shared)
    before = shared.read_bytes()
    second = _rank(tmp_path, 0, "job-b", TEMPOTRACE_EXPORT_PATH=str(shared))
    moved = tmp_path / "spans-job-b.jsonl"
    assert second.stdout.strip() == str(moved)
    assert "holds the spans of job 'job-a'" in second.stderr and str(moved) in second.stderr
    assert shared.read_bytes() == before
    assert [s["name"] for s in read_spans(moved)] == ["rank-0"]
    # A rank of job-a that starts late still appends to the shared file.
    assert _rank(tmp_path, 1, "job-a", TEMPOTRACE_EXPORT_PATH=str(shared)).stdout.strip() == str(shared)
    assert len(read_spans(shared)) == 3


def test_without_a_job_the_default_file_is_the_documented_one() -> None:
    assert default_path(None) == "tempotrace-spans.jsonl"
    assert default_path("7b2f0c1e-aaaa") == "tempotrace-spans-7b2f0c1e-aaaa.jsonl"


@pytest.mark.parametrize("job", ["../../etc/passwd", "a/b", ".hidden", "x" * 300, "job\nid", "ü"])
def test_a_job_id_never_leaves_the_folder_or_collides(job: str) -> None:
    """A job id from the environment becomes a plain file name: no separator, no leading dot, bounded; two
    ids cleaned alike keep apart by their hash."""
    name = safe_name(job)
    assert "/" not in name and not name.startswith(".") and len(name) <= 64 and name.isprintable()
    assert safe_name(job + "!") != name


def test_unreadable_or_foreign_files_name_no_job(tmp_path: Path) -> None:
    """A file that is not an OTLP trace line (or is missing, or empty) is appended to as before."""
    files = (("empty.jsonl", ""), ("junk.jsonl", "not json\n"), ("metrics.jsonl", '{"resourceMetrics":[]}\n'))
    for name, text in files:
        path = tmp_path / name
        path.write_text(text)
        assert file_job(str(path)) is None and for_job(str(path), "job-b") == str(path)
    assert for_job(str(tmp_path / "missing.jsonl"), "job-b") == str(tmp_path / "missing.jsonl")
