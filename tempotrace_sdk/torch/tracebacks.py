"""Keep the tracer out of the program's tracebacks (spec/torch.md §1.1).

An exception torch raises inside a traced op passes through our wrapper
frames on its way up; printed, they make the tracer look guilty of a failure
that is torch's (issue 21: a failed all-reduce "in" ``tempotrace_sdk/torch``).
CPython's import machinery does the same for its own frames
(``_call_with_frames_removed``); here: the outermost frame of ours that an
exception passes through calls ``hide_our_frames(err)`` and re-raises with a
bare ``raise``, which on Python 3.11+ adds no frame, so the traceback is the
one the untraced program prints. (On 3.10 a bare ``raise`` restores the
traceback it caught, so our frames stay there.)

Only an exception that came from elsewhere loses our frames: one raised by
our own code (its innermost frame is ours) keeps them, so a bug of ours still
shows where it is. A function implemented in C (``Work.wait``) leaves no frame
of its own, so what it raises ends in the frame of ours that called it: that
caller says so (``from_call=True``).
"""

from __future__ import annotations

from types import TracebackType

__all__ = ["hide_our_frames", "ours"]

#: Modules whose frames are hidden: the torch integration's (``tempotrace_sdk.torch.*``).
_PACKAGE = __name__.rpartition(".")[0] + "."


def ours(tb: TracebackType) -> bool:
    """The traceback entry is a frame of one of our modules."""
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith(_PACKAGE)


def hide_our_frames(err: BaseException, *, from_call: bool = False) -> None:
    """Drop our frames from ``err``'s traceback, unless ``err`` was raised in one of them (``from_call``: the
    caller knows it came out of the torch function it called). Never raises."""
    try:
        tb = err.__traceback__
        entries: list[TracebackType] = []
        while tb is not None:
            entries.append(tb)
            tb = tb.tb_next
        if not entries or (ours(entries[-1]) and not from_call) or not any(ours(t) for t in entries):
            return
        rebuilt: TracebackType | None = None
        for t in reversed(entries):
            if not ours(t):
                rebuilt = TracebackType(rebuilt, t.tb_frame, t.tb_lasti, t.tb_lineno)
        err.__traceback__ = rebuilt
    except Exception:  # a traceback we cannot rebuild: it keeps our frames, the program loses nothing
        pass
