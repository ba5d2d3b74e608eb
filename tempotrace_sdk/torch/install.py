"""``instrument()`` / ``uninstrument()``: trace every collective and point-to-point op (spec/torch.md §1).

What is replaced while instrumented, and put back exactly by ``uninstrument()``:

- the public functions in ``torch.distributed`` (``dist.all_reduce`` ...,
  ``dist.isend``, ``dist.batch_isend_irecv``); their definitions in
  ``torch.distributed.distributed_c10d`` are left alone, so torch's own
  internal calls (``send`` calling ``isend``, ``*_object`` calling
  ``broadcast``) are never traced a second time;
- ``P2POp.__new__`` / ``__init__``: torch checks ``op`` by identity against
  its own ``isend`` / ``irecv``, so a ``P2POp(dist.isend, ...)`` built while
  instrumented stores torch's function, not ours: it works before, during and
  after instrumentation, and so does one built before;
- ``Work.wait``: ends the span of an async op whose backend gives no future.

Code that took a function before ``instrument()`` (``from torch.distributed
import all_reduce``) keeps the untraced one. Each entry point's wrapper
(``make_wrapper``) hands the call to its body: collectives in wrappers.py,
point-to-point ops in p2p.py, chosen here so that neither imports the other.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from ..errors import TempoTraceError
from ..torchops import SPECS, Kind, OpSpec, Reader
from . import compute, opspans
from .carriage import MODES, owed
from .counts import count
from .dumps import install_dump_signal, remove_dump_signal, watchdog
from .groups import forget_groups, group_info
from .p2p import receive, send, traced_batch
from .pending import registry
from .recorder import Retention, recorder
from .wrappers import (
    ORIGINAL_ATTR,
    collective,
    forget_native_groups,
    hide_our_frames,
    inside,
    native_wrapper,
    settings,
    unwrap,
)

__all__ = ["carriage_mode", "instrument", "is_instrumented", "sweep", "uninstrument"]

_log = logging.getLogger(__name__)
_lock = threading.Lock()

#: (owner, attribute, the value it had) for everything instrument() replaced, in order.
_saved: list[tuple[Any, str, Any]] = []


def instrument(*, carriage: str = "step", gpu: bool | None = None, retain: str | None = None,
               ring_ops: int | None = None, export_every: int | None = None, hang_timeout: float | None = None,
               dump_signal: int | None = None, sdk_spans: bool | None = None) -> None:
    """Trace every torch.distributed collective and p2p op of this process.

    ``carriage``: ``"none"`` (spans and sequence numbers only), ``"step"``
    (default: one all_gather of every rank's record when a ``step()`` ends;
    nothing added to a point-to-point op), ``"step+p2p"`` (and a side
    message after every p2p send), ``"op"`` (an exchange after every
    collective, and p2p side messages: for debugging). Every rank must use the same mode, as every rank must call
    the same collectives. ``gpu``: time collectives on CUDA tensors with CUDA
    events (default: when ``torch.cuda.is_available()``; spec/torch.md §6).

    The flight recorder (spec/torch.md §8; each knob also has a variable, spec/configuration.md):
    ``retain`` ``"export"`` (default: every op's span exported) or ``"ring"``
    (the last ``ring_ops`` ops kept, about 105 octets each, exported only when
    dumped; ``export_every=N`` also exports every N-th step in full);
    ``hang_timeout`` seconds an op may stay open before every rank dumps
    (default 300; 0: no watchdog); ``dump_signal`` (e.g. ``signal.SIGUSR1``)
    dumps on that signal; ``sdk_spans=True`` makes every op an SDK span at
    once, which a provider's other span processors then see (several times the
    CPU per op). Calling it again changes the settings; nothing is wrapped twice.
    """
    if carriage not in MODES:
        raise TempoTraceError(f"carriage must be one of {', '.join(MODES)}; got {carriage!r}")
    chosen = Retention.resolve(retain=retain, ring_ops=ring_ops, export_every=export_every,
                               hang_timeout=hang_timeout, dump_signal=dump_signal, sdk_spans=sdk_spans)
    with _lock:
        settings.carriage = carriage
        if gpu is None:
            gpu = _cuda_available()
        if not gpu:
            if settings.gpu is not None:
                settings.gpu.harvest(final=True)
            settings.gpu = None
        elif settings.gpu is None:  # kept across calls: its queue holds spans still open
            settings.gpu = _gpu_timer()
        _apply(chosen)
        if settings.active:
            return
        _patch_functions()
        _patch_p2pop()
        _patch_work_wait()
        settings.active = True
    _log.debug("tempotrace.torch: instrumented (carriage=%s, retain=%s)", carriage, chosen.retain)


def _apply(chosen: Retention) -> None:
    """The flight recorder's settings: a ring of another size starts empty (what it held is exported first)."""
    if recorder.size < chosen.ring_ops or recorder.size >= 2 * chosen.ring_ops:
        opspans.release(force=True)
        with recorder.lock:
            recorder.resize(chosen.ring_ops)
    recorder.retain = chosen.retain
    recorder.export_every = chosen.export_every
    settings.retain = chosen.retain
    settings.sdk_spans = chosen.sdk_spans
    watchdog.owner_pid = os.getpid()
    if chosen.hang_timeout > 0:
        watchdog.start(chosen.hang_timeout)
    else:
        watchdog.stop()
    install_dump_signal(chosen.dump_signal)


def uninstrument() -> None:
    """Put back exactly what ``instrument()`` replaced; end every span still open."""
    with _lock:
        if not settings.active:
            return
        settings.active = False
        try:
            # a step exchange still owed: no traced op comes to pay it, so pay it now, unless this runs
            # while an exception unwinds (a rank going down issues nothing; carriage/owed.py)
            owed.settle(unwinding=sys.exc_info()[1] is not None)
            sweep(final=True)  # never raises; the restore below must happen whatever it meets
            compute.release()  # trace_compute's held spans; never raises
            if recorder.retain == "export":
                opspans.release(force=True)  # never raises
            watchdog.stop()
            remove_dump_signal()
        finally:
            _restore()
            forget_groups()
            forget_native_groups()
            settings.gpu = None


def _restore() -> None:
    for owner, name, value in reversed(_saved):
        current = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        if _ours(current):
            setattr(owner, name, value)
        else:  # someone wrapped ours in turn: restoring would drop their wrapper
            _log.warning("tempotrace.torch: %s.%s was replaced after instrument(); left as it is",
                         getattr(owner, "__name__", owner), name)
    _saved.clear()


def is_instrumented() -> bool:
    return settings.active


def carriage_mode() -> str:
    return settings.carriage


def sweep(*, final: bool = False) -> None:
    """End the spans of async ops seen complete since the last sweep; harvest GPU timings. Never raises:
    a failure (a sticky CUDA error in the harvest's event query) is counted ``sweep_failed``; a final
    sweep then ends the GPU timer's spans still waiting as ``unfinished``."""
    try:
        registry.sweep(final=final)
    except Exception:
        count("sweep_failed")
        _log.debug("tempotrace.torch: sweep of async ops failed", exc_info=True)
    gpu = settings.gpu
    if gpu is None:
        return
    try:
        gpu.harvest(final=final)
    except Exception:
        count("sweep_failed")
        _log.debug("tempotrace.torch: GPU harvest failed", exc_info=True)
        if final:
            _abandon(gpu)


def _abandon(gpu: Any) -> None:
    """End every span a failed final harvest left waiting, without asking the device anything."""
    try:
        gpu.abandon()
    except Exception:
        _log.debug("tempotrace.torch: GPU timer spans not ended", exc_info=True)


def _ours(value: Any) -> bool:
    func = value.__func__ if isinstance(value, staticmethod) else value
    return getattr(func, ORIGINAL_ATTR, None) is not None


def _replace(owner: Any, name: str, value: Any) -> None:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    _saved.append((owner, name, original))
    setattr(owner, name, value)


def _patch_functions() -> None:
    for spec in SPECS:
        original = getattr(dist, spec.name, None)
        if original is None:  # an older torch without this entry point
            continue
        _replace(dist, spec.name, make_wrapper(spec, unwrap(original)))
    _replace(dist, "batch_isend_irecv", traced_batch(unwrap(dist.batch_isend_irecv)))


def make_wrapper(spec: OpSpec, original: Callable[..., Any]) -> Callable[..., Any]:
    """The wrapper of one entry point: its body runs the op traced, or the call goes straight to torch."""
    reader = Reader(original)
    body = {Kind.COLLECTIVE: collective, Kind.SEND: send, Kind.RECV: receive}[spec.kind]

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            if not settings.active or inside.get():
                return original(*args, **kwargs)
            if owed.due():
                owed.pay()  # a step's exchange owed since its exception goes first, as it did on the other ranks (§4.2)
            group = reader.get(args, kwargs, "group")
            if group is dist.GroupMember.NON_GROUP_MEMBER:
                return original(*args, **kwargs)
            try:
                info = group_info(group)
            except Exception:  # not initialised, a group torch will refuse, ...: torch says what is wrong
                count("untraced")
                _log.debug("tempotrace.torch: %s not traced", spec.name, exc_info=True)
                return original(*args, **kwargs)
            return body(spec, reader, original, info, args, kwargs)
        except BaseException as err:
            hide_our_frames(err)  # torch's error, with the traceback the untraced call gives (hide_our_frames)
            raise

    setattr(wrapper, ORIGINAL_ATTR, original)
    fast = native_wrapper(spec, original, wrapper, reader)  # the common case in C, the rest by ``wrapper``
    if fast is None:
        return wrapper
    functools.update_wrapper(fast, original)
    setattr(fast, ORIGINAL_ATTR, original)
    return fast


def _patch_p2pop() -> None:
    cls = c10d.P2POp
    original_new = cls.__dict__["__new__"].__func__
    original_init = cls.__dict__["__init__"]

    def __new__(klass: Any, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = _unwrap_op(args, kwargs)
        try:
            return original_new(klass, *args, **kwargs)
        except BaseException as err:
            hide_our_frames(err)  # torch refusing the op: its traceback, not ours (hide_our_frames)
            raise

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        args, kwargs = _unwrap_op(args, kwargs)
        try:
            original_init(self, *args, **kwargs)
        except BaseException as err:
            hide_our_frames(err)
            raise

    setattr(__new__, ORIGINAL_ATTR, original_new)
    setattr(__init__, ORIGINAL_ATTR, original_init)
    _replace(cls, "__new__", staticmethod(__new__))
    _replace(cls, "__init__", __init__)


def _unwrap_op(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if args:
        return (unwrap(args[0]), *args[1:]), kwargs
    if "op" in kwargs:
        kwargs = dict(kwargs)
        kwargs["op"] = unwrap(kwargs["op"])
    return args, kwargs


def _patch_work_wait() -> None:
    work = c10d.Work
    original_wait = work.__dict__["wait"]

    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            result = original_wait(self, *args, **kwargs)
        except BaseException as err:
            hide_our_frames(err, from_call=True)  # the op failed (in C): torch's traceback, not ours (hide_our_frames)
            raise
        try:
            registry.on_wait(self)
        except Exception:
            _log.debug("tempotrace.torch: wait hook failed", exc_info=True)
        return result

    setattr(wait, ORIGINAL_ATTR, original_wait)
    _replace(work, "wait", wait)


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _gpu_timer() -> Any:
    from .gpu import GpuTimer

    return GpuTimer.for_cuda()
