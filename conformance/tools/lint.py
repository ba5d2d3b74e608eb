#!/usr/bin/env python3
"""Lint the tt-ext v3 conformance vectors (run by `make test`).

Checks, for every file in conformance/vectors/:
  * it validates against the JSON Schema it names (conformance/schemas/);
  * tcIds are unique within the file; numberOfTests matches the tests;
  * every flag used has a note, and every note is used;
  * the bytes are canonical JSON (see generate.py) byte for byte;
  * the bytes are exactly what conformance/tools/generate.py writes today,
    so nobody edits a vector by hand and nobody forgets to regenerate.
Exit status 0 when clean, 1 with one line per problem otherwise.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import jsonschema

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import generate

ROOT = pathlib.Path(__file__).resolve().parents[1]
MIN_HEADER_TESTS = 80  # issue 2: at least 80 header tests


def lint_file(path: pathlib.Path, expected: dict[str, str]) -> list[str]:
    problems: list[str] = []
    name = path.name
    text = path.read_text(encoding="utf-8")
    try:
        data: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError as err:
        return [f"{name}: not JSON: {err}"]
    schema_path = ROOT / "schemas" / str(data.get("schema", ""))
    if not schema_path.is_file():
        return [f"{name}: names a schema that does not exist: {data.get('schema')!r}"]
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in error.absolute_path)
        problems.append(f"{name}: schema: at /{where}: {error.message[:200]}")
    if problems:
        return problems
    tests = [t for group in data["testGroups"] for t in group["tests"]]
    ids = [t["tcId"] for t in tests]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        problems.append(f"{name}: duplicate tcIds {duplicates}")
    if data["numberOfTests"] != len(tests):
        problems.append(f"{name}: numberOfTests is {data['numberOfTests']} but the file holds {len(tests)} tests")
    used = {flag for t in tests for flag in t["flags"]}
    if used - data["notes"].keys():
        problems.append(f"{name}: flags without a note: {sorted(used - data['notes'].keys())}")
    if data["notes"].keys() - used:
        problems.append(f"{name}: notes never used: {sorted(data['notes'].keys() - used)}")
    if generate.canonical(data) != text:
        problems.append(f"{name}: not canonical JSON (sorted keys, 2-space indent, ASCII, trailing newline)")
    if name not in expected:
        problems.append(f"{name}: not produced by generate.py")
    elif expected[name] != text:
        problems.append(f"{name}: differs from generate.py output (regenerate; never edit vectors by hand)")
    if name == "tt_ext_v3_header_test.json" and len(tests) < MIN_HEADER_TESTS:
        problems.append(f"{name}: only {len(tests)} tests, at least {MIN_HEADER_TESTS} required")
    return problems


def main() -> int:
    expected = generate.build()
    paths = sorted((ROOT / "vectors").glob("*.json"))
    problems = [p for path in paths for p in lint_file(path, expected)]
    missing = sorted(expected.keys() - {p.name for p in paths})
    problems += [f"{name}: missing (run conformance/tools/generate.py)" for name in missing]
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        total = sum(json.loads(p.read_text(encoding="utf-8"))["numberOfTests"] for p in paths)
        print(f"conformance vectors OK: {len(paths)} files, {total} tests")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
