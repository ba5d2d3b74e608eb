"""Held op spans: a blocking collective inside a step becomes its span later, in bulk (spec/torch.md §1.4).

Why: between two collectives of 1 MiB, gloo has copied megabytes through the
caches, and making one OpenTelemetry span there (the SDK's span, its
attributes, our stamps) runs from cold memory at about three times its warm
cost; with more ranks than cores that time delays every rank's next
collective. So a blocking collective on a CPU group that carries nothing,
run inside ``step()``, takes at the op only what must be taken then -- its
two clock readings with their Lamport ticks (its place in this process's
order), its attributes and its parent context -- and its span is made and
ended from those, with those readings and those Lamport values, when the
step exits, when ``MAX_HELD`` ops are held, before any flush (SIGTERM, exit,
``force_flush``, shutdown: ``lifecycle.release_held``), on the batch
exporter's tick (at most its 1 s delay later, like a queued span) and at
``uninstrument()``. The exported span is the one an immediate span would
have been; only its export is later.

Anything unusual makes the span at once instead: a clock that fails, an op
that raises (its span carries the error), an op outside a step.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from opentelemetry import context as context_api

from ..clocks.base import Timestamp
from ..otel import lifecycle
from ..otel.context import get_state
from . import spans
from .carriage import count
from .spans import end_span, now

__all__ = ["MAX_HELD", "HeldOp", "hold", "release", "step_closed", "step_opened"]

_log = logging.getLogger(__name__)

#: Held ops before the holding thread makes their spans itself: a bulk of this size runs warm after
#: its first span, and bounds what a process holds (a few KiB per op).
MAX_HELD = 64

#: How many ``step()`` contexts are open, process-wide (``step_opened``/``step_closed``): ops hold only
#: inside one, whose exit is the next release.
steps_open = [0]
_steps_lock = threading.Lock()

_held: deque[HeldOp] = deque()
#: Ops taken from ``_held`` whose span is being made, and its condition (an RLock's: a signal handler may
#: release on a thread that was inside it).
_making = [0]
_made = threading.Condition()
#: How long ``release()`` waits for ops another thread took: a flush after it then exports them too.
RELEASE_WAIT_S = 1.0


def step_opened() -> None:
    with _steps_lock:
        steps_open[0] += 1


def step_closed() -> None:
    with _steps_lock:
        steps_open[0] = max(0, steps_open[0] - 1)


class HeldOp:
    """What an op's span will be made of: name, attributes, parent context, start and end with their Lamport."""

    __slots__ = ("attributes", "context", "end", "end_lts", "name", "start", "start_lts")

    def __init__(self, name: str, attributes: dict[str, Any], start: Timestamp, start_lts: int) -> None:
        self.name = name
        self.attributes = attributes
        self.context = context_api.get_current()
        self.start = start
        self.start_lts = start_lts
        self.end: Timestamp | None = None
        self.end_lts = 0

    def ended(self) -> bool:
        """The op returned: take its end reading and Lamport tick and hold it (False: the clock failed)."""
        state = get_state()
        ts = now(state)
        if ts is None:
            return False
        self.end, self.end_lts = ts, state.lamport.tick()
        _held.append(self)
        if len(_held) >= MAX_HELD:
            release()
        return True

    def make(self, attributes: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        """Make and end the span now, from what was taken at the op (an end not taken yet: read now). Never raises."""
        try:
            sp = spans.start_span(self.name, self.attributes, self.context, at=(self.start, self.start_lts))
        except Exception:
            count("untraced")
            _log.debug("tempotrace.torch: a held span %s could not be made", self.name, exc_info=True)
            return
        end_span(sp, attributes, error, self.end, self.end_lts if self.end is not None else None)


def hold(name: str, attributes: Callable[[], dict[str, Any]]) -> HeldOp | None:
    """The op's start, held (None: not inside a step, the clock failed, or its attributes could not be built:
    make the span at once). ``attributes`` is called only inside a step. Never raises."""
    if not steps_open[0]:  # the common case outside step(): decided before the attributes are built
        return None
    try:
        state = get_state()
        ts = now(state)
        if ts is None:
            return None
        return HeldOp(name, attributes(), ts, state.lamport.tick())
    except Exception:
        _log.debug("tempotrace.torch: %s not held; its span is made now", name, exc_info=True)
        return None


def release() -> None:
    """Make the span of every held op, any thread; ops held meanwhile are made too. Returns once the ops other
    threads took are made as well (waiting RELEASE_WAIT_S at most), so that a flush after it exports every one,
    and a shutdown after it stamps every one. Never raises."""
    held = _held
    while True:
        with _made:  # taking an op and counting it is one step: a concurrent release cannot miss it
            if not held:
                break
            op = held.popleft()
            _making[0] += 1
        try:
            op.make()
        finally:
            with _made:
                _making[0] -= 1
                if not _making[0]:
                    _made.notify_all()
    with _made:
        _made.wait_for(lambda: not _making[0], RELEASE_WAIT_S)


class _AfterFork:
    def after_fork_in_child(self) -> None:
        # the parent's ops are its spans to make, not the child's; its steps are not the child's either
        global _made, _steps_lock
        _held.clear()
        _making[0] = 0
        _made = threading.Condition()
        _steps_lock = threading.Lock()
        steps_open[0] = 0


_after_fork = _AfterFork()
lifecycle.renew_after_fork(_after_fork)
lifecycle.release_before_flush(release, lambda: bool(_held) or bool(_making[0]))
