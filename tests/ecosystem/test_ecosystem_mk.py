"""mk/ecosystem.mk: chrony is installed as root when missing, and its service is never started by apt."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")

pytestmark = pytest.mark.skipif(MAKE is None or not os.path.exists("/bin/sh"), reason="needs make and /bin/sh")


def _run(tmp_path: Path, have: list[str], policy_exists: bool = False) -> tuple[str, str, Path]:
    """Run ecosystem-chrony with a PATH of stubs: root, an apt-get that records its arguments and whether
    policy-rc.d forbade starting services while it ran, and the commands in ``have``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    log, policy = tmp_path / "apt.log", tmp_path / "policy-rc.d"
    if policy_exists:
        policy.write_text("#!/bin/sh\n# the machine's own\nexit 101\n")
        policy.chmod(0o755)
    apt = f'echo "$@" >> {log}; if [ -x {policy} ] && {policy}; then :; else echo "policy=$?" >> {log}; fi'
    stubs = {"id": "echo 0", "apt-get": apt} | {name: "exit 0" for name in have}
    for name, body in stubs.items():
        stub = bin_dir / name
        stub.write_text(f"#!/bin/sh\n{body}\n")
        stub.chmod(0o755)
    assert MAKE is not None
    out = subprocess.run(
        [MAKE, "-s", "-C", str(ROOT), "ecosystem-chrony", f"POLICY_RC_D={policy}", f"SBIN_CHRONYD={tmp_path}/no"],
        env={"PATH": f"{bin_dir}:/bin:/usr/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out, log.read_text() if log.exists() else "", policy


def test_installs_chrony_with_services_forbidden_then_removes_its_policy(tmp_path: Path) -> None:
    out, apt, policy = _run(tmp_path, have=["ip"])
    assert "install -y -qq chrony" in apt and "policy=101" in apt, (out, apt)
    assert not policy.exists()  # ours, removed again


def test_keeps_the_machines_own_policy(tmp_path: Path) -> None:
    _, apt, policy = _run(tmp_path, have=["ip"], policy_exists=True)
    assert "policy=101" in apt and "the machine's own" in policy.read_text()


def test_nothing_to_do_when_chronyd_and_ip_exist(tmp_path: Path) -> None:
    _, apt, policy = _run(tmp_path, have=["chronyd", "ip"])
    assert apt == "" and not policy.exists()
