"""``tempotrace analyze``: decide every known causal edge of a trace and name lying clocks
(spec/analysis.md §5, §6)."""

from __future__ import annotations

import argparse
import json
import sys

from .._terminal_text import MESSAGE_LIMIT, shown
from ..analysis.analyzer import DEFAULT_DEDUP, DEFAULT_KEEP, DEFAULT_WINDOW
from ..analysis.api import ENGINES, analyze
from ..analysis.engine import gc_paused
from ..analysis.html_model import HTML_MAX_SPANS
from ..analysis.inputs import DEFAULT_MAX_LINE, Source, TraceFileError, TraceIOError, expand
from ..analysis.progress import Progress
from ..analysis.text import warnings
from ..analysis.text_torch import job_warnings
from ..analysis.topology import TopologyError
from ._common import EXIT_CHECK_FAILED, EXIT_CODES_HELP, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, fail

__all__ = ["add_analyze_command", "run_analyze"]

EPILOG = f"""inputs: files, directories (every *.jsonl / *.json / *.parquet file under them), glob patterns
(quoted: 'export/spans-*.jsonl'), or '-' for stdin. Several inputs are read side by side
as one trace. The format is OTLP JSON lines as TempoTrace's exporter and the OpenTelemetry
Collector's file exporter write them (ids hex or base64, 64-bit integers as strings or numbers),
or span tables: Parquet that 'tempotrace convert' or TEMPOTRACE_EXPORT_FORMAT=parquet wrote
(spec/parquet.md; needs pyarrow), a directory of an exporter's parts included.

A line that cannot be read (a writer killed mid-line leaves one) is skipped and counted with
its path:line, as is a span whose tempotrace.* values break a rule; --strict stops at the
first instead. Spans an exporter says it dropped are counted and warned about.

examples:
  tempotrace analyze trace.jsonl --html out.html
  tempotrace analyze "$TEMPOTRACE_EXPORT_DIR"            # one spans-<pid>.jsonl per process
  tempotrace analyze collector/traces.json --json > report.json
  tempotrace analyze big/ --engine dask --scheduler tcp://scheduler:8786

{EXIT_CODES_HELP}
  (for analyze, 1 means --fail-on-wrong found a wrong decision)"""


def _at_least(lo: int) -> type[int] | object:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo} (got {value})")
        return value

    return parse


def add_analyze_command(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p: argparse.ArgumentParser = subparsers.add_parser(
        "analyze",
        help="order a trace's events with uncertainty, Lamport and SVC; find lying clocks",
        description="Read OTLP JSON lines (or span tables), decide every known causal edge (parent -> child, "
        "send -> receive) by physics / Lamport / SVC, count naive inversions, and attribute clock faults to clocks "
        "(host and rank).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="trace file, directory, glob, or '-' for stdin")
    p.add_argument("--topology", metavar="FILE", help="host -> rack map and rack-pair extra error (JSON, spec §3)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    p.add_argument("--perfetto", metavar="OUT.json", help="write a Chrome trace-event file for ui.perfetto.dev")
    p.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML timeline")
    p.add_argument("--strict", action="store_true", help="stop at the first bad line or span (exit 2)")
    p.add_argument("--window", type=_at_least(1), default=DEFAULT_WINDOW, metavar="SPANS",  # type: ignore[arg-type]
                   help=f"input positions a trace's spans are gathered over before it is analysed "
                        f"(memory; default {DEFAULT_WINDOW:,})")
    p.add_argument("--dedup", type=_at_least(0), default=DEFAULT_DEDUP, metavar="SPANS",  # type: ignore[arg-type]
                   help=f"how far back (input positions) a span delivered twice is still recognised "
                        f"(default {DEFAULT_DEDUP:,})")
    p.add_argument("--keep", type=_at_least(0), default=None, metavar="SPANS",  # type: ignore[arg-type]
                   help=f"spans (with their hops and collectives) kept for --perfetto/--html (default "
                        f"{DEFAULT_KEEP:,}), and listed by --json when given")
    p.add_argument("--html-max-spans", type=_at_least(1), default=None, metavar="N",  # type: ignore[arg-type]
                   help=f"spans the --html timeline draws at most (default {HTML_MAX_SPANS:,}; keeps at least as "
                        "many: see --keep); the page says how many it left out")
    p.add_argument("--max-line-mb", type=_at_least(1), default=DEFAULT_MAX_LINE >> 20,  # type: ignore[arg-type]
                   metavar="MB", help=f"longest line read; longer ones are skipped (default {DEFAULT_MAX_LINE >> 20})")
    p.add_argument("--jobs", type=_at_least(1), default=1, metavar="N",  # type: ignore[arg-type]
                   help="analyse with N local processes, split by trace (same report; default 1)")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="auto (default): columnar where pyarrow and the native columns module are installed, "
                        "else reference; reference: the per-span engine in local processes ('local' is its "
                        "former name); columnar: local processes decoding lines and span tables as columns (the "
                        "same report); dask: the columnar decode over a Dask cluster (pip install "
                        "'tempotrace-sdk[dask]')")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler to use with --engine dask (default: a local cluster of --jobs workers)")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    p.add_argument("--fail-on-wrong", action="store_true", help="exit 1 when any confident decision is wrong")
    p.set_defaults(func=run_analyze)
    return p


def _total_bytes(sources: list[Source]) -> int | None:
    sizes = [s.size for s in sources]
    return None if any(size is None for size in sizes) else sum(size or 0 for size in sizes)


def _keep(args: argparse.Namespace) -> int:
    """How many spans the analysis keeps: the drawings need them; --json lists them only when asked,
    since a cluster's report would otherwise carry 20,000 spans nobody requested."""
    if args.perfetto or args.html:
        keep = DEFAULT_KEEP if args.keep is None else int(args.keep)
        return max(keep, int(args.html_max_spans)) if args.html and args.html_max_spans else keep
    return int(args.keep) if (args.json and args.keep is not None) else 0


def run_analyze(args: argparse.Namespace) -> int:
    if args.scheduler and args.engine != "dask":
        return fail("analyze", "--scheduler needs --engine dask", EXIT_USAGE)
    keep = _keep(args)
    # Each error below names a path or quotes the input: shown as one line, escaped and cut (_terminal_text).
    try:
        sources = expand(args.inputs)
        progress = Progress.for_stream(sys.stderr, _total_bytes(sources), args.quiet or args.json)
        with gc_paused():
            report = analyze(args.inputs, args.topology, keep=keep, window_spans=args.window, dedup_spans=args.dedup,
                             strict=args.strict, max_line=args.max_line_mb << 20, jobs=args.jobs, engine=args.engine,
                             scheduler=args.scheduler, progress=progress)
    except TraceIOError as err:
        return fail("analyze", shown(err, MESSAGE_LIMIT), EXIT_RUNTIME)
    except (TraceFileError, TopologyError) as err:
        return fail("analyze", shown(err, MESSAGE_LIMIT), EXIT_USAGE)
    except ImportError as err:  # an engine's optional dependencies (the reference needs none)
        extra = "dask: pip install 'tempotrace-sdk[dask]'" if args.engine == "dask" else \
            "pyarrow and numpy: pip install 'tempotrace-sdk[analysis]'"
        engine = "the columnar engine" if args.engine == "auto" else f"--engine {args.engine}"
        return fail("analyze", f"{engine} needs {extra} ({shown(err, MESSAGE_LIMIT)})", EXIT_USAGE)
    except MemoryError:
        return fail("analyze", "out of memory: lower --window / --dedup, or split the work (--jobs, --engine dask)",
                    EXIT_RUNTIME)
    except OSError as err:  # e.g. a Dask scheduler that cannot be reached
        return fail("analyze", f"{type(err).__name__}: {shown(err, MESSAGE_LIMIT)}", EXIT_RUNTIME)
    from ..analysis.writers import write_html, write_perfetto

    try:
        if args.perfetto:
            write_perfetto(report, args.perfetto)
        if args.html:
            write_html(report, args.html, args.html_max_spans)
    except OSError as err:
        return fail("analyze", f"cannot write output: {shown(err, MESSAGE_LIMIT)}", EXIT_RUNTIME)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        for warning in warnings(report):  # the text report holds them; JSON readers get them on stderr
            fail("analyze", f"warning: {warning}", EXIT_OK)
    else:
        print(report.to_text())  # its values shown escaped where it puts them in (analysis/text.py)
        for warning in job_warnings(report):  # runs mixed in one input: on the terminal even when stdout is not
            fail("analyze", f"warning: {warning}", EXIT_OK)
        for label, path in (("perfetto", args.perfetto), ("html", args.html)):
            if path:
                print(f"  wrote {label}: {shown(path, MESSAGE_LIMIT)}")
    if args.fail_on_wrong and sum(report.edges.wrong.values()):
        return EXIT_CHECK_FAILED
    return EXIT_OK
