"""Per-process TempoTrace state shared by the propagator, the processor and the decorators.

One process has one Lamport counter, one configured clock, one local tenant
and one table of span sketches, whoever reads them: a propagator loaded from
the ``opentelemetry_propagator`` entry point (no arguments) and the processor
installed by ``configure()`` must agree, so both default to ``get_state()``.
Tests build their own ``TempoTraceState`` with a fake clock.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import weakref
from collections import Counter, deque
from itertools import islice
from typing import TYPE_CHECKING, Any

from opentelemetry import context as context_api

from ..clocks.base import ClockSource, Timestamp
from ..clocks.domain import HostDomain, host_domain
from ..clocks.leapseconds import utc_to_tai_ns
from ..wire import LamportClock, Sketch
from ..wire.layout import UNCERTAINTY_SATURATED, ClockQuality, TsSource
from .records import RemoteHop, Sent, SpanRecord
from .stamp import NativeLamport, new_lamport, stamp_for

if TYPE_CHECKING:
    from .policy import Contract, Policy

__all__ = [
    "LIVE_SPANS_MAX",
    "REMOTE_HOP_KEY",
    "RemoteHop",
    "SpanRecord",
    "TempoTraceState",
    "get_state",
    "hop_seen",
    "remote_hop",
]

_log = logging.getLogger(__name__)

#: Where extract() leaves the received header for the processor to find.
REMOTE_HOP_KEY = context_api.create_key("tempotrace.remote-hop")

#: ``hop_seen[0]`` turns True (for good) when this process first stores a hop
#: under REMOTE_HOP_KEY (hop.receive, the only writer: the key is unique to
#: this module). Until then no context can hold one, and the processor skips
#: looking for it on every root span.
hop_seen = [False]

#: Ended spans whose sketch is kept for children that start after their parent
#: ended (async fan-out). 8192 entries is about 1 MiB.
ENDED_SKETCHES = 8192

#: Distinct received headers remembered to recognise a repeated extract of
#: one request's headers (about 500 bytes each, with the decoded header). A
#: sender never sends the same header twice (every send ticks its counter),
#: so a repeat within this window is the same message read again.
RECEIVED_HEADERS = 1024

#: Open spans tracked at once (about 200 bytes each). A full table means
#: spans that are never ended (a leak in the program): the oldest records are
#: evicted, LIVE_EVICT_BATCH at a time (counted as live_evicted), so new spans
#: are always tracked. An evicted span that does end later gets no end stamp,
#: and its children fall back to a sketch of its id alone.
LIVE_SPANS_MAX = 1 << 17

#: One eviction frees 1/16 of the table: finding the oldest entries scans the
#: dict from its start, so evicting in batches keeps that cost per span constant.
LIVE_EVICT_FRACTION = 16


def remote_hop(context: context_api.Context | None = None) -> RemoteHop | None:
    """The header extracted into ``context`` (default: the current one), if any."""
    ctx = context if context is not None else context_api.get_current()
    hop = ctx.get(REMOTE_HOP_KEY)
    return hop if isinstance(hop, RemoteHop) else None


class _UnsyncedWallClock:
    """Used only when no clock layer is available: says honestly that it knows nothing."""

    name = "cpu-unsynced"

    def now(self) -> Timestamp:
        return Timestamp(utc_to_tai_ns(time.time_ns()), TsSource.CPU, ClockQuality.UNKNOWN, UNCERTAINTY_SATURATED)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "fallback", "note": "clock layer unavailable; quality UNKNOWN"}


def default_clock(spec: str | None = None) -> ClockSource:
    """``select_clock(spec)`` (env TEMPOTRACE_CLOCK when spec is None); raises its errors."""
    # Imported lazily: the clock layer may pull in the native module, and the
    # propagator must import (entry point) even where that is unavailable.
    from ..clocks.select import select_clock

    return select_clock(spec)


def env_tenant() -> int:
    """TEMPOTRACE_TENANT as an int 0..15 (0 when unset); ValueError otherwise."""
    raw = os.environ.get("TEMPOTRACE_TENANT", "").strip()
    if not raw:
        return 0
    value = int(raw, 0)
    if not 0 <= value <= 15:
        raise ValueError(f"TEMPOTRACE_TENANT must be 0..15, got {raw!r}")
    return value


def env_host() -> str:
    return os.environ.get("TEMPOTRACE_HOST", "").strip() or socket.gethostname()


class TempoTraceState:
    """Clock, Lamport counter, tenant, host, policy, span records and counters."""

    def __init__(
        self,
        *,
        clock: ClockSource | None = None,
        tenant: int | None = None,
        host: str | None = None,
        policy: Policy | None = None,
        lamport: LamportClock | NativeLamport | None = None,
        native_stamp: bool | None = None,
    ) -> None:
        if tenant is not None and (not isinstance(tenant, int) or isinstance(tenant, bool) or not 0 <= tenant <= 15):
            raise ValueError(f"tenant must be an integer 0..15, got {tenant!r}")
        #: Bumped whenever clock, tenant, host, policy or launch facts change: what the per-process attributes
        #: (otel/process.py) were computed from.
        self.version = 0
        self._clock = clock
        self._domain: tuple[object, HostDomain | None] = (None, None)  # (the clock it is of, the domain)
        self._tenant = tenant
        self._host = host if host is not None else env_host()
        # The counter decides the stamp: a NativeLamport (the default when the
        # native module is loaded; native_stamp=False refuses it, True demands
        # it) stamps in C, any LamportClock in Python (otel/stamp.py).
        self.lamport = lamport if lamport is not None else new_lamport(native_stamp=native_stamp)
        self.stamp = stamp_for(self.lamport)
        self._policy = policy
        #: The launcher's facts (rank, world size, job ...; tempotrace_sdk/launch.py), empty outside a launch.
        self._launch: dict[str, int | str] = {}
        self.live: dict[int, SpanRecord] = {}
        # Ended spans' sketches, oldest evicted first: a plain dict and a ring
        # of its keys in end order (cheaper per span than an OrderedDict;
        # every operation on either is atomic under the GIL).
        self.ended: dict[int, SpanRecord] = {}
        self._ended_order: deque[int] = deque()
        # Headers received lately, as received (text or bytes), oldest evicted
        # first: a second extract of the same header is not a second receive.
        self.received: dict[str | bytes, RemoteHop] = {}
        self._received_order: deque[str | bytes] = deque()
        self._counts_lock = threading.Lock()
        self._sends_lock = threading.Lock()
        self._rejections: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        _STATES.add(self)

    # -- configuration, resolved lazily so the entry point works unconfigured --
    @property
    def clock(self) -> ClockSource:
        clock = self._clock
        if clock is None:
            try:
                clock = default_clock()
            except Exception as err:  # ImportError before the clock layer lands, or a bad TEMPOTRACE_CLOCK
                _log.warning("tempotrace: no usable clock (%s); stamping with quality UNKNOWN", err)
                clock = _UnsyncedWallClock()
            self._clock = clock
            self.version += 1
        return clock

    @clock.setter
    def clock(self, clock: ClockSource) -> None:
        self._clock = clock
        self.version += 1

    @property
    def domain(self) -> HostDomain | None:
        """The host clock domain of the clock (clocks/domain.py): None unless it reads the kernel's clock."""
        clock = self.clock
        of, domain = self._domain
        if of is not clock:
            try:
                domain = host_domain(clock)
            except Exception as err:  # never a reason not to stamp: the spans only lose the domain
                _log.debug("tempotrace: no clock domain (%s)", err)
                domain = None
            self._domain = (clock, domain)
        return domain

    @property
    def tenant(self) -> int:
        tenant = self._tenant
        if tenant is None:
            try:
                tenant = env_tenant()
            except ValueError as err:
                _log.warning("tempotrace: %s; using tenant 0", err)
                tenant = 0
            self._tenant = tenant
            self.version += 1
        return tenant

    @tenant.setter
    def tenant(self, tenant: int) -> None:
        if not isinstance(tenant, int) or isinstance(tenant, bool) or not 0 <= tenant <= 15:
            raise ValueError(f"tenant must be an integer 0..15, got {tenant!r}")
        self._tenant = tenant
        self.version += 1

    @property
    def host(self) -> str:
        return self._host

    @host.setter
    def host(self, host: str) -> None:
        self._host = host
        self.version += 1

    @property
    def policy(self) -> Policy | None:
        return self._policy

    @policy.setter
    def policy(self, policy: Policy | None) -> None:
        self._policy = policy
        self.version += 1

    @property
    def launch(self) -> dict[str, int | str]:
        return self._launch

    @launch.setter
    def launch(self, facts: dict[str, int | str]) -> None:
        self._launch = dict(facts)
        self.version += 1

    @property
    def contract(self) -> Contract | None:
        """The LOCAL tenant's contract; a remote tenant's is never consulted."""
        policy = self.policy
        return None if policy is None else policy.contract_for(self.tenant)

    # -- span records ---------------------------------------------------------
    def make_room(self) -> None:
        """Evict the oldest open-span records: the table is full of spans that never ended."""
        live = self.live
        try:  # dicts keep insertion order: the first keys are the oldest spans
            victims = list(islice(live, max(1, LIVE_SPANS_MAX // LIVE_EVICT_FRACTION)))
        except RuntimeError:  # another thread changed the table mid-scan: the next full start retries
            return
        evicted = sum(live.pop(span_id, None) is not None for span_id in victims)
        if evicted:
            self.count_error("live_evicted", evicted)

    def take_sends(self, record: SpanRecord, finish: bool) -> list[Sent]:
        """The sends recorded so far, in send order; ``finish``: record no more (the list is then final,
        else a copy is returned: more may come)."""
        lock = self._sends_lock  # acquire/release: half the cost of ``with`` on the per-span path
        lock.acquire()
        try:
            sends = record.sends
            if finish:
                record.finished = True
            elif sends:
                sends = list(sends)
        finally:
            lock.release()
        return sends or []

    def sketch_of(self, span_id: int) -> Sketch | None:
        record = self.live.get(span_id)
        if record is None:
            record = self.ended.get(span_id)
        return None if record is None else record.sketch

    def close_span(self, span_id: int) -> SpanRecord | None:
        """Move an ended span's record from the open table to the ended one (``_remember``, inline: once per span)."""
        record = self.live.pop(span_id, None)
        if record is not None:
            self.ended[span_id] = record
            order = self._ended_order
            order.append(span_id)
            if len(order) > ENDED_SKETCHES:
                try:
                    self.ended.pop(order.popleft(), None)
                except IndexError:  # another thread emptied it first
                    pass
        return record

    def remember_received(self, key: str | bytes, hop: RemoteHop) -> None:
        """Remember a received header (RECEIVED_HEADERS at most) so its repeat is recognised."""
        _remember(self.received, self._received_order, key, hop, RECEIVED_HEADERS)

    # -- counters (the rare path only: rejections and internal errors) -------
    def count_rejection(self, error_class: str) -> None:
        with self._counts_lock:
            self._rejections[error_class] += 1

    def count_error(self, where: str, n: int = 1) -> None:
        with self._counts_lock:
            self._errors[where] += n

    def rejections(self) -> dict[str, int]:
        """Headers refused at extract, by error class (e.g. TEXT_LENGTH, VERSION, TEXT_MULTIPLE), and
        LAMPORT_AHEAD: valid headers whose counter was not merged (tt-ext §10.1; the hop is kept)."""
        with self._counts_lock:
            return dict(self._rejections)

    def errors(self) -> dict[str, int]:
        """Internal errors swallowed in hooks, by hook name."""
        with self._counts_lock:
            return dict(self._errors)

    def _after_fork_in_child(self) -> None:
        # A lock held by another thread at fork time stays held forever in
        # the child. Span records are kept: the child's spans descend from them.
        self._counts_lock = threading.Lock()
        self._sends_lock = threading.Lock()


def _remember(table: dict[Any, Any], order: deque[Any], key: Any, value: Any, limit: int) -> None:
    """``table[key] = value``, evicting the oldest key once ``table`` holds more than ``limit``.

    A plain dict and a ring of its keys in insertion order: cheaper per call
    than an OrderedDict, and every operation on either is atomic under the GIL.
    """
    table[key] = value
    order.append(key)
    if len(order) > limit:
        try:
            table.pop(order.popleft(), None)
        except IndexError:  # another thread emptied it first
            pass


_STATES: weakref.WeakSet[TempoTraceState] = weakref.WeakSet()


def _renew_after_fork() -> None:
    global _GLOBAL_LOCK
    _GLOBAL_LOCK = threading.Lock()
    for state in list(_STATES):
        state._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_after_fork)

#: (Read directly by the C call of a traced torch op, native/opcall, once it is not None.)
_GLOBAL: TempoTraceState | None = None
_GLOBAL_LOCK = threading.Lock()


def get_state() -> TempoTraceState:
    """The process-wide state (created on first use from the environment)."""
    state = _GLOBAL
    if state is None:
        with _GLOBAL_LOCK:
            state = _GLOBAL
            if state is None:
                state = _set_global(TempoTraceState())
    return state


def _set_global(state: TempoTraceState) -> TempoTraceState:
    global _GLOBAL
    _GLOBAL = state
    return state
