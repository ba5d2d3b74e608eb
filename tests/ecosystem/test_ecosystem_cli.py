"""CLI edges from issue 14: the gate's UNKNOWN, an all-zero span id, chronyd's figures as chronyc prints them."""

from __future__ import annotations

import time

import pytest
from _chrony_golden import GOLDEN_CHRONYC, GOLDEN_REPLY, GOLDEN_SEQUENCE

from tempotrace_sdk.cli.clock import chronyc_tracking_lines
from tempotrace_sdk.cli.main import main
from tempotrace_sdk.clocks.chrony import ChronyHealth
from tempotrace_sdk.clocks.chrony_candm import decode_tracking_reply
from tempotrace_sdk.clocks.chrony_client import ChronyTarget
from tempotrace_sdk.wire import TTExt


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse usage errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("spelling", ["UNKNOWN", "unknown"])
@pytest.mark.parametrize("clock", ["sim:ptp", "sim:unsynced"])
def test_require_unknown_is_refused_not_passed(capsys: pytest.CaptureFixture[str], spelling: str, clock: str) -> None:
    """Every clock meets UNKNOWN, so such a gate can never fail: a usage error (exit 2), never "clock OK"."""
    code, out, err = run(capsys, "clock", "--clock", clock, "--require", spelling)
    assert code == 2 and "clock OK" not in out
    assert "UNKNOWN is met by every clock" in err


@pytest.mark.parametrize("quality", ["OK", "DEGRADED"])
def test_require_ok_and_degraded_still_gate(capsys: pytest.CaptureFixture[str], quality: str) -> None:
    code, out, _ = run(capsys, "clock", "--clock", "sim:ptp", "--require", quality)
    assert code == 0 and out.startswith("clock OK for the job")
    code, out, err = run(capsys, "clock", "--clock", "sim:unsynced", "--require", quality)
    assert code == 1 and out == "" and "pre-flight gate failed" in err


@pytest.mark.parametrize("span_id", ["0000000000000000", "0", "0x0"])
def test_encode_refuses_the_all_zero_span_id(capsys: pytest.CaptureFixture[str], span_id: str) -> None:
    """W3C Trace Context: an all-zero parent-id is invalid, so no real span can have it."""
    code, out, err = run(capsys, "encode", "--span-id", span_id)
    assert code == 2 and out == ""
    assert "all zeros is the invalid span id (W3C Trace Context" in err


def test_encode_still_takes_real_span_ids_and_decode_may_ask_about_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "encode", "--span-id", "00f067aa0ba902b7")
    assert code == 0 and TTExt.from_header(out.strip()).svc_sketch.contains(0x00F067AA0BA902B7)
    code, out, _ = run(capsys, "decode", out.strip(), "--span-id", "0000000000000000")  # a question, not a header
    assert code == 0 and "NOT in the causal past" in out


def test_tracking_figures_read_as_chronyc_printed_them() -> None:
    """The golden reply rendered by ``tempotrace clock`` matches ``chronyc tracking`` line for line.

    Root dispersion grew between chronyc's request and ours; every other line is identical.
    """
    health = ChronyHealth(ChronyTarget("unix", "/nonexistent/golden.sock"))
    tracking = decode_tracking_reply(GOLDEN_REPLY, GOLDEN_SEQUENCE)
    health.observe(tracking, time.monotonic_ns(), tracking.ref_time_s + 0.3)
    lines = chronyc_tracking_lines(health.describe())
    assert lines[0] == "chronyd (unix:/nonexistent/golden.sock):"
    ours = [line[2:] for line in lines[1:14]]
    theirs = GOLDEN_CHRONYC.splitlines()
    assert [line for line in ours if not line.startswith("Root dispersion")] == [
        line for line in theirs if not line.startswith("Root dispersion")
    ]
    assert ours[10] == "Root dispersion : 0.000291913 seconds"
    assert lines[14].startswith("  CPU bound       : ") and lines[15].startswith("  why             : ")


def test_unused_chrony_says_why() -> None:
    health = ChronyHealth(ChronyTarget("unix", "/nonexistent/absent.sock"))
    health.poll(force=True)
    lines = chronyc_tracking_lines(health.describe())
    assert lines[1].startswith("  not used        : chronyd unreachable") and "absent.sock" in lines[1]
