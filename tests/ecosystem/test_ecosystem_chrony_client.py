"""The chronyd socket client against a stand-in chronyd on a Unix datagram socket (no root needed).

The real daemon is in test_ecosystem_chrony_live.py; here the stand-in replays
the golden reply and misbehaves on purpose (silence, late answers, refusals).
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _chrony_golden import GOLDEN_REPLY

from tempotrace_sdk.clocks.chrony_client import ChronyTarget, query_tracking, target
from tempotrace_sdk.errors import ClockError


class FakeChronyd:
    """Answers each TRACKING request according to the next entry of ``script``."""

    def __init__(self, path: Path, script: list[str]) -> None:
        self.path = path
        self.script = list(script)
        self.requests: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _reply(self, request: bytes, sequence_delta: int = 0, status: int = 0) -> bytes:
        buf = bytearray(GOLDEN_REPLY)
        struct.pack_into(">I", buf, 16, (struct.unpack_from(">I", request, 8)[0] + sequence_delta) & 0xFFFFFFFF)
        struct.pack_into(">H", buf, 8, status)
        return bytes(buf)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                request, sender = self.sock.recvfrom(1024)
            except TimeoutError:
                continue
            self.requests.append(request)
            action = self.script.pop(0) if self.script else "answer"
            if action == "silent":
                continue
            if action == "late-then-answer":  # an answer to an earlier request first
                self.sock.sendto(self._reply(request, sequence_delta=-1), sender)
            status = 2 if action == "unauth" else 0
            self.sock.sendto(self._reply(request, status=status), sender)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    path.mkdir(mode=0o750)
    return path


@pytest.fixture
def fake(run_dir: Path, request: pytest.FixtureRequest) -> Iterator[FakeChronyd]:
    daemon = FakeChronyd(run_dir / "chronyd.sock", getattr(request, "param", []))
    yield daemon
    daemon.close()


def test_asks_like_chronyc_and_leaves_nothing_behind(fake: FakeChronyd, run_dir: Path) -> None:
    t = query_tracking(target(str(fake.path)))
    assert t.ref_address == "10.77.0.1" and t.stratum == 2
    assert len(fake.requests) == 1 and len(fake.requests[0]) == 104
    assert os.listdir(run_dir) == ["chronyd.sock"]  # our private directory and socket are gone


@pytest.mark.parametrize("fake", [["late-then-answer"]], indirect=True)
def test_a_late_answer_to_an_earlier_request_is_skipped(fake: FakeChronyd) -> None:
    assert query_tracking(target(str(fake.path))).stratum == 2


@pytest.mark.parametrize("fake", [["silent"]], indirect=True)
def test_a_silent_chronyd_costs_one_bounded_wait(fake: FakeChronyd, run_dir: Path) -> None:
    started = time.monotonic()
    with pytest.raises(ClockError) as caught:
        query_tracking(target(str(fake.path)), timeout_s=0.2)
    assert caught.value.errno == errno.ETIMEDOUT and str(fake.path) in str(caught.value)
    assert time.monotonic() - started < 10  # bounded (generous: the box may be loaded)
    assert os.listdir(run_dir) == ["chronyd.sock"]


@pytest.mark.parametrize("fake", [["unauth"]], indirect=True)
def test_a_refusal_is_a_protocol_error_naming_the_status(fake: FakeChronyd) -> None:
    with pytest.raises(ClockError) as caught:
        query_tracking(target(str(fake.path)))
    assert caught.value.errno == errno.EPROTO and "UNAUTH" in str(caught.value)


def test_no_socket_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ClockError) as caught:
        query_tracking(target(str(tmp_path / "absent.sock")))
    assert caught.value.errno == errno.ENOENT and "absent.sock" in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "mode", "path"),
    [("", "auto", None), ("AUTO", "auto", None), ("off", "off", None), ("0", "off", None),
     ("/run/x/chronyd.sock", "unix", "/run/x/chronyd.sock")],
)  # fmt: skip
def test_target_forms(spec: str, mode: str, path: str | None) -> None:
    got = target(spec)
    assert (got.mode, got.path) == (mode, path)


def test_a_relative_or_unknown_target_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match=r"TEMPOTRACE_CHRONY='chronyd\.sock'"):
        target("chronyd.sock")


def test_off_is_never_asked() -> None:
    with pytest.raises(ClockError, match="disabled"):
        query_tracking(ChronyTarget("off"))
