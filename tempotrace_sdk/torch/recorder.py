"""The op recorder: each blocking host op that carries nothing as a fixed-size record in one ring (spec/torch.md
§1.4, §8.1).

At the op the recorder takes only what must be taken then: the start reading
with its Lamport tick, written with the op's facts (op, group, seq, bytes,
root) into the ring in one native call (native/opcall's begin, which takes
the slot and calls native/stamp ``tt_oprec_start``; the Python path where the
clock has no native mapping or the extension is not built), and the parent span
context; at its return, the end reading and tick, likewise. Each record is
96 octets packed into one ``bytearray`` allocated once,
plus one state octet and one list slot for the parent (a reference to a
context shared by the step's ops): about 105 octets an op, and no Python
object per op. Spans are made from records later, in bulk (opspans.py):
``retain="export"`` (default) makes them at the step's exit, every
``RELEASE_AT`` ops, before any flush and on the export tick; ``retain="ring"``
keeps the last ``ring_ops`` ops and makes spans only when dumped (dumps.py),
counting every op overwritten before it was ever exported.

Why records and not SDK spans: an SDK span per op (start_span, attribute
cleaning, the processor's hooks) cost 2.3-3.6 bare SDK spans of CPU per op
(issue 23); a record costs two readings and one pack.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import signal
import struct
import threading
from dataclasses import dataclass
from typing import Any, NamedTuple

from opentelemetry import trace
from opentelemetry.context import Context, get_current
from opentelemetry.trace import SpanContext

from ..errors import TempoTraceError
from ..otel import lifecycle
from ..otel.context import get_state
from .counts import count, native_overwritten
from .groups import GroupInfo

try:
    from .. import _opcall
except ImportError:  # not built: the recorder's own lock and begin and end
    _opcall = None
#: The C call's begin and end (native/opcall), for the recorder it is configured with; None: not built.
_record_begin = getattr(_opcall, "record_begin", None)
_record_end = getattr(_opcall, "record_end", None)

__all__ = ["AMBIGUOUS", "BATCHED", "COMPLETIONS", "COMPLETION_CODES", "DEFAULT_HANG_TIMEOUT_S", "DEFAULT_RING_OPS",
           "RECORD_BYTES", "RELEASE_AT", "OpRecord", "Recorder", "Retention", "p2p_word", "peer_and_tag", "recorder"]

_log = logging.getLogger(__name__)

#: Ops a ring keeps by default: ~1.7 MiB of records (RECORD_BYTES + 9 octets each), about a minute of
#: FSDP steps at a few hundred collectives a step.
DEFAULT_RING_OPS = 16384
#: An op open this long dumps every rank (dumps.py): below torch's default process-group timeout (30 min;
#: NCCL's watchdog 10 min), so the dump comes before torch aborts the job.
DEFAULT_HANG_TIMEOUT_S = 300.0
#: Ended ops (retain="export") after which the recording thread makes their spans itself: bounds what waits.
RELEASE_AT = 512
#: Open records the ring came round to (or a resize dropped) kept aside, at most: an async op outstanding
#: longer than ``ring_ops`` later ops (an early-posted receive) still gets its span, as the SDK path kept it.
ASIDE_MAX = 1024

#: One record: op number, facts (op index | group index << 16 | start source << 40 | start quality << 48 |
#: AMBIGUOUS | BATCHED), seq (a point-to-point op's: its p2p seq), bytes (-1: none), root (-1: none; a
#: point-to-point op's: ``p2p_word``), start ptp_ns, start uncertainty_ns, start lts; then the end: ptp_ns,
#: uncertainty_ns, lts, facts (completion << 0 | source << 8 | quality << 16).
_START = struct.Struct("<qqqqqqqq")
_END = struct.Struct("<qqqq")
RECORD_BYTES = _START.size + _END.size

#: A record's flags (facts bits 56 and 57): the receive overlapped another on its (group, tag) (spec/torch.md
#: §2); the op was one of a ``batch_isend_irecv``.
AMBIGUOUS = 1 << 56
BATCHED = 1 << 57


def p2p_word(peer: int, tag: int) -> int | None:
    """A point-to-point op's root word: its peer (a global rank) below its tag (torch's int32; a negative tag
    makes a negative word), or None when they do not fit (the op's span is then made the SDK's way)."""
    if not (0 <= peer < 1 << 31 and -(1 << 31) <= tag < 1 << 31):
        return None
    return (tag << 32) | peer


def peer_and_tag(word: int) -> tuple[int, int]:
    """``p2p_word``'s (peer, tag)."""
    return word & 0xFFFFFFFF, word >> 32


#: A slot's state (one octet a slot; see Recorder).
EMPTY, OPEN, ENDED, WRITING, ENDING, DUMPED = 0, 1, 2, 3, 4, 5


class OpRecord(NamedTuple):
    """One record, unpacked (only when spans are made: never on the hot path)."""

    number: int
    op: int  #: index into torchops.SPECS
    group: GroupInfo
    seq: int
    nbytes: int
    root: int
    start: tuple[int, int, int, int, int]  #: (ptp_ns, uncertainty_ns, ts_source, clk_quality, lts)
    end: tuple[int, int, int, int, int] | None  #: the same for the end; None while the op is open
    completion: int  #: index into COMPLETIONS (0: open)
    parent: SpanContext | None
    flags: int = 0  #: AMBIGUOUS | BATCHED, or either, or 0


#: What a record's completion code means (index 0: still open): the ``tempotrace.torch.completion`` values
#: (spec/semantic-conventions.md §9.2) a host op's end can be seen by (pending.py for an async op's).
COMPLETIONS = ("pending", "return", "error", "future", "wait", "sweep", "unfinished")
#: Each value's code.
COMPLETION_CODES = {name: code for code, name in enumerate(COMPLETIONS)}
#: The completion code of an op that raised.
ERROR = 2


class _Counts:
    """Recorder.issued and .ended where the extension is not built (else its Counts: ints the C call reads)."""

    __slots__ = ("ended", "issued")

    def __init__(self) -> None:
        self.issued = self.ended = 0


def _slot_lock() -> Any:
    """The lock of the ring's slot states: the C call's own where it is built (it takes it with no Python call,
    twice an op), else a threading.Lock."""
    return _opcall.SlotLock() if _opcall is not None else threading.Lock()


class Recorder:
    """The process's op records: a ring of ``size`` slots (a power of two), ops numbered from 0.

    A slot's state octet says who may touch it: WRITING (``begin`` is filling it), OPEN, DUMPED (open, and a
    dump has exported it ``pending``: its end is still recorded, and exported under the same span id),
    ENDING (``end`` is filling the end), ENDED, EMPTY (exported or never used). Each change out of OPEN,
    DUMPED or ENDED, and into WRITING, is made under ``_slot_lock`` (uncontended on the hot path: one acquire
    per ``begin`` and per ``end``), so a dump and an ending op never both take one op, and a scan that meets a
    slot being written stops there: op numbers are only ever taken by ``begin``, so a slot that does not yet
    hold its number is one still being written. A record still open when a begin (or a resize) takes its slot
    moves to ``aside`` and goes on from there.
    """

    def __init__(self, size: int = DEFAULT_RING_OPS) -> None:
        #: next() is atomic under the GIL: one op number per op, never reset (span ids derive from it).
        self.numbers = itertools.count()
        self._counts = _opcall.Counts() if _opcall is not None else _Counts()
        self._overwritten = 0  #: Python's share of ``overwritten``
        self._native_base = native_overwritten()  #: the C call's count when this one began (0 but after a fork)
        #: ops a dump exported pending, overwritten while still open: their ends are lost (a ring too small)
        self.dumped_overwritten = 0
        self._group_lock = threading.Lock()
        self._slot_lock = _slot_lock()
        #: Held while records are taken and made into spans (opspans.py): one maker at a time.
        self.lock = threading.Lock()
        #: Open records moved out of the ring (ASIDE_MAX at most), by op number: [state, record, context],
        #: each change under ``_slot_lock`` as a slot's.
        self.aside: dict[int, list[Any]] = {}
        #: slot -> the number a begin set aside from it, until that begin's reading is known (``_put_back``)
        self._aside_from: dict[int, int] = {}
        #: Their op numbers in the order they ended aside (some since exported: skipped), for ``_make_room``.
        self._ended_aside: collections.deque[int] = collections.deque()
        self.resize(size)
        self.retain = "export"
        #: retain="ring": every N-th step's ops are exported in full as well (0: none).
        self.export_every = 0
        self.groups: list[GroupInfo] = []

    @property
    def issued(self) -> int:
        """Every op number below this has been taken by a ``begin`` (it may lag a concurrent one)."""
        return int(self._counts.issued)

    @issued.setter
    def issued(self, value: int) -> None:
        self._counts.issued = value

    @property
    def ended(self) -> int:
        """Ops ended since the last take (approximate: only a trigger for a release)."""
        return int(self._counts.ended)

    @ended.setter
    def ended(self, value: int) -> None:
        self._counts.ended = value

    @property
    def overwritten(self) -> int:
        """Ops overwritten (or dropped by a resize) before they were ever exported: Python's count and the C
        call's."""
        return self._overwritten + native_overwritten() - self._native_base

    def _publish(self) -> None:
        """``ring``: the objects the C call of a traced op (native/opcall) reads at each op, in one tuple, replaced
        whole whenever one of them is (a resize, a fork)."""
        self.ring = (self.state, self.buffer, self._slot_lock, self.mask, self.numbers, self.parents)
        if _opcall is not None:
            _opcall.ring_published(self)

    def resize(self, size: int) -> None:
        """A new, empty ring of at least ``size`` slots (instrument() with another ``ring_ops``); ops it held
        that were never exported are counted overwritten. Numbering goes on."""
        old = getattr(self, "state", None)
        if old is None:
            self._replace(size)
            return
        with self._slot_lock:  # (a begin or end waiting meanwhile reads the new ring: both read it under the lock)
            for slot, s in enumerate(old):
                if s in (OPEN, DUMPED) and self._set_aside(slot, s):
                    continue
                if s in (OPEN, ENDED, ENDING, WRITING, DUMPED):
                    self._overwriting(s, 1)
            old[:] = bytes(len(old))  # a stale reader of the old ring finds nothing there
            self._aside_from.clear()
            self._replace(size)

    def _replace(self, size: int) -> None:
        old = getattr(self, "state", None)
        slots = 1 << max(0, int(size) - 1).bit_length()
        self.size = slots
        self.mask = slots - 1
        self.buffer = bytearray(slots * RECORD_BYTES)
        if old is not None:  # a ring replaced: the native stamp's view of the old one goes too (its memory)
            forget = getattr(get_state().stamp, "forget_buffer", None)
            if forget is not None:
                forget()
        self.state = bytearray(slots)
        #: Each slot's context when its op began (shared by a step's ops: one reference a slot).
        self.parents: list[Context | None] = [None] * slots
        self.next_due = self.issued  #: op numbers below this are exported, overwritten or forgotten
        self.ended = 0
        self._publish()

    # -- the hot path ------------------------------------------------------------------------------
    def group_index(self, info: GroupInfo) -> int:
        index = info.record_index
        if index >= 0:
            return index
        with self._group_lock:
            if info.record_index < 0:
                info.record_index = len(self.groups)
                self.groups.append(info)
        return info.record_index

    def begin(self, op: int, info: GroupInfo, seq: int, nbytes: int, root: int, flags: int = 0) -> int:
        """Record an op's start now, with ``flags`` (BATCHED); its number (for ``end``), or -1 when the clock failed
        (counted). The C call's begin writes it where it applies (a third of the time)."""
        gi = info.record_index
        if gi < 0:
            gi = self.group_index(info)
        if _record_begin is not None:
            number = _record_begin(self, op | (gi << 16) | flags, seq, nbytes, root)
            if number is not None:
                return number  # type: ignore[no-any-return]
        state = get_state()
        clock = state._clock
        if clock is None:
            clock = state.clock
        with self._slot_lock:  # (the ring read under the lock: a resize replaces it under the lock)
            states, buffer, parents = self.state, self.buffer, self.parents  # (one ring: a resize swaps all three)
            number = next(self.numbers)
            slot = number & self.mask
            held = states[slot]
            self._overwriting(held, 1, slot)
            states[slot] = WRITING
        base, facts = slot * RECORD_BYTES, op | (gi << 16) | flags
        stamp = state.stamp
        start = getattr(stamp, "op_start", None)  # the native stamp: reading, tick and words in one call
        if start is None or not start(clock, buffer, base, number, facts, seq, nbytes, root):
            if not self._start_words(clock, stamp, buffer, base, number, facts, seq, nbytes, root, slot, held):
                return -1
        parents[slot] = get_current()  # the span is looked up when the record becomes one (cheaper here)
        states[slot] = OPEN
        if number >= self.issued:
            self.issued = number + 1
        return number

    def end(self, number: int, completion: int = 1) -> bool:
        """Record the end of op ``number`` now, ``completion`` a COMPLETIONS code (False: the ring moved on, or
        the clock failed: then the record is dropped, counted ``torch_clock``, rather than left open for ever).
        An op a dump exported pending ends like any other: its span follows, under the same span id. The C call's
        end where it applies."""
        if _record_end is not None:
            ended = _record_end(self, number, completion)
            if ended is not None:
                return ended  # type: ignore[no-any-return]
        return self.end_aside(number, completion)

    def end_aside(self, number: int, completion: int) -> bool:
        """``end`` in Python, for the ring or for the records set aside (the C call's end asks when its ring check
        missed): which of the two holds the op is decided in one section, so a record put back meanwhile
        (``_put_back``) is ended where it is."""
        with self._slot_lock:
            states, buffer = self.state, self.buffer
            slot = number & self.mask
            base = slot * RECORD_BYTES
            entry = None
            if states[slot] in (OPEN, DUMPED) and _NUMBER.unpack_from(buffer, base)[0] == number:
                states[slot] = ENDING
            else:
                entry = self.aside.get(number)
                if entry is None or entry[0] not in (OPEN, DUMPED):
                    return False  # overwritten while it ran and not set aside: lost, counted there
                entry[0] = ENDING
        if entry is not None:
            return self._ended_aside_now(number, entry, completion)
        state = get_state()
        clock = state._clock
        if clock is None:
            clock = state.clock
        stamp = state.stamp
        finish = getattr(stamp, "op_end", None)
        ok = True
        if finish is None or not finish(clock, buffer, base + _START.size, completion):
            ok = self._end_words(clock, stamp, buffer, base + _START.size, completion)
        # Only ``end`` leaves ENDING, but a begin may have taken the slot meanwhile (a ring smaller than the
        # ops in flight: counted there): then the slot is that op's, being written, and is left alone.
        with self._slot_lock:
            if states[slot] != ENDING or _NUMBER.unpack_from(buffer, base)[0] != number:
                return False
            states[slot] = ENDED if ok else EMPTY
        if ok:
            self.ended += 1
        return ok

    # The reading the Python way (a source without a native mapping, one the native read refused), for begin and
    # end and for the C call (native/opcall/tt_opcall.c), which hands over a slot it has marked WRITING / ENDING.
    def _start_words(self, clock: Any, stamp: Any, buffer: bytearray, base: int, number: int, facts: int, seq: int,
                     nbytes: int, root: int, slot: int, held: int) -> bool:
        """The start's reading and words at ``base``; False when the clock failed (counted ``torch_clock``): then
        the slot goes back to the op it held (this number is skipped)."""
        try:
            ptp, unc, source, quality, lts = stamp.tick(clock)
            _START.pack_into(buffer, base, number, facts | (source << 40) | (quality << 48), seq, nbytes,
                             root, ptp, unc, lts)
            return True
        except Exception:
            get_state().count_error("torch_clock")
            _log.debug("tempotrace.torch: clock read failed", exc_info=True)
            with self._slot_lock:
                # (in the ring the begin took the slot in: a resize since then left it, and another begin may
                # be writing that slot of the new one)
                if buffer is self.buffer and self.state[slot] == WRITING:
                    self.state[slot] = held
                    self._overwriting(held, -1, slot)
            return False

    def _end_words(self, clock: Any, stamp: Any, buffer: bytearray, offset: int, completion: int) -> bool:
        """The end's reading and words at ``offset``; False when the clock failed (counted ``torch_clock``)."""
        state = get_state()
        try:
            ptp, unc, source, quality, lts = stamp.tick(clock)
            _END.pack_into(buffer, offset, ptp, unc, lts, completion | (source << 8) | (quality << 16))
            return True
        except Exception:
            state.count_error("torch_clock")
            return False

    def _overwriting(self, held: int, n: int, slot: int = -1) -> None:
        """Under ``_slot_lock``: a begin takes (n=1; n=-1: gives back, its state restored) ``slot`` in state
        ``held``. An open op is set aside while there is room (and taken back with the slot); else only an op
        never exported leaves its state set (export and dumps clear it); one a dump exported pending loses its
        end, counted apart."""
        if held in (OPEN, DUMPED) and slot >= 0:
            if n > 0 and self._set_aside(slot, held):
                return
            if n < 0 and self._put_back(slot):
                return
        if held == DUMPED:
            self.dumped_overwritten += n
            count("ring_overwrote_dumped", n)
        elif held != EMPTY:
            self._overwritten += n
            count("ring_overwritten", n)

    # -- records set aside ------------------------------------------------------------------------
    # Under ``_slot_lock``, from a begin (Python's, or the C call's through ``_overwriting``) or a resize.
    def _set_aside(self, slot: int, held: int) -> bool:
        if len(self.aside) >= ASIDE_MAX and not self._make_room():
            self._aside_from.pop(slot, None)
            return False
        base = slot * RECORD_BYTES
        number = _NUMBER.unpack_from(self.buffer, base)[0]
        self.aside[number] = [held, self.buffer[base:base + RECORD_BYTES], self.parents[slot]]
        self._aside_from[slot] = number  # (one int a slot at most: replaced at the slot's next set-aside)
        return True

    def _make_room(self) -> bool:
        """A full table gives up the record that ended first (retain="ring" keeps them for a dump: as the ring's
        own, the oldest goes, counted overwritten); False when every one is still open. O(1) a call, amortised:
        each number leaves ``_ended_aside`` once (a table of open records asked at every begin costs nothing)."""
        ended, aside = self._ended_aside, self.aside
        while ended:
            if aside.pop(ended.popleft(), None) is not None:  # (an ended record stays ENDED until exported)
                self._overwriting(ENDED, 1)
                return True
        return False

    def _put_back(self, slot: int) -> bool:
        """A begin gave ``slot`` back (its reading failed, nothing written; its state restored): the record it set
        aside is the slot's again, a flag set meanwhile with it; when that op ended, was exported, discarded or
        given up meanwhile, it is not: the slot is emptied (an end in progress goes on aside). False: this begin
        set nothing aside (counted)."""
        number = self._aside_from.pop(slot, None)
        if number is None:
            return False
        entry = self.aside.get(number)
        if entry is not None and entry[0] in (OPEN, DUMPED):
            del self.aside[number]
            base = slot * RECORD_BYTES
            self.buffer[base:base + RECORD_BYTES] = entry[1]
            self.state[slot] = entry[0]
        else:
            self.state[slot] = EMPTY
        return True

    def _ended_aside_now(self, number: int, entry: list[Any], completion: int) -> bool:
        """The end of an op set aside, its entry marked ENDING by ``end_aside``."""
        state = get_state()
        clock = state._clock
        try:
            ok = self._end_words(clock if clock is not None else state.clock, state.stamp, entry[1], _START.size,
                                 completion)
        except BaseException:  # (an interrupt: not left ENDING for ever, holding a place aside)
            with self._slot_lock:
                self.aside.pop(number, None)
            raise
        with self._slot_lock:
            if ok:
                entry[0] = ENDED
                ended = self._ended_aside
                ended.append(number)
                if len(ended) > 2 * ASIDE_MAX:  # mostly exported since (retain="export"): only the ended left
                    self._ended_aside = collections.deque(n for n in ended if n in self.aside)
            else:
                del self.aside[number]
        if ok:
            self.ended += 1
        return ok

    def _take_aside(self, numbers: Any, wanted: tuple[int, ...], dump: bool = False) -> list[OpRecord]:
        """The records set aside whose number ``numbers`` holds (a range, a set) in a ``wanted`` state, oldest
        first, taken: ended ones out of the table; with ``dump`` open ones stay, DUMPED."""
        if not self.aside:
            return []
        taken = []
        with self._slot_lock:  # (the records copied under the lock, unpacked outside it: begins wait for neither)
            for number in sorted(n for n, e in self.aside.items() if n in numbers and e[0] in wanted):
                held, record, context = entry = self.aside[number]
                taken.append((bytes(record), held == ENDED, context))
                if dump and held == OPEN:
                    entry[0] = DUMPED
                elif held == ENDED:
                    del self.aside[number]
        groups = self.groups
        return [_unpack(record, 0, ended, context, groups) for record, ended, context in taken]

    # -- reading records back ---------------------------------------------------------------------
    def unpack(self, slot: int, ended: bool | None = None) -> OpRecord:
        return _unpack(self.buffer, slot * RECORD_BYTES, ended if ended is not None else self.state[slot] == ENDED,
                       self.parents[slot], self.groups)

    def flag(self, number: int, flag: int) -> bool:
        """Set ``flag`` in op ``number``'s record while the ring still holds it unexported (open, dumped, ending
        or ended); False when it no longer does."""
        slot = number & self.mask
        base = slot * RECORD_BYTES
        with self._slot_lock:
            buffer, offset = self.buffer, base + _NUMBER.size
            if self.state[slot] in (EMPTY, WRITING) or _NUMBER.unpack_from(buffer, base)[0] != number:
                entry = self.aside.get(number)
                if entry is None:
                    return False
                buffer, offset = entry[1], _NUMBER.size
            _NUMBER.pack_into(buffer, offset, _NUMBER.unpack_from(buffer, offset)[0] | flag)
        return True

    def discard(self, number: int) -> bool:
        """Forget op ``number``'s open record, never exported (a batch planned, then run untraced)."""
        slot = number & self.mask
        with self._slot_lock:
            if self.state[slot] != OPEN or _NUMBER.unpack_from(self.buffer, slot * RECORD_BYTES)[0] != number:
                entry = self.aside.get(number)
                if entry is None or entry[0] != OPEN:
                    return False
                del self.aside[number]
                return True
            self.state[slot] = EMPTY
            self.parents[slot] = None
        return True

    def mark(self) -> int:
        """An op number every op begun from now on has or exceeds (a step's entry)."""
        return self.issued

    def _take(self, slot: int, number: int, wanted: tuple[int, ...]) -> OpRecord | None:
        """The record of op ``number`` if its slot holds it in a ``wanted`` state, the slot then emptied."""
        states = self.state
        with self._slot_lock:
            s = states[slot]
            if s not in wanted or _NUMBER.unpack_from(self.buffer, slot * RECORD_BYTES)[0] != number:
                return None
            record = self.unpack(slot, s == ENDED)
            states[slot] = EMPTY
            self.parents[slot] = None
        return record

    def take_ended(self, since: int | None = None, native: Any = None) -> tuple[list[Any], list[OpRecord]]:
        """Every ended op not yet exported (numbered ``since`` or later), oldest first, marked exported. Open
        ops, and ops being written or ended, stay: the next take starts at the first of them. ``native``
        (opspans.JsonSpans) writes the spans it can itself: (its items, the records left to make)."""
        last = self.issued
        low = max(self.next_due if since is None else since, last - self.size)
        if native is not None:
            items, left, first_waiting, lost = native.take(self.ring, low, last)
            if lost:
                count("trace_failed", lost)
            taken = []
            try:  # (what C took is out of the ring: it is returned whatever happens to the rest)
                for number in left:
                    record = self._take(number & self.mask, number, (ENDED,))
                    if record is not None:
                        taken.append(record)
                    elif first_waiting < 0 or number < first_waiting:  # changed since: as a failed take below
                        first_waiting = number
            except Exception:
                count("trace_failed")
                _log.debug("tempotrace.torch: records left by the C pass not taken", exc_info=True)
                first_waiting = low
        else:
            items, (taken, first_waiting) = [], self._take_ended(low, last)
        if self.aside:
            taken[:0] = self._take_aside(range(since or 0, last), (ENDED,))
        if since is None:
            self.next_due = first_waiting if first_waiting >= 0 else last
            self.ended = 0
        return items, taken

    def _take_ended(self, low: int, last: int) -> tuple[list[OpRecord], int]:
        taken: list[OpRecord] = []
        first_waiting = -1
        states, mask, buffer = self.state, self.mask, self.buffer
        for number in range(low, last):
            slot = number & mask
            s = states[slot]
            if s == EMPTY:
                continue
            held = _NUMBER.unpack_from(buffer, slot * RECORD_BYTES)[0]
            if held > number:
                continue  # overwritten by a later op: counted when it was
            if held < number or s != ENDED:  # not written yet, or open, or ending: it waits
                if first_waiting < 0:
                    first_waiting = number
                continue
            record = self._take(slot, number, (ENDED,))
            if record is not None:
                taken.append(record)
            elif first_waiting < 0:
                first_waiting = number
        return taken, first_waiting

    def take_all(self) -> list[OpRecord]:
        """Every op in the ring not yet exported, open ones included, oldest first (a dump). Ended ones are
        marked exported; open ones DUMPED: their end is exported when it comes (and no later dump repeats
        them). An op being written or ended right now is left to its ``end`` (and the next take)."""
        taken: list[OpRecord] = []
        last = self.issued
        states, mask = self.state, self.mask
        for number in range(max(0, last - self.size), last):
            slot = number & mask
            s = states[slot]
            if s == ENDED:
                record = self._take(slot, number, (ENDED,))
            elif s == OPEN:
                record = self._dump_open(slot, number)
            else:
                continue
            if record is not None:
                taken.append(record)
        # then those set aside (older): one the ring hands aside during the scan is DUMPED already, or found here
        return self._take_aside(range(last), (OPEN, ENDED), dump=True) + taken

    def _dump_open(self, slot: int, number: int) -> OpRecord | None:
        with self._slot_lock:
            if self.state[slot] != OPEN or _NUMBER.unpack_from(self.buffer, slot * RECORD_BYTES)[0] != number:
                return None
            record = self.unpack(slot, False)
            self.state[slot] = DUMPED
        return record

    def take_one(self, number: int) -> OpRecord | None:
        """Op ``number``'s record if it has ended and was not yet exported, marked exported (a failed op's
        span, made at once)."""
        record = self._take(number & self.mask, number, (ENDED,))
        if record is None and number in self.aside:
            record = next(iter(self._take_aside((number,), (ENDED,))), None)
        return record

    def open_numbers(self) -> list[int]:
        """The op numbers of every op still open, dumped pending or not (the hang watchdog's question; C scans
        of the states)."""
        state, buffer, out = self.state, self.buffer, []
        for wanted in (OPEN, DUMPED):
            slot = state.find(wanted)
            while slot >= 0:
                number = _NUMBER.unpack_from(buffer, slot * RECORD_BYTES)[0]
                if state[slot] == wanted:  # still: not taken and begun again while its number was read
                    out.append(number)
                slot = state.find(wanted, slot + 1)
        if self.aside:
            with self._slot_lock:
                out.extend(n for n, e in self.aside.items() if e[0] in (OPEN, DUMPED))
        return out

    def holding(self) -> bool:
        """Ended ops wait to be made into spans (a flush makes them first: lifecycle.release_before_flush). A
        C scan of the states: an approximate count could miss them."""
        return self.retain == "export" and (self.state.find(ENDED) >= 0 or any(
            e[0] == ENDED for e in list(self.aside.values())))

    def after_fork_in_child(self) -> None:
        # The parent's records are the parent's to export; the child starts with an empty ring of the same size
        # (its numbering goes on; opspans renews the nonce its span ids start from).
        self.state = bytearray(self.size)
        self.lock = threading.Lock()
        self._group_lock = threading.Lock()
        self._slot_lock = _slot_lock()
        self.aside = {}
        self._ended_aside = collections.deque()
        self._aside_from = {}
        self.resize(self.size)  # (publishes the new ring with the new locks)
        self._overwritten, self._native_base = 0, native_overwritten()
        self.dumped_overwritten = 0


_NUMBER = struct.Struct("<q")


def _unpack(buffer: Any, base: int, ended: bool, context: Context | None, groups: list[GroupInfo]) -> OpRecord:
    number, facts, seq, nbytes, root, ptp, unc, lts = _START.unpack_from(buffer, base)
    group = groups[(facts >> 16) & 0xFFFFFF]
    start = (ptp, unc, (facts >> 40) & 0xFF, (facts >> 48) & 0xFF, lts)
    end = None
    completion = 0
    if ended:
        eptp, eunc, elts, efacts = _END.unpack_from(buffer, base + _START.size)
        end = (eptp, eunc, (efacts >> 8) & 0xFF, (efacts >> 16) & 0xFF, elts)
        completion = efacts & 0xFF
    parent = trace.get_current_span(context).get_span_context() if context is not None else None
    return OpRecord(number, facts & 0xFFFF, group, seq, nbytes, root, start, end, completion,
                    parent if parent is not None and parent.is_valid else None, facts & (AMBIGUOUS | BATCHED))

#: The variables for instrument()'s flight-recorder arguments (spec/configuration.md).
RETAIN_ENV = "TEMPOTRACE_TORCH_RETAIN"
RING_OPS_ENV = "TEMPOTRACE_TORCH_RING_OPS"
EXPORT_EVERY_ENV = "TEMPOTRACE_TORCH_EXPORT_EVERY"
HANG_TIMEOUT_ENV = "TEMPOTRACE_HANG_TIMEOUT"
DUMP_SIGNAL_ENV = "TEMPOTRACE_TORCH_DUMP_SIGNAL"
SDK_SPANS_ENV = "TEMPOTRACE_TORCH_SDK_SPANS"
RETAIN_MODES = ("export", "ring")
#: Signals a dump may not take: uncatchable, or already ours or the program's (Ctrl-C, the SIGTERM flush).
_RESERVED_SIGNALS = frozenset(int(s) for s in (signal.SIGKILL, signal.SIGSTOP, signal.SIGINT, signal.SIGTERM))
#: The largest ring: 2^24 ops, about 1.7 GiB.
RING_OPS_MAX = 1 << 24


@dataclass(frozen=True)
class Retention:
    """What instrument() was asked to keep, and how it dumps: each argument, else its variable, else the default."""

    retain: str = "export"
    ring_ops: int = DEFAULT_RING_OPS
    export_every: int = 0
    hang_timeout: float = DEFAULT_HANG_TIMEOUT_S
    dump_signal: int | None = None
    sdk_spans: bool = False

    @classmethod
    def resolve(cls, *, retain: str | None, ring_ops: int | None, export_every: int | None,
                hang_timeout: float | None, dump_signal: int | None, sdk_spans: bool | None) -> Retention:
        """Raises TempoTraceError naming the argument (or variable) and the rule."""
        env = os.environ
        retain = retain if retain is not None else env.get(RETAIN_ENV, "export").strip().lower() or "export"
        if retain not in RETAIN_MODES:
            raise TempoTraceError(f"retain ({RETAIN_ENV}) must be one of {', '.join(RETAIN_MODES)}; got {retain!r}")
        ring = _int(ring_ops, RING_OPS_ENV, "ring_ops", DEFAULT_RING_OPS, 1, RING_OPS_MAX)
        every = _int(export_every, EXPORT_EVERY_ENV, "export_every", 0, 0, 1 << 62)
        if hang_timeout is None:
            text = env.get(HANG_TIMEOUT_ENV, "").strip()
            try:
                hang_timeout = float(text) if text else DEFAULT_HANG_TIMEOUT_S
            except ValueError:
                raise TempoTraceError(f"{HANG_TIMEOUT_ENV} must be a number of seconds >= 0; got {text!r}") from None
        if isinstance(hang_timeout, bool) or not isinstance(hang_timeout, (int, float)) or not (
                0 <= hang_timeout < float("inf")):
            raise TempoTraceError(f"hang_timeout must be a number of seconds >= 0 (0: no watchdog); "
                                  f"got {hang_timeout!r}")
        if dump_signal is None:
            text = env.get(DUMP_SIGNAL_ENV, "").strip().upper()
            if text:
                name = text if text.startswith("SIG") else "SIG" + text
                found = getattr(signal, name, None)
                if not isinstance(found, signal.Signals):
                    raise TempoTraceError(f"{DUMP_SIGNAL_ENV} must name a signal (e.g. SIGUSR1); got {text!r}")
                dump_signal = int(found)
        elif isinstance(dump_signal, bool) or not isinstance(dump_signal, int) or dump_signal not in set(
                signal.valid_signals()):
            raise TempoTraceError(f"dump_signal must be a signal number (e.g. signal.SIGUSR1); got {dump_signal!r}")
        if dump_signal is not None:
            if dump_signal in _RESERVED_SIGNALS:
                name = signal.Signals(dump_signal).name
                raise TempoTraceError(f"dump_signal must not be {name}: it cannot be caught, or it already means "
                                      "something (interrupt, the SIGTERM flush); use SIGUSR1")
            if threading.current_thread() is not threading.main_thread():
                raise TempoTraceError("dump_signal can only be set from the main thread (Python handles signals there)")
        if sdk_spans is None:
            sdk_spans = env.get(SDK_SPANS_ENV, "").strip().lower() in ("1", "true", "yes", "on")
        return cls(retain, ring, every, float(hang_timeout), None if dump_signal is None else int(dump_signal),
                   bool(sdk_spans))


def _int(value: int | None, variable: str, name: str, default: int, low: int, high: int) -> int:
    if value is None:
        text = os.environ.get(variable, "").strip()
        if not text:
            return default
        try:
            value = int(text)
        except ValueError:
            raise TempoTraceError(f"{variable} must be an integer {low}..{high}; got {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise TempoTraceError(f"{name} must be an integer {low}..{high}; got {value!r}")
    return value

#: The process's recorder.
recorder = Recorder()
lifecycle.renew_after_fork(recorder)
