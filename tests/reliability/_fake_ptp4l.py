"""A fake ptp4l on a Unix socket: answers the SDK's management GETs with whatever a test tells it.

It speaks the same management message layout the client sends and parses
(tempotrace_sdk/clocks/ptp4l.py, from linuxptp's msg.h/tlv.h), so the real
client, parser and quality rules run end to end against a daemon that lies.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tempotrace_sdk.clocks.ptp4l import _HEADER, _MGMT, _TLV, MgmtId

GM = bytes.fromhex("a287e4fffe79f8a2")
OWN = bytes.fromhex("6ea3effffefd8a55")


@dataclass
class Answer:
    """What the fake daemon reports; the defaults are an honest, locked slave."""

    master_offset_ns: int = 120
    cds_offset_ns: int | None = None  # CURRENT_DATA_SET's copy of the offset (default: the same)
    path_delay_ns: int = 2_000
    sync_age_s: float = 0.05
    gm_present: bool = True
    gm_identity: bytes = GM
    parent_gm_identity: bytes | None = None  # PARENT_DATA_SET's grandmaster (default: the same)
    port_state: int = 9  # SLAVE
    log_sync_interval: int = -3
    steps_removed: int = 1
    gm_clock_class: int = 6
    interface: str = "eth3"
    timestamping: int = 1  # HARDWARE
    extra: dict[int, bytes] = field(default_factory=dict)

    def data(self, mid: int) -> bytes:
        scaled = 1 << 16
        if mid == MgmtId.TIME_STATUS_NP:
            ingress = time.time_ns() - int(self.sync_age_s * 1e9)
            head = struct.pack(">qqiiH", self.master_offset_ns, ingress, 0, 0, 0)
            return head + bytes(38 - len(head)) + struct.pack(">i8s", int(self.gm_present), self.gm_identity)
        if mid == MgmtId.PORT_DATA_SET:
            body = struct.pack(">8sHBbqbBb", OWN, 1, self.port_state, 0, 0, -2, 3, self.log_sync_interval)
            return body + bytes(26 - len(body))
        if mid == MgmtId.CURRENT_DATA_SET:
            cds = self.master_offset_ns if self.cds_offset_ns is None else self.cds_offset_ns
            return struct.pack(">Hqq", self.steps_removed, cds * scaled, self.path_delay_ns * scaled)
        if mid == MgmtId.PARENT_DATA_SET:
            gm = self.parent_gm_identity or self.gm_identity
            return struct.pack(">8sHBBHiBBBHB8s", GM, 1, 0, 0, 0, 0, 128, self.gm_clock_class, 0x21, 0x4E5D, 128, gm)
        if mid == MgmtId.PORT_PROPERTIES_NP:
            name = self.interface.encode()
            return struct.pack(">8sHBBB", OWN, 1, self.port_state, self.timestamping, len(name)) + name
        return self.extra[mid]


class FakePtp4l:
    """Serves ``answer`` on ``path`` from a thread until ``close()``."""

    def __init__(self, path: Path, answer: Answer) -> None:
        self.path = str(path)
        self.answer = answer
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        self._sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                request, sender = self._sock.recvfrom(1500)
            except TimeoutError:
                continue
            fields = _HEADER.unpack_from(request, 0)
            mid = _TLV.unpack_from(request, _HEADER.size + _MGMT.size)[2]
            data = self.answer.data(mid)
            length = _HEADER.size + _MGMT.size + _TLV.size + len(data)
            header = _HEADER.pack(0x0D, 2, length, 0, 0, 0, 0, 0, OWN, 1, fields[10], 4, 0x7F)
            body = _MGMT.pack(b"\xff" * 8, 0xFFFF, 0, 0, 2, 0)  # action RESPONSE
            self._sock.sendto(header + body + _TLV.pack(1, 2 + len(data), mid) + data, sender)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()
