"""Shared fixtures of the conformance tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "native" / "ttext"


@pytest.fixture(scope="session")
def c_adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C codec's adapter, compiled here (gcc, -Werror) so no earlier `make` step is needed."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed (make test installs it: mk/conformance.mk)")
    out = tmp_path_factory.mktemp("ttext") / "ttext-adapter"
    sources = [
        SRC / n for n in ("adapter.c", "adapter_stamps.c", "jsonline.c", "ttext.c", "murmur3.c", "record.c", "stamps.c")
    ]
    cmd = [gcc, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic", "-o", str(out), *map(str, sources)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return out
