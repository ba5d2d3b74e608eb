"""The vector generator and linter (conformance/README.md) and the spec's worked example.

The linter must catch what it promises to catch; the generator must stay
independent of the codec it tests; the numbers printed in spec §8.5 must be
what a conforming implementation computes.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import pathlib
import re
import subprocess
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import mmh3
import pytest

from tempotrace_sdk import ClockQuality, Sketch, TsSource, TTExt
from tempotrace_sdk.wire import sketch_indices

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOLS = ROOT / "conformance" / "tools"
SPEC = ROOT / "spec" / "tt-ext-v3.md"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(TOOLS))
    try:
        spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(TOOLS))


lint = _load("lint")
reference = _load("reference")


def test_linter_passes_on_the_committed_vectors() -> None:
    result = subprocess.run([sys.executable, str(TOOLS / "lint.py")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "conformance vectors OK" in result.stdout


def _mutated(tmp_path: pathlib.Path, change: Callable[[dict[str, Any]], None], *, raw: bool = False) -> list[str]:
    name = "tt_ext_v3_header_test.json"
    text = (ROOT / "conformance" / "vectors" / name).read_text(encoding="utf-8")
    data = json.loads(text)
    change(data)
    out = lint.generate.canonical(data) if not raw else json.dumps(data)
    path = tmp_path / name
    path.write_text(out, encoding="utf-8")
    expected = lint.generate.build()
    problems: list[str] = lint.lint_file(path, expected)
    return problems


def _first_test(data: dict[str, Any]) -> dict[str, Any]:
    test: dict[str, Any] = data["testGroups"][0]["tests"][0]
    return test


@pytest.mark.parametrize(
    ("what", "change", "raw", "expect"),
    [
        ("duplicate tcId", lambda d: d["testGroups"][0]["tests"][1].update(tcId=1001), False, "duplicate"),
        ("wrong count", lambda d: d.update(numberOfTests=d["numberOfTests"] + 1), False, "numberOfTests"),
        ("64-bit int as number", lambda d: _first_test(d)["fields"].update(ptpNs=5), False, "schema"),
        ("unknown error class", lambda d: d["testGroups"][0]["tests"][-1].update(errorClass="OOPS"), False, "schema"),
        ("valid test with errorClass", lambda d: _first_test(d).update(errorClass="LENGTH"), False, "schema"),
        ("flag without note", lambda d: _first_test(d)["flags"].append("Mystery"), False, "note"),
        ("hand-edited value", lambda d: _first_test(d).update(comment="edited"), False, "differs from generate.py"),
        ("not canonical JSON", lambda d: None, True, "not canonical"),
    ],
)
def test_linter_catches(tmp_path: pathlib.Path, what: str, change: Any, raw: bool, expect: str) -> None:
    problems = _mutated(tmp_path, change, raw=raw)
    assert any(expect in p for p in problems), (what, problems)


def test_generator_does_not_import_the_codec() -> None:
    """Expected values come from first principles, not from the code under test."""
    for path in TOOLS.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.startswith("tempotrace_sdk") for n in names), path.name


@pytest.mark.parametrize("length", range(0, 40))
def test_reference_murmur_matches_mmh3_for_all_tail_lengths(length: int) -> None:
    key = bytes((7 * i + length) & 0xFF for i in range(length))
    for seed in (0, 1, 0xFFFFFFFF):
        assert reference.murmur3_x64_128(key, seed) == mmh3.hash64(key, seed=seed, x64arch=True, signed=False)


def test_spec_worked_example_is_what_the_codec_computes() -> None:
    """Every number in spec §8.5 comes out of the codec and the reference."""
    spec = SPEC.read_text(encoding="utf-8")
    section = spec[spec.index("### 8.5") : spec.index("## 9.")]
    span_id = bytes.fromhex("0102030405060708")
    h1, h2 = mmh3.hash64(span_id, seed=0, x64arch=True, signed=False)
    assert f"({h1})" in section and f"({h2})" in section
    assert f"0x{h1:016x}" in section and f"0x{h2:016x}" in section
    indices = sketch_indices(span_id)
    assert f"bits {indices[0]}, {indices[1]}, {indices[2]}, {indices[3]}" in section
    sketch = Sketch.of(span_id)
    assert f"sketch = {sketch.to_bytes().hex()}" in section
    header = TTExt(1700000037000000123, TsSource.GTE, ClockQuality.OK, 220, 42, sketch, 0)
    assert header.to_header() in section
    hex_lines = re.findall(r"^ *([0-9a-f ]+?) *(?:\(53 octets\))?$", section, re.MULTILINE)
    assert header.encode().hex() in "".join(line.replace(" ", "") for line in hex_lines)
    hello = mmh3.hash64(b"hello", seed=0, x64arch=True, signed=False)
    assert f"({hello[0]}, {hello[1]})" in section


def test_spec_error_table_lists_every_class_the_vectors_use() -> None:
    for path in (ROOT / "conformance" / "vectors").glob("*.json"):
        # the torch record's vectors belong to spec/torch.md §3.2, the stamps text's to semantic-conventions §1.4
        owner = {"tt_torch_record_test.json": "torch.md", "tt_stamps_text_test.json": "semantic-conventions.md"}
        spec = (ROOT / "spec" / owner[path.name] if path.name in owner else SPEC).read_text(encoding="utf-8")
        used = set(re.findall(r'"(?:header)?[eE]rrorClass": "([A-Z_]+)"', path.read_text(encoding="utf-8")))
        missing = {c for c in used if f"`{c}`" not in spec}
        assert not missing, path.name
