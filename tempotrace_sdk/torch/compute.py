"""``trace_compute()``: spans for a model's forward and backward and an optimizer's step (spec/torch.md §4.3).

Collectives say when ranks talk; between them a trace is blank unless the user
adds spans. This opt-in fills the blank with three spans per iteration, each
the child of the step:

- ``torch.forward``: from a forward pre-hook to the forward hook, registered
  with ``always_call`` so a forward that raises still ends it (with the error);
- ``torch.backward``: from the moment backward reaches the forward's output (a
  gradient hook on the output tensor) to the end of that backward pass (a
  callback queued on autograd's engine, the mechanism DDP and FSDP use for
  the same moment): one Python call per forward and two per backward, however
  many parameters the model has. DDP's last bucket may still be reducing then;
- ``torch.optimizer.step``: from the optimizer's step pre-hook to its post-hook.

Inside a step they are **held** (spec/torch.md §1.4): at the hook only the
clock reading and its Lamport tick are taken (``hold``, ``HeldOp.ended``), and
the spans are made in bulk, stamped with those readings and those Lamport
values, when the step exits, when ``MAX_HELD`` are held, before any flush
(SIGTERM, exit, ``force_flush``, shutdown: ``lifecycle.release_held``), on the
batch exporter's tick and at ``uninstrument()`` (``release``). The exported
span is the one a live span would have been; only its export is later. Why: a
span made between a backward pass and the optimizer runs from caches the pass
just flushed, at several times its warm cost, on the training thread (made at
the hooks, a 3 MiB MLP's spans took about 225 µs each against 45 µs warm on a
2-core machine; benchmarks/bench_torch_compute.py measures what is left). So
none of them is the current span while it runs: what forward or the optimizer
issues (FSDP's all-gathers) is the step's child, as it would be untraced.
Outside a step each span is made at its hooks; so is one whose clock fails.

A span whose end never came (an optimizer step or a backward that raised) is
ended ``completion="unfinished"`` when the next one starts, or at ``remove()``.
Tracing never raises into the program: a hook that fails counts
``trace_failed``.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import torch
from opentelemetry import context as context_api
from opentelemetry.trace import Span

from ..clocks.base import Timestamp
from ..otel import lifecycle
from ..otel.context import get_state
from ..semconv import TORCH_COMPLETION, TORCH_COMPUTE, TORCH_MODULE, TORCH_OPTIMIZER
from . import spans
from .counts import count
from .spans import callback_context, end_span, now, start_or_invalid

__all__ = ["MAX_HELD", "TORCH_COMPUTE", "TORCH_MODULE", "TORCH_OPTIMIZER", "ComputeTracing", "HeldOp", "hold",
           "release", "step_closed", "step_opened", "trace_compute"]

_log = logging.getLogger(__name__)


# -- held spans: made at the step's exit, in bulk ------------------------------------------------------------

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


# -- the hooks -----------------------------------------------------------------------------------------------

#: How deep a forward's output is searched for the tensor whose gradient starts backward (a tensor, a
#: tuple of them, a dict such as a model-output object).
_OUTPUT_DEPTH = 3
_UNFINISHED = {TORCH_COMPLETION: "unfinished"}


def _first_grad_tensor(value: Any, depth: int = _OUTPUT_DEPTH) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value if value.requires_grad else None
    if depth <= 0:
        return None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = _first_grad_tensor(item, depth - 1)
        if found is not None:
            return found
    return None


def _queue_at_backward_end(callback: Callable[[], None]) -> None:
    """Run ``callback`` when the backward pass now running ends (autograd's final callbacks)."""
    torch.autograd.Variable._execution_engine.queue_callback(callback)


class _Interval:
    """One compute span while it is open: held (made at the step's exit) or, outside a step, a live span."""

    __slots__ = ("held", "span")

    def __init__(self, name: str, attributes: dict[str, Any], context: context_api.Context | None) -> None:
        self.held: HeldOp | None = hold(name, lambda: attributes)
        self.span: Span | None = None
        if self.held is None:
            self.span = start_or_invalid(name, attributes, context)
        elif context is not None:  # started on a thread without our context (autograd's): the step's
            self.held.context = context

    def end(self, attributes: dict[str, Any] | None = None, error: BaseException | None = None) -> None:
        """End it now (``attributes``, ``error``: made at once with them). Never raises."""
        if self.span is not None:
            end_span(self.span, attributes, error)
        elif self.held is not None and (attributes or error or not self.held.ended()):
            self.held.make(attributes, error)  # unusual ends are made at once, as a held op that raised


class ComputeTracing:
    """What ``trace_compute()`` registered on a model and an optimizer; ``remove()`` takes it all off."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> None:
        self._forward_attrs = {TORCH_COMPUTE: "forward", TORCH_MODULE: type(model).__name__}
        self._backward_attrs = {TORCH_COMPUTE: "backward", TORCH_MODULE: type(model).__name__}
        self._step_attrs = {TORCH_COMPUTE: "optimizer.step",
                            TORCH_OPTIMIZER: type(optimizer).__name__ if optimizer is not None else ""}
        self._forward = threading.local()  # per thread: open forwards, innermost last (a module may nest in itself)
        self._backward: _Interval | None = None
        self._step: _Interval | None = None
        self._lock = threading.Lock()
        self._handles = [
            model.register_forward_pre_hook(self._forward_starts),
            model.register_forward_hook(self._forward_ends, always_call=True),
        ]
        if optimizer is not None:
            self._handles += [optimizer.register_step_pre_hook(self._step_starts),
                              optimizer.register_step_post_hook(self._step_ends)]

    def remove(self) -> None:
        """Remove every hook; end what is still open (``unfinished``). Idempotent."""
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()
        for left in (self._take("_backward"), self._take("_step")):
            if left is not None:
                left.end(_UNFINISHED)

    def _take(self, slot: str) -> _Interval | None:
        with self._lock:
            taken: _Interval | None = getattr(self, slot)
            setattr(self, slot, None)
        return taken

    # forward -----------------------------------------------------------------------------------------------

    def _forward_starts(self, module: Any, args: Any) -> None:
        try:
            left = self._take("_backward")
            if left is not None:  # the last backward raised: its end never came
                left.end(_UNFINISHED)
            self._open_forwards().append(_Interval("torch.forward", self._forward_attrs, None))
        except Exception:  # tracing never fails the program's forward (spec/torch.md §1.1)
            _failed("forward")

    def _forward_ends(self, module: Any, args: Any, output: Any) -> None:
        try:
            opened = self._open_forwards()
            if not opened:
                return
            error = sys.exc_info()[1]  # an always-called hook after a forward that raised runs in its except block
            opened.pop().end(error=error)
            if error is None:
                tensor = _first_grad_tensor(output)
                if tensor is not None:
                    tensor.register_hook(self._backward_reaches_output)  # type: ignore[no-untyped-call]
        except Exception:
            _failed("forward")

    def _open_forwards(self) -> list[_Interval]:
        opened: list[_Interval] | None = getattr(self._forward, "open", None)
        if opened is None:
            opened = self._forward.open = []
        return opened

    # backward ----------------------------------------------------------------------------------------------

    def _backward_reaches_output(self, grad: Any) -> None:
        try:
            with self._lock:
                if self._backward is not None:  # a second output of the same pass
                    return
                interval = self._backward = _Interval("torch.backward", self._backward_attrs, callback_context())
            _queue_at_backward_end(lambda: self._backward_ends(interval))
        except Exception:
            _failed("backward")

    def _backward_ends(self, interval: _Interval) -> None:
        try:
            with self._lock:
                if self._backward is not interval:  # ended already (unfinished)
                    return
                self._backward = None
            interval.end()
        except Exception:
            _failed("backward")

    # optimizer.step ----------------------------------------------------------------------------------------

    def _step_starts(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            left = self._take("_step")
            if left is not None:  # the last step raised: its post-hook never ran
                left.end(_UNFINISHED)
            self._step = _Interval("torch.optimizer.step", self._step_attrs, None)
        except Exception:
            _failed("optimizer.step")

    def _step_ends(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            interval = self._take("_step")
            if interval is not None:
                interval.end()
        except Exception:
            _failed("optimizer.step")


def _failed(what: str) -> None:
    count("trace_failed")
    _log.debug("tempotrace.torch: tracing a %s failed", what, exc_info=True)


def trace_compute(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> ComputeTracing:
    """Spans for ``model``'s forward and backward passes and ``optimizer``'s steps, children of the open
    ``step()`` (spec/torch.md §4.3). ``model`` may be the DDP/FSDP wrapper or the module inside it. Opt-in:
    its cost is measured by benchmarks/bench_torch_compute.py. ``.remove()`` on the result takes the hooks
    off."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"trace_compute() needs an nn.Module, got {type(model).__name__}")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"trace_compute() needs a torch.optim.Optimizer, got {type(optimizer).__name__}")
    return ComputeTracing(model, optimizer)
