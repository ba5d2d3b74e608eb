"""An export path that cannot be used is reported, and the application runs on (issue 13 item 4).

Decision (spec/reliability.md §Configuration errors): mistakes in the
configuration itself (a bad tenant, clock, policy or exporter name) still
raise from ``configure()``; an export destination the process cannot use (a
read-only or full file system, a missing permission, a path through a file)
is the environment's fault: one warning, ``errors()["export_open_failed"]``,
spans kept briefly and then counted as dropped, opening retried, and the
application's own work is never interrupted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _rel_helpers import FileContents, as_json, describe, run_python, tmpfs

APP = r"""
import json, os, sys, time
from tempotrace_sdk.otel import configure, span

handle = configure(service_name="app")
for i in range(10):
    with span(f"early-{i}"):
        pass
first = handle.force_flush(2000)
if sys.argv[1] == "heal":  # the operator fixes the path; opening is retried at most every second
    os.unlink(sys.argv[2])
    time.sleep(1.2)
for i in range(10):
    with span(f"late-{i}"):
        pass
second = handle.force_flush(2000)
handle.shutdown()
print("app finished its work")
print(json.dumps({"flushed": [first, second], "errors": handle.errors()}))
"""


def _run_app(path: Path, mode: str = "stay", blocker: Path | None = None) -> tuple[dict[str, object], str]:
    result = run_python(APP, mode, str(blocker or ""), TEMPOTRACE_EXPORT_PATH=str(path))
    assert result.returncode == 0, describe(result)
    assert "app finished its work" in result.stdout
    assert "Traceback" not in result.stderr
    return as_json(result), result.stderr


def _assert_reported_once(report: dict[str, object], stderr: str, path: Path, reason: str) -> None:
    errors = report["errors"]
    assert isinstance(errors, dict)
    assert errors["export_open_failed"] >= 1
    assert errors["export_dropped"] == errors["export_dropped_unavailable"] == 20
    warnings = [line for line in stderr.splitlines() if "tempotrace export" in line]
    assert len(warnings) == 1, stderr
    assert str(path) in warnings[0] and reason in warnings[0]
    assert report["flushed"] == [False, False]


def test_a_path_through_a_regular_file_is_a_warning_and_the_application_runs_on(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    path = blocker / "spans.jsonl"
    report, stderr = _run_app(path)
    _assert_reported_once(report, stderr, path, "Not a directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
def test_an_unwritable_directory_is_a_warning_and_the_application_runs_on(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    path = locked / "spans.jsonl"
    report, stderr = _run_app(path)
    _assert_reported_once(report, stderr, path, "Permission denied")


def test_a_read_only_file_system_is_a_warning_and_the_application_runs_on(tmp_path: Path) -> None:
    """The issue's case: configure() raised OSError at start-up and the program died."""
    with tmpfs(tmp_path / "ro", "ro,size=1m", "a read-only tmpfs") as ro:
        path = ro / "spans.jsonl"
        report, stderr = _run_app(path)
        _assert_reported_once(report, stderr, path, "Read-only file system")


def test_a_path_fixed_while_running_gets_every_kept_span(tmp_path: Path) -> None:
    """Kept spans are written once the path can be opened: nothing was lost, only delayed."""
    blocker = tmp_path / "dir"
    blocker.write_text("")  # a file where the export directory should be
    path = blocker / "spans.jsonl"
    report, _ = _run_app(path, "heal", blocker)
    errors = report["errors"]
    assert isinstance(errors, dict)
    assert errors["export_open_failed"] >= 1 and "export_dropped" not in errors
    assert report["flushed"] == [False, True]
    expected = [f"early-{i}" for i in range(10)] + [f"late-{i}" for i in range(10)]
    assert sorted(FileContents(path).names) == sorted(expected)


RECONFIGURE_BADLY = r"""
import json, os, sys
from tempotrace_sdk.otel import configure, span
from tempotrace_sdk.otel.context import get_state

good, bad_path, what = sys.argv[1], sys.argv[2], sys.argv[3]
handle = configure(service_name="app", export_path=good, tenant=3)
with span("before"):
    pass
bad = {"block-ms": {"TEMPOTRACE_EXPORT_BLOCK_MS": "2s"},
       "rank": {"RANK": "first", "WORLD_SIZE": "2"}}[what]
os.environ.update(bad)
try:
    configure(service_name="app", export_path=bad_path, tenant=5)
except ValueError as err:
    print("raised:", err)
for key in bad:
    del os.environ[key]
for i in range(20):
    with span(f"after-{i}"):
        pass
flushed = handle.force_flush(10_000)
print(json.dumps({"flushed": flushed, "tenant": get_state().tenant, "errors": handle.errors()}))
"""


@pytest.mark.parametrize("what", ["block-ms", "rank"])
def test_a_failed_reconfigure_leaves_the_running_pipeline_as_it_was(tmp_path: Path, what: str) -> None:
    """A bad setting in a second configure() raises, and nothing was replaced (spec/reliability.md §6).

    Before the fix an invalid TEMPOTRACE_EXPORT_BLOCK_MS or RANK was found only after the old
    pipeline had been shut down: every later span went nowhere and errors() said nothing.
    """
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    result = run_python(RECONFIGURE_BADLY, str(good), str(bad), what)
    assert result.returncode == 0, describe(result)
    assert "raised:" in result.stdout
    report = as_json(result)
    assert report == {"flushed": True, "tenant": 3, "errors": {}}
    assert sorted(FileContents(good).names) == sorted(["before"] + [f"after-{i}" for i in range(20)])
    assert not bad.exists(), "a configure() that raised must not have created its export file"
