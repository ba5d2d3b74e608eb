"""chronyd's command-and-monitoring protocol, the TRACKING request only (sans-IO).

What ``chronyc tracking`` sends and reads, from chrony's ``candm.h`` (protocol
version 6), ``pktlength.c`` (request padding) and ``util.c`` (the 32-bit
float and the timespec). Every field is big-endian ("network order").
``encode_tracking_request`` and ``decode_tracking_reply`` take and return
bytes and values; the socket side is ``chrony_client``.
"""

from __future__ import annotations

import errno
import ipaddress
import math
import struct
from dataclasses import dataclass
from typing import Any

from ..errors import ClockError

__all__ = [
    "LEAP_NAMES",
    "REFID_LOCAL",
    "REPLY_LEN",
    "REQUEST_LEN",
    "ChronyTracking",
    "decode_float",
    "decode_tracking_reply",
    "encode_float",
    "encode_tracking_request",
    "reply_sequence",
]

# -- candm.h ------------------------------------------------------------------
PROTO_VERSION = 6  # PROTO_VERSION_NUMBER
PKT_TYPE_CMD_REQUEST = 1
PKT_TYPE_CMD_REPLY = 2
REQ_TRACKING = 33
RPY_TRACKING = 5
STT_SUCCESS = 0
#: Status codes chronyd may answer instead of data (candm.h STT_*).
STATUS_NAMES = {
    0: "SUCCESS",
    1: "FAILED",
    2: "UNAUTH (command not allowed from this socket/address)",
    3: "INVALID",
    6: "NOTENABLED",
    9: "ACCESSDENIED",
    18: "BADPKTVERSION (chronyd speaks another protocol version)",
    19: "BADPKTLENGTH",
}
#: Leap status as chronyc prints it (client.c, %L); 3 means "not synchronised".
LEAP_NAMES = {0: "Normal", 1: "Insert second", 2: "Delete second", 3: "Not synchronised"}
#: Reference id of chronyd's own local reference (``local`` directive): "LOCL" (ntp_core.h NTP_REFID_LOCAL).
REFID_LOCAL = 0x7F7F0101

# CMD_Request header: version, pkt_type, res1, res2, command, attempt, sequence, pad1, pad2.
_REQUEST_HEAD = struct.Struct(">BBBBHHIII")
# CMD_Reply header: version, pkt_type, res1, res2, command, reply, status, pad1..3, sequence, pad4, pad5.
_REPLY_HEAD = struct.Struct(">BBBBHHHHHHIII")
# RPY_Tracking: ref_id, IPAddr (16-byte union, family, pad), stratum, leap_status,
# Timespec (sec high, sec low, nsec), then nine Floats.
_TRACKING = struct.Struct(">I16sHHHHIII9I")
#: Reply length for TRACKING: header + RPY_Tracking up to its EOR field (pktlength.c RPY_LENGTH_ENTRY).
REPLY_LEN = _REPLY_HEAD.size + _TRACKING.size  # 28 + 76 = 104
#: A request is padded to the reply's length so chronyd is never an amplifier (PROTO_VERSION_PADDING).
REQUEST_LEN = REPLY_LEN

_IPADDR_INET4, _IPADDR_INET6 = 1, 2  # addressing.h
_TV_NOHIGHSEC = 0x7FFFFFFF  # candm.h: "used in tv_sec_high for 32-bit timestamps"
_FLOAT_EXP_BITS = 7  # util.c: 7-bit signed exponent, 25-bit signed coefficient, value = coef * 2^(exp - 25)
_FLOAT_COEF_BITS = 32 - _FLOAT_EXP_BITS


def decode_float(word: int) -> float:
    """chrony's 32-bit ``Float`` (util.c UTI_FloatNetworkToHost) from its big-endian word."""
    exp = word >> _FLOAT_COEF_BITS
    if exp >= 1 << (_FLOAT_EXP_BITS - 1):
        exp -= 1 << _FLOAT_EXP_BITS
    coef = word % (1 << _FLOAT_COEF_BITS)
    if coef >= 1 << (_FLOAT_COEF_BITS - 1):
        coef -= 1 << _FLOAT_COEF_BITS
    return coef * 2.0 ** (exp - _FLOAT_COEF_BITS)


def encode_float(value: float) -> int:
    """The inverse (util.c UTI_FloatHostToNetwork): for recorded replies and tests."""
    neg = 1 if value < 0 else 0
    x = abs(value) if value == value else 0.0  # NaN is sent as zero
    coef_max = (1 << (_FLOAT_COEF_BITS - 1)) - 1
    exp_max = (1 << (_FLOAT_EXP_BITS - 1)) - 1
    if x < 1e-100:
        exp = coef = 0
    elif x > 1e100:
        exp, coef = exp_max, coef_max + neg
    else:
        exp = int(math.log(x) / math.log(2)) + 1
        coef = int(x * 2.0 ** (_FLOAT_COEF_BITS - exp) + 0.5)
        while coef > coef_max + neg:  # at most two bits too many
            coef >>= 1
            exp += 1
        if exp > exp_max:
            exp, coef = exp_max, coef_max + neg
        elif exp < -exp_max - 1:  # underflow: denormalise, or zero when nothing is left
            exp_min = -exp_max - 1
            exp, coef = (exp_min, coef >> (exp_min - exp)) if exp + _FLOAT_COEF_BITS >= exp_min else (0, 0)
    if neg:
        coef = -coef
    return ((exp % (1 << _FLOAT_EXP_BITS)) << _FLOAT_COEF_BITS) | (coef % (1 << _FLOAT_COEF_BITS))


def encode_tracking_request(sequence: int) -> bytes:
    """A TRACKING request (attempt 0), zero-padded to REQUEST_LEN."""
    head = _REQUEST_HEAD.pack(PROTO_VERSION, PKT_TYPE_CMD_REQUEST, 0, 0, REQ_TRACKING, 0, sequence & 0xFFFFFFFF, 0, 0)
    return head + bytes(REQUEST_LEN - len(head))


@dataclass(frozen=True, slots=True)
class ChronyTracking:
    """One TRACKING reply: what ``chronyc tracking`` prints, in seconds and ppm."""

    ref_id: int
    ref_address: str  # "" when chronyd names no address (local reference, refclock)
    stratum: int
    leap_status: int
    ref_time_s: float  # UTC (Unix) time of chronyd's last clock update; 0 before the first one
    current_correction_s: float  # > 0: the system clock is slow of NTP time (chronyc "System time")
    last_offset_s: float
    rms_offset_s: float
    freq_ppm: float
    resid_freq_ppm: float
    skew_ppm: float
    root_delay_s: float
    root_dispersion_s: float
    last_update_interval_s: float

    @property
    def ref_name(self) -> str:
        """The reference as chronyc names it: its address, else the printable characters of the ref id."""
        if self.ref_address:
            return self.ref_address
        raw = self.ref_id.to_bytes(4, "big")
        return "".join(chr(b) for b in raw if 32 < b < 127)

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference_id": f"{self.ref_id:08X}",
            "reference": self.ref_name,
            "stratum": self.stratum,
            "ref_time_unix_s": self.ref_time_s,
            "system_time_offset_s": self.current_correction_s,
            "last_offset_s": self.last_offset_s,
            "rms_offset_s": self.rms_offset_s,
            "frequency_ppm": self.freq_ppm,
            "residual_freq_ppm": self.resid_freq_ppm,
            "skew_ppm": self.skew_ppm,
            "root_delay_s": self.root_delay_s,
            "root_dispersion_s": self.root_dispersion_s,
            "update_interval_s": self.last_update_interval_s,
            "leap_status": LEAP_NAMES.get(self.leap_status, str(self.leap_status)),
        }


def _protocol_error(what: str) -> ClockError:
    return ClockError(errno.EPROTO, f"chronyd reply: {what}")


def _address(raw: bytes, family: int) -> str:
    if family == _IPADDR_INET4:
        return str(ipaddress.IPv4Address(raw[:4]))
    if family == _IPADDR_INET6:
        return str(ipaddress.IPv6Address(raw))
    return ""


def reply_sequence(data: bytes) -> int | None:
    """The sequence number a reply echoes (None if too short to hold one): to skip late answers."""
    if len(data) < _REPLY_HEAD.size:
        return None
    return int(_REPLY_HEAD.unpack_from(data)[10])


def decode_tracking_reply(data: bytes, sequence: int) -> ChronyTracking:
    """Check a reply against our request (as chronyc's request_reply does) and read its fields.

    Raises ClockError (errno EPROTO) naming what was wrong: chronyd's bytes
    come from another process, so nothing here trusts them.
    """
    if len(data) < _REPLY_HEAD.size:
        raise _protocol_error(f"reply of {len(data)} bytes is shorter than the {_REPLY_HEAD.size}-byte header")
    version, pkt_type, res1, res2, command, reply, status, _p1, _p2, _p3, seq, _p4, _p5 = _REPLY_HEAD.unpack_from(data)
    if version != PROTO_VERSION:
        raise _protocol_error(f"reply has protocol version {version}, we speak {PROTO_VERSION}")
    if pkt_type != PKT_TYPE_CMD_REPLY or res1 or res2:
        raise _protocol_error(f"not a command reply (packet type {pkt_type})")
    if command != REQ_TRACKING or seq != sequence & 0xFFFFFFFF:
        raise _protocol_error(f"reply to another request (command {command}, sequence {seq})")
    if status != STT_SUCCESS:
        raise _protocol_error(f"chronyd answered status {STATUS_NAMES.get(status, status)}")
    if reply != RPY_TRACKING:
        raise _protocol_error(f"reply format {reply}, expected TRACKING ({RPY_TRACKING})")
    if len(data) < REPLY_LEN:
        raise _protocol_error(f"TRACKING reply of {len(data)} bytes, expected {REPLY_LEN}")
    ref_id, addr, family, _pad, stratum, leap, sec_high, sec_low, nsec, *floats = _TRACKING.unpack_from(
        data, _REPLY_HEAD.size
    )
    seconds = (0 if sec_high == _TV_NOHIGHSEC else sec_high << 32) | sec_low
    corr, last, rms, freq, resid, skew, delay, disp, interval = (decode_float(w) for w in floats)
    return ChronyTracking(
        ref_id=ref_id,
        ref_address=_address(addr, family),
        stratum=stratum,
        leap_status=leap,
        ref_time_s=seconds + min(nsec, 999_999_999) / 1e9,
        current_correction_s=corr,
        last_offset_s=last,
        rms_offset_s=rms,
        freq_ppm=freq,
        resid_freq_ppm=resid,
        skew_ppm=skew,
        root_delay_s=delay,
        root_dispersion_s=disp,
        last_update_interval_s=interval,
    )
