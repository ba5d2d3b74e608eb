"""The PHC (GTE) source: a NIC's PTP hardware clock, read through the native module.

``now()`` does one sysoff-style read (N samples, narrowest sandwich) and
reports ptp_ns = PHC time (ptp4l keeps the PHC on TAI, PTP's timescale).
Its bound = the PTP error from ptp4l (refreshed off the hot path, at most
once a second) + half the sandwich width + drift × age of that sync data.
"""

from __future__ import annotations

import errno
import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ClockError
from ..wire.layout import PTP_NS_MAX, UNCERTAINTY_SATURATED, ClockQuality, TsSource
from . import refresh
from ._native import require_native
from .base import Timestamp, saturate_uncertainty
from .cpu import CpuClock
from .ptp4l import DEFAULT_UDS
from .ptpquality import Ptp4lHealth

__all__ = ["DEFAULT_SAMPLES", "MAX_SAMPLES", "METHOD_NAMES", "PhcClock", "PhcDevice", "PhcReading", "select_samples"]

DEFAULT_SAMPLES = 5
MAX_SAMPLES = 25  # PTP_MAX_SAMPLES in <linux/ptp_clock.h>

METHOD_NAMES = {
    1: "PTP_SYS_OFFSET_PRECISE",
    2: "PTP_SYS_OFFSET_EXTENDED",
    3: "PTP_SYS_OFFSET",
    4: "clock_gettime(FD_TO_CLOCKID)",
}
_CAP_FIELDS = (
    "max_adj_ppb",
    "n_alarm",
    "n_ext_ts",
    "n_per_out",
    "pps",
    "n_pins",
    "cross_timestamping",
    "adjust_phase",
)
_METHOD_IDS = {name: number for number, name in METHOD_NAMES.items()}


@dataclass(frozen=True, slots=True)
class PhcReading:
    """PHC and CLOCK_REALTIME (sandwich midpoint) in ns, the sandwich width, and how it was read."""

    phc_ns: int
    sys_ns: int
    width_ns: int
    method: str
    samples: int


def _fail(rc: int, what: str, path: str | None) -> ClockError:
    code = -rc
    return ClockError(code, f"{what}: {os.strerror(code)}", path)


def _to_reading(out: Any) -> PhcReading:
    return PhcReading(int(out.phc_ns), int(out.sys_ns), int(out.width_ns), METHOD_NAMES.get(out.method, "?"),
                      int(out.samples))  # fmt: skip


def select_samples(samples: Sequence[tuple[int, int, int]], method: str = "PTP_SYS_OFFSET_EXTENDED") -> PhcReading:
    """Run recorded (sys_before, phc, sys_after) samples through the C selection real reads use."""
    lib, ffi = require_native("sample selection")
    arr = ffi.new("struct tt_sample[]", max(1, len(samples)))
    for i, (before, phc, after) in enumerate(samples):
        arr[i].sys_before_ns, arr[i].phc_ns, arr[i].sys_after_ns = before, phc, after
    out = ffi.new("struct tt_reading *")
    rc = lib.tt_sysoff_select(arr, len(samples), _METHOD_IDS[method], out)
    if rc < 0:
        raise _fail(rc, f"selecting among {len(samples)} samples", None)
    return _to_reading(out)


def resolve(target: str) -> str:
    """A /dev/ptpN path for a path or a network interface name."""
    if target.startswith("/"):
        return target
    lib, ffi = require_native(f"PHC lookup for interface {target!r}")
    index = ffi.new("int *")
    rc = lib.tt_phc_index_of_iface(target.encode(), index)
    if rc == -errno.ENODEV:
        raise ClockError(errno.ENODEV, f"no network interface named {target!r}", target)
    if rc == -errno.EOPNOTSUPP:
        raise ClockError(errno.EOPNOTSUPP, f"interface {target!r} has no PTP hardware clock", target)
    if rc < 0:
        raise _fail(rc, f"ETHTOOL_GET_TS_INFO on {target!r}", target)
    return f"/dev/ptp{index[0]}"


def interface_phc(iface: str) -> str:
    """The /dev/ptpN of network interface ``iface``; never a path (ptp4l names interfaces, not devices)."""
    if iface.startswith("/"):
        raise ClockError(errno.EINVAL, f"{iface!r} is a path, not a network interface name", iface)
    return resolve(iface)


class PhcDevice:
    """An open PHC: capabilities, a probed-once read method, N-sample reads."""

    def __init__(self, target: str, *, samples: int = DEFAULT_SAMPLES) -> None:
        if not 1 <= samples <= MAX_SAMPLES:
            raise ValueError(f"samples: must be 1..{MAX_SAMPLES}, got {samples}")
        self._lib, self._ffi = require_native(f"PHC {target}")
        self.target = target
        self.path = resolve(target)
        self.samples = samples
        fd = self._ffi.new("int *")
        caps = self._ffi.new("struct tt_phc_caps *")
        rc = self._lib.tt_phc_open(self.path.encode(), fd, caps)
        if rc < 0:
            hint = " (not a PTP clock)" if rc == -errno.ENOTTY else ""
            raise _fail(rc, f"opening PHC {self.path}{hint}", self.path)
        self.fd: int = fd[0]
        self.caps = {name: int(getattr(caps, name)) for name in _CAP_FIELDS}
        self._method = 0
        self._lock = threading.Lock()
        self._out = self._ffi.new("struct tt_reading *")
        self._finalizer = weakref.finalize(self, self._lib.tt_phc_close, self.fd)

    @property
    def method(self) -> str | None:
        return METHOD_NAMES.get(self._method)

    def read(self) -> PhcReading:
        """One read: probes the method on first use (cached), keeps the narrowest of N samples."""
        with self._lock:  # the output struct is shared; reads are serialized per device
            if not self._method:
                method = self._lib.tt_sysoff_probe(self.fd)
                if method < 0:
                    raise _fail(method, f"reading PHC {self.path}", self.path)
                self._method = method
            rc = self._lib.tt_sysoff_read(self.fd, self._method, self.samples, self._out)
            if rc < 0:
                raise _fail(rc, f"reading PHC {self.path} with {self.method}", self.path)
            return _to_reading(self._out)

    def close(self) -> None:
        self._finalizer()


class PhcClock:
    """ts_source GTE: PHC time with a bound from ptp4l's state (spec/clocks.md §PHC)."""

    def __init__(
        self,
        target: str,
        *,
        samples: int = DEFAULT_SAMPLES,
        uds_path: str | None = None,
        background: bool = True,
    ) -> None:
        self.device = PhcDevice(target, samples=samples)
        self.name = f"phc:{target}"
        self.uds_path = uds_path or os.environ.get("TEMPOTRACE_PTP4L_UDS", DEFAULT_UDS)
        # expect_phc: answers count only from a ptp4l that hardware-timestamps
        # on an interface whose PHC is this device (spec/clocks.md §PHC).
        self.monitor = Ptp4lHealth(self.uds_path, reference_ns=lambda: self.device.read().phc_ns,
                                   expect_phc=self.device.path, iface_phc=interface_phc)  # fmt: skip
        self.read_failures = 0
        self.last_read_error = ""
        self._cpu = CpuClock(background=False)
        self.monitor.update()
        if background:
            refresh.register(self)

    def refresh(self) -> None:
        self.monitor.update()
        self._cpu.refresh()

    def ptp4l_reachable(self) -> bool:
        return self.monitor.last_status is not None

    def close(self) -> None:
        self.device.close()

    def now(self) -> Timestamp:
        try:
            reading = self.device.read()
        except ClockError as err:
            # The hot path must not throw into the caller: CPU time, labelled
            # as such and UNKNOWN, and the failure is counted for describe().
            self.read_failures += 1
            self.last_read_error = str(err)
            fallback = self._cpu.now()
            return Timestamp(fallback.ptp_ns, TsSource.CPU, ClockQuality.UNKNOWN, UNCERTAINTY_SATURATED)
        health = self.monitor.health
        mono = time.monotonic_ns()
        quality = health.quality_at(mono)
        if quality is ClockQuality.UNKNOWN or not 0 <= reading.phc_ns <= PTP_NS_MAX:
            clamped = min(max(0, reading.phc_ns), PTP_NS_MAX)
            return Timestamp(clamped, TsSource.GTE, ClockQuality.UNKNOWN, UNCERTAINTY_SATURATED)
        bound = health.bound_at(mono) + reading.width_ns / 2
        return Timestamp(reading.phc_ns, TsSource.GTE, quality, saturate_uncertainty(bound))

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ts_source": TsSource.GTE.name,
            "path": self.device.path,
            "caps": self.device.caps,
            "read_method": self.device.method,
            "samples": self.device.samples,
            "ptp4l_uds": self.uds_path,
            "ptp4l_reachable": self.ptp4l_reachable(),
            "sync": self.monitor.health.as_dict(),
            "read_failures": self.read_failures,
            "last_read_error": self.last_read_error or None,
            "reason": self.monitor.health.reason,
        }


def survey_devices(paths: Sequence[str]) -> list[dict[str, Any]]:
    """For each /dev/ptp*: caps, read method and read delay, or why it cannot be used."""
    found: list[dict[str, Any]] = []
    for path in paths:
        entry: dict[str, Any] = {"path": path}
        try:
            device = PhcDevice(path)
        except ClockError as err:
            entry["usable"] = False
            entry["why"] = str(err)
            found.append(entry)
            continue
        try:
            reading = device.read()
            entry.update(
                usable=True,
                caps=device.caps,
                read_method=reading.method,
                read_delay_ns=reading.width_ns,
                phc_minus_realtime_ns=str(reading.phc_ns - reading.sys_ns),
            )
        except ClockError as err:
            entry.update(usable=False, caps=device.caps, why=str(err))
        finally:
            device.close()
        found.append(entry)
    return found
