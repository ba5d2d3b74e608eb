"""The host clock domain: processes that read one kernel clock, and how far their readings can be compared
(spec/clocks.md §Domain, spec/analysis.md §2.1).

Every process on a host reads the kernel's one timekeeper. Its error against TAI is common to all of
them, so two readings taken by two processes differ by the time between them, whatever the absolute
bound says; the analysis orders them by that difference against a *relative* bound. That holds only
while nobody steps the clock: a step (settimeofday, chronyd's makestep, a new TAI offset, a leap
second) moves every later reading by the step. A step is seen exactly, without thresholds:
CLOCK_TAI − CLOCK_MONOTONIC is a constant of the kernel (its ``offs_tai``) that changes only when the
clock is set; slewing moves both clocks alike. That constant, measured between two CLOCK_MONOTONIC
reads, is the domain's **epoch**: the same value in every process of one boot until a step.

``HostDomain.check()`` measures it again and remembers, by Lamport value, where it changed; a span's
readings are labelled with the epoch they were all taken in (``label``), or as stepped when a change
lies between them. The check costs three clock reads (~0.3 µs) and is made where a span is written.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BOOT_ID_PATH", "MAX_EPOCH_WIDTH_NS", "Epoch", "HostDomain", "boot_id", "domain_key"]

#: The kernel's id of this boot: readings of one clock are comparable only within one boot.
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
#: A measurement of the epoch wider than this is repeated (a preemption between the reads); the
#: narrowest of the tries is kept. A step smaller than twice the width could go unseen, so the
#: relative bound every reading carries includes it (``read_ns``).
MAX_EPOCH_WIDTH_NS = 1_000
_TRIES = 5
_READ_SAMPLES = 32

_CLOCK_TAI: int = getattr(time, "CLOCK_TAI", 11)
_mono = time.monotonic_ns
_gettime = time.clock_gettime_ns


def boot_id(path: Path = BOOT_ID_PATH) -> str | None:
    """This boot's id (a UUID), None where the kernel does not say (not Linux, no /proc)."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def domain_key(boot: str, clock_id: int) -> str:
    """``tempotrace.clock.domain`` of a kernel clock: the boot and the clock (spec/semantic-conventions §1.2)."""
    name = "tai" if clock_id == _CLOCK_TAI else f"clock{clock_id}"
    return f"kernel:{boot}:{name}"


@dataclass(frozen=True, slots=True)
class Epoch:
    """CLOCK_TAI (as the source corrects it) − CLOCK_MONOTONIC, in [mid − half, mid + half]."""

    mid_ns: int
    half_ns: int

    def same(self, other: Epoch) -> bool:
        """Can both measurements be of one constant (their intervals meet)?"""
        return abs(self.mid_ns - other.mid_ns) <= self.half_ns + other.half_ns


def _measure(read: Callable[[], int]) -> Epoch:
    """The narrowest of a few sandwiches ``monotonic, read, monotonic``: the constant lies between
    ``read − second`` and ``read − first``."""
    best: Epoch | None = None
    for _ in range(_TRIES):
        m1 = _mono()
        t = read()
        m2 = _mono()
        lo, hi = t - m2, t - m1
        got = Epoch((lo + hi) // 2, (hi - lo + 1) // 2)
        if best is None or got.half_ns < best.half_ns:
            best = got
        if 2 * best.half_ns <= MAX_EPOCH_WIDTH_NS:
            break
    assert best is not None
    return best


def _read_delay(read: Callable[[], int]) -> int:
    """The median time between two back-to-back readings: how close to each other two events can be and
    still be told apart by this process's reads."""
    gaps = []
    for _ in range(_READ_SAMPLES):
        a = read()
        b = read()
        gaps.append(b - a)
    gaps.sort()
    return max(1, gaps[len(gaps) // 2])


class HostDomain:
    """One process's view of its kernel clock's domain: the key, the epoch at start, the relative bound
    of a reading, and the epoch changes seen since, each with the Lamport window it may lie in.

    ``read`` returns what the clock source stamps (CLOCK_TAI plus the source's correction), ``lamport``
    the counter's current value. Thread-safe; ``check`` never raises.
    """

    def __init__(self, key: str, read: Callable[[], int], lamport: Callable[[], int]) -> None:
        self.key = key
        self._read = read
        self._lamport = lamport
        self._lock = threading.Lock()
        self.start = _measure(read)
        #: The relative bound of one reading (ns): the read delay, plus the widest epoch measurement a
        #: check accepts (a step below it could go unseen) and the start's.
        self.read_ns = _read_delay(read) + MAX_EPOCH_WIDTH_NS + 2 * self.start.half_ns
        self.current = self.start
        # Lamport values read before each of the last two checks' measurements.
        self._l1 = self._l2 = lamport()
        #: Epoch changes (lo, hi, after): a reading with lts in (lo, hi] may lie on either side of one;
        #: ``after`` is the epoch from hi on. Both ends grow from one window to the next (checks come
        #: in Lamport order), so the list is sorted by either.
        self._windows: list[tuple[int, int, Epoch]] = []
        self.unsure = 0  #: checks whose measurement stayed wider than MAX_EPOCH_WIDTH_NS (taken as a change)

    def check(self) -> None:
        """Measure the epoch now; a different one (or one too wide to tell) starts a new epoch, with the
        readings since the check before last as its window."""
        with self._lock:
            lts = self._lamport()
            cur = self.current
            try:
                m1 = _mono()
                t = self._read()
                m2 = _mono()
            except Exception:  # a clock that cannot be read now: nothing can be said since the last check
                m1, t, m2 = 0, cur.mid_ns, 2 * MAX_EPOCH_WIDTH_NS
            lo, hi = t - m2, t - m1
            # The common case, one sandwich: narrow enough and meeting the current epoch's interval.
            # (A current epoch too wide to tell, after an unsure check, is measured again until one is not.)
            if (hi - lo > MAX_EPOCH_WIDTH_NS or hi < cur.mid_ns - cur.half_ns or lo > cur.mid_ns + cur.half_ns
                    or 2 * cur.half_ns > MAX_EPOCH_WIDTH_NS):
                self._changed(lts)
            self._l2, self._l1 = self._l1, lts

    def _changed(self, lts: int) -> None:
        """The first sandwich did not match: measure carefully; a different epoch (or none narrow enough
        to tell) is a change."""
        try:
            now = _measure(self._read)
        except Exception:
            now = Epoch(self.current.mid_ns, MAX_EPOCH_WIDTH_NS + 1)
        wide = 2 * now.half_ns > MAX_EPOCH_WIDTH_NS
        if wide or 2 * self.current.half_ns > MAX_EPOCH_WIDTH_NS or not now.same(self.current):
            self.unsure += wide
            self._windows.append((self._l2, lts, now))
            self.current = now

    def epoch_of(self, lts: int) -> Epoch | None:
        """The epoch a reading with Lamport value ``lts`` was taken in, None when an epoch change may lie
        on either side of it. Final only for readings ticked before the last ``check``."""
        windows = self._windows
        at = bisect.bisect_left(windows, lts, key=lambda w: w[1])  # the first window ending at or after lts
        if at < len(windows) and windows[at][0] < lts:
            return None  # inside it (a later window starts no earlier than this one: none holds lts either)
        return self.start if at == 0 else windows[at - 1][2]

    def label(self, readings: tuple[int, ...]) -> Epoch | None:
        """Check, then the one epoch every reading (their Lamport values) was taken in; None when a
        change may lie between them or beside one of them."""
        self.check()
        epochs = {self.epoch_of(lts) for lts in readings}
        if len(epochs) != 1:
            return None
        return epochs.pop()


def host_domain(clock: object, lamport: Callable[[], int]) -> HostDomain | None:
    """The domain of a clock source that reads the kernel's CLOCK_TAI (the CPU source: its ``raw_mapping``
    names the kernel clock and the correction it adds), None for any other (a PHC, a calibrated or a
    simulated clock: each is a domain of its own, ordered by its absolute bound) or without a boot id."""
    mapping = getattr(clock, "raw_mapping", None)
    if not isinstance(mapping, tuple) or not mapping or mapping[0] != _CLOCK_TAI:
        return None
    boot = boot_id()
    if boot is None:
        return None

    def read() -> int:
        m = clock.raw_mapping  # type: ignore[attr-defined]  # replaced whole on each refresh
        return int(_gettime(m[0]) + m[3])

    return HostDomain(domain_key(boot, _CLOCK_TAI), read, lamport)
