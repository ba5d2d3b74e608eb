"""The ``tempotrace`` command line: one sub-command per module of this package."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence

from .. import __version__
from ._common import EXIT_CODES_HELP, EXIT_RUNTIME, EXIT_USAGE, fail
from .codec import add_decode_command, add_encode_command

__all__ = ["build_parser", "main"]

EPILOG = f"""examples:
  tempotrace clock                         # every clock source, the one 'auto' picks, a span's fields now
  tempotrace clock --require OK --max-uncertainty 1000   # pre-flight gate for a training job
  tempotrace decode <71-char tt-ext value> # inspect a header
  tempotrace demo                          # 4 processes, skewed clocks, traced and analysed
  tempotrace analyze trace.jsonl --html out.html

{EXIT_CODES_HELP}"""


def _add_optional(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], module: str, adder: str) -> None:
    # A layer that has not landed (or was left out of an install) simply has
    # no sub-command; a layer that is present but broken must fail loudly,
    # so only a *missing* module is skipped.
    if importlib.util.find_spec(module) is None:
        return
    getattr(importlib.import_module(module), adder)(subparsers)


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tempotrace",
        description="TempoTrace: trace context whose timestamps say how far they can be trusted.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tempotrace {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    # The clock layer's survey/preflight land separately from the codec.
    if all(
        hasattr(importlib.import_module("tempotrace_sdk.clocks"), n) for n in ("preflight", "survey", "select_clock")
    ):
        _add_optional(subparsers, "tempotrace_sdk.cli.clock", "add_clock_command")
    add_decode_command(subparsers)
    add_encode_command(subparsers)
    if _module_exists("tempotrace_sdk.analysis.cli"):
        analysis = importlib.import_module("tempotrace_sdk.analysis.cli")
        analysis.add_analyze_command(subparsers)
        analysis.add_simulate_command(subparsers)
    if _module_exists("tempotrace_sdk.otel"):
        _add_optional(subparsers, "tempotrace_sdk.cli.demo", "add_demo_command")
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
        code: int = args.func(args)
    except KeyboardInterrupt:
        return fail(args.command, "interrupted", 130)
    except BrokenPipeError:  # `tempotrace ... | head`
        return EXIT_RUNTIME
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
