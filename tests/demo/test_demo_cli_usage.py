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
