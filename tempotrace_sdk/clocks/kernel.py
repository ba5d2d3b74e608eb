"""The kernel's NTP state (adjtimex / ntp_adjtime with modes = 0) and raw clock reads.

Read-only: modes = 0 never changes the clock, so no privilege is needed.
The native module is used when present; otherwise the same syscall goes
through ctypes (the pure-Python fallback, ``TEMPOTRACE_PUREPYTHON=1``).
"""

from __future__ import annotations

import ctypes
import errno as errno_mod
import functools
import time
from dataclasses import dataclass
from typing import Any

from ..errors import ClockError
from ._native import native

__all__ = [
    "STA_BITS",
    "STA_CLOCKERR",
    "STA_UNSYNC",
    "TIME_ERROR",
    "TIME_STATES",
    "KernelSync",
    "read_clock_ns",
    "read_kernel_sync",
]

# Status bits and clock states from <linux/timex.h> (uapi, stable ABI).
STA_BITS = {
    0x0001: "STA_PLL",
    0x0002: "STA_PPSFREQ",
    0x0004: "STA_PPSTIME",
    0x0008: "STA_FLL",
    0x0010: "STA_INS",
    0x0020: "STA_DEL",
    0x0040: "STA_UNSYNC",
    0x0080: "STA_FREQHOLD",
    0x0100: "STA_PPSSIGNAL",
    0x0200: "STA_PPSJITTER",
    0x0400: "STA_PPSWANDER",
    0x0800: "STA_PPSERROR",
    0x1000: "STA_CLOCKERR",
    0x2000: "STA_NANO",
    0x4000: "STA_MODE",
    0x8000: "STA_CLK",
}
STA_UNSYNC = 0x0040
STA_CLOCKERR = 0x1000
TIME_STATES = {0: "TIME_OK", 1: "TIME_INS", 2: "TIME_DEL", 3: "TIME_OOP", 4: "TIME_WAIT", 5: "TIME_ERROR"}
TIME_ERROR = 5


@dataclass(frozen=True, slots=True)
class KernelSync:
    """One adjtimex(modes=0) reading. Errors are in µs as the kernel keeps them."""

    clock_state: int
    status: int
    maxerror_us: int
    esterror_us: int
    tai_s: int
    via: str

    @property
    def unsync(self) -> bool:
        return bool(self.status & STA_UNSYNC)

    @property
    def flags(self) -> list[str]:
        return [name for bit, name in STA_BITS.items() if self.status & bit]

    def as_dict(self) -> dict[str, Any]:
        return {
            "clock_state": TIME_STATES.get(self.clock_state, str(self.clock_state)),
            "status": f"0x{self.status:04x}",
            "status_flags": self.flags,
            "sta_unsync": self.unsync,
            "maxerror_us": self.maxerror_us,
            "esterror_us": self.esterror_us,
            "tai_offset_s": self.tai_s,
            "read_via": self.via,
        }


class _Timex(ctypes.Structure):
    """struct timex as glibc declares it: c_long fields follow the platform's long.

    native/phc/tt_ntp.c asserts the LP64 size (208) and the ``tai`` offset (160).
    """

    _fields_ = (
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("tv_sec", ctypes.c_long),
        ("tv_usec", ctypes.c_long),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_pad", ctypes.c_int * 11),
    )


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _read_ctypes() -> KernelSync:
    tx = _Timex()  # zeroed: modes = 0 means "read only"
    state = _libc().ntp_adjtime(ctypes.byref(tx))
    if state < 0:
        err = ctypes.get_errno()
        raise ClockError(err, f"ntp_adjtime(modes=0) failed: {errno_mod.errorcode.get(err, err)}")
    return KernelSync(state, tx.status, tx.maxerror, tx.esterror, tx.tai, "ctypes ntp_adjtime")


def _read_native(lib: Any, ffi: Any) -> KernelSync:
    out = ffi.new("struct tt_ntp_state *")
    rc = lib.tt_ntp_read(out)
    if rc < 0:
        raise ClockError(-rc, f"ntp_adjtime(modes=0) failed: {errno_mod.errorcode.get(-rc, -rc)}")
    return KernelSync(out.clock_state, out.status, out.maxerror_us, out.esterror_us, out.tai_s, "native ntp_adjtime")


def read_kernel_sync() -> KernelSync:
    """The kernel's NTP state now; raises ClockError (an OSError) on failure."""
    loaded = native()
    if loaded is not None:
        return _read_native(*loaded)
    return _read_ctypes()


def read_clock_ns(clock_id: int) -> int:
    """Read any POSIX clock id in ns (native when built, else time.clock_gettime_ns)."""
    loaded = native()
    if loaded is None:
        try:
            return time.clock_gettime_ns(clock_id)
        except OSError as err:
            raise ClockError(err.errno, f"clock_gettime({clock_id}) failed: {err.strerror}") from err
    lib, ffi = loaded
    out = ffi.new("int64_t *")
    rc = lib.tt_clock_read_ns(clock_id, out)
    if rc < 0:
        raise ClockError(-rc, f"clock_gettime({clock_id}) failed: {errno_mod.errorcode.get(-rc, -rc)}")
    return int(out[0])
