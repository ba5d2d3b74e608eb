"""``tempotrace decode`` and ``tempotrace encode``: inspect and build tt-ext headers."""

from __future__ import annotations

import argparse
import errno
import json
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._bounded import InputRefused, read_regular_file
from .._terminal_text import shown
from ..clocks.leapseconds import tai_to_utc_ns, utc_to_tai_ns
from ..errors import HeaderError
from ..wire import HEADER_LEN, TEXT_LEN, TRACESTATE_KEY, ClockQuality, Sketch, TsSource, TTExt
from ._common import EXIT_CODES_HELP, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, fail

__all__ = ["add_decode_command", "add_encode_command", "read_header", "render_header"]

_HEX = re.compile(r"[0-9a-fA-F]+")
# Characters that never occur in the text or hex forms: a value holding one is a path.
_PATH_HINTS = ("/", ".", "~", "\\")
#: The most VALUE, a file or stdin may hold: the largest header line common
#: HTTP servers accept (nginx and Apache default to 8 KiB), far above any form
#: of a header (71 text characters, 106 hex digits, 53 bytes) or a tracestate
#: (512 characters, W3C Trace Context §3.3.1.5).
MAX_INPUT_BYTES = 8 * 1024

DECODE_EPILOG = f"""VALUE is detected:
  -                 read stdin (53 raw bytes, or text/hex)
  a path            read the file (53 raw bytes = binary form, else text/hex)
  106 hex digits    the binary form in hex (spaces, ':' and a 0x prefix allowed)
  tt=... / a tracestate holding a tt= member: the text form in that member
  anything else     the {TEXT_LEN}-character base64url text form (a leading 'tt-ext:' is ignored)

examples:
  tempotrace decode 8wYH...AAA              # text form as sent in the tt-ext HTTP header
  tempotrace decode header.bin              # binary form (e.g. gRPC tt-ext-bin) from a file
  tempotrace encode --format bin | tempotrace decode -
  tempotrace decode --json VALUE            # machine-readable
  tempotrace decode -- -AbC...              # a value that starts with '-' goes after --

{EXIT_CODES_HELP}"""

ENCODE_EPILOG = f"""examples:
  tempotrace encode --source GTE --quality OK --uncertainty 220 --lts 7 --span-id 00f067aa0ba902b7
  tempotrace encode --ptp-ns 1764000037000000000 --format hex
  tempotrace encode --format bin > header.bin

{EXIT_CODES_HELP}"""


class InputError(Exception):
    """The VALUE could not be read (missing file, not ASCII, too large): not a header rule.

    ``exit_code`` is 2 for bad input and 3 when reading failed (an I/O error).
    """

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _names_a_file(value: str) -> bool:
    """True when ``value`` looks like a path or names an existing file (never raises)."""
    if any(hint in value for hint in _PATH_HINTS):
        return True
    try:
        return Path(value).is_file()
    except (OSError, ValueError):  # too long for a file name, a NUL byte: a value, not a path
        return False


def _read_file(value: str) -> bytes:
    try:
        return read_regular_file(Path(value).expanduser(), MAX_INPUT_BYTES)
    except FileNotFoundError:
        raise InputError(f"no such file: {value}") from None
    except InputRefused as err:
        raise InputError(f"{value}: {err.rule} (a header file is 53 bytes, or a line of text)") from None
    except OSError as err:
        usage = err.errno in (errno.EACCES, errno.EPERM, errno.ENAMETOOLONG, errno.ENOTDIR, errno.ELOOP)
        raise InputError(f"cannot read {value}: {err.strerror or err}", EXIT_USAGE if usage else EXIT_RUNTIME) from None


def _detect_string(text: str) -> tuple[str, bytes | str]:
    """Return ("hex", bytes) or ("text", str) for a string value."""
    stripped = text.strip()
    if stripped.lower().startswith("tt-ext:"):
        stripped = stripped[len("tt-ext:") :].strip()
    compact = re.sub(r"[\s:]", "", stripped)
    if compact[:2].lower() == "0x":
        compact = compact[2:]
    if len(stripped) != TEXT_LEN and compact and _HEX.fullmatch(compact) and len(compact) % 2 == 0:
        return "hex", bytes.fromhex(compact)
    # A W3C tracestate carrying the fallback member (spec §6): take tt=<value>.
    # base64url never holds "=" except as (forbidden) padding at the end.
    members = [m.strip() for m in stripped.split(",")]
    tt = [m[len(TRACESTATE_KEY) + 1 :] for m in members if m.startswith(TRACESTATE_KEY + "=")]
    if len(tt) == 1 and not stripped.endswith("="):
        return "text (tracestate member tt=)", tt[0]
    # The text decoder itself allows only spaces/tabs around the value; a
    # trailing newline from a file or `echo` is not part of the value.
    return "text", stripped


def read_header(value: str, stdin: Any = None) -> tuple[str, TTExt]:
    """Detect the form of ``value`` and decode it. Returns (form, header).

    Raises ``InputError`` when the value cannot be read and ``HeaderError``
    when it is read but breaks a rule of the spec.
    """
    raw: bytes | None = None
    if value == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        try:
            raw = stream.read(MAX_INPUT_BYTES + 1)
        except OSError as err:
            raise InputError(f"cannot read stdin: {err.strerror or err}", EXIT_RUNTIME) from None
        if len(raw) > MAX_INPUT_BYTES:
            raise InputError(f"stdin holds more than {MAX_INPUT_BYTES} bytes; a header is at most that")
        origin = "stdin"
    elif len(value) > MAX_INPUT_BYTES:
        raise InputError(f"VALUE is {len(value)} characters; a header is at most {MAX_INPUT_BYTES}")
    elif _names_a_file(value):
        raw = _read_file(value)
        origin = "file"
    if raw is not None:
        if len(raw) == HEADER_LEN:
            return f"binary ({origin})", TTExt.decode(raw)
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            raise InputError(
                f"{origin} holds {len(raw)} bytes that are neither the {HEADER_LEN}-byte binary form nor ASCII text"
            ) from None
        form, payload = _detect_string(text)
        form = f"{form} ({origin})"
    else:
        form, payload = _detect_string(value)
    if isinstance(payload, bytes):
        return form, TTExt.decode(payload)
    return form, TTExt.from_header(payload)


def _iso(ns: int) -> str:
    seconds, rest = divmod(ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{rest:09d}"


def header_dict(form: str, header: TTExt) -> dict[str, Any]:
    """A JSON-ready view of a header (64-bit integers as decimal strings, as in the vectors)."""
    sketch = header.svc_sketch
    interval = header.interval()
    return {
        "form": form,
        "version": 3,
        "tenant_id": header.tenant_id,
        "ptp_ns": str(header.ptp_ns),
        "ptp_tai": _iso(header.ptp_ns) + " TAI",
        "ptp_utc": _iso(tai_to_utc_ns(header.ptp_ns)) + " UTC",
        "ts_source": header.ts_source.name,
        "clk_quality": header.clk_quality.name,
        "uncertainty_ns": header.uncertainty_ns,
        "saturated": header.saturated,
        "usable_for_physics": interval is not None,
        "interval_ns": None if interval is None else [str(interval[0]), str(interval[1])],
        "lts": str(header.lts),
        "svc_sketch": sketch.to_bytes().hex(),
        "svc_popcount": sketch.popcount,
        "svc_false_positive_rate": sketch.false_positive_rate(),
        "text": header.to_header(),
        "hex": header.encode().hex(),
    }


def render_header(info: dict[str, Any]) -> str:
    """The human-readable table ``tempotrace decode`` prints."""
    if info["usable_for_physics"]:
        physics = f"interval [{info['interval_ns'][0]}, {info['interval_ns'][1]}]"
    elif info["clk_quality"] == "UNKNOWN":
        physics = "quality UNKNOWN: never order by ptp_ns"
    else:
        physics = "saturated (>= 65,535 ns): physics cannot use it; Lamport/SVC decide"
    rows = [
        ("form", info["form"]),
        ("version", "3"),
        ("tenant_id", str(info["tenant_id"])),
        ("ptp_ns", f"{info['ptp_ns']}  ({info['ptp_tai']} = {info['ptp_utc']})"),
        ("ts_source", info["ts_source"]),
        ("clk_quality", info["clk_quality"]),
        ("uncertainty_ns", f"{info['uncertainty_ns']}  ({physics})"),
        ("lts", info["lts"]),
        (
            "svc_sketch",
            f"{info['svc_popcount']}/256 bits set, false-positive rate {info['svc_false_positive_rate']:.2e}",
        ),
        ("", info["svc_sketch"]),
        ("text", info["text"]),
        ("hex", info["hex"]),
    ]
    return "\n".join(f"{name:<15} {value}" for name, value in rows)


def run_decode(args: argparse.Namespace) -> int:
    try:
        form, header = read_header(args.value)
    except InputError as err:
        return fail("decode", str(err), err.exit_code)
    except HeaderError as err:
        msg = f"invalid header: field {err.field}: {err.rule} (error class {err.error_class})"
        return fail("decode", msg, EXIT_USAGE)
    info = header_dict(form, header)
    if args.span_id:
        info["contains"] = {s: header.svc_sketch.contains(_span_id(s)) for s in args.span_id}
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(render_header(info))
        for span, present in info.get("contains", {}).items():
            verdict = "in the causal past (up to the false-positive rate)" if present else "NOT in the causal past"
            # As typed, escaped: the id was checked after strip(), which lets C0 separators and C1 NEL by.
            print(f"{'span ' + shown(span):<15} {verdict}")
    return EXIT_OK


def _span_id(text: str) -> int:
    value = text.strip().lower().removeprefix("0x")
    if not _HEX.fullmatch(value) or len(value) > 16:
        raise argparse.ArgumentTypeError(f"span id {text!r}: must be up to 16 hex digits (8 bytes, as in traceparent)")
    return int(value, 16)


def _span_id_arg(text: str) -> str:
    _span_id(text)
    return text


def _sent_span_id_arg(text: str) -> str:
    """A span id that goes into a header we build: W3C Trace Context forbids the all-zero one."""
    if _span_id(text) == 0:
        raise argparse.ArgumentTypeError(
            f"span id {text!r}: all zeros is the invalid span id (W3C Trace Context, parent-id), never a real span"
        )
    return text


def _enum_arg(enum_type: type[TsSource] | type[ClockQuality]) -> Any:
    def parse(text: str) -> Any:
        try:
            return enum_type[text.upper()]
        except KeyError:
            names = "|".join(m.name for m in enum_type)
            raise argparse.ArgumentTypeError(f"{text!r}: must be one of {names}") from None

    return parse


def run_encode(args: argparse.Namespace) -> int:
    ptp_ns = utc_to_tai_ns(time.time_ns()) if args.ptp_ns == "now" else args.ptp_ns
    try:
        sketch = Sketch.from_bytes(bytes.fromhex(args.sketch)) if args.sketch else Sketch.EMPTY
        for span in args.span_id:
            sketch = sketch.with_span(_span_id(span))
        header = TTExt(
            ptp_ns=ptp_ns,
            ts_source=args.source,
            clk_quality=args.quality,
            uncertainty_ns=args.uncertainty,
            lts=args.lts,
            svc_sketch=sketch,
            tenant_id=args.tenant,
        )
    except HeaderError as err:
        return fail("encode", f"field {err.field}: {err.rule} (error class {err.error_class})", EXIT_USAGE)
    except ValueError as err:  # bytes.fromhex on --sketch
        return fail("encode", f"--sketch: {err}", EXIT_USAGE)
    try:
        if args.format == "bin":
            sys.stdout.buffer.write(header.encode())
            sys.stdout.buffer.flush()
        elif args.format == "hex":
            print(header.encode().hex())
        else:
            print(header.to_header())
    except OSError as err:
        return fail("encode", f"cannot write output: {err}", EXIT_RUNTIME)
    return EXIT_OK


def _ptp_arg(text: str) -> int | str:
    if text == "now":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: an integer (ns since 1970 TAI) or 'now'") from None


def _sketch_arg(text: str) -> str:
    if len(text) != 64 or not _HEX.fullmatch(text):
        raise argparse.ArgumentTypeError("must be 64 hex digits (the 32-byte sketch)")
    return text


def add_decode_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "decode",
        help="inspect a tt-ext header (text, hex or binary; detected)",
        description="Decode and validate a tt-ext v3 header; name the rule it breaks if it is invalid.",
        epilog=DECODE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("value", metavar="VALUE", help="the header: text, hex, a file path, or - for stdin")
    parser.add_argument("--json", action="store_true", help="print JSON (64-bit values as decimal strings)")
    parser.add_argument(
        "--span-id",
        action="append",
        default=[],
        type=_span_id_arg,
        metavar="HEX",
        help="also say whether this span id is in the SVC sketch (repeatable)",
    )
    parser.set_defaults(func=run_decode)


def add_encode_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "encode",
        help="build a tt-ext header from its fields",
        description="Build a tt-ext v3 header and print it as text (default), hex or raw bytes.",
        epilog=ENCODE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--ptp-ns", type=_ptp_arg, default="now", help="ns since 1970-01-01 TAI, or 'now' (default: now, from UTC+leap)"
    )
    parser.add_argument("--source", type=_enum_arg(TsSource), default=TsSource.CPU, help="GTE|SW_GCC|CPU (default CPU)")
    parser.add_argument(
        "--quality", type=_enum_arg(ClockQuality), default=ClockQuality.UNKNOWN, help="OK|DEGRADED|UNKNOWN (default)"
    )
    parser.add_argument("--uncertainty", type=int, default=65535, help="3-sigma bound in ns, 0..65535 (default 65535)")
    parser.add_argument("--lts", type=int, default=1, help="Lamport counter (default 1)")
    parser.add_argument("--tenant", type=int, default=0, help="tenant id 0..15 (default 0)")
    parser.add_argument(
        "--span-id",
        action="append",
        default=[],
        type=_sent_span_id_arg,
        metavar="HEX",
        help="add to the sketch (repeatable; not all zeros)",
    )
    parser.add_argument("--sketch", type=_sketch_arg, help="start from this 64-hex-digit sketch")
    parser.add_argument("--format", choices=("text", "hex", "bin"), default="text", help="output form (default text)")
    parser.set_defaults(func=run_encode)
