"""``tempotrace demo``: a traced multi-process training step with skewed clocks, end to end."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import EXIT_CHECK_FAILED, EXIT_CODES_HELP, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, fail

__all__ = ["add_demo_command"]

EPILOG = f"""What it does: starts the ranks as separate processes on localhost, each with a
simulated clock (sim:ptp, sim:ntp, sim:liar: the real clock plus a known error),
instrumented only with configure(), @traced/span() and OTEL_PROPAGATORS=
tracecontext,baggage,tempotrace. Each iteration runs a ring all-reduce, a
pipeline activation chain and a barrier over HTTP, every hop carrying tt-ext.
Then it analyses the spans and prints what a plain tracer gets wrong, how
TempoTrace decided each known edge, and which clock lied.

examples:
  tempotrace demo                         # 4 honest ranks + 1 liar, 3 iterations
  tempotrace demo --ranks 6 --iterations 10 --out /tmp/tt-demo
  tempotrace demo --no-liar               # every clock keeps its promise: 0 wrong decisions

{EXIT_CODES_HELP}
  (for the demo, 1 means one of its printed checks failed)"""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _duration_ns(text: str) -> float:
    units = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
    for suffix, scale in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * scale
            except ValueError:
                break
    raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 3ms, 500us or 50000ns")


def liar_claim_ns() -> float:
    """The bound the demo's liar claims in every tt-ext (its profile's); an offset within it is no lie."""
    from ..clocks.simulated import PROFILES

    return PROFILES["liar"].bound_ns


def _file_in_the_way(out: Path) -> Path | None:
    """The existing non-folder at ``out`` or above it that would stop the demo making its folder."""
    for path in (out, *out.parents):
        if path.exists():
            return None if path.is_dir() else path
    return None


def run_demo_command(args: argparse.Namespace) -> int:
    # Imported here: the demo pulls in OpenTelemetry and the analysis, which
    # `tempotrace decode` has no need to load.
    from ..demo.coordinator import DemoConfig, run_demo
    from ..demo.processes import WorkerError
    from ..errors import TempoTraceError

    if args.ranks < 2:
        return fail("demo", "--ranks: the demo needs at least 2 honest ranks", EXIT_USAGE)
    claim = liar_claim_ns()
    if not args.no_liar and args.liar_offset is not None and abs(args.liar_offset) <= claim:
        return fail(
            "demo",
            f"--liar-offset {args.liar_offset:g} ns: within the {claim:g} ns the liar claims, so it would keep "
            f"its promise and be no liar; give more than {claim:g} ns (e.g. 10ms)",
            EXIT_USAGE,
        )
    occupied = _file_in_the_way(args.out)
    if occupied is not None:
        where = "" if occupied == args.out else f"{occupied} "
        return fail("demo", f"--out {args.out}: {where}is a file, not a folder", EXIT_USAGE)
    config = DemoConfig(
        ranks=args.ranks,
        iterations=args.iterations,
        out=args.out,
        liar=not args.no_liar,
        liar_offset_ns=args.liar_offset,
        seed=args.seed,
    )
    try:
        result = run_demo(config)
    except WorkerError as err:
        return fail("demo", f"a worker failed (all workers stopped): {err}", EXIT_RUNTIME)
    except OSError as err:
        return fail("demo", f"{err}", EXIT_RUNTIME)
    except (TempoTraceError, ValueError) as err:
        # The workload ran, but its trace could not be analysed (e.g. the workers
        # flushed nothing): a runtime failure of the demo, not bad user input.
        return fail("demo", f"the analysis of the demo's trace failed: {err}", EXIT_RUNTIME)
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


def add_demo_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run a traced multi-process training step with skewed clocks and analyse it",
        description="A distributed training step traced across processes whose clocks disagree: what a plain "
        "tracer shows, and what TempoTrace decides.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--ranks", type=_positive, default=4, help="honest worker processes (default 4)")
    parser.add_argument("--iterations", type=_positive, default=3, help="training steps to run (default 3)")
    parser.add_argument(
        "--out", type=Path, default=Path("tempotrace-demo-out"), help="output folder (default ./tempotrace-demo-out)"
    )
    parser.add_argument("--no-liar", action="store_true", help="leave out the rank whose clock lies")
    parser.add_argument(
        "--liar-offset",
        type=_duration_ns,
        metavar="DURATION",
        help="how far off the liar is (default 10ms); more than the 220 ns it claims, and below a localhost "
        "hop's latency nobody can catch it",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed for the simulated clocks' noise (default 1)")
    parser.set_defaults(func=run_demo_command)
