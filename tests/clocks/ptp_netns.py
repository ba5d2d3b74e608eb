"""A master and a slave ptp4l in two network namespaces joined by a veth pair.

Software timestamping, L2 transport, free_running 1: nothing ever adjusts a
clock on the host. Everything created here is removed in ``stop()``, which
the fixture calls from ``finally`` even when a test fails.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

# Fast intervals keep the test short: Sync 8/s, Announce 4/s, master lost after 0.75 s.
CONFIG = """[global]
time_stamping software
network_transport L2
free_running 1
logSyncInterval -3
logAnnounceInterval -2
announceReceiptTimeout 3
logMinDelayReqInterval -3
summary_interval 10
uds_address {uds}
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def unavailable_reason() -> str | None:
    """Why these tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ptp4l") is None:
        return "ptp4l not installed (make test installs Debian's linuxptp as root)"
    if shutil.which("ip") is None:
        return "iproute2 'ip' not installed"
    probe = f"ttprobe{secrets.token_hex(3)}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.SubprocessError, OSError) as err:
        return f"'ip netns' unavailable: {err}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None


class PtpPair:
    def __init__(self) -> None:
        tag = secrets.token_hex(3)
        self.ns_master, self.ns_slave = f"ttm{tag}", f"tts{tag}"
        self.if_master, self.if_slave = f"ttva{tag}", f"ttvb{tag}"
        # UDS paths must fit sun_path (108 bytes): a short private directory.
        self.dir = Path(tempfile.mkdtemp(prefix="ttptp-"))
        self.master_uds = str(self.dir / "m.sock")
        self.slave_uds = str(self.dir / "s.sock")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        _ip("netns", "add", self.ns_master)
        _ip("netns", "add", self.ns_slave)
        _ip("link", "add", self.if_master, "type", "veth", "peer", "name", self.if_slave)
        _ip("link", "set", self.if_master, "netns", self.ns_master)
        _ip("link", "set", self.if_slave, "netns", self.ns_slave)
        for ns, dev in ((self.ns_master, self.if_master), (self.ns_slave, self.if_slave)):
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", dev, "up")
        (self.dir / "m.cfg").write_text(CONFIG.format(uds=self.master_uds) + "priority1 10\n")
        (self.dir / "s.cfg").write_text(CONFIG.format(uds=self.slave_uds) + "slaveOnly 1\n")
        self._spawn("master", self.ns_master, self.if_master, "m")
        self._spawn("slave", self.ns_slave, self.if_slave, "s")

    def _spawn(self, role: str, ns: str, dev: str, stem: str) -> None:
        log = open(self.dir / f"{stem}.log", "wb")
        cmd = ["ip", "netns", "exec", ns, "ptp4l", "-f", str(self.dir / f"{stem}.cfg"), "-i", dev, "-m"]
        self.procs[role] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def stop_master(self) -> None:
        self._stop("master")

    def _stop(self, role: str) -> None:
        proc = self.procs.pop(role, None)
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def log(self, stem: str) -> str:
        path = self.dir / f"{stem}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for role in list(self.procs):
            self._stop(role)
        for ns in (self.ns_master, self.ns_slave):  # deleting a namespace removes its veth end
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
        subprocess.run(["ip", "link", "del", self.if_master], capture_output=True, timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def wait_for(predicate: object, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():  # type: ignore[operator]
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
