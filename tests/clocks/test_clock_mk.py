"""mk/clocks.mk installs what the ptp4l tests need, as root, when it is missing (spec: `make test` on a fresh box)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")


def _run(tmp_path: Path, have: list[str]) -> tuple[str, str]:
    """Run the clocks-linuxptp step with a PATH holding only stubs: root, a recording apt-get, and ``have``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    log = tmp_path / "apt.log"
    stubs = {"id": "echo 0", "apt-get": f'echo "$@" >> {log}'} | {name: "exit 0" for name in have}
    for name, body in stubs.items():
        stub = bin_dir / name
        stub.write_text(f"#!/bin/sh\n{body}\n")
        stub.chmod(0o755)
    assert MAKE is not None
    out = subprocess.run(
        [MAKE, "-s", "-C", str(ROOT), "clocks-linuxptp"],
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out, log.read_text() if log.exists() else ""


@pytest.mark.skipif(MAKE is None or not os.path.exists("/bin/sh"), reason="needs make and /bin/sh")
def test_installs_iproute2_when_ip_is_missing(tmp_path: Path) -> None:
    out, apt = _run(tmp_path, have=["ptp4l"])
    assert "install -y -qq iproute2" in apt and "linuxptp" not in apt, (out, apt)


@pytest.mark.skipif(MAKE is None or not os.path.exists("/bin/sh"), reason="needs make and /bin/sh")
def test_installs_both_or_nothing(tmp_path: Path) -> None:
    _, apt = _run(tmp_path / "none", have=[])
    assert "install -y -qq linuxptp iproute2" in apt
    _, apt = _run(tmp_path / "all", have=["ptp4l", "ip"])
    assert apt == ""
