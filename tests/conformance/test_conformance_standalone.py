"""The conformance kit stands alone (issue 15): a team with only its own adapter needs a stock Python.

Each test runs the real runner on an interpreter with nothing installed (a
fresh ``python -m venv --without-pip``, which cannot import mmh3, msgspec or
anything else outside the standard library), against the C adapter, which
needs no Python at all: the stand-in for an adapter in another language.
What is checked is what such a team would see: every vector passes, and
asking for the reference implementation without its dependencies is one clear
setup error (exit 2) that says how to fix it, not a failure per vector.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "conformance" / "run"
VECTORS = ROOT / "conformance" / "vectors"
TOTAL = sum(json.loads(p.read_text(encoding="utf-8"))["numberOfTests"] for p in VECTORS.glob("*.json"))


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python with the standard library only (no site-packages of ours or the system's)."""
    base = getattr(sys, "_base_executable", sys.executable)
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True, timeout=120)
    python = str(venv / "bin" / "python")
    probe = subprocess.run([python, "-c", "import mmh3"], capture_output=True, env=_clean_env(), timeout=60)
    assert probe.returncode != 0, "the bare interpreter must not see installed packages"
    return python


def _clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that points Python at our packages."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHON")}
    return {**env, **extra}


def test_runner_needs_nothing_but_a_stock_python(bare_python: str, c_adapter: Path) -> None:
    """conformance/run --impl mine=CMD on a bare interpreter: every vector runs and passes."""
    res = subprocess.run(
        [str(RUN), "--impl", f"mine={c_adapter}"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(PYTHON=bare_python),
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    assert f"mine: {TOTAL} passed, 0 failed" in res.stdout


def test_reference_without_its_dependencies_is_one_clear_setup_error(bare_python: str, c_adapter: Path) -> None:
    """Issue 15: this used to fail every vector ('No module named mmh3') and restart the adapter each time."""
    res = subprocess.run(
        [str(RUN), "--impl", "python", "--impl", f"mine={c_adapter}", "--python", bare_python],
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(PYTHON=bare_python),
    )
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr
    assert "implementation 'python' cannot start" in res.stderr
    assert "No module named" in res.stderr and "make venv" in res.stderr and "PYTHON" in res.stderr
    assert res.stdout.count("FAIL python") <= 1
    assert f"{TOTAL} passed" not in res.stdout


def _runner_module(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    """python -m conformance.runner ARGS, from the repository root, with nothing else on the path."""
    return subprocess.run(
        [python, "-m", "conformance.runner", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=_clean_env(PYTHONPATH=str(ROOT)),
    )


def test_reference_is_found_in_the_repository_venv(bare_python: str, c_adapter: Path) -> None:
    """A bare runner finds the reference implementation in .venv without being told (conformance/README.md)."""
    if not os.access(ROOT / ".venv" / "bin" / "python", os.X_OK):
        pytest.skip("no .venv in this checkout (make venv creates it)")
    res = _runner_module(bare_python, "--impl", "python", "--impl", f"mine={c_adapter}")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    assert f"python: {TOTAL} passed, 0 failed" in res.stdout
    assert "disagreements between implementations: 0" in res.stdout


def test_a_command_that_does_not_exist_is_a_setup_error(tmp_path: Path) -> None:
    res = subprocess.run(
        [str(RUN), "--impl", f"mine={tmp_path / 'no-such-adapter'}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_clean_env(PYTHON=sys.executable),
    )
    assert res.returncode == 2
    assert "implementation 'mine' cannot start: cannot run" in res.stderr


@pytest.mark.parametrize("version", ["3.8", "3.9"])
def test_runner_runs_on_the_oldest_supported_python(version: str, c_adapter: Path) -> None:
    """The README promises Python 3.8 or later for the runner; checked where such an interpreter exists."""
    python = shutil.which(f"python{version}")
    if python is None or subprocess.run([python, "-c", ""], capture_output=True, timeout=60).returncode != 0:
        pytest.skip(f"python{version} not installed")
    res = _runner_module(python, "--impl", f"mine={c_adapter}")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    assert f"mine: {TOTAL} passed, 0 failed" in res.stdout
