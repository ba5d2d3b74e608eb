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

``HostDomain.check()`` measures it again and remembers when (in CLOCK_MONOTONIC) each epoch held; a
span's readings are labelled with the epoch they were all taken in (``label``, by their own values), or
as stepped when one may lie across a change. The check costs three clock reads (~1 µs in Python) and is
made where a span is written.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BOOT_ID_PATH", "MAX_EPOCH_WIDTH_NS", "Epoch", "HostDomain", "boot_id", "domain_key"]

#: The kernel's id of this boot: readings of one clock are comparable only within one boot.
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
#: A measurement of the epoch wider than a domain's width (``HostDomain.max_width_ns``: this, or more
#: where the clock is slow to read) is repeated (a preemption between the reads); the narrowest of the
#: tries is kept. A step smaller than twice the width could go unseen, so the relative bound every
#: reading carries includes it (``read_ns``).
MAX_EPOCH_WIDTH_NS = 1_000
#: The width a domain accepts is at least this many times its clock's median sandwich: where one read
#: of CLOCK_TAI and two of CLOCK_MONOTONIC take 500 ns (a VM's clock source), a fixed 1 µs would call
#: every sandwich a thread woken from sleep takes too wide to tell, and each such check a change.
WIDTH_PER_MEDIAN = 4
_TRIES = 5
#: Tries of a measurement that the first tries found too wide (rare: a preempted or cold thread).
_RETRIES = 20
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


def _measure(read: Callable[[], int], width_ns: int = MAX_EPOCH_WIDTH_NS, tries: int = _TRIES) -> Epoch:
    """The narrowest of a few sandwiches ``monotonic, read, monotonic`` (up to ``tries``, fewer once one is
    no wider than ``width_ns``): the constant lies between ``read − second`` and ``read − first``."""
    best: Epoch | None = None
    for _ in range(tries):
        m1 = _mono()
        t = read()
        m2 = _mono()
        lo, hi = t - m2, t - m1
        got = Epoch((lo + hi) // 2, (hi - lo + 1) // 2)
        if best is None or got.half_ns < best.half_ns:
            best = got
        if 2 * best.half_ns <= width_ns:
            break
    assert best is not None
    return best


def _median(sample: Callable[[], int]) -> int:
    """The median of ``_READ_SAMPLES`` samples."""
    values = sorted(sample() for _ in range(_READ_SAMPLES))
    return values[len(values) // 2]


def _width_limit(read: Callable[[], int]) -> int:
    """The widest epoch measurement a domain accepts: ``WIDTH_PER_MEDIAN`` times the median of its clock's
    sandwiches, never below ``MAX_EPOCH_WIDTH_NS``."""

    def sandwich() -> int:
        m1 = _mono()
        read()
        return _mono() - m1

    return max(MAX_EPOCH_WIDTH_NS, WIDTH_PER_MEDIAN * _median(sandwich))


def _read_delay(read: Callable[[], int]) -> int:
    """The median time between two back-to-back readings: how close to each other two events can be and
    still be told apart by this process's reads."""

    def gap() -> int:
        a = read()
        return read() - a

    return max(1, _median(gap))


class HostDomain:
    """One process's view of its kernel clock's domain: the key, the epoch at start, the relative bound
    of a reading, and the epochs seen since, each with the CLOCK_MONOTONIC interval it can hold readings
    of.

    A reading is placed by its own value, not by when it was written down: a reading ``v`` taken in
    epoch E was taken at CLOCK_MONOTONIC ``v − E``, which must fall where E held. An epoch held from
    after the last check that saw the one before (its sandwich's first CLOCK_MONOTONIC read) until the
    check that saw the next (that sandwich's last read); the first epoch from the domain's making. A
    reading that fits one epoch only is in it; one that fits two (near a step) or none (taken before
    the domain was made, or by another clock) is in none. So no ordering of reads, ticks and checks
    between threads can put a reading on the wrong side of a step.

    ``read`` returns what the clock source stamps (CLOCK_TAI plus the source's correction). Thread-safe;
    ``check`` never raises.
    """

    def __init__(self, key: str, read: Callable[[], int]) -> None:
        self.key = key
        self._read = read
        self._lock = threading.Lock()
        made = _mono()
        #: The widest epoch measurement a check accepts (ns): a wider one is too wide to tell a step by.
        self.max_width_ns = _width_limit(read)
        self.start = _measure(read, self.max_width_ns, _TRIES + _RETRIES)
        #: The relative bound of one reading (ns): the read delay, plus the widest epoch measurement a
        #: check accepts (a step below it could go unseen) and the start's.
        self.read_ns = _read_delay(read) + self.max_width_ns + 2 * self.start.half_ns
        #: (epoch, from, until): CLOCK_MONOTONIC bounds of when the epoch held (until None: it still does).
        self._epochs: list[tuple[Epoch, int, int | None]] = [(self.start, made, None)]
        self._seen_at = made  #: the first CLOCK_MONOTONIC read of the last check that saw the current epoch
        _LIVE.add(self)

    @property
    def current(self) -> Epoch:
        return self._epochs[-1][0]

    def check(self) -> int:
        """Measure the epoch now; a different one (or one too wide to tell) is a new epoch. Returns the
        measurement's last CLOCK_MONOTONIC read: every reading taken before the call was taken before it."""
        with self._lock:
            cur = self._epochs[-1][0]
            try:
                m1 = _mono()
                t = self._read()
                m2 = _mono()
            except Exception:  # a clock that cannot be read now: nothing can be said since the last check
                m1 = m2 = _mono()
                t = cur.mid_ns + m1 + 2 * self.max_width_ns
            lo, hi = t - m2, t - m1
            width = self.max_width_ns
            # The common case, one sandwich: narrow enough and meeting the current epoch's interval.
            # (A current epoch too wide to tell, after an unsure check, is measured again until one is not.)
            if (hi - lo > width or hi < cur.mid_ns - cur.half_ns or lo > cur.mid_ns + cur.half_ns
                    or 2 * cur.half_ns > width):
                m2 = self._changed(m1)
            else:
                self._seen_at = m1
            return m2

    def _changed(self, m1: int) -> int:
        """The first sandwich did not match: measure carefully; a different epoch (or none narrow enough
        to tell) is a change, which happened after the last check that saw the current epoch and before
        this measurement's end. Too wide after the usual tries, it tries more before taking it as a change:
        a thread just woken from sleep reads the clock slowly for a while, and every change seen spends one
        of ``MAX_EPOCHS``."""
        width = self.max_width_ns
        try:
            now = _measure(self._read, width, _TRIES + _RETRIES)
        except Exception:
            now = Epoch(self.current.mid_ns, width + 1)
        end = _mono()
        wide = 2 * now.half_ns > width
        if wide or 2 * self.current.half_ns > width or not now.same(self.current):
            epoch, since, _ = self._epochs[-1]
            self._epochs[-1] = (epoch, since, end)
            self._epochs.append((now, self._seen_at, None))
        self._seen_at = m1
        return end

    def epoch_of(self, reading: int, before: int) -> Epoch | None:
        """The one epoch a reading (the value the source stamped) can have been taken in, given that it was
        taken before CLOCK_MONOTONIC ``before``; None when it fits two or none."""
        if len(self._epochs) > MAX_EPOCHS:  # a clock stepped without end: no longer told apart (module doc)
            return None
        found = None
        for epoch, since, until in self._epochs:
            lo = reading - epoch.mid_ns - epoch.half_ns  # when it was taken, were it of this epoch
            hi = reading - epoch.mid_ns + epoch.half_ns
            if hi > since and lo < min(before, until if until is not None else before):
                if found is not None:
                    return None
                found = epoch
        return found

    def label_windows(self) -> list[tuple[Epoch, int, int]] | None:
        """Check (as ``label`` does), then each epoch with the CLOCK_MONOTONIC window its readings lie in
        (``epoch_of``'s: since, until or the check's bound): what ``label`` decides by, for a labeller outside
        Python (torch's op spans written in C); None when epochs are no longer told apart."""
        before = getattr(_batch, "before", None)
        if before is None:
            before = self.check()
        if len(self._epochs) > MAX_EPOCHS:
            return None
        return [(epoch, since, before if until is None else min(before, until)) for epoch, since, until in self._epochs]

    def label(self, readings: tuple[int, ...]) -> Epoch | None:
        """Check, then the one epoch every reading was taken in; None when one may lie across a change,
        before the domain was made or in another clock. Inside ``checked_once()`` on this thread, the check
        made when it was entered serves (a batch of spans made from readings taken before it)."""
        before = getattr(_batch, "before", None)
        if before is None:
            before = self.check()
        if len(self._epochs) == 1:  # no change seen (the common case): epoch_of for one epoch, inline
            epoch, since, _ = self._epochs[0]
            mid, half = epoch.mid_ns, epoch.half_ns
            for v in readings:
                if not (v - mid + half > since and v - mid - half < before):
                    return None
            return epoch
        epochs = {self.epoch_of(v, before) for v in readings}
        if len(epochs) != 1:
            return None
        return epochs.pop()


_batch = threading.local()


class checked_once:  # lower case: used like a function, ``with domain.checked_once(d):``
    """One check for every label on this thread inside the block: for spans made in bulk from readings
    all taken before the block (torch's op records), the check need not be repeated per span."""

    __slots__ = ("_domain", "_outer")

    def __init__(self, domain: HostDomain | None) -> None:
        self._domain = domain
        self._outer: int | None = None

    def __enter__(self) -> None:
        self._outer = getattr(_batch, "before", None)
        if self._domain is not None and self._outer is None:
            _batch.before = self._domain.check()

    def __exit__(self, *exc: object) -> None:
        _batch.before = self._outer


#: Epochs one domain tells apart; past them it labels nothing (forgetting one would let its readings fit
#: another: each is told from the rest only by comparing it with every epoch it might be).
MAX_EPOCHS = 64
_LIVE: weakref.WeakSet[HostDomain] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A lock held by a thread that does not exist in the child would block its first span write.
    for domain in list(_LIVE):
        domain._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def host_domain(clock: object) -> HostDomain | None:
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

    return HostDomain(domain_key(boot, _CLOCK_TAI), read)
