"""What every ``tempotrace`` command shares: exit codes, and error and log output on stderr.

Both show their lines through ``_terminal_text.shown_lines``: a message may quote the input (a path, a
clock spec, a worker's log), and none of it may drive the terminal (spec/reliability.md §7).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from .._terminal_text import shown_lines

__all__ = [
    "EXIT_CHECK_FAILED", "EXIT_CODES_HELP", "EXIT_OK", "EXIT_RUNTIME", "EXIT_USAGE", "fail", "shown_log_records",
]

#: Success.
EXIT_OK = 0
#: The command ran but a check failed (clock gate not met, demo numbers wrong).
EXIT_CHECK_FAILED = 1
#: Usage error or bad input (unknown option, bad header, missing file,
#: unknown clock source). argparse uses 2 for usage errors too.
EXIT_USAGE = 2
#: A runtime failure (a worker died, a port could not be bound, I/O failed).
EXIT_RUNTIME = 3

EXIT_CODES_HELP = """exit codes:
  0  success
  1  a check failed (clock --require not met; demo found a wrong decision)
  2  usage error or bad input (bad header, missing file, unknown clock source)
  3  runtime failure (a worker died, I/O error)"""


def fail(command: str, message: str, code: int, stream: TextIO | None = None) -> int:
    """Print ``tempotrace COMMAND: message`` to stderr, each line shown (``shown_lines``); return ``code``."""
    print(f"tempotrace {command}: {shown_lines(message)}", file=stream or sys.stderr)
    return code


class _ShownOnStderr(logging.Handler):
    """What logging's last-resort handler prints (WARNING and above, the bare message, to the stderr of
    the moment), each line shown: a library warning may quote a path from the environment."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(shown_lines(self.format(record)) + "\n")
        except Exception:  # as logging's own handlers do: a log line never stops the command
            self.handleError(record)


@contextmanager
def shown_log_records() -> Iterator[None]:
    """While a command runs, log records go through ``_ShownOnStderr`` instead of logging's last resort,
    unless the process configured logging itself (a handler on the root logger decides how they look)."""
    root = logging.getLogger()
    if root.handlers:
        yield
        return
    handler = _ShownOnStderr()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
