"""Loading the native module, checking its version, and saying how to fix it.

The extension ``tempotrace_sdk._phc`` (the PHC and kernel-clock reads, and the
OTel layer's per-event stamp, otel/stamp.py) is built by ``pip install .``
through cffi (``native/build_phc.py``). The package must work without it: every
caller asks :func:`native` and falls back to the pure-Python paths (CPU
clock via ctypes) when it returns ``None``. ``TEMPOTRACE_PUREPYTHON=1``
forces that fallback, like msgpack's ``MSGPACK_PUREPYTHON``.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ABI_VERSION", "PURE_ENV", "NativeStatus", "native", "native_status", "require_native"]

#: Must equal TT_PHC_ABI_VERSION in native/phc/tt_phc_abi.h; bump both together
#: whenever a C signature or struct in the cdef changes.
ABI_VERSION = 5

#: Set to 1/true/yes to ignore the native module even when it is built.
PURE_ENV = "TEMPOTRACE_PUREPYTHON"

FIX_HINT = "rebuild it with `pip install -e .` (or `make venv`); needs a C compiler and Linux kernel headers"

#: Capability flags the module exports (which ioctls the kernel headers it
#: was compiled against know about).
CAPABILITY_NAMES = (
    "SYS_OFFSET_PRECISE",
    "SYS_OFFSET_EXTENDED",
    "SYS_OFFSET",
    "ETHTOOL_TS_INFO",
    "CLOCK_TAI",
)


@dataclass(frozen=True)
class NativeStatus:
    """Whether the native module is in use, and why (for survey/describe)."""

    available: bool
    reason: str
    version: int | None = None
    capabilities: dict[str, bool] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "reason": self.reason,
            "abi_version": self.version,
            "expected_abi_version": ABI_VERSION,
            "capabilities": dict(self.capabilities),
        }


def _forced_pure() -> bool:
    return os.environ.get(PURE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


@functools.lru_cache(maxsize=1)
def _load() -> tuple[Any, Any, NativeStatus]:
    if _forced_pure():
        return None, None, NativeStatus(False, f"disabled by {PURE_ENV}=1 (pure-Python fallback forced)")
    try:
        # Built by cffi_modules; absent in a source tree that was never installed.
        _phc = importlib.import_module("tempotrace_sdk._phc")
    except ImportError as err:
        return None, None, NativeStatus(False, f"native module tempotrace_sdk._phc is not built ({err}); {FIX_HINT}")
    lib, ffi = _phc.lib, _phc.ffi
    version = int(lib.tt_phc_abi_version())
    if version != ABI_VERSION:
        reason = (
            f"native module tempotrace_sdk._phc has ABI version {version} but this Python code expects "
            f"{ABI_VERSION} (stale build); {FIX_HINT}"
        )
        return None, None, NativeStatus(False, reason, version)
    bits = int(lib.tt_phc_caps_compiled())
    caps = {"has_" + name.lower(): bool(bits & getattr(lib, "TT_CAP_" + name)) for name in CAPABILITY_NAMES}
    return lib, ffi, NativeStatus(True, f"native module tempotrace_sdk._phc ABI {version}", version, caps)


def native() -> tuple[Any, Any] | None:
    """``(lib, ffi)`` of the native module, or ``None`` when absent/forced off/mismatched."""
    lib, ffi, _ = _load()
    return None if lib is None else (lib, ffi)


def native_status() -> NativeStatus:
    return _load()[2]


def require_native(what: str) -> tuple[Any, Any]:
    """The native module, or a ClockError saying why it is missing and how to fix it."""
    loaded = native()
    if loaded is None:
        import errno

        from ..errors import ClockError

        raise ClockError(errno.ENOSYS, f"{what} needs the native module: {native_status().reason}")
    return loaded


def reset_cache() -> None:
    """Forget the load result (tests flip TEMPOTRACE_PUREPYTHON)."""
    _load.cache_clear()
