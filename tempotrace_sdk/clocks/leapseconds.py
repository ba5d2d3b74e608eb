"""TAI − UTC: the leap-second table, and conversions between the two scales.

tt-ext carries TAI (PTP epoch); OpenTelemetry wants Unix-epoch UTC. The
system's ``leap-seconds.list`` (IERS format, shipped by tzdata) is used when
present; otherwise a built-in copy of the table, which is complete up to its
``BUILTIN_VALID_UNTIL`` (no leap second has been announced since 2017).
"""

from __future__ import annotations

import bisect
import functools
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass

from .._bounded import read_regular_file

__all__ = ["SYSTEM_LEAP_FILES", "LeapTable", "leap_table", "tai_to_utc_ns", "utc_to_tai_ns"]

#: Seconds between the NTP epoch (1900-01-01) and the Unix epoch (1970-01-01).
NTP_TO_UNIX_S = 2_208_988_800

_log = logging.getLogger(__name__)

LEAP_FILE_ENV = "TEMPOTRACE_LEAP_SECONDS_FILE"
#: The IERS list is ~10 KB (one line per leap second plus comments); a file
#: much larger is not one, and /dev/zero must not be read until memory runs out.
MAX_LEAP_FILE_BYTES = 1 << 20

#: Where Debian's tzdata and others put the IERS list.
SYSTEM_LEAP_FILES = ("/usr/share/zoneinfo/leap-seconds.list", "/etc/leap-seconds.list")

# (Unix seconds at which the offset takes effect, TAI - UTC in seconds), from
# IERS Bulletin C / leap-seconds.list. 1972-01-01 starts the integer-second era.
_BUILTIN: tuple[tuple[int, int], ...] = (
    (63072000, 10),
    (78796800, 11),
    (94694400, 12),
    (126230400, 13),
    (157766400, 14),
    (189302400, 15),
    (220924800, 16),
    (252460800, 17),
    (283996800, 18),
    (315532800, 19),
    (362793600, 20),
    (394329600, 21),
    (425865600, 22),
    (489024000, 23),
    (567993600, 24),
    (631152000, 25),
    (662688000, 26),
    (709948800, 27),
    (741484800, 28),
    (773020800, 29),
    (820454400, 30),
    (867715200, 31),
    (915148800, 32),
    (1136073600, 33),
    (1230768000, 34),
    (1341100800, 35),
    (1435708800, 36),
    (1483228800, 37),
)
#: Bulletin C 70 (July 2025): no leap second before 2026-06-28 at least.
BUILTIN_VALID_UNTIL_UNIX_S = 1_782_604_800


@dataclass(frozen=True)
class LeapTable:
    """A sorted list of (effective Unix second, TAI − UTC) and where it came from."""

    starts: tuple[int, ...]
    offsets: tuple[int, ...]
    origin: str
    expires_unix_s: int | None

    @classmethod
    def from_entries(cls, entries: Iterable[tuple[int, int]], origin: str, expires: int | None) -> LeapTable:
        pairs = sorted(entries)
        if not pairs:
            raise ValueError(f"{origin}: no leap-second entries")
        return cls(tuple(p[0] for p in pairs), tuple(p[1] for p in pairs), origin, expires)

    def offset_at_utc(self, unix_s: float) -> int:
        """TAI − UTC in seconds at a UTC instant (10 before 1972, by convention)."""
        i = bisect.bisect_right(self.starts, unix_s) - 1
        return self.offsets[i] if i >= 0 else self.offsets[0]

    def offset_at_tai(self, tai_s: float) -> int:
        """TAI − UTC in seconds at a TAI instant."""
        # A TAI instant t maps to UTC t - off; the table is keyed by UTC, and
        # offsets only grow, so test each boundary in TAI terms.
        i = len(self.starts) - 1
        while i > 0 and tai_s < self.starts[i] + self.offsets[i]:
            i -= 1
        return self.offsets[i]


def parse_leap_seconds_list(text: str, origin: str) -> LeapTable:
    """Parse the IERS/NTP ``leap-seconds.list`` format."""
    entries: list[tuple[int, int]] = []
    expires: int | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#@"):
            expires = int(line[2:].split()[0]) - NTP_TO_UNIX_S
            continue
        body = line.split("#", 1)[0].split()
        if not body:
            continue
        if len(body) < 2:
            raise ValueError(f"{origin}:{number}: expected '<NTP seconds> <TAI-UTC>'")
        entries.append((int(body[0]) - NTP_TO_UNIX_S, int(body[1])))
    return LeapTable.from_entries(entries, origin, expires)


@functools.lru_cache(maxsize=1)
def leap_table() -> LeapTable:
    """The system table when readable and parseable, else the built-in one.

    Files are read bounded (a regular file of at most ``MAX_LEAP_FILE_BYTES``;
    a FIFO or device is refused without waiting). A file named by
    TEMPOTRACE_LEAP_SECONDS_FILE that cannot be used is a warning naming it.
    """
    override = os.environ.get(LEAP_FILE_ENV)
    for path in (override,) if override else SYSTEM_LEAP_FILES:
        try:
            return parse_leap_seconds_list(read_regular_file(path, MAX_LEAP_FILE_BYTES).decode("ascii"), path)
        except (OSError, ValueError) as err:  # UnicodeDecodeError is a ValueError
            if override:
                why = getattr(err, "rule", None) or (err.strerror if isinstance(err, OSError) else None) or err
                _log.warning("%s=%s cannot be used (%s); using the built-in table", LEAP_FILE_ENV, path, why)
            continue
    return LeapTable.from_entries(_BUILTIN, "built-in", BUILTIN_VALID_UNTIL_UNIX_S)


def utc_to_tai_ns(unix_ns: int) -> int:
    """Unix-epoch UTC ns → TAI ns since 1970-01-01 TAI."""
    return unix_ns + leap_table().offset_at_utc(unix_ns / 1e9) * 1_000_000_000


def tai_to_utc_ns(tai_ns: int) -> int:
    """TAI ns → Unix-epoch UTC ns (what OpenTelemetry span times use)."""
    return tai_ns - leap_table().offset_at_tai(tai_ns / 1e9) * 1_000_000_000
