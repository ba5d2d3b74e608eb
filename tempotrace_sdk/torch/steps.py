"""``step()``: one trace id for every rank of a training step, and the step-level exchange (spec/torch.md §4).

Every rank computes the step's trace id from the job id and the step number
(``wire.torchkeys.step_ids``), with no communication, and starts its step span as a
child of a virtual remote parent with that trace id: the step spans of all
ranks are siblings in one trace. ``step()`` without a number counts steps
itself; a number this process used before (an epoch loop's ``enumerate``) is
counted ``step_reused``, warned about once, and still gets a trace of its own
(``wire.torchkeys.StepNumbers``). On exit (carriage ``"step"``, instrumented)
each rank makes one send event and the ranks all_gather their records; each
step span records what it merged (``tempotrace.torch.recv.*``). Leaving a
step is therefore a collective: every rank of the group must do it. A step
left by an ``Exception`` owes its exchange, paid before this rank's next
collective (carriage/owed.py): a handled exception keeps every rank in step, a rank
that dies of it issues nothing. A torch.distributed failure (no collective can
be trusted then) or a non-``Exception`` exit (KeyboardInterrupt, SystemExit)
skips the exchange: spec/torch.md §4.2. Whatever fails in the tracing, the
all_gather is issued (§3.6).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from types import TracebackType
from typing import Any

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, TraceFlags

from ..launch import job_id_from_env, launch_facts
from ..semconv import TORCH_CARRIAGE, TORCH_STEP, TORCH_STEP_OCCURRENCE
from ..wire.torchkeys import StepNumbers, step_ids
from ..wire.torchrecord import RecordKind
from . import compute, opspans
from .carriage import STEP_MODES
from .carriage.owed import Owed, owe, pay
from .carriage.records import Exchange, make_record
from .counts import count
from .dumps import dump
from .groups import group_info
from .install import sweep
from .spans import end_span, now, open_steps, start_or_invalid
from .wrappers import raised_by_op, settings

__all__ = ["TORCH_STEP_OCCURRENCE", "job_id", "step"]

_log = logging.getLogger(__name__)


_lock = threading.Lock()
_job: str | None = None
#: Every step number this process used, for counting (``step()``) and for telling reuses apart.
numbers = StepNumbers()
#: A reused number is warned about once per process (and counted every time).
_reuse_warned = [False]


def job_id() -> str:
    """The job id step trace ids derive from (spec/torch.md §4.1).

    TEMPOTRACE_JOB_ID, else TORCHELASTIC_RUN_ID (unless torchrun's default
    ``none``); else, once per process, rank 0 draws one and broadcasts it
    (every rank gets here at its first step, so this is one collective); a
    process outside any process group uses its own pid.
    """
    global _job
    with _lock:
        if _job is None:
            _job = job_id_from_env() or _agree_on_job_id()
        return _job


def _agree_on_job_id() -> str:
    if not (dist.is_available() and dist.is_initialized()):
        return f"pid-{os.getpid()}-{secrets.token_hex(4)}"
    box = [secrets.token_hex(8) if dist.get_rank() == 0 else None]
    c10d.broadcast_object_list(box, src=0)
    return str(box[0])


class step:  # lower case: used like a function, ``with step():``
    """The context of a training step on this rank (spec/torch.md §4).

    ``number``: the step's number, the same on every rank. Without it the step
    is counted: one more than the highest number this process used (0 at
    first), so every rank that enters the same steps in the same order counts
    the same numbers. A number used before in this process is counted
    ``step_reused`` and warned about once; it still gets a trace of its own.
    ``group``: the process group whose ranks take part (default: all).
    """

    __slots__ = ("_group", "_number", "_span", "_token", "first_op", "number")

    def __init__(self, number: int | None = None, *, group: Any = None) -> None:
        if number is not None and (not isinstance(number, int) or isinstance(number, bool) or number < 0):
            raise ValueError(f"step number must be a non-negative integer, got {number!r}")
        self._number = number
        #: The number this step runs as, known once it is entered (the one given, or the one counted).
        self.number = number
        self._group = group
        self._span: Span | None = None
        self._token: object = None
        #: The op number the recorder was at when the step was entered (opspans.step_entered).
        self.first_op = 0

    def __enter__(self) -> Span:
        pay()  # an earlier step's exchange, owed since its exception (§4.2): before anything of this step
        number, occurrence = numbers.take(self._number)
        self.number = number
        if occurrence:
            _reused(number, occurrence)
        facts = launch_facts()
        trace_id, parent_id = step_ids(job_id(), facts.restart if facts else 0, number, occurrence)
        parent = NonRecordingSpan(SpanContext(trace_id, parent_id, is_remote=True,
                                              trace_flags=TraceFlags(TraceFlags.SAMPLED)))
        attrs: dict[str, Any] = {TORCH_STEP: number, TORCH_CARRIAGE: _mode()}
        if occurrence:
            attrs[TORCH_STEP_OCCURRENCE] = occurrence
        sp = start_or_invalid("torch.step", attrs, trace.set_span_in_context(parent))  # the step runs, exchanges
        self._span = sp
        self._token = context_api.attach(trace.set_span_in_context(sp))
        open_steps.append((number, sp))
        compute.step_opened()
        opspans.step_entered(self)
        return sp

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        sp = self._span
        if sp is None:
            return
        self._span = None
        try:
            context_api.detach(self._token)  # type: ignore[arg-type]
        finally:
            if open_steps and open_steps[-1][1] is sp:
                open_steps.pop()
            compute.step_closed()
            attrs = self._leave(sp, exc)
            compute.release()  # trace_compute's spans, held during the step
            opspans.step_left(self)  # the step's op spans, made after the exchange, before the step ends
            if exc is not None and isinstance(exc, Exception) and settings.active:
                dump("exception")  # the ring's ops up to the failure (spec/torch.md §8.2); never raises
            if attrs is not None:
                end_span(sp, attrs, error=exc)

    def _leave(self, sp: Span, exc: BaseException | None) -> dict[str, Any] | None:
        """The sweep and the step exchange, as spec/torch.md §4.2 says for this exit; the step span's attributes,
        or None when the exchange is owed (the span ends once it is paid)."""
        if not settings.active or (exc is not None and not isinstance(exc, Exception)):
            return {}  # not instrumented, or the program is stopping (KeyboardInterrupt, SystemExit...)
        try:
            sweep()  # async ops that completed during the step end now, before the step does
        except Exception:
            _log.debug("tempotrace.torch: sweep failed", exc_info=True)
        if settings.carriage not in STEP_MODES or not dist.is_initialized():
            return {}
        if exc is not None and _from_distributed(exc):
            return {}  # a collective after a failed one cannot be trusted to pair
        try:
            info = group_info(self._group)
        except Exception:  # a group torch cannot describe: the same on every rank
            count("exchange_failed")
            _log.debug("tempotrace.torch: step exchange failed", exc_info=True)
            return {}
        number = self.number if self.number is not None else 0  # entered: always set
        record = make_record(RecordKind.EXCHANGE, info.rank, number, sp)  # the absent record on failure
        if exc is not None:  # perhaps nobody handles it: a dying rank must issue nothing (carriage/owed.py)
            owe(Owed(sp, info, record, number, exc, now()))
            return None
        pay()
        try:
            exchange = Exchange(info, record, number, async_op=True)
        except Exception:  # torch refused the all_gather itself
            count("exchange_failed")
            _log.debug("tempotrace.torch: step exchange failed", exc_info=True)
            return {}
        compute.release()  # the step's spans are made while the exchange travels (this rank would only wait)
        opspans.release()
        try:
            if exchange.work is not None:
                exchange.work.wait()
            return exchange.finish()
        except Exception:  # the all_gather failed on its way (a broken group)
            count("exchange_failed")
            _log.debug("tempotrace.torch: step exchange failed", exc_info=True)
            return {}


def _reused(number: int, occurrence: int) -> None:
    """A step number used again: counted every time, said once per process."""
    count("step_reused")
    if _reuse_warned[0]:
        return
    _reuse_warned[0] = True
    _log.warning("tempotrace.torch: step number %d entered again (use %d in this process; an epoch loop numbering "
                 "its steps with enumerate?): counted as step_reused, and each use gets a trace of its own "
                 "(tempotrace.torch.step_occurrence=%d). Use tt.step() without a number to have steps counted. "
                 "Said once.", number, occurrence + 1, occurrence)


#: How far along an exception's causes and contexts a torch.distributed failure is looked for.
_CHAIN_LIMIT = 16


def _from_distributed(exc: BaseException) -> bool:
    """``exc`` is a failure of torch.distributed itself (spec/torch.md §4.2): a ``DistError``, or an exception
    that came out of a traced op, as ``exc`` or anywhere in its cause/context chain."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _CHAIN_LIMIT:
        if isinstance(current, dist.DistError) or raised_by_op(current):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _mode() -> str:
    return settings.carriage if settings.active else "none"
