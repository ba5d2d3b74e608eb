"""Step exchanges owed by steps that ended by an exception (spec/torch.md §4.2).

A step left by an ``Exception`` (not a torch.distributed failure) does not
run its exchange at its exit: nobody knows yet whether the program handles
the exception. If it does not (a CUDA OOM in forward on one rank), an
all_gather issued there would pair with the other ranks' next collective and
hold the dying rank until the group's timeout. So the exchange is owed, and
paid (``pay()``) before this rank's next collective of any kind: the next
``step()`` entry or exit, the next traced op, ``check_clocks()``. The other
ranks issued theirs at their step's exit, before any later op, so the
collective order is the same on every rank; a rank that dies issues nothing.
Any group, not only the step's: an op on a subgroup first would wait for
ranks that wait in the step's all_gather.

The step span stays open until then, and ends with what the exchange carried,
stamped with the time of its exit. An exchange still owed when no traced op
comes any more -- ``uninstrument()``, interpreter exit -- is paid if the
program survived (the other ranks wait for it in their step-exit all_gather:
a last step that raised and was handled must not hold them until the group's
timeout), and dropped (counted ``owed_dropped``, its span ends without it)
when ``uninstrument()`` runs while an exception unwinds or the process ends
by an unhandled one.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import Span

from ...clocks.base import Timestamp
from ..counts import count
from ..groups import GroupInfo
from ..spans import end_span
from .records import Exchange

__all__ = ["Owed", "drop", "due", "owe", "pay", "settle"]

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class Owed:
    """A step's exchange not yet issued: everything its normal exit had ready."""

    span: Span  #: the step span, still open
    info: GroupInfo
    record: bytes  #: made at the step's exit (its send event is the exit's)
    number: int
    error: BaseException
    ts: Timestamp | None  #: the step's exit time: its span's end


#: Held while an exchange is owed or being paid: an op on another thread (a DDP hook on autograd's)
#: that must pay first waits here until the exchange is out.
_paying = threading.RLock()
_owed: list[Owed] = []
#: The thread paying now (None: none). Set before the first item is issued and cleared after the last,
#: and items leave ``_owed`` only once paid, so another thread's fast path never sees "nothing owed"
#: while an exchange is still on its way out.
_payer: int | None = None
_at_exit = False


def owe(item: Owed) -> None:
    global _at_exit
    with _paying:
        _owed.append(item)
        if not _at_exit:  # registered late, so it runs before the exporters registered earlier shut down
            atexit.register(_settle_at_exit)
            _at_exit = True


def due() -> bool:
    """An exchange is owed or being paid: ``pay()`` has work (the cheap test every traced op makes first; the C
    call, native/opcall, makes it by reading ``_owed`` (a list, never rebound) and ``_payer`` itself)."""
    return bool(_owed) or _payer is not None


def pay() -> None:
    """Issue every owed exchange, oldest first, and end its step span. Never raises.

    Another thread calling it meanwhile waits until they are out (its op must come after them); the
    paying thread itself, re-entering from the exchange, returns at once."""
    global _payer
    if not _owed and _payer is None:
        return
    me = threading.get_ident()
    if _payer == me:
        return
    with _paying:
        _payer = me
        try:
            while _owed:
                item = _owed[0]
                try:
                    _pay(item)
                finally:
                    _owed.pop(0)
        finally:
            _payer = None


def _pay(item: Owed) -> None:
    attrs: dict[str, Any] = {}
    try:
        attrs = Exchange(item.info, item.record, item.number, async_op=False).finish()
    except Exception:  # torch refused the all_gather itself
        count("exchange_failed")
        _log.debug("tempotrace.torch: owed step exchange failed", exc_info=True)
    end_span(item.span, attrs, error=item.error, ts=item.ts)


def drop() -> int:
    """Give up every owed exchange: counted ``owed_dropped``; the spans end without it."""
    with _paying:
        items = list(_owed)
        _owed.clear()
    for item in items:
        count("owed_dropped")
        end_span(item.span, error=item.error, ts=item.ts)
    return len(items)


def settle(*, unwinding: bool) -> None:
    """No traced op comes any more (``uninstrument()``, interpreter exit): the program survived an owed
    exchange's exception unless ``unwinding``, so the other ranks wait in their step-exit all_gather for
    it: pay. A rank going down with an exception issues nothing: drop."""
    if unwinding:
        drop()
    else:
        pay()


def _dying_of_it() -> bool:
    """At exit: does the process end by an unhandled exception (``sys.last_value``, set by the
    interpreter for one)? Then, like a rank dying inside a step, it issues nothing."""
    return getattr(sys, "last_value", None) is not None


def _settle_at_exit() -> None:
    settle(unwinding=_dying_of_it())
