"""Export pipelines across a process's life: fork, SIGTERM, interpreter exit, multiprocessing exit.

spec/reliability.md §Process lifecycle says what each guarantees:

- fork: every registered object renews its locks, threads and buffers in
  the child (``renew_after_fork``), so a lock held by another thread at the
  moment of the fork cannot hang the child;
- SIGTERM (how Kubernetes, torchrun and systemd stop a process): ended spans
  are flushed first, on helper threads, within 5 s whatever locks the
  interrupted thread holds, then the user's own Python handler runs, or,
  when there was none, the default action terminates the process as before;
  a handler the user set to ignore SIGTERM or installed from C is left alone;
- interpreter exit: ``atexit`` flushes (also when the provider was created
  with ``shutdown_on_exit=False``);
- ``multiprocessing`` workers started by fork end with ``os._exit`` (no
  atexit): a finalizer registered in each such child flushes first.

Spans that ended but are held back to be made later, in bulk (torch's
compute spans inside a step, torch/compute.py; recorded ops, torch/opspans.py),
are released before every flush:
``release_before_flush`` registers who holds them; every flush here, the
configure() handle's and exit's (``flush_each``), our span processor's and
the batch exporter's worker tick call ``release_held()`` first.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, Protocol

__all__ = [
    "EXIT_FLUSH_TIMEOUT_S",
    "FlushLock",
    "before_exit_flush",
    "flush_all",
    "flush_each",
    "flush_on_exit",
    "install_exit_flush",
    "release_before_flush",
    "release_held",
    "release_held_within",
    "renew_after_fork",
]

_log = logging.getLogger(__name__)

#: The longest a SIGTERM, exit or worker-exit flush may take in all: within
#: Kubernetes' default 30 s grace period and torchrun's 30 s before SIGKILL.
EXIT_FLUSH_TIMEOUT_S = 5.0
#: multiprocessing runs finalizers with higher priority first; ours before the default 0.
_MP_EXIT_PRIORITY = 100


class _Renewable(Protocol):
    def after_fork_in_child(self) -> None: ...


class _Flushable(Protocol):
    def force_flush(self, timeout_millis: int = ...) -> bool: ...


class FlushLock:
    """A lock that knows its owner, so a flush from a signal handler never waits on its own thread.

    ``acquire`` returns False at once when the calling thread already holds
    it (the signal arrived while this thread was exporting), and after
    ``timeout`` seconds otherwise. A SIGTERM that interrupts a thread holding
    one is acted upon when that thread releases its last one (``_deferred``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        _LOCKS.add(self)

    def acquire(self, timeout: float = -1) -> bool:
        me = threading.get_ident()
        if self._owner == me:
            return False
        if not self._lock.acquire(timeout=timeout if timeout >= 0 else -1):
            return False
        self._owner = me
        return True

    def release(self) -> None:
        self._owner = None
        self._lock.release()
        if _deferred:
            _run_deferred()


_LOCKS: weakref.WeakSet[FlushLock] = weakref.WeakSet()
#: (thread id, action): signal work waiting for that thread to leave an export.
_deferred: list[tuple[int, Callable[[], None]]] = []


def _holds_flush_lock(thread_id: int) -> bool:
    return any(lock._owner == thread_id for lock in list(_LOCKS))


def _run_deferred() -> None:
    me = threading.get_ident()
    if _holds_flush_lock(me):
        return
    for entry in list(_deferred):
        if entry[0] == me:
            _deferred.remove(entry)
            entry[1]()


# -- fork --------------------------------------------------------------------------------------------------------
_RENEW: weakref.WeakSet[Any] = weakref.WeakSet()


def renew_after_fork(obj: _Renewable) -> None:
    """Call ``obj.after_fork_in_child()`` in every forked child while ``obj`` lives."""
    _RENEW.add(obj)


def _after_fork_in_child() -> None:
    _deferred.clear()  # the parent's pending signal work is not the child's
    for obj in list(_RENEW):
        try:
            obj.after_fork_in_child()
        except Exception:  # a child must come up even if one object cannot renew
            _log.debug("tempotrace: renewing %r after fork failed", obj, exc_info=True)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# -- spans held back to be made in bulk ---------------------------------------------------------------------------
#: (release, holding): ``release()`` makes and ends the spans held, ``holding()`` says whether there are any.
_RELEASE: list[tuple[Callable[[], None], Callable[[], bool]]] = []


def release_before_flush(release: Callable[[], None], holding: Callable[[], bool]) -> None:
    """Call ``release`` (which makes the spans it holds and ends them) before every flush; once per function."""
    if all(release is not r for r, _ in _RELEASE):
        _RELEASE.append((release, holding))


def _holding() -> bool:
    try:
        return any(holding() for _, holding in list(_RELEASE))
    except Exception:
        return True


def release_held() -> None:
    """Make every held span now, on this thread, so that a flush exports it; never raises."""
    for release, _ in list(_RELEASE):
        try:
            release()
        except Exception:
            _log.debug("tempotrace: releasing held spans failed", exc_info=True)


def release_held_within(timeout_s: float) -> None:
    """``release_held`` on a helper thread, waited for at most ``timeout_s``; never raises.

    A flush may be asked for on a thread that was interrupted (a signal handler calling
    ``force_flush()``) while it held a lock that making a span needs: the helper can be stopped by
    it, the caller cannot. Where no thread can start (interpreter exit) it runs here."""
    if not _holding():
        return
    releasing = _start_daemon(release_held, "tempotrace-release")
    if releasing is None:
        release_held()
    else:
        releasing.join(max(0.0, timeout_s))


# -- flushing at the end of a process ----------------------------------------------------------------------------
_FLUSH: weakref.WeakSet[Any] = weakref.WeakSet()


def flush_on_exit(obj: _Flushable) -> None:
    """Flush ``obj`` (a span processor or exporter) on SIGTERM and at (multiprocessing) exit."""
    _FLUSH.add(obj)


def _start_daemon(target: Callable[[], None], name: str) -> threading.Thread | None:
    """A started daemon thread, or None where none can start (Python >= 3.12 refuses at interpreter exit)."""
    thread = threading.Thread(target=target, name=name, daemon=True)
    try:
        thread.start()
    except RuntimeError:
        return None
    return thread


def _flush_one(obj: _Flushable, deadline: float) -> bool:
    left_ms = int((deadline - time.monotonic()) * 1000)
    if left_ms <= 0:
        return False
    try:
        return bool(obj.force_flush(left_ms))
    except Exception:
        _log.debug("tempotrace: flushing %r failed", obj, exc_info=True)
        return False


def flush_each(objs: Iterable[_Flushable], timeout_s: float) -> bool:
    """Flush every one of ``objs`` at once, each on its own thread, all within ``timeout_s``; never raises.

    True when every flush finished in time and succeeded. One that hangs (a
    collector not answering, an ``export()`` that overruns, a lock it cannot
    have) neither delays the others nor this call past ``timeout_s``: it is
    left running on its daemon thread. Where no thread can start (interpreter
    exit on newer Pythons) they run here one after the other, each bounded by
    what is left (an ``export()`` already running is not interrupted).

    The held spans are made first, on a helper thread given at most half the
    time: a lock the interrupted thread holds can stop that thread, not the
    flush of what is already queued.
    """
    deadline = time.monotonic() + timeout_s
    release_held_within(timeout_s / 2)
    results: dict[int, bool] = {}
    threads: list[threading.Thread] = []
    items = list(objs)
    for i, obj in enumerate(items):

        def run(i: int = i, obj: _Flushable = obj) -> None:
            results[i] = _flush_one(obj, deadline)

        thread = _start_daemon(run, "tempotrace-flush")
        if thread is None:
            run()
        else:
            threads.append(thread)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return len(results) == len(items) and all(results.values())


def flush_all(timeout_s: float = EXIT_FLUSH_TIMEOUT_S) -> bool:
    """Flush every registered processor and exporter within ``timeout_s`` in all (held spans made first:
    ``flush_each``); never raises."""
    return flush_each(list(_FLUSH), timeout_s)


#: Called with "exit" or "sigterm" before the flush at interpreter exit and at SIGTERM (torch's flight-recorder
#: dump, torch/dumps.py): what they hand to the export processors is then flushed with the rest.
_BEFORE_EXIT: list[Callable[[str], None]] = []


def before_exit_flush(hook: Callable[[str], None]) -> None:
    """Call ``hook(reason)`` before the exit and SIGTERM flushes (once per function); it must not raise."""
    if all(hook is not h for h in _BEFORE_EXIT):
        _BEFORE_EXIT.append(hook)


def _before_exit(reason: str) -> None:
    for hook in list(_BEFORE_EXIT):
        try:
            hook(reason)
        except Exception:
            _log.debug("tempotrace: a before-exit hook failed", exc_info=True)


def _flush_at_exit() -> None:
    _before_exit("exit")
    flush_all(EXIT_FLUSH_TIMEOUT_S)


class _Anchor:
    """Lives as long as the module: multiprocessing keys its after-fork callbacks by a live object."""


_MP_ANCHOR = _Anchor()


def _in_multiprocessing_child(_anchor: object) -> None:
    # Runs in a multiprocessing child after fork, once multiprocessing has
    # cleared the finalizers it inherited; the child will end in os._exit.
    import multiprocessing.util as mp_util

    mp_util.Finalize(None, _flush_at_exit, exitpriority=_MP_EXIT_PRIORITY)


def _on_sigterm_then(previous: Any) -> Any:
    """Our SIGTERM handler: flush (bounded) on a helper thread, then the ``previous`` handler or the default action.

    The flush never runs on the interrupted thread: that thread may hold any
    lock the flush needs (a ledger's, a queue's, one it was just acquiring),
    and waiting for it there would wait forever. The handler waits for the
    helper at most EXIT_FLUSH_TIMEOUT_S, then terminates whatever the helper
    is stuck on (spec/reliability.md §5).
    """
    flushing: threading.Thread | None = None  # the helper of the SIGTERM being handled

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        nonlocal flushing
        if flushing is not None:
            # Another SIGTERM while the first one's flush runs (Pool.terminate
            # may send several): the first one finishes, then terminates.
            return
        deadline = time.monotonic() + EXIT_FLUSH_TIMEOUT_S
        me = threading.get_ident()
        inside_export = _holds_flush_lock(me)
        # The signal interrupted this thread inside one of our exports or
        # flushes: the helper needs what this thread holds, so this thread
        # must go on and release it; the rest happens then (_deferred). With
        # no handler to chain to, the helper itself ends the process once it
        # has flushed, so an export that never ends cannot keep it alive.
        helper_terminates = inside_export and previous is None
        if helper_terminates:
            signal.signal(signum, signal.SIG_DFL)  # raise_signal on the helper then kills, as the default does

        def flush() -> None:
            _before_exit("sigterm")
            flush_all(max(0.0, deadline - time.monotonic()))
            if helper_terminates:
                signal.raise_signal(signum)

        flushing = _start_daemon(flush, "tempotrace-sigterm-flush")
        if flushing is None:  # no thread can start now: flush here, bounded between batches only
            _before_exit("sigterm")
            flush_all(EXIT_FLUSH_TIMEOUT_S)
        if inside_export:
            _deferred.append((me, lambda: finish(signum, frame, deadline)))
            return
        finish(signum, frame, deadline)

    def finish(signum: int, frame: FrameType | None, deadline: float) -> None:
        nonlocal flushing
        if flushing is not None:
            flushing.join(max(0.0, deadline - time.monotonic()))
        flushing = None
        if previous is not None:
            previous(signum, frame)
            return
        # There was no handler: terminate exactly as the default action would
        # (exit status "killed by SIGTERM", what supervisors expect).
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    on_sigterm.tempotrace_flush = True  # type: ignore[attr-defined]
    return on_sigterm


_installed = False
_install_lock = threading.Lock()


def install_exit_flush() -> str:
    """Install the atexit, multiprocessing and SIGTERM flushes (once); returns what was done with SIGTERM.

    SIGTERM: ``"installed"`` (there was no handler), ``"chained"`` (ours runs,
    then the user's Python handler), ``"kept"`` (ignored, or a handler set
    from C: not ours to wrap), ``"already"``, or ``"not main thread"``
    (Python handlers can only be set there; atexit still flushes).
    """
    global _installed
    with _install_lock:
        if not _installed:
            _installed = True
            atexit.register(_flush_at_exit)
            try:
                import multiprocessing.util as mp_util

                mp_util.register_after_fork(_MP_ANCHOR, _in_multiprocessing_child)
            except ImportError:  # a build without multiprocessing
                pass
    return _install_sigterm()


def _install_sigterm() -> str:
    if threading.current_thread() is not threading.main_thread():
        return "not main thread"
    current = signal.getsignal(signal.SIGTERM)
    if getattr(current, "tempotrace_flush", False):
        return "already"
    if current is None or current == signal.SIG_IGN:
        return "kept"
    previous = None if current == signal.SIG_DFL else current
    signal.signal(signal.SIGTERM, _on_sigterm_then(previous))
    return "installed" if previous is None else "chained"
