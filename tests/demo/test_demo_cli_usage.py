"""`tempotrace demo` usage errors and help text (issue 14's small demo items)."""

from __future__ import annotations

import pytest

from tempotrace_sdk.cli.main import main


@pytest.mark.parametrize("offset", ["100ns", "220ns", "-150ns", "0.2us"])
def test_a_liar_inside_its_own_claim_is_refused(capsys: pytest.CaptureFixture[str], offset: str) -> None:
    """A 'liar' off by no more than the 220 ns it claims keeps its promise: a usage error, before any process."""
    assert main(["demo", f"--liar-offset={offset}", "--out", "/nonexistent/never-made"]) == 2
    err = capsys.readouterr().err
    assert "--liar-offset" in err and "220 ns" in err and "no liar" in err


def test_help_counts_the_processes_the_demo_starts(capsys: pytest.CaptureFixture[str]) -> None:
    """4 honest ranks and the liar: 5 processes (tempotrace_sdk.demo.plan)."""
    from tempotrace_sdk.demo.plan import plan_ranks

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert f"{len(plan_ranks(4))} processes" in out and "4 processes" not in out


def test_make_demo_installs_torch_s_cpu_build_before_it_runs_the_job() -> None:
    """A fresh machine's `make demo` needs torch: mk/torch.mk's pinned install (never CUDA) comes first."""
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("make") is None:
        pytest.skip("no make here")
    root = Path(__file__).resolve().parents[2]
    plan = subprocess.run(["make", "-n", "-B", "demo"], cwd=root, capture_output=True, text=True, check=True).stdout
    lines = plan.splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install" in line and "'torch==2.13.0'" in line)
    run = next(i for i, line in enumerate(lines) if line.strip().endswith("tempotrace demo"))
    assert install < run
    assert any("nvidia-" in line for line in lines[install:run])  # the CUDA-wheel guard runs too


def test_carriage_is_for_the_torchrun_job_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--http", "--carriage", "op", "--out", "/nonexistent/never-made"]) == 2
    assert "--carriage" in capsys.readouterr().err
    assert main(["demo", "--carriage", "sometimes"]) == 2


def test_without_torch_the_job_says_how_to_install_it_and_starts_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    import tempotrace_sdk.cli.demo as demo_cli

    monkeypatch.setattr(demo_cli, "_torch_installed", lambda: False)
    assert main(["demo", "--out", f"{tmp_path}/out"]) == 3
    err = capsys.readouterr().err
    assert "make demo" in err and "torch==2.13.0" in err and "--http" in err
