"""The ``tempotrace`` command line: one sub-command per module of this package."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from ._common import EXIT_CODES_HELP, EXIT_RUNTIME, EXIT_USAGE, fail, shown_log_records
from .analyze import add_analyze_command
from .clock import add_clock_command
from .codec import add_decode_command, add_encode_command
from .convert import add_convert_command
from .demo import add_demo_command
from .simulate import add_simulate_command

__all__ = ["build_parser", "main"]

EPILOG = f"""examples:
  tempotrace clock                         # every clock source, the one 'auto' picks, a span's fields now
  tempotrace clock --require OK --max-uncertainty 1000   # pre-flight gate for a training job
  tempotrace decode <71-char tt-ext value> # inspect a header
  tempotrace demo                          # 5 processes (4 honest ranks + a liar), skewed clocks, analysed
  tempotrace analyze trace.jsonl --html out.html
  tempotrace convert trace.jsonl --parquet trace.parquet   # a span table for SQL engines (and analyze)

{EXIT_CODES_HELP}"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tempotrace",
        description="TempoTrace: trace context whose timestamps say how far they can be trusted.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tempotrace {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_clock_command(subparsers)
    add_decode_command(subparsers)
    add_encode_command(subparsers)
    add_analyze_command(subparsers)
    add_convert_command(subparsers)
    add_simulate_command(subparsers)
    add_demo_command(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tempotrace``; return the exit code (see ``tempotrace --help``)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, usage errors
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        with shown_log_records():
            code: int = args.func(args)
    except KeyboardInterrupt:
        return fail(args.command, "interrupted", 130)
    except BrokenPipeError:  # `tempotrace ... | head`
        return EXIT_RUNTIME
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
