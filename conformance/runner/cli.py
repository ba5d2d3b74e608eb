"""Command line of the conformance runner: run vectors through adapters, compare, report.

    python -m conformance.runner [--impl python] [--impl c] [--impl NAME=COMMAND] [--all] [VECTORS...]

The runner uses the standard library only (any Python 3.8 or later). Only the
built-in ``python`` implementation needs more: an interpreter that can import
tempotrace_sdk and its dependencies, found as ``--python``, else ``$PYTHON``,
else the repository's ``.venv/bin/python``, else the runner's own interpreter.

Each implementation's answers are checked against the vectors; with two or
more implementations every vector's answers are also compared with each
other, and any disagreement fails the run, printing the tcId, the input and
both answers. Exit status: 0 all passed, 1 failures, 2 usage or setup error.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from .adapter import Adapter, AdapterStartError
from .mutate import differential_requests
from .vectors import Case, Value, VectorError, load_cases, norm_response

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VECTORS = ROOT / "conformance" / "vectors"
C_ADAPTER = ROOT / "native" / "build" / "ttext" / "ttext-adapter"
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
BUILTIN = ("python", "c")
STAMPS_SEED_MAX = 2048  # native/ttext/fuzz.h MAX_INPUT: the 2 MB textParts vectors are no fuzz seeds


def die(message: str) -> NoReturn:
    """A usage or setup error: exit status 2, distinct from test failures (1)."""
    print(f"conformance: {message}", file=sys.stderr)
    raise SystemExit(2)


def reference_python(explicit: str | None) -> str:
    """The interpreter for the built-in python implementation (see the module docstring)."""
    if explicit:
        return explicit
    if os.environ.get("PYTHON"):
        return os.environ["PYTHON"]
    if os.access(VENV_PYTHON, os.X_OK):
        return str(VENV_PYTHON)
    return sys.executable


def builtin_argv(name: str, c_adapter: Path, python: str) -> list[str]:
    if name == "python":
        return [python, str(ROOT / "conformance" / "adapters" / "python_adapter.py")]
    if name == "c":
        if not os.access(c_adapter, os.X_OK):
            die(f"C adapter {c_adapter} not built; run `make conformance-c-build` (or pass --c-adapter PATH)")
        return [str(c_adapter)]
    die(f"unknown implementation {name!r}; built-in: {', '.join(BUILTIN)}; or pass NAME=COMMAND")


def shorten(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= limit else text[: limit - 20] + f"...({len(text)} chars)"


def describe_input(request: dict[str, Any]) -> str:
    return " ".join(f"{k}={shorten(v)}" for k, v in request.items())


def mismatches(expect: dict[str, Value], got: dict[str, Value]) -> list[str]:
    """Ways a normalised response differs from the vector's expectation (empty: pass)."""
    if "adapterError" in got or "unsupported" in got:
        return [f"no answer: {shorten(got)}"]
    out = []
    if "errorClass" in expect and "errorClass" not in got:
        out.append(f"expected errorClass {expect['errorClass']}, got a valid result")
    elif "errorClass" in got and "errorClass" not in expect:
        out.append(f"expected a valid result, got errorClass {got['errorClass']}")
    else:
        for key, want in expect.items():
            if want is None:  # the vector says this value is absent: so must the key be
                if key in got:
                    out.append(f"{key}: expected no such key (the value is absent), got {shorten(got[key])}")
            elif got.get(key) != want:
                out.append(f"{key}: expected {shorten(want)}, got {shorten(got.get(key, '<missing>'))}")
    return out


def parse_impls(
    specs: list[str], use_all: bool, c_adapter: Path, timeout: float, python: str | None = None
) -> list[Adapter]:
    names = list(specs)
    if use_all or not names:
        names = list(BUILTIN) + [s for s in names if s not in BUILTIN]
    adapters = []
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    for spec in names:
        if "=" in spec:
            name, command = spec.split("=", 1)
            adapters.append(Adapter(name, shlex.split(command), timeout, env))
        else:
            adapters.append(Adapter(spec, builtin_argv(spec, c_adapter, reference_python(python)), timeout, env))
    if len({a.name for a in adapters}) != len(adapters):
        die("each --impl needs a distinct name")
    return adapters


def run(
    cases: list[Case],
    adapters: list[Adapter],
    max_reports: int,
    differential: Iterable[dict[str, Any]] = (),
    out: Any = sys.stdout,
) -> int:
    """Every vector through every adapter, then the differential inputs; print reports and the summary."""
    passed = dict.fromkeys((a.name for a in adapters), 0)
    failed = dict.fromkeys((a.name for a in adapters), 0)
    disagreements = 0
    reports = 0
    first = adapters[0].name

    def report(lines: list[str]) -> None:
        nonlocal reports
        reports += 1
        if reports <= max_reports:
            print("\n".join(lines), file=out)

    def compare(label: str, shown_input: str, answers: dict[str, dict[str, Value]]) -> None:
        nonlocal disagreements
        for other in adapters[1:]:
            if answers[other.name] != answers[first]:
                disagreements += 1
                report(
                    [
                        f"DISAGREE {first} vs {other.name}: {label}",
                        f"  input: {shown_input}",
                        f"  {first}: {shorten(answers[first], 400)}",
                        f"  {other.name}: {shorten(answers[other.name], 400)}",
                    ]
                )

    for case in cases:
        answers: dict[str, dict[str, Value]] = {}
        for adapter in adapters:
            got = norm_response(_ask(adapters, adapter, case.request))
            answers[adapter.name] = got
            problems = mismatches(case.expect, got)
            if problems:
                failed[adapter.name] += 1
                report(
                    [
                        f"FAIL {adapter.name}: {case.label}",
                        f"  input:    {describe_input(case.request)}",
                        f"  expected: {shorten(case.expect, 400)}",
                        f"  {adapter.name}: {shorten(got, 400)}",
                        *(f"  - {p}" for p in problems),
                    ]
                )
            else:
                passed[adapter.name] += 1
        compare(case.label, describe_input(case.request), answers)

    n_differential = 0
    for n_differential, request in enumerate(differential, 1):
        answers = {a.name: norm_response(_ask(adapters, a, request)) for a in adapters}
        label = f"differential input #{n_differential}"
        for name, got in answers.items():
            if "adapterError" in got or "unsupported" in got:  # equal non-answers are not agreement
                failed[name] += 1
                report([f"FAIL {name}: {label}", f"  input: {describe_input(request)}", f"  {name}: {shorten(got)}"])
        compare(label, describe_input(request), answers)
    if n_differential:
        print(f"differential: {n_differential} mutated inputs compared across implementations", file=out)
    for adapter in adapters:
        adapter.close()
    if reports > max_reports:
        print(f"... {reports - max_reports} more reports not shown (--max-reports)", file=out)

    process_problems = 0
    for adapter in adapters:
        for problem in adapter.problems:
            process_problems += 1
            print(f"ADAPTER {adapter.name}: {problem}", file=out)
        print(f"{adapter.name}: {passed[adapter.name]} passed, {failed[adapter.name]} failed", file=out)
    if len(adapters) > 1:
        print(f"disagreements between implementations: {disagreements}", file=out)
    total_pass = sum(passed.values())
    total_fail = sum(failed.values()) + disagreements + process_problems
    print(f"{total_pass} passed, {total_fail} failed", file=out)
    return 0 if total_fail == 0 else 1


class ImplementationCannotStart(Exception):
    """An implementation under test cannot be started: a setup error (exit 2), not a failed vector."""


def _ask(adapters: list[Adapter], adapter: Adapter, request: dict[str, Any]) -> dict[str, Any]:
    try:
        return adapter.ask(request)
    except AdapterStartError as err:
        for other in adapters:
            if other is not adapter:
                other.close()
        raise ImplementationCannotStart(f"implementation {adapter.name!r} cannot start: {err}") from err


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="conformance/run", description=__doc__.split("\n\n")[0])
    parser.add_argument("vectors", nargs="*", type=Path, help=f"vector files or folders (default {DEFAULT_VECTORS})")
    parser.add_argument(
        "--impl",
        action="append",
        default=[],
        metavar="NAME[=COMMAND]",
        help="implementation to test: python, c, or NAME=COMMAND for any adapter (repeatable)",
    )
    parser.add_argument("--all", action="store_true", help="every built-in implementation (python and c)")
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="interpreter for the built-in python implementation, one that can import tempotrace_sdk "
        "(default $PYTHON, else the repository's .venv/bin/python, else this interpreter)",
    )
    parser.add_argument(
        "--c-adapter",
        type=Path,
        default=Path(os.environ.get("TTEXT_C_ADAPTER", C_ADAPTER)),
        help="the C adapter binary (default native/build/ttext/ttext-adapter or $TTEXT_C_ADAPTER)",
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for each answer, plus 4 s per MB of the request"
    )
    parser.add_argument("--max-reports", type=int, default=50, help="failure reports to print (all are counted)")
    parser.add_argument(
        "--differential",
        type=int,
        default=0,
        metavar="N",
        help="after the vectors, send N seeded mutations of their inputs to every implementation; "
        "any disagreement fails (needs two or more implementations)",
    )
    parser.add_argument("--seed", type=int, default=20261129, help="seed of the --differential inputs")
    parser.add_argument(
        "--write-corpus",
        type=Path,
        metavar="FILE",
        help="write every wire/text/record/stamps input as a fuzz seed corpus (lines 'b HEX' / 't HEX' / 'r HEX' / "
        "'s HEX') and exit",
    )
    args = parser.parse_args(argv)

    try:
        cases = list(load_cases(args.vectors or [DEFAULT_VECTORS]))
    except (OSError, ValueError, VectorError) as err:
        print(f"conformance: cannot load vectors: {err}", file=sys.stderr)
        return 2
    if not cases:
        print("conformance: no vectors found", file=sys.stderr)
        return 2
    if args.write_corpus:
        write_corpus(cases, args.write_corpus)
        return 0
    adapters = parse_impls(args.impl, args.all, args.c_adapter, args.timeout, args.python)
    print(
        f"conformance: {len(cases)} vectors x {len(adapters)} implementation(s): {', '.join(a.name for a in adapters)}"
    )
    if args.differential and len(adapters) < 2:
        print("conformance: --differential compares implementations; give two or more", file=sys.stderr)
        return 2
    differential = differential_requests(cases, args.differential, args.seed)
    try:
        return run(cases, adapters, args.max_reports, differential)
    except ImplementationCannotStart as err:
        print(f"conformance: {err}", file=sys.stderr)
        return 2


def write_corpus(cases: list[Case], path: Path) -> None:
    """Seeds for native/ttext/fuzz.c: binary inputs as hex, text inputs as hex of their UTF-8, records as hex,
    stamps texts as hex of their UTF-8."""
    lines = []
    for case in cases:
        req = case.request
        if req["op"] == "decode_bytes":
            lines.append(f"b {req['wire']}")
        elif req["op"] == "decode_text":
            lines.append(f"t {req['text'].encode('utf-8', 'surrogatepass').hex()}")
        elif req["op"] == "encode" and "wire" in case.expect:
            lines.append(f"b {case.expect['wire']}")
        elif req["op"] in ("decode_record", "receive_record"):
            lines.append(f"r {req['record']}")
        elif req["op"] == "encode_record" and "record" in case.expect:
            lines.append(f"r {case.expect['record']}")
        elif req["op"] == "decode_stamps" and len(req["text"]) <= STAMPS_SEED_MAX:
            lines.append(f"s {req['text'].encode('utf-8', 'surrogatepass').hex()}")
        elif req["op"] == "encode_stamps" and "text" in case.expect:
            lines.append(f"s {str(case.expect['text']).encode('utf-8').hex()}")
    path.write_text("\n".join(lines) + "\n", encoding="ascii")
