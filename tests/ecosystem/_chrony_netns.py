"""A chronyd NTP server and a chronyd client in two network namespaces joined by a veth pair.

Both run with ``-x``: chronyd never touches the system clock (the host's, shared
by every namespace). The server serves its own clock (``local stratum 1``); the
client polls it every 0.25 s. Names carry a random tag so parallel runs cannot
collide, and ``stop()`` (called from ``finally``) removes every process,
namespace and file, even when a test fails.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

SERVER_IP, CLIENT_IP = "10.213.0.1", "10.213.0.2"
#: Where mk/ecosystem.mk unpacks Debian's chrony when it is not installed.
UNPACKED = Path(__file__).resolve().parents[2] / "native" / "build" / "chrony"


def _find(name: str, *places: Path) -> str | None:
    found = shutil.which(name)
    return found or next((str(p) for p in places if os.access(p, os.X_OK)), None)


CHRONYD = _find("chronyd", Path("/usr/sbin/chronyd"), UNPACKED / "usr/sbin/chronyd")
CHRONYC = _find("chronyc", Path("/usr/bin/chronyc"), UNPACKED / "usr/bin/chronyc")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def unavailable_reason() -> str | None:
    """Why these tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, chronyd)"
    if CHRONYD is None:
        return "no chronyd (make test unpacks Debian's chrony as root)"
    if shutil.which("ip") is None:
        return "iproute2 'ip' not installed"
    probe = f"ttcprobe{secrets.token_hex(3)}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.SubprocessError, OSError) as err:
        return f"'ip netns' unavailable: {err}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None


def _chrony_user() -> str:
    """chronyd drops to its own user as packaged (Debian: _chrony); root where that user does not exist."""
    try:
        pwd.getpwnam("_chrony")
        return "_chrony"
    except KeyError:
        return "root"


class ChronyPair:
    def __init__(self) -> None:
        tag = secrets.token_hex(3)
        self.ns_server, self.ns_client = f"ttcs{tag}", f"ttcc{tag}"
        self.if_server, self.if_client = f"ttcva{tag}", f"ttcvb{tag}"
        self.dir = Path(tempfile.mkdtemp(prefix="ttchrony-"))
        self.dir.chmod(0o755)  # chronyd, once it dropped to its user, must reach run/
        # chronyd refuses a socket directory others can read; sun_path must fit 108 bytes.
        self.run = self.dir / "run"
        self.run.mkdir(mode=0o750)
        self.user = _chrony_user()
        shutil.chown(self.run, self.user, self.user)
        self.server_sock, self.client_sock = str(self.run / "s.sock"), str(self.run / "c.sock")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._net_up = False

    def _network(self) -> None:
        if self._net_up:
            return
        _ip("netns", "add", self.ns_server)
        _ip("netns", "add", self.ns_client)
        _ip("link", "add", self.if_server, "type", "veth", "peer", "name", self.if_client)
        _ip("link", "set", self.if_server, "netns", self.ns_server)
        _ip("link", "set", self.if_client, "netns", self.ns_client)
        for ns, dev, addr in ((self.ns_server, self.if_server, SERVER_IP), (self.ns_client, self.if_client, CLIENT_IP)):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", dev, "up")
        self._net_up = True

    def start_server(self) -> None:
        self._network()
        self._spawn("server", self.ns_server, f"local stratum 1\nallow {SERVER_IP.rsplit('.', 1)[0]}.0/24\n")

    def start_client(self) -> None:
        self._network()
        self._spawn("client", self.ns_client, f"server {SERVER_IP} iburst minpoll -2 maxpoll -2\n")

    def _spawn(self, role: str, ns: str, body: str) -> None:
        stem = role[0]
        conf = self.dir / f"{stem}.conf"
        sock = self.server_sock if role == "server" else self.client_sock
        conf.write_text(f"{body}bindcmdaddress {sock}\ncmdport 0\npidfile {self.dir / stem}.pid\n")
        log = open(self.dir / f"{stem}.log", "wb")
        assert CHRONYD is not None
        cmd = ["ip", "netns", "exec", ns, CHRONYD, "-x", "-d", "-u", self.user, "-f", str(conf)]
        self.procs[role] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def stop_server(self) -> None:
        self._stop("server")

    def stop_client(self) -> None:
        self._stop("client")

    def _stop(self, role: str) -> None:
        proc = self.procs.pop(role, None)
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def log(self, stem: str) -> str:
        path = self.dir / f"{stem}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        for role in list(self.procs):
            self._stop(role)
        for ns in (self.ns_server, self.ns_client):  # deleting a namespace removes its veth end
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
        subprocess.run(["ip", "link", "del", self.if_server], capture_output=True, timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        logs = "\n".join(f"--- {stem}.log\n{self.log(stem)}" for stem in ("s", "c"))
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}\n{logs}")
