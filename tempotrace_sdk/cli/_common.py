"""What every ``tempotrace`` command shares: exit codes and error output."""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["EXIT_CHECK_FAILED", "EXIT_CODES_HELP", "EXIT_OK", "EXIT_RUNTIME", "EXIT_USAGE", "fail"]

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
    """Print ``tempotrace COMMAND: message`` to stderr and return ``code``."""
    print(f"tempotrace {command}: {message}", file=stream or sys.stderr)
    return code
