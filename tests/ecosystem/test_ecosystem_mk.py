"""mk/ecosystem.mk: chronyd for the tests comes from Debian's package, unpacked, never installed.

Installing chrony would remove the machine's own time daemon (it Conflicts with
systemd-timesyncd, ntpsec, openntpd) and could start a chronyd that steers the clock.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")

pytestmark = pytest.mark.skipif(MAKE is None or not os.path.exists("/bin/sh"), reason="needs make and /bin/sh")


def _run(tmp_path: Path, have: list[str]) -> tuple[str, str, Path]:
    """Run ecosystem-chrony with a PATH of stubs (root, apt-get, apt-cache, dpkg-deb, and ``have``);
    the apt/dpkg stubs record their arguments in one log."""
    bin_dir, log, unpacked = tmp_path / "bin", tmp_path / "calls.log", tmp_path / "chrony"
    bin_dir.mkdir(parents=True)
    stubs = {
        "id": "echo 0",
        "apt-get": f'echo "apt-get $*" >> {log}; [ "$1" = download ] && touch chrony_4.3-2_amd64.deb; exit 0',
        "apt-cache": 'printf "chrony\\n  Depends: adduser\\n  Depends: libc6\\n  Depends: libedit2\\n"',
        "dpkg-deb": f'echo "dpkg-deb $*" >> {log}; mkdir -p "$3/usr/sbin" && touch "$3/usr/sbin/chronyd"',
    } | {name: "exit 0" for name in have}
    for name, body in stubs.items():
        stub = bin_dir / name
        stub.write_text(f"#!/bin/sh\n{body}\n")
        stub.chmod(0o755)
    for tool in ("mktemp", "awk", "rm", "mkdir", "touch"):  # the real ones, and nothing else
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    assert MAKE is not None
    out = subprocess.run(
        [MAKE, "-s", "-C", str(ROOT), "ecosystem-chrony", f"SBIN_CHRONYD={tmp_path}/none", f"CHRONY_DIR={unpacked}"],
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out, log.read_text() if log.exists() else "", unpacked


def test_unpacks_chrony_and_installs_only_its_libraries(tmp_path: Path) -> None:
    out, calls, unpacked = _run(tmp_path, have=["ip"])
    assert "apt-get install -y -qq libc6 libedit2" in calls, (out, calls)
    assert "apt-get download -qq chrony" in calls
    assert "dpkg-deb -x " in calls and f" {unpacked}" in calls
    assert not [line for line in calls.splitlines() if line.startswith("apt-get install") and "chrony" in line]
    assert (unpacked / "usr/sbin/chronyd").exists()


def test_installs_iproute2_when_ip_is_missing(tmp_path: Path) -> None:
    _, calls, _ = _run(tmp_path, have=["chronyd"])
    assert "apt-get install -y -qq iproute2" in calls and "download" not in calls


def test_nothing_to_do_when_chronyd_and_ip_exist(tmp_path: Path) -> None:
    _, calls, unpacked = _run(tmp_path, have=["chronyd", "ip"])
    assert calls == "" and not unpacked.exists()
