"""Helpers for the reliability suite (a unique module name: tests/ has no packages)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Generous: the machine may be shared and loaded; a hang shows as this timeout.
CHILD_TIMEOUT_S = 60.0


def subprocess_env(**extra: str) -> dict[str, str]:
    """The test environment minus anything that would change the setup under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TEMPOTRACE_"))}
    env.setdefault("TEMPOTRACE_CLOCK", "sim:ptp")
    env.update(extra)
    return env


def run_python(code: str, *args: str, timeout: float = CHILD_TIMEOUT_S, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter; a hang fails the test through the timeout."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class FileContents:
    """An export file read back: span names, drop records, and lines that do not parse."""

    def __init__(self, *paths: Path) -> None:
        self.names: list[str] = []
        self.fragments: list[str] = []
        self.lines: list[str] = []
        for path in paths:
            data = Path(path).read_bytes().decode("utf-8", "replace")
            for line in data.split("\n"):
                if not line:
                    continue
                self.lines.append(line)
                try:
                    doc = json.loads(line)
                except ValueError:
                    self.fragments.append(line)
                    continue
                for rs in doc["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        self.names.extend(sp["name"] for sp in ss["spans"])
        self.dropped_by_writer = drop_records(self.lines)

    @property
    def dropped(self) -> int:
        return sum(self.dropped_by_writer.values())

    def merged_lines(self) -> list[str]:
        """Lines holding the start of more than one record: two writes ran together."""
        return [line for line in self.lines if line.count('{"resourceSpans"') > 1]


def drop_records(lines: list[str]) -> dict[str, int]:
    """The reading rule of spec/reliability.md §Drop records: the largest count per writer id."""
    out: dict[str, int] = {}
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        for rs in doc["resourceSpans"]:
            attrs = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
            if "tempotrace.export.dropped_spans" in attrs:
                assert rs["scopeSpans"] == [], "a drop record carries no spans"
                writer = attrs["tempotrace.export.writer_id"]["stringValue"]
                count = int(attrs["tempotrace.export.dropped_spans"]["intValue"])
                out[writer] = max(out.get(writer, 0), count)
    return out


def describe(result: subprocess.CompletedProcess[str]) -> str:
    return f"rc={result.returncode}\nstdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-4000:]}"


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(result.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def tmpfs(where: Path, options: str, purpose: str) -> Iterator[Path]:
    """A tmpfs mounted at ``where`` with ``options`` (``ro,size=1m``, ``size=2m``), unmounted afterwards;
    skips with ``purpose`` named when not root or when this machine cannot mount one."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip(f"mounting {purpose} needs root")
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
