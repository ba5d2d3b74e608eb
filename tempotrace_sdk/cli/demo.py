"""``tempotrace demo``: a traced torchrun training job (or, with ``--http``, an HTTP imitation) with skewed clocks;
with ``--hang``, a job in which one rank stops, and the hang report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import EXIT_CHECK_FAILED, EXIT_CODES_HELP, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, fail

__all__ = ["add_demo_command"]

EPILOG = f"""What it does: runs a real training job under torchrun, one CPU rank (gloo) per
clock: a small model trained with DDP (its gradient all-reduce traced through
tempotrace_sdk.torch.comm_hook), a pipeline stage chain over send/recv and a
barrier in every step. Each rank has a simulated clock (sim:ptp, sim:ntp,
sim:liar: the real clock plus a known error). Before training, check_clocks
measures every rank against rank 0 and names the clock that cannot be
reconciled with its claim. Then it analyses the spans and prints what a plain
tracer gets wrong, how TempoTrace decided each known edge, which clock lied
and who straggled. torch's CPU build must be installed (`make demo` does it).

--http runs the older imitation instead: one process per rank, a ring
all-reduce, a pipeline chain and a barrier as HTTP calls carrying tt-ext.

--hang runs a job that hangs: --ranks ranks (default 4) with the flight
recorder on (instrument(retain="ring", hang_timeout=--hang-timeout)) train
--steps steps of all_reduces and a barrier; then rank 2 stops before an
all_reduce the others enter. After --hang-timeout seconds every rank dumps its
ring; the demo stops the job, analyses the dumps and prints the hang report,
which names the rank and the collective it never entered.

examples:
  tempotrace demo                         # 4 honest ranks + 1 liar, 3 training steps
  tempotrace demo --ranks 6 --steps 10 --out /tmp/tt-demo
  tempotrace demo --no-liar               # every clock keeps its promise: 0 wrong decisions
  tempotrace demo --http                  # the same cast over HTTP, no torch needed
  tempotrace demo --hang                  # rank 2 stops; every rank dumps 3 s later; the hang report

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


def _torch_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def _seconds(text: str) -> float:
    try:
        value = float(text[:-1] if text.endswith("s") else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of seconds such as 3 or 0.5") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def _hang_usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the options of ``--hang`` (or with --hang-timeout without it), if anything."""
    from ..demo.hang_demo import HANG_TIMEOUT_LIMIT_S, STUCK_RANK

    if not args.hang:
        return "--hang-timeout: the option is for the hang demo (add --hang)" if args.hang_timeout is not None else None
    if args.http:
        return "--hang: the hang demo is a torchrun job; leave out --http"
    if args.liar_offset is not None:
        return "--liar-offset: the hang demo has no liar (every clock is honest)"
    if args.ranks <= STUCK_RANK:
        return f"--ranks: the hang demo needs at least {STUCK_RANK + 1} ranks (rank {STUCK_RANK} is the one that stops)"
    if args.carriage == "op":
        return ("--carriage op: a carried collective is not recorded in the flight-recorder ring (spec/torch.md "
                "§8.1), so no rank would dump the all_reduce it hangs in; use step or none with --hang")
    if args.hang_timeout is not None and args.hang_timeout >= HANG_TIMEOUT_LIMIT_S:
        return (f"--hang-timeout {args.hang_timeout:g}: the hang demo needs less than {HANG_TIMEOUT_LIMIT_S:g} s, "
                "so that every rank dumps and the demo stops the job before the process group's own timeout "
                "fails the collective")
    return None


def run_hang_command(args: argparse.Namespace) -> int:
    from ..demo.hang_demo import DEFAULT_HANG_TIMEOUT_S, HangConfig, run_hang_demo
    from ..demo.processes import WorkerError
    from ..errors import TempoTraceError

    config = HangConfig(
        ranks=args.ranks,
        steps=args.iterations,
        hang_timeout_s=DEFAULT_HANG_TIMEOUT_S if args.hang_timeout is None else args.hang_timeout,
        out=args.out,
        carriage=args.carriage or "step",
        seed=args.seed,
    )
    try:
        result = run_hang_demo(config)
    except WorkerError as err:  # only before the hang: a failure after it ends the wait, and the dumps are analysed
        return fail("demo", f"the training job failed before it hung (all stopped): {err}", EXIT_RUNTIME)
    except OSError as err:
        return fail("demo", f"{err}", EXIT_RUNTIME)
    except (TempoTraceError, ValueError) as err:
        return fail("demo", f"the analysis of the dumps failed: {err}", EXIT_RUNTIME)
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


def run_demo_command(args: argparse.Namespace) -> int:
    # Imported here: the demo pulls in OpenTelemetry and the analysis, which
    # `tempotrace decode` has no need to load.
    from ..demo.coordinator import DemoConfig, run_demo
    from ..demo.processes import WorkerError
    from ..errors import TempoTraceError

    if args.ranks < 2:
        return fail("demo", "--ranks: the demo needs at least 2 honest ranks", EXIT_USAGE)
    hang_error = _hang_usage_error(args)
    if hang_error is not None:
        return fail("demo", hang_error, EXIT_USAGE)
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
    if args.http and args.carriage is not None:
        return fail("demo", "--carriage: the HTTP imitation carries tt-ext in HTTP headers; the option is for the "
                    "torchrun job (leave out --http)", EXIT_USAGE)
    if not args.http and not _torch_installed():
        return fail(
            "demo",
            "the training job needs torch's CPU build: run `make demo` (it installs torch==2.13.0), or "
            "`pip install torch==2.13.0`; `tempotrace demo --http` runs without it",
            EXIT_RUNTIME,
        )
    if args.hang:
        return run_hang_command(args)
    config = DemoConfig(
        http=args.http,
        carriage=args.carriage or "step",
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
        what = "a worker failed (all workers stopped)" if args.http else "the training job failed (all stopped)"
        return fail("demo", f"{what}: {err}", EXIT_RUNTIME)
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
        help="run a traced torchrun training job whose ranks' clocks disagree, and analyse it",
        description="A distributed training job traced across ranks whose clocks disagree: what a plain "
        "tracer shows, and what TempoTrace decides.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--ranks", type=_positive, default=4, help="honest ranks (default 4; the liar is one more)")
    parser.add_argument(
        "--steps", "--iterations", dest="iterations", type=_positive, default=3, help="training steps (default 3)"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("tempotrace-demo-out"), help="output folder (default ./tempotrace-demo-out)"
    )
    parser.add_argument("--no-liar", action="store_true", help="leave out the rank whose clock lies")
    parser.add_argument(
        "--liar-offset",
        type=_duration_ns,
        metavar="DURATION",
        help="how far off the liar is (default 10ms); more than the 220 ns it claims, and below the latency "
        "of what it stamps (a localhost message, check_clocks' round trip) nobody can catch it",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed for the simulated clocks' noise (default 1)")
    parser.add_argument(
        "--carriage",
        choices=("none", "step", "step+p2p", "op"),
        help="how the ranks carry tt-ext records (tempotrace_sdk.torch.instrument; default step: one exchange per "
        "step, nothing added to a send; step+p2p: and a side message per send; op: an exchange after every "
        "collective too; none: spans only)",
    )
    parser.add_argument(
        "--http", action="store_true", help="run the HTTP imitation of a training step instead of torchrun"
    )
    parser.add_argument(
        "--hang", action="store_true",
        help="run a job in which rank 2 stops before an all_reduce, and print the hang report of its dumps",
    )
    parser.add_argument(
        "--hang-timeout", type=_seconds, metavar="SECONDS",
        help="with --hang: instrument(hang_timeout=...), how long an op may stay open before every rank dumps "
        "(default 3; it must leave every rank time to dump before the job's process group times out)",
    )
    parser.set_defaults(func=run_demo_command)
