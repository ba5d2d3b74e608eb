"""A management client for a running ptp4l over its Unix-domain socket (what ``pmc -u`` does).

Speaks the IEEE 1588 management message format as linuxptp implements it
(msg.h, tlv.h, pmc_common.c): a 34-byte PTP header, the management body
(target port identity, boundary hops, action), one MANAGEMENT TLV. GETs carry
a zero-filled data field of the data set's size, as pmc sends by default.
boundaryHops is 0 so ptp4l answers locally and never forwards our request
onto the network. The client binds its own (abstract) socket address,
because ptp4l replies to the sender's address.
"""

from __future__ import annotations

import enum
import errno
import itertools
import os
import shutil
import socket
import struct
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ClockError

__all__ = [
    "DEFAULT_UDS",
    "PORT_STATES",
    "TIMESTAMPING",
    "CurrentDataSet",
    "MgmtId",
    "ParentDataSet",
    "PortDataSet",
    "PortProperties",
    "Ptp4lClient",
    "Ptp4lStatus",
    "TimeStatusNP",
    "survey_ptp4l",
]

#: ptp4l's default uds_address (linuxptp config.c).
DEFAULT_UDS = "/var/run/ptp4l"

_HEADER = struct.Struct(">BBHBBHqI8sHHBb")  # 34 bytes, msg.h struct ptp_header
_MGMT = struct.Struct(">8sHBBBB")  # 14 bytes: targetPortIdentity, hops, hops, flags, reserved
_TLV = struct.Struct(">HHH")  # type, length, managementId
assert _HEADER.size == 34 and _MGMT.size == 14

_MANAGEMENT = 0x0D  # messageType
_PTP_VERSION = 2
_CTL_MANAGEMENT = 4
_GET, _RESPONSE = 0, 2
_TLV_MANAGEMENT, _TLV_MANAGEMENT_ERROR_STATUS = 1, 2
_WILDCARD_PORT = (b"\xff" * 8, 0xFFFF)


class MgmtId(enum.IntEnum):
    """Management ids we GET (tlv.h) and the size of their data field."""

    CURRENT_DATA_SET = 0x2001
    PARENT_DATA_SET = 0x2002
    PORT_DATA_SET = 0x2004
    TIME_STATUS_NP = 0xC000
    PORT_PROPERTIES_NP = 0xC004


_DATALEN = {
    MgmtId.CURRENT_DATA_SET: 18,
    MgmtId.PARENT_DATA_SET: 32,
    MgmtId.PORT_DATA_SET: 26,
    MgmtId.TIME_STATUS_NP: 50,
    # portIdentity(10) port_state(1) timestamping(1) interface PTPText(1 + n): 13 at least.
    MgmtId.PORT_PROPERTIES_NP: 13,
}
#: GETs sent with an empty data field (what ``pmc -z`` sends; ptp4l accepts
#: length-2 management TLVs for GET): a zero-filled PTPText would be parsed.
_EMPTY_GET = frozenset({MgmtId.PORT_PROPERTIES_NP})

#: linuxptp's enum timestamp_type (sk.h), as pmc prints it.
TIMESTAMPING = {0: "SOFTWARE", 1: "HARDWARE", 2: "LEGACY_HW", 3: "ONESTEP", 4: "P2P1STEP"}

#: IEEE 1588 portState values (ddt.h / fsm.h).
PORT_STATES = {
    1: "INITIALIZING",
    2: "FAULTY",
    3: "DISABLED",
    4: "LISTENING",
    5: "PRE_MASTER",
    6: "MASTER",
    7: "PASSIVE",
    8: "UNCALIBRATED",
    9: "SLAVE",
}


def _clock_id(raw: bytes) -> str:
    """linuxptp's cid2str form: 3 bytes, 2 bytes, 3 bytes in hex, dot-separated."""
    return f"{raw[:3].hex()}.{raw[3:5].hex()}.{raw[5:8].hex()}"


def _scaled_ns(value: int) -> float:
    """TimeInterval (ns × 2^16) → ns."""
    return value / 65536.0


@dataclass(frozen=True)
class TimeStatusNP:
    master_offset_ns: int
    ingress_time_ns: int
    cumulative_scaled_rate_offset: int
    gm_present: bool
    gm_identity: str

    @classmethod
    def parse(cls, data: bytes) -> TimeStatusNP:
        offset, ingress, csro, _slgpc, _tbi = struct.unpack_from(">qqiiH", data, 0)
        gm_present, gm_id = struct.unpack_from(">i8s", data, 38)
        return cls(offset, ingress, csro, bool(gm_present), _clock_id(gm_id))


@dataclass(frozen=True)
class PortDataSet:
    port_number: int
    port_state: str
    log_sync_interval: int
    log_announce_interval: int
    peer_mean_path_delay_ns: float

    @classmethod
    def parse(cls, data: bytes) -> PortDataSet:
        _cid, port, state, _lmdri, pmpd, lai, _art, lsi = struct.unpack_from(">8sHBbqbBb", data, 0)
        return cls(port, PORT_STATES.get(state, f"UNKNOWN({state})"), lsi, lai, _scaled_ns(pmpd))


@dataclass(frozen=True)
class PortProperties:
    """PORT_PROPERTIES_NP: which interface a port runs on and how it timestamps."""

    port_number: int
    port_state: str
    timestamping: str
    interface: str

    @property
    def hardware(self) -> bool:
        """True when ptp4l timestamps in the NIC, i.e. disciplines the interface's PHC."""
        return self.timestamping not in ("SOFTWARE",) and not self.timestamping.startswith("UNKNOWN")

    @classmethod
    def parse(cls, data: bytes) -> PortProperties:
        _cid, port, state, tsm, n = struct.unpack_from(">8sHBBB", data, 0)
        name = data[13 : 13 + n].decode("utf-8", "replace")
        return cls(port, PORT_STATES.get(state, f"UNKNOWN({state})"), TIMESTAMPING.get(tsm, f"UNKNOWN({tsm})"), name)


@dataclass(frozen=True)
class CurrentDataSet:
    steps_removed: int
    offset_from_master_ns: float
    mean_path_delay_ns: float

    @classmethod
    def parse(cls, data: bytes) -> CurrentDataSet:
        steps, offset, delay = struct.unpack_from(">Hqq", data, 0)
        return cls(steps, _scaled_ns(offset), _scaled_ns(delay))


@dataclass(frozen=True)
class ParentDataSet:
    parent_identity: str
    gm_identity: str
    gm_clock_class: int
    gm_clock_accuracy: int
    gm_offset_scaled_log_variance: int
    gm_priority1: int
    gm_priority2: int

    @classmethod
    def parse(cls, data: bytes) -> ParentDataSet:
        pid, _pport, _stats, _res, _oplv, _opcpcr, p1, cclass, cacc, oslv, p2, gmid = struct.unpack_from(
            ">8sHBBHiBBBHB8s", data, 0
        )
        return cls(_clock_id(pid), _clock_id(gmid), cclass, cacc, oslv, p1, p2)


@dataclass(frozen=True)
class Ptp4lStatus:
    """One full query of ptp4l; ``port`` is its first PTP port (ptp4l with one interface)."""

    uds_path: str
    time_status: TimeStatusNP
    port: PortDataSet | None
    current: CurrentDataSet
    parent: ParentDataSet
    realtime_ns: int  # CLOCK_REALTIME when the answers arrived
    monotonic_ns: int
    #: The port's interface and timestamping mode; None when ptp4l did not answer it.
    properties: PortProperties | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["time_status"]["master_offset_ns"] = str(self.time_status.master_offset_ns)
        out["time_status"]["ingress_time_ns"] = str(self.time_status.ingress_time_ns)
        out["realtime_ns"] = str(self.realtime_ns)
        out["monotonic_ns"] = str(self.monotonic_ns)
        return out


_client_ids = itertools.count()


class Ptp4lClient:
    """GETs over ptp4l's UDS. Errors are ClockError (an OSError) naming the socket path."""

    def __init__(self, uds_path: str = DEFAULT_UDS, *, timeout_s: float = 0.5, domain: int = 0) -> None:
        self.uds_path = uds_path
        self.timeout_s = timeout_s
        self.domain = domain
        self._seq = 0
        self._port_number = os.getpid() & 0xFFFF
        # ptp4l copies sun_path as a C string, so an abstract address would
        # lose its leading NUL: bind a real path in a private directory.
        self._dir = tempfile.mkdtemp(prefix="tempotrace-pmc-")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            self._sock.bind(os.path.join(self._dir, f"c{next(_client_ids)}"))
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        self._sock.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Ptp4lClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, mid: MgmtId) -> bytes:
        datalen = 0 if mid in _EMPTY_GET else _DATALEN[mid]
        length = _HEADER.size + _MGMT.size + _TLV.size + datalen
        self._seq = (self._seq + 1) & 0xFFFF
        header = _HEADER.pack(
            _MANAGEMENT, _PTP_VERSION, length, self.domain, 0, 0, 0, 0,
            b"tempotrc", self._port_number, self._seq, _CTL_MANAGEMENT, 0x7F,
        )  # fmt: skip
        body = _MGMT.pack(_WILDCARD_PORT[0], _WILDCARD_PORT[1], 0, 0, _GET, 0)
        return header + body + _TLV.pack(_TLV_MANAGEMENT, 2 + datalen, mid) + bytes(datalen)

    def get(self, mid: MgmtId) -> list[tuple[int, bytes]]:
        """All answers to one GET: (answering port number, data field)."""
        try:
            self._sock.sendto(self._request(mid), self.uds_path)
        except OSError as err:
            raise ClockError(err.errno, f"ptp4l not reachable: {err.strerror}", self.uds_path) from err
        answers: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + self.timeout_s
        while True:
            # After the first answer, wait only briefly for other ports' answers.
            left = deadline - time.monotonic()
            if answers:
                left = min(left, 0.02)
            if left <= 0:
                break
            self._sock.settimeout(left)
            try:
                data = self._sock.recv(1500)
            except TimeoutError:
                break
            except OSError as err:
                raise ClockError(err.errno, f"ptp4l read failed: {err.strerror}", self.uds_path) from err
            answer = self._parse(data, mid)
            if answer is not None:
                answers.append(answer)
        if not answers:
            raise ClockError(errno.ETIMEDOUT, f"ptp4l gave no answer to GET {mid.name}", self.uds_path)
        return answers

    def _parse(self, data: bytes, mid: MgmtId) -> tuple[int, bytes] | None:
        """The answer's (port, data), or None for a datagram that is not our answer (remote bytes)."""
        if len(data) < _HEADER.size + _MGMT.size + _TLV.size:
            return None
        fields = _HEADER.unpack_from(data, 0)
        if fields[0] & 0x0F != _MANAGEMENT or fields[10] != self._seq:
            return None
        _tcid, _tport, _sbh, _bh, flags, _res = _MGMT.unpack_from(data, _HEADER.size)
        if flags & 0x0F != _RESPONSE:
            return None
        tlv_type, tlv_len, got = _TLV.unpack_from(data, _HEADER.size + _MGMT.size)
        start = _HEADER.size + _MGMT.size + 4
        if tlv_type == _TLV_MANAGEMENT_ERROR_STATUS:
            code = got  # for an error TLV the first field is the error id, then the management id
            raise ClockError(errno.EPROTO, f"ptp4l refused GET {mid.name}: management error 0x{code:04x}",
                             self.uds_path)  # fmt: skip
        if tlv_type != _TLV_MANAGEMENT or got != mid:
            return None
        payload = data[start + 2 : start + tlv_len]
        if len(payload) < _DATALEN[mid]:
            return None
        return fields[9], payload  # sourcePortIdentity.portNumber

    def status(self) -> Ptp4lStatus:
        """TIME_STATUS_NP, PORT_DATA_SET, CURRENT_DATA_SET and PARENT_DATA_SET in one go."""
        ts = TimeStatusNP.parse(self.get(MgmtId.TIME_STATUS_NP)[0][1])
        ports = sorted((PortDataSet.parse(d) for _, d in self.get(MgmtId.PORT_DATA_SET)), key=lambda p: p.port_number)
        cur = CurrentDataSet.parse(self.get(MgmtId.CURRENT_DATA_SET)[0][1])
        par = ParentDataSet.parse(self.get(MgmtId.PARENT_DATA_SET)[0][1])
        port = next((p for p in ports if p.port_number >= 1), None)
        return Ptp4lStatus(self.uds_path, ts, port, cur, par, time.time_ns(), time.monotonic_ns(), self.properties())

    def properties(self) -> PortProperties | None:
        """The first PTP port's PORT_PROPERTIES_NP, or None when ptp4l does not answer it."""
        try:
            answers = self.get(MgmtId.PORT_PROPERTIES_NP)
        except ClockError:
            return None  # older ptp4l, or a refusal: the caller treats it as "cannot confirm"
        props = sorted((PortProperties.parse(d) for _, d in answers), key=lambda p: p.port_number)
        return next((p for p in props if p.port_number >= 1), None)


def query(uds_path: str = DEFAULT_UDS, *, timeout_s: float = 0.5, domain: int = 0) -> Ptp4lStatus:
    """One status query with a fresh client (raises ClockError when unreachable)."""
    with Ptp4lClient(uds_path, timeout_s=timeout_s, domain=domain) as client:
        return client.status()


def survey_ptp4l(uds_path: str = DEFAULT_UDS) -> dict[str, Any]:
    """JSON-ready: ptp4l's answers, or why it could not be asked."""
    if not os.path.exists(uds_path):
        return {"reachable": False, "uds_path": uds_path, "why": f"no ptp4l socket at {uds_path} (ptp4l not running?)"}
    try:
        status = query(uds_path)
    except ClockError as err:
        return {"reachable": False, "uds_path": uds_path, "why": str(err)}
    return {"reachable": True, "uds_path": uds_path, "status": status.as_dict()}
