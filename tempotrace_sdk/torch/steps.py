"""``step(i)``: one trace id for every rank of a training step, and the step-level exchange (spec/torch.md §4).

Every rank computes the step's trace id from the job id and the step number
(``keys.step_ids``), with no communication, and starts its step span as a
child of a virtual remote parent with that trace id: the step spans of all
ranks are siblings in one trace. On exit (carriage ``"step"``, instrumented)
each rank makes one send event and the ranks all_gather their records; each
step span records what it merged (``tempotrace.torch.recv.*``). Leaving a
step is therefore a collective: every rank of the group must do it. A step
left by an ``Exception`` owes its exchange, paid before this rank's next
collective (owed.py): a handled exception keeps every rank in step, a rank
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

from ..semconv import TORCH_CARRIAGE, TORCH_STEP
from . import held
from .carriage import Exchange, count, make_record
from .groups import group_info
from .install import sweep
from .keys import step_ids
from .launch import job_id_from_env, launch_facts
from .owed import Owed, owe, pay
from .record import RecordKind
from .spans import end_span, now, start_or_invalid
from .wrappers import raised_by_op, settings

__all__ = ["current_step", "job_id", "step"]

_log = logging.getLogger(__name__)

_lock = threading.Lock()
_job: str | None = None
#: Open steps, innermost last: process-wide (a DDP hook runs on autograd's threads, not in our context).
_open: list[tuple[int, Span]] = []


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


def current_step() -> tuple[int, Span] | None:
    """(step number, step span) of the innermost open step, from any thread; None outside one."""
    return _open[-1] if _open else None


class step:  # lower case: used like a function, ``with step(i):``
    """The context of training step ``number`` on this rank (spec/torch.md §4).

    ``group``: the process group whose ranks take part (default: all).
    """

    __slots__ = ("_group", "_number", "_span", "_token")

    def __init__(self, number: int, *, group: Any = None) -> None:
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise ValueError(f"step number must be a non-negative integer, got {number!r}")
        self._number = number
        self._group = group
        self._span: Span | None = None
        self._token: object = None

    def __enter__(self) -> Span:
        pay()  # an earlier step's exchange, owed since its exception (§4.2): before anything of this step
        facts = launch_facts()
        trace_id, parent_id = step_ids(job_id(), facts.restart if facts else 0, self._number)
        parent = NonRecordingSpan(SpanContext(trace_id, parent_id, is_remote=True,
                                              trace_flags=TraceFlags(TraceFlags.SAMPLED)))
        attrs: dict[str, Any] = {TORCH_STEP: self._number, TORCH_CARRIAGE: _mode()}
        sp = start_or_invalid("torch.step", attrs, trace.set_span_in_context(parent))  # the step runs, exchanges
        self._span = sp
        self._token = context_api.attach(trace.set_span_in_context(sp))
        _open.append((self._number, sp))
        held.step_opened()
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
            if _open and _open[-1][1] is sp:
                _open.pop()
            held.step_closed()
            attrs = self._leave(sp, exc)
            held.release()  # the step's op spans, made after the exchange (every rank at once) and before it ends
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
        if settings.carriage != "step" or not dist.is_initialized():
            return {}
        if exc is not None and _from_distributed(exc):
            return {}  # a collective after a failed one cannot be trusted to pair
        try:
            info = group_info(self._group)
        except Exception:  # a group torch cannot describe: the same on every rank
            count("exchange_failed")
            _log.debug("tempotrace.torch: step exchange failed", exc_info=True)
            return {}
        record = make_record(RecordKind.EXCHANGE, info.rank, self._number, sp)  # the absent record on failure
        if exc is not None:  # perhaps nobody handles it: a dying rank must issue nothing (owed.py)
            owe(Owed(sp, info, record, self._number, exc, now()))
            return None
        pay()
        try:
            exchange = Exchange(info, record, self._number, async_op=True)
        except Exception:  # torch refused the all_gather itself
            count("exchange_failed")
            _log.debug("tempotrace.torch: step exchange failed", exc_info=True)
            return {}
        held.release()  # the step's op spans are made while the exchange travels (this rank would only wait)
        try:
            if exchange.work is not None:
                exchange.work.wait()
            return exchange.finish()
        except Exception:  # the all_gather failed on its way (a broken group)
            count("exchange_failed")
            _log.debug("tempotrace.torch: step exchange failed", exc_info=True)
            return {}


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
