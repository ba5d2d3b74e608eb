"""``tempotrace clock``: what the clock sources say (like ``chronyc tracking``), and the pre-flight gate.

Names and reasons come from outside (a device or interface name, chronyd's reference, a path from the
environment): each is shown escaped and cut (``_terminal_text.shown``, spec/reliability.md §7).
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import datetime, timezone
from typing import Any

from .._terminal_text import MESSAGE_LIMIT, shown
from ..clocks import preflight, select_clock, survey
from ..clocks.base import ClockSource, Timestamp
from ..errors import ClockError
from ..wire import ClockQuality
from ._common import EXIT_CHECK_FAILED, EXIT_CODES_HELP, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, fail

__all__ = ["add_clock_command"]

EPILOG = f"""Sources: auto (PHC when usable, else CPU), cpu, phc:/dev/ptp0, phc:eth0,
sim:PROFILE[,key=value...] (simulated, for tests and demos: ptp, ntp, liar, unsynced).
The source comes from --clock, else $TEMPOTRACE_CLOCK, else auto.

The CPU source's bound comes from the local chronyd when it is synchronised (shown as
`chronyc tracking` shows it; $TEMPOTRACE_CHRONY: auto, off, or chronyd's socket path),
else from the kernel's NTP state.

--require QUALITY passes when the clock is at least that good (OK better than DEGRADED).
UNKNOWN is refused: every clock meets it, so such a gate could never fail.

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
        keys = {key: shown(key) for key in value}
        width = max((len(k) for k in keys.values()), default=0)
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{keys[key]}:")
                lines.extend(_render(item, indent + 1))
            else:
                lines.append(f"{pad}{keys[key]:<{width}} : {_scalar(item)}")
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
    return shown(value, MESSAGE_LIMIT)


def _signed_word(value: float, positive: str, negative: str, unit: str, precision: int) -> str:
    return f"{abs(value):.{precision}f} {unit} {positive if value > 0 else negative}"


def chronyc_tracking_lines(chrony: dict[str, Any]) -> list[str]:
    """chronyd's tracking figures laid out as ``chronyc tracking`` prints them (chrony client.c), then our bound."""
    t = chrony.get("tracking")
    lines = [f"chronyd ({shown(chrony.get('socket'), MESSAGE_LIMIT)}):"]
    if t is None:
        return [*lines, f"  {'not used':<15} : {shown(chrony.get('reason'), MESSAGE_LIMIT)}"]
    ref_time = datetime.fromtimestamp(t["ref_time_unix_s"], tz=timezone.utc).strftime("%a %b %d %H:%M:%S %Y")
    rows = [
        ("Reference ID", f"{shown(t['reference_id'])} ({shown(t['reference'])})"),
        ("Stratum", str(t["stratum"])),
        ("Ref time (UTC)", ref_time),
        # chronyc: a positive correction means the system clock is slow of NTP time.
        ("System time", _signed_word(t["system_time_offset_s"], "slow", "fast", "seconds", 9) + " of NTP time"),
        ("Last offset", f"{t['last_offset_s']:+.9f} seconds"),
        ("RMS offset", f"{t['rms_offset_s']:.9f} seconds"),
        ("Frequency", _signed_word(t["frequency_ppm"], "fast", "slow", "ppm", 3)),
        ("Residual freq", f"{t['residual_freq_ppm']:+.3f} ppm"),
        ("Skew", f"{t['skew_ppm']:.3f} ppm"),
        ("Root delay", f"{t['root_delay_s']:.9f} seconds"),
        ("Root dispersion", f"{t['root_dispersion_s']:.9f} seconds"),
        ("Update interval", f"{t['update_interval_s']:.1f} seconds"),
        ("Leap status", shown(t["leap_status"])),
    ]
    lines += [f"  {name:<15} : {value}" for name, value in rows]
    used = f"{chrony['bound_ns']} ns ({chrony['status']})" if chrony.get("used") else "not used"
    lines += [f"  {'CPU bound':<15} : {used}", f"  {'why':<15} : {shown(chrony.get('reason'), MESSAGE_LIMIT)}"]
    return lines


def _chrony_block(describe: dict[str, Any]) -> list[str]:
    chrony = describe.get("chrony")
    if not isinstance(chrony, dict) or chrony.get("status") == "disabled":
        return []
    return chronyc_tracking_lines(chrony)


def _quoted(spec: str | None, limit: int = 80) -> str:
    """The spec for a message, quoted: escaped, and cut when hostile input made it long."""
    return f"'{shown(spec or 'auto', limit)}'"


def _select(spec: str | None) -> ClockSource:
    return select_clock(spec) if spec else select_clock()


def run_clock(args: argparse.Namespace) -> int:
    if args.max_uncertainty is not None and args.require is None:
        return fail("clock", "--max-uncertainty needs --require QUALITY", EXIT_USAGE)
    spec = args.clock or os.environ.get("TEMPOTRACE_CLOCK") or None
    try:
        clock = _select(spec)
    except ClockError as err:
        why = err.strerror or str(err)
        return fail("clock", f"cannot use clock source {_quoted(spec)}: {shown(why, 300)}", EXIT_USAGE)
    except ValueError as err:
        return fail("clock", f"unknown clock source {_quoted(spec)}: {shown(err, 300)}", EXIT_USAGE)
    if args.require is not None:
        return _gate(args, clock)
    try:
        report: dict[str, Any] = {
            "sources": survey(),
            "selected": {"spec": spec or "auto", "name": clock.name, "describe": clock.describe()},
            "span_now": _timestamp_dict(clock.now()),
        }
    except ClockError as err:
        return fail("clock", f"reading {shown(clock.name)}: {shown(err, MESSAGE_LIMIT)}", EXIT_RUNTIME)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return EXIT_OK
    print(f"Selected source   : {shown(clock.name)}  (from {'--clock/$TEMPOTRACE_CLOCK' if spec else 'auto'})")
    print("A span started now would carry:")
    print("\n".join(_render(report["span_now"], 1)))
    cpu_describe = report["selected"]["describe"] if clock.name == "cpu" else report["sources"].get("cpu", {})
    print("\n".join(_chrony_block(cpu_describe)))
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
        return fail("clock", f"reading {shown(clock.name)}: {shown(err, MESSAGE_LIMIT)}", EXIT_RUNTIME)
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
        print(f"clock OK for the job: {shown(result.reason, MESSAGE_LIMIT)}")
    if not result.ok:
        return fail("clock", f"pre-flight gate failed: {shown(result.reason, MESSAGE_LIMIT)}", EXIT_CHECK_FAILED)
    return EXIT_OK


def _quality_arg(text: str) -> ClockQuality:
    try:
        quality = ClockQuality[text.upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r}: must be OK or DEGRADED") from None
    if quality is ClockQuality.UNKNOWN:
        # Every clock is at least UNKNOWN: a gate that cannot fail would print "clock OK" for anything.
        raise argparse.ArgumentTypeError("UNKNOWN is met by every clock, so the gate could never fail: use OK/DEGRADED")
    return quality


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
        help="gate: the clock must be at least this good: OK, or DEGRADED (accepts OK too)",
    )
    parser.add_argument(
        "--max-uncertainty", type=int, metavar="NS", help="gate: the bound must also be at most NS nanoseconds"
    )
    parser.set_defaults(func=run_clock)
