"""Every layer's command is reachable from `tempotrace` (analysis commands come from the analysis package)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tempotrace_sdk.cli.main import build_parser, main


def test_every_command_is_registered() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands is not None
    assert {"clock", "decode", "encode", "analyze", "simulate", "demo"} <= set(commands)


@pytest.mark.parametrize("command", ["clock", "decode", "encode", "analyze", "simulate", "demo"])
def test_every_command_has_help(capsys: pytest.CaptureFixture[str], command: str) -> None:
    assert main([command, "--help"]) == 0
    assert f"usage: tempotrace {command}" in capsys.readouterr().out


def test_analyze_errors_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["analyze", str(tmp_path / "absent.jsonl")]) == 2
    assert "absent.jsonl" in capsys.readouterr().err
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"hello": 1}\n')
    assert main(["analyze", str(foreign)]) == 2
    assert "foreign.jsonl:1" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("tempotrace ")
