"""A chronyd that lies gets no verdict (spec/clocks.md §3.2).

What answers on chronyd's socket is evidence, not truth: in a container where
unprivileged processes may bind port 323, anyone can answer the UDP
fallback. Before the sanity check, a root delay of −2 s cancelled a 0.25 s
correction into "OK ±0 ns" for a clock 250 ms off. A stand-in chronyd on a
Unix datagram socket answers the real client with a real reply (the golden
one recorded from chronyd 4.3) with one field changed per case.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _chrony_golden import GOLDEN_REPLY
from test_ecosystem_chrony_client import FakeChronyd

from tempotrace_sdk.clocks.chrony import ChronyHealth
from tempotrace_sdk.clocks.chrony_candm import encode_float
from tempotrace_sdk.clocks.chrony_client import ChronyTarget
from tempotrace_sdk.wire.layout import ClockQuality

#: Offsets in the 104-byte RPY_TRACKING (chrony candm.h): 28-byte header, ref id, IPAddr (20),
#: stratum, leap status, ref time (s high, s low, ns), then nine Floats.
STRATUM, REF_TIME = 52, 56
FLOATS = {"correction": 68, "rms_offset": 76, "skew": 88, "root_delay": 92, "root_dispersion": 96, "interval": 100}


def reply(request: bytes, changes: dict[str, float]) -> bytes:
    buf = bytearray(GOLDEN_REPLY)
    struct.pack_into(">I", buf, 16, struct.unpack_from(">I", request, 8)[0])  # our sequence
    ref_time = time.time() - 1 + changes.get("ref_time_ahead", 0.0)  # fresh: synchronised
    struct.pack_into(">IIi", buf, REF_TIME, 0, int(ref_time), int(ref_time % 1 * 1e9))
    if "stratum" in changes:
        struct.pack_into(">H", buf, STRATUM, int(changes["stratum"]))
    for name, at in FLOATS.items():
        if name in changes:
            struct.pack_into(">I", buf, at, encode_float(changes[name]))
    return bytes(buf)


class StandIn(FakeChronyd):
    """The client tests' stand-in, answering every TRACKING request with the golden reply changed by ``changes``."""

    def __init__(self, path: Path) -> None:
        self.changes: dict[str, float] = {}
        super().__init__(path, [])

    def _reply(self, request: bytes, sequence_delta: int = 0, status: int = 0) -> bytes:
        return reply(request, self.changes)


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[tuple[StandIn, ChronyHealth]]:
    run = tmp_path / "run"
    run.mkdir(mode=0o750)
    daemon = StandIn(run / "chronyd.sock")
    yield daemon, ChronyHealth(ChronyTarget("unix", str(run / "chronyd.sock")), max_drift_ppb=1000)
    daemon.close()


def _verdict(health: ChronyHealth) -> tuple[ClockQuality | None, str, str]:
    health.poll(force=True)
    v = health.verdict_at(time.monotonic_ns())
    return v.quality, v.status, v.reason


def test_the_unchanged_answer_is_believed(stand_in: tuple[StandIn, ChronyHealth]) -> None:
    """The control: the same stand-in, nothing changed, gives chronyd's OK verdict."""
    _daemon, health = stand_in
    quality, status, _reason = _verdict(health)
    assert (quality, status) == (ClockQuality.OK, "synchronised")


@pytest.mark.parametrize(
    ("changes", "rule"),
    [
        ({"root_delay": -2.0, "correction": 0.25}, "root delay -2 s is negative"),  # the review's: OK ±0 ns before
        ({"root_dispersion": -0.001}, "root dispersion"),
        ({"skew": -5.0}, "skew"),
        ({"rms_offset": -1e-6}, "RMS offset"),
        ({"stratum": 0}, "stratum 0"),
        ({"stratum": 16}, "stratum 16"),
        ({"interval": -64.0}, "update interval"),
        ({"ref_time_ahead": 3600.0}, "in the future"),
    ],
    ids=["negative-root-delay", "negative-dispersion", "negative-skew", "negative-rms", "stratum-0",
         "stratum-16", "negative-interval", "future-ref-time"],
)  # fmt: skip
def test_an_implausible_answer_gives_no_verdict_with_the_rule_as_reason(
    stand_in: tuple[StandIn, ChronyHealth], changes: dict[str, float], rule: str
) -> None:
    daemon, health = stand_in
    daemon.changes = changes
    quality, status, reason = _verdict(health)
    assert quality is None and status == "implausible"
    assert reason.startswith("implausible chronyd answer: ") and rule in reason, reason


def test_a_daemon_caught_lying_gets_no_holdover(stand_in: tuple[StandIn, ChronyHealth]) -> None:
    """An honest answer first, then a lie: not DEGRADED holdover from the earlier answer, no verdict."""
    daemon, health = stand_in
    assert _verdict(health)[0] is ClockQuality.OK
    daemon.changes = {"root_delay": -2.0}
    assert _verdict(health)[:2] == (None, "implausible")
    daemon.changes = {"interval": 0.0, "ref_time_ahead": -30.0}  # honest again, but not synchronised now
    quality, status, reason = _verdict(health)
    assert quality is None and status == "free running", "the lie's anchor must not carry a holdover"
    assert "no synchronised report" in reason


def test_the_first_update_interval_of_zero_is_not_a_lie(stand_in: tuple[StandIn, ChronyHealth]) -> None:
    """chronyd reports an update interval of 0 until its second clock update (reference.c): honest, not
    synchronised yet by ClockBound's rule (8 intervals), so no verdict, but not called implausible."""
    daemon, health = stand_in
    daemon.changes = {"interval": 0.0}
    quality, status, _reason = _verdict(health)
    assert quality is None and status == "free running"


# -- the UDP fallback: who answers on 127.0.0.1:323 ---------------------------------------------------------------
NEIGHBOUR = r"""
import json, os, socket, struct, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from test_ecosystem_chrony_sanity import reply

# A fresh network namespace where, as in many containers, anyone may bind ports below 1024.
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
with open("/proc/sys/net/ipv4/ip_unprivileged_port_start", "w") as f:
    f.write("0")
ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:  # the neighbour: an unprivileged process answering plausibly as "chronyd"
    os.setgid(65534); os.setuid(65534)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 323))
    os.write(ready_w, b"x")
    while True:
        request, sender = sock.recvfrom(1024)
        sock.sendto(reply(request, {}), sender)
os.read(ready_r, 1)
from tempotrace_sdk.clocks.chrony import ChronyHealth
from tempotrace_sdk.clocks.chrony_client import ChronyTarget
health = ChronyHealth(ChronyTarget("auto"))
health.poll(force=True)
v = health.verdict_at(time.monotonic_ns())
os.kill(pid, 9)
print(json.dumps({"quality": None if v.quality is None else v.quality.name, "status": v.status, "reason": v.reason}))
"""


def test_an_unprivileged_neighbour_on_the_udp_port_is_not_asked(tmp_path: Path) -> None:
    """chronyd binds its command port as root; a socket on 127.0.0.1:323 owned by another user is not chronyd."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs root, unshare and ip (a network namespace of its own)")
    if any(os.path.exists(p) for p in ("/run/chrony/chronyd.sock", "/var/run/chrony/chronyd.sock")):
        pytest.skip("a local chronyd's Unix socket is asked first")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPOTRACE_")}
    result = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", NEIGHBOUR, str(Path(__file__).parent)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if result.returncode != 0 and "unshare failed" in result.stderr:
        pytest.skip(f"cannot make a network namespace here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout.strip().splitlines()[-1])
    assert verdict["quality"] is None and verdict["status"] == "absent", verdict
    assert "uid 65534" in verdict["reason"] and "127.0.0.1" in verdict["reason"], verdict
