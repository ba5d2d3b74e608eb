"""``tempotrace clock``: what the clock sources say (like ``chronyc tracking``), and the pre-flight gate."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ..clocks import preflight, select_clock, survey
from ..clocks.base import ClockSource, Timestamp
from ..errors import ClockError
from ..wire import ClockQuality
from ._common import EXIT_CHECK_FAILED, EXIT_CODES_HELP, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, fail

__all__ = ["add_clock_command"]

EPILOG = f"""Sources: auto (PHC when usable, else CPU), cpu, phc:/dev/ptp0, phc:eth0,
sim:PROFILE[,key=value...] (simulated, for tests and demos: ptp, ntp, liar, unsynced).
The source comes from --clock, else $TEMPOTRACE_CLOCK, else auto.

examples:
  tempotrace clock                                   # every source, the pick, a span's fields now
  tempotrace clock --json
  tempotrace clock --require OK --max-uncertainty 1000 && torchrun train.py   # pre-flight gate
  tempotrace clock --clock sim:ptp --require OK      # the gate against a simulated PTP clock

{EXIT_CODES_HELP}
  (with --require: 1 means the clock does not meet the requirement; the reason is printed)"""


def _timestamp_dict(ts: Timestamp) -> dict[str, Any]:
    return {
        "ptp_ns": str(ts.ptp_ns),
        "ts_source": ts.ts_source.name,
        "clk_quality": ts.clk_quality.name,
        "uncertainty_ns": ts.uncertainty_ns,
        "saturated": ts.uncertainty_ns == 0xFFFF,
    }


def _render(value: Any, indent: int = 0) -> list[str]:
    """A nested dict/list as aligned ``key : value`` lines, chronyc style."""
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        width = max((len(str(k)) for k in value), default=0)
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:")
                lines.extend(_render(item, indent + 1))
            else:
                lines.append(f"{pad}{key!s:<{width}} : {_scalar(item)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                sub = _render(item, indent + 1)
                lines.append(f"{pad}- {sub[0].strip()}" if sub else f"{pad}-")
                lines.extend(sub[1:])
            else:
                lines.append(f"{pad}- {_scalar(item)}")
    else:
        lines.append(f"{pad}{_scalar(value)}")
    return lines


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        return "(none)"
    return str(value)


def _select(spec: str | None) -> ClockSource:
    return select_clock(spec) if spec else select_clock()


def run_clock(args: argparse.Namespace) -> int:
    if args.max_uncertainty is not None and args.require is None:
        return fail("clock", "--max-uncertainty needs --require QUALITY", EXIT_USAGE)
    spec = args.clock or os.environ.get("TEMPOTRACE_CLOCK") or None
    try:
        clock = _select(spec)
    except ClockError as err:
        return fail("clock", f"cannot use clock source {spec or 'auto'!r}: {err.strerror or err}", EXIT_USAGE)
    except ValueError as err:
        return fail("clock", f"unknown clock source {spec!r}: {err}", EXIT_USAGE)
    if args.require is not None:
        return _gate(args, clock)
    try:
        report: dict[str, Any] = {
            "sources": survey(),
            "selected": {"spec": spec or "auto", "name": clock.name, "describe": clock.describe()},
            "span_now": _timestamp_dict(clock.now()),
        }
    except ClockError as err:
        return fail("clock", f"reading {clock.name}: {err}", EXIT_RUNTIME)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return EXIT_OK
    print(f"Selected source   : {clock.name}  (from {'--clock/$TEMPOTRACE_CLOCK' if spec else 'auto'})")
    print("A span started now would carry:")
    print("\n".join(_render(report["span_now"], 1)))
    if spec:  # auto's pick is already among "All sources"
        print("Selected source details:")
        print("\n".join(_render(report["selected"]["describe"], 1)))
    print("All sources:")
    print("\n".join(_render(report["sources"], 1)))
    return EXIT_OK


def _gate(args: argparse.Namespace, clock: ClockSource) -> int:
    try:
        result = preflight(args.require, max_uncertainty_ns=args.max_uncertainty, clock=clock)
    except ClockError as err:
        return fail("clock", f"reading {clock.name}: {err}", EXIT_RUNTIME)
    except ValueError as err:  # --max-uncertainty out of range
        return fail("clock", str(err), EXIT_USAGE)
    verdict = {
        "ok": bool(result.ok),
        "reason": result.reason,
        "source": result.source,
        "require": args.require.name,
        "max_uncertainty_ns": args.max_uncertainty,
        "timestamp": _timestamp_dict(result.timestamp) if result.timestamp is not None else None,
    }
    if args.json:
        print(json.dumps(verdict, indent=2, default=str))
    elif result.ok:
        print(f"clock OK for the job: {result.reason}")
    if not result.ok:
        return fail("clock", f"pre-flight gate failed: {result.reason}", EXIT_CHECK_FAILED)
    return EXIT_OK


def _quality_arg(text: str) -> ClockQuality:
    try:
        return ClockQuality[text.upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r}: must be OK, DEGRADED or UNKNOWN") from None


def add_clock_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "clock",
        help="show clock sources and their honesty; --require makes it a pre-flight gate",
        description="Show every clock source, the one that would be picked, and the tt-ext fields a span "
        "would get right now. With --require it is a pre-flight gate: exit 1 with the reason when "
        "the clock does not meet the requirement.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--clock", metavar="SPEC", help="source to use instead of $TEMPOTRACE_CLOCK / auto")
    parser.add_argument(
        "--require",
        type=_quality_arg,
        metavar="QUALITY",
        help="gate: the clock must be at least this good (OK better than DEGRADED better than UNKNOWN)",
    )
    parser.add_argument(
        "--max-uncertainty", type=int, metavar="NS", help="gate: the bound must also be at most NS nanoseconds"
    )
    parser.set_defaults(func=run_clock)
