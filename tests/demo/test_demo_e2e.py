"""The HTTP demo (``tempotrace demo --http``) end to end: real processes, real sockets, simulated clocks, real
analysis (issue 6). The torchrun job is tests/demo/test_demo_torchrun.py."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from proc_tree import children, wait_gone  # tests/demo is on sys.path (no package: pytest's rootdir insertion)

from tempotrace_sdk.cli.main import main
from tempotrace_sdk.demo import DemoConfig, plan_ranks, run_demo
from tempotrace_sdk.demo import coordinator as coordinator_module
from tempotrace_sdk.demo import processes as processes_module
from tempotrace_sdk.demo.plan import RankPlan, expected_hops
from tempotrace_sdk.demo.processes import WorkerError

pytestmark = pytest.mark.slow


def test_with_a_liar_every_hop_is_traced_honest_edges_are_never_wrong_and_the_liar_is_flagged(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    # 30 ms: far beyond any localhost hop even on a loaded CI machine, so every
    # edge it stamps with an honest PTP-class peer contradicts its 220 ns claim.
    result = run_demo(DemoConfig(http=True, ranks=3, iterations=2, out=tmp_path, liar_offset_ns=30e6), out)
    report = result.report
    plans = result.plans
    assert [p.profile for p in plans] == ["ptp", "liar", "ptp", "ntp"]

    # Known edges: every HTTP hop the workload made is in the trace, matched send -> receive.
    hops = expected_hops(len(plans), 2)
    assert result.hops_sent == hops == 2 * (4 * 3 + 3 + 4)
    assert report["hops"] == {"total": hops, "matched": hops}
    assert report["edges"]["by_kind"]["hop"] == hops
    assert report["edges"]["total"] > hops  # plus parent/child and end edges

    # The NTP rank is 1.2 ms behind: a plain tracer shows some receivers acting before senders.
    assert report["edges"]["naive_inversions"] > 0
    assert 0 < result.naive_hops <= hops
    # Hops with the NTP-class end: the saturated bound never lets physics decide.
    assert sum(result.saturated_hops.values()) > 0
    assert result.saturated_hops.get("physics", 0) == 0
    # Its bound saturates, so Lamport/SVC decide edges physics cannot.
    assert report["edges"]["decided"]["lamport"] + report["edges"]["decided"]["svc"] > 0

    # Every wrong decision is blamed on the liar, and only the liar is blamed.
    assert report["lying_hosts"] == ["node1"]
    assert [f["host"] for f in report["faults"]] == ["node1"]
    assert report["faults"][0]["kind"] == "physics"
    assert report["edges"]["wrong"]["lamport"] == 0 and report["edges"]["wrong"]["svc"] == 0
    assert report["edges"]["wrong_total"] == report["faults"][0]["violations"] > 0
    # Per host pair: every wrong decision has the liar on one end; none is left unattributed.
    assert report["wrong_by_pair"] and all("node1" in e["hosts"] for e in report["wrong_by_pair"])
    assert report["unattributed"] == 0
    assert result.ok, result.checks

    # One folder holds everything, and the printed summary names it all.
    text = out.getvalue()
    for key in ("trace", "report", "perfetto", "html"):
        assert result.paths[key].parent == tmp_path.resolve()
        assert result.paths[key].stat().st_size > 0
        assert str(result.paths[key]) in text
    assert "LYING clock: node1" in text and "[ok] the lying clock was flagged" in text
    assert json.loads(result.paths["report"].read_text())["edges"] == report["edges"]
    events = json.loads(result.paths["perfetto"].read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert tracks == {p.host for p in plans}  # one track per (simulated) host
    assert "<html" in result.paths["html"].read_text()[:500].lower()


def test_honest_clocks_only_give_zero_wrong_decisions_and_no_faults(tmp_path: Path) -> None:
    result = run_demo(DemoConfig(http=True, ranks=2, iterations=1, out=tmp_path, liar=False), io.StringIO())
    assert [p.profile for p in result.plans] == ["ptp", "ntp"]
    assert result.report["edges"]["wrong_total"] == 0
    assert result.report["faults"] == []
    assert result.report["hops"]["matched"] == expected_hops(2, 1)
    assert result.ok and "the lying clock was flagged" not in result.checks


def test_with_one_ptp_witness_the_liar_is_a_suspect_not_a_verdict(tmp_path: Path) -> None:
    """One PTP-class peer cannot tell who lied: both are suspects, and the demo says exactly that."""
    out = io.StringIO()
    result = run_demo(DemoConfig(http=True, ranks=2, iterations=1, out=tmp_path, liar_offset_ns=30e6), out)
    assert [p.profile for p in result.plans] == ["ptp", "liar", "ntp"]
    report = result.report
    assert report["lying_hosts"] == []
    assert "node1" in report["suspect_hosts"]
    assert set(report["suspect_hosts"]) <= {"node0", "node1"}
    assert result.ok, result.checks
    assert "SUSPECT clock: node1" in out.getvalue() and "it or its peer broke a promise" in out.getvalue()


def test_a_rerun_in_the_same_folder_starts_from_a_clean_trace(tmp_path: Path) -> None:
    first = run_demo(DemoConfig(http=True, ranks=2, iterations=1, out=tmp_path, liar=False), io.StringIO())
    second = run_demo(DemoConfig(http=True, ranks=2, iterations=1, out=tmp_path, liar=False), io.StringIO())
    assert second.report["spans"] == first.report["spans"]


def test_a_worker_that_cannot_start_fails_the_demo_and_no_process_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def recording_popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        started.append(proc)
        return proc

    def broken_plan(ranks: int, **kwargs: object) -> list[RankPlan]:
        plans = plan_ranks(ranks, liar=False)
        return [*plans[:-1], RankPlan(ranks - 1, "nodeX", "ntp", 0.0, "sim:no-such-profile")]

    monkeypatch.setattr(processes_module.subprocess, "Popen", recording_popen)
    monkeypatch.setattr(coordinator_module, "plan_ranks", broken_plan)
    with pytest.raises(WorkerError, match="exited before it was ready") as info:
        run_demo(DemoConfig(http=True, ranks=3, iterations=1, out=tmp_path, liar=False), io.StringIO())
    assert "unknown profile 'no-such-profile'" in str(info.value)  # the worker's own reason, from its log
    assert len(started) == 3
    assert all(p.poll() is not None for p in started)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupting_the_demo_stops_every_worker(tmp_path: Path, sig: signal.Signals) -> None:
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tempotrace_sdk",
            "demo",
            "--http",
            "--ranks",
            "2",
            "--iterations",
            "100000",
            "--out",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert demo.stdout is not None
        for line in demo.stdout:
            if "iteration 2/" in line:
                break
        workers = children(demo.pid)
        assert len(workers) == 3
        demo.send_signal(sig)
        _, err = demo.communicate(timeout=30)
    finally:
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 130 and "interrupted" in err
    assert wait_gone(workers, 5.0) == []


def test_demo_command_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--ranks", "1"]) == 2
    assert "at least 2 honest ranks" in capsys.readouterr().err
    assert main(["demo", "--iterations", "0"]) == 2
    assert "must be at least 1" in capsys.readouterr().err
    assert main(["demo", "--liar-offset", "lots"]) == 2
    assert "a duration such as 3ms" in capsys.readouterr().err
    assert main(["demo", "--help"]) == 0
    helptext = capsys.readouterr().out
    assert "exit codes:" in helptext and "examples:" in helptext


def test_a_lie_smaller_than_a_hop_cannot_be_caught_and_the_demo_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A liar 1 µs off hides inside the hop latency: no edge contradicts it; exit code 1 (a check failed)."""
    code = main(["demo", "--http", "--ranks", "3", "--iterations", "1", "--liar-offset", "1us", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "[FAILED] the lying clock was flagged" in out
    assert "the liar is +1 µs off" in out and "the default, 10ms, is larger" in out
    assert "[ok] no wrong decision on edges between honest clocks" in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["edges"]["wrong_total"] == 0 and report["lying_hosts"] == []


def test_an_analysis_that_fails_is_a_runtime_failure_with_a_message_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Workers that flushed nothing leave an empty trace: the real analysis refuses it; the CLI says so, exit 3."""
    import tempotrace_sdk.analysis as analysis

    real_analyze = analysis.analyze_file

    def analyze_after_nothing_was_flushed(path: str, *args: object, **kwargs: object) -> object:
        Path(path).write_text("")  # as if every worker died before its exporter wrote a line
        return real_analyze(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(analysis, "analyze_file", analyze_after_nothing_was_flushed)
    code = main(["demo", "--http", "--ranks", "2", "--iterations", "1", "--no-liar", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith("tempotrace demo: the analysis of the demo's trace failed")
    assert "trace.jsonl" in err
    assert "Traceback" not in err


def test_out_naming_an_existing_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    occupied = tmp_path / "results.txt"
    occupied.write_text("keep me")
    assert main(["demo", "--ranks", "2", "--iterations", "1", "--out", str(occupied)]) == 2
    err = capsys.readouterr().err
    assert f"--out {occupied}: is a file, not a folder" in err
    assert main(["demo", "--ranks", "2", "--iterations", "1", "--out", str(occupied / "sub")]) == 2
    assert f"--out {occupied / 'sub'}: {occupied} is a file, not a folder" in capsys.readouterr().err
    assert occupied.read_text() == "keep me"
