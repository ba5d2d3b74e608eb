"""``tempotrace convert``: OTLP JSON lines (and span tables) -> one Parquet span table (spec/parquet.md §5.2)."""

from __future__ import annotations

import argparse
import os
import sys

from .._terminal_text import MESSAGE_LIMIT, shown
from ..analysis.inputs import DEFAULT_MAX_LINE, TraceFileError, TraceIOError, expand
from ..analysis.progress import Progress
from ._common import EXIT_CODES_HELP, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, fail

__all__ = ["add_convert_command", "run_convert"]

#: parquet_write.ROW_GROUP_ROWS, without importing pyarrow to build the parser
DEFAULT_ROW_GROUP = 1 << 16

EPILOG = f"""inputs: as for 'tempotrace analyze': files, directories (every *.jsonl / *.json / *.parquet file under
them, an exporter's parts in order), glob patterns, or '-' for stdin. Several inputs are read side by
side, as the analysis reads them, and written in that order.

The output holds one row per span, a typed column for every tempotrace.* value (the stamps text
decoded), the OTLP fields and the Resource (spec/parquet.md). Lines that cannot be read are counted
as 'analyze' counts them, and the count travels in the file: 'tempotrace analyze OUT.parquet' reports
what 'tempotrace analyze IN...' reports. Needs pyarrow (pip install 'tempotrace-sdk[analysis]').

examples:
  tempotrace convert trace.jsonl --parquet trace.parquet
  tempotrace convert "$TEMPOTRACE_EXPORT_DIR" --parquet run.parquet
  tempotrace convert tempotrace-spans.parquet.d --parquet run.parquet   # an exporter's parts, compacted

{EXIT_CODES_HELP}"""


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {value})")
    return value


def add_convert_command(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p: argparse.ArgumentParser = subparsers.add_parser(
        "convert",
        help="write a trace as a Parquet span table (one row per span, typed columns)",
        description="Read OTLP JSON lines (or span tables) and write one Parquet span table: one row per span, "
        "typed columns for the OTLP fields, the Resource and every tempotrace.* value, the stamps text decoded.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="trace file, directory, glob, or '-' for stdin")
    p.add_argument("--parquet", required=True, metavar="OUT.parquet", help="the span table to write (replaced)")
    p.add_argument("--strict", action="store_true", help="stop at the first bad line (exit 2), writing nothing")
    p.add_argument("--max-line-mb", type=_at_least_one, default=DEFAULT_MAX_LINE >> 20, metavar="MB",
                   help=f"longest line read; longer ones are skipped (default {DEFAULT_MAX_LINE >> 20})")
    p.add_argument("--row-group-spans", type=_at_least_one, default=DEFAULT_ROW_GROUP, metavar="N",
                   help=f"spans per row group (memory: one row group; default {DEFAULT_ROW_GROUP:,})")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    p.set_defaults(func=run_convert)
    return p


def run_convert(args: argparse.Namespace) -> int:
    try:
        from ..analysis.parquet_convert import convert
        from ..analysis.text import warnings
    except ImportError as err:
        return fail("convert", f"needs pyarrow: pip install 'tempotrace-sdk[analysis]' ({shown(err, MESSAGE_LIMIT)})",
                    EXIT_USAGE)
    try:
        sources = expand(args.inputs)
        total = sum(s.size or 0 for s in sources) if all(s.size is not None for s in sources) else None
        progress = Progress.for_stream(sys.stderr, total, args.quiet)
        done = convert(args.inputs, args.parquet, strict=args.strict, max_line=args.max_line_mb << 20,
                       row_group_rows=args.row_group_spans, progress=progress)
    except TraceIOError as err:
        return fail("convert", shown(err, MESSAGE_LIMIT), EXIT_RUNTIME)
    except TraceFileError as err:
        return fail("convert", shown(err, MESSAGE_LIMIT), EXIT_USAGE)
    except OSError as err:
        return fail("convert", f"cannot write {shown(args.parquet, MESSAGE_LIMIT)}: {shown(err, MESSAGE_LIMIT)}",
                    EXIT_RUNTIME)
    size = os.path.getsize(args.parquet)
    ratio = f", {size / total:.3f}x the input's {total:,} bytes" if total else ""
    print(f"wrote {shown(args.parquet, MESSAGE_LIMIT)}: {done.rows:,} spans from {done.trace_lines:,} trace lines, "
          f"{size:,} bytes{ratio}")
    for warning in warnings(done.report):
        fail("convert", f"warning: {warning}", EXIT_OK)
    return EXIT_OK
