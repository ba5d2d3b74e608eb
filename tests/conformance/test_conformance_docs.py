"""conformance/README.md, PROTOCOL.md, the schemas and the vectors say the same thing (issue 15 item 3).

An engineer in another language implements from these documents alone; a
point where they disagree with the data costs that engineer an afternoon.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the runner lives in the repository, not in the installed package
    sys.path.insert(0, str(ROOT))

from conformance.runner.vectors import load_cases  # noqa: E402

KIT = ROOT / "conformance"
README = (KIT / "README.md").read_text(encoding="utf-8")
PROTOCOL = (KIT / "PROTOCOL.md").read_text(encoding="utf-8")
VECTOR_FILES = sorted((KIT / "vectors").glob("*.json"))
SCHEMAS = sorted((KIT / "schemas").glob("*.json"))


def _readme_error_classes(start: str, end: str) -> set[str]:
    section = " ".join(README[README.index("## Error classes") :].split())  # line breaks do not matter
    at = section.index(start)
    section = section[at : section.index(end, at)]
    return set(re.findall(r"[A-Z][A-Z_]+[A-Z]", section))


def _schema_enum(path: Path, name: str = "errorClass") -> set[str]:
    return set(json.loads(path.read_text(encoding="utf-8"))["$defs"][name]["enum"])


def test_readme_error_classes_are_exactly_each_schemas_enumeration() -> None:
    tt_ext = _readme_error_classes("**The tt-ext files**", "These fourteen")
    assert len(tt_ext) == 14
    for path in SCHEMAS:
        if path.name.startswith("tt_ext_v3_"):
            assert _schema_enum(path) == tt_ext, path.name
    record = _readme_error_classes("**The record file**", "These ten")
    assert len(record) == 10  # one name per failure (issue 20: check 7 had check 5's)
    assert _schema_enum(KIT / "schemas" / "tt_torch_record_test_schema.json") == record
    header_classes = _readme_error_classes("With `RECORD_HEADER` comes", "first failure wins")
    assert _schema_enum(KIT / "schemas" / "tt_torch_record_test_schema.json", "headerErrorClass") == header_classes - {
        "RECORD_HEADER"
    }
    stamps = _readme_error_classes("**The stamps file**", "These nine")
    assert len(stamps) == 9
    assert _schema_enum(KIT / "schemas" / "tt_stamps_text_test_schema.json") == stamps
    assert {p.name for p in SCHEMAS} == {
        *(f"tt_ext_v3_{n}_test_schema.json" for n in ("header", "sketch", "lamport")),
        "tt_torch_record_test_schema.json",
        "tt_stamps_text_test_schema.json",
    }, "a new schema needs its error classes in README.md"


def test_readme_lists_every_vector_file_and_group() -> None:
    for path in VECTOR_FILES:
        assert f"`vectors/{path.name}`" in README, path.name
        for group in json.loads(path.read_text(encoding="utf-8"))["testGroups"]:
            assert f"**`{group['type']}`**" in README, group["type"]


def test_readme_states_each_file_s_vector_count_and_the_total() -> None:
    """Issue 20: the counts a reader plans by (and an implementer checks a run against) are the files'."""
    total = 0
    for path in VECTOR_FILES:
        count = json.loads(path.read_text(encoding="utf-8"))["numberOfTests"]
        total += count
        row = next(line for line in README.splitlines() if line.startswith(f"| `vectors/{path.name}` |"))
        assert f"| {count} |" in row, (path.name, count, row)
    assert f"| all five | | {total} | |" in README, total


def test_every_invalid_vector_has_an_error_class_and_no_valid_one_does() -> None:
    for path in VECTOR_FILES:
        for group in json.loads(path.read_text(encoding="utf-8"))["testGroups"]:
            for test in group["tests"]:
                assert ("errorClass" in test) is (test["result"] == "invalid"), (path.name, test["tcId"])


def test_readme_example_header_matches_the_header_file() -> None:
    header = json.loads((KIT / "vectors" / "tt_ext_v3_header_test.json").read_text(encoding="utf-8"))
    assert f'"numberOfTests": {header["numberOfTests"]},' in README
    assert f'"generatorVersion": "{header["generatorVersion"]}",' in README


def _protocol_row(op: str) -> str:
    rows = [line for line in PROTOCOL.splitlines() if line.startswith(f"| `{op}` |")]
    assert len(rows) == 2, f"PROTOCOL.md has a request row and a response row for {op}"
    return rows[1]


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.name)
def test_protocol_names_every_key_the_runner_compares(path: Path) -> None:
    """A key the runner expects but PROTOCOL.md does not list in the op's answer would fail a correct adapter."""
    for case in load_cases([path]):
        op = case.request["op"]
        # decode_text answers "the same keys" as decode_bytes, plus its own; receive_record as decode_record.
        same = {"decode_text": "decode_bytes", "receive_record": "decode_record"}.get(op)
        row = _protocol_row(op) + (_protocol_row(same) if same else "")
        for key in case.expect:
            if key != "errorClass":
                assert f"`{key}`" in row, (case.label, key)


def test_float_comparison_is_documented_as_numeric() -> None:
    for doc in (README, PROTOCOL):
        assert "compared as a number" in doc


def test_protocol_example_session_is_what_the_reference_answers() -> None:
    """Every '< ' line of PROTOCOL.md's example session is the Python adapter's answer to the '> ' line before it."""
    section = PROTOCOL[PROTOCOL.index("## Example session") :]
    lines = [line for line in section.split("```")[1].splitlines() if line[:2] in ("> ", "< ")]
    requests = [line[2:] for line in lines if line.startswith("> ")]
    answers = [json.loads(line[2:]) for line in lines if line.startswith("< ")]
    assert len(requests) == len(answers) >= 5
    res = subprocess.run(
        [sys.executable, str(KIT / "adapters" / "python_adapter.py")],
        input="\n".join(requests) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, res.stderr
    assert [json.loads(line) for line in res.stdout.splitlines()] == answers
